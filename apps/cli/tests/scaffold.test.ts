// `loom new plugin NAME`: the files of the new project, its refusals, the
// packages it installs from (a small installed tree stands for the CLI's
// folder), and the project working. Its node_modules links the workspace's
// packages (what an install would put there), so the generated plugin boots on
// the kit, its own tests pass, it typechecks under its own tsconfig, and `loom
// prompt` and `loom run --patch demo.yml` in it show its section and call its
// tool. The install from the packed CLI, with no registry, is outside.test.ts.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHost } from '@loom/testkit'
import { NPMRC } from '../src/offline-install.ts'
import { type NewPluginOptions, newPlugin, projectFiles, TYPES_NODE_VERSION, TYPESCRIPT_VERSION } from '../src/scaffold.ts'
import { loom, project, spawnRun } from './helpers.ts'
import { writePackage } from './npm-offline.ts'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))
const CLI = JSON.parse(readFileSync(join(REPO, 'apps/cli/package.json'), 'utf8'))
const ROOT = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'))

const FILES = [
  '.gitignore',
  '.npmrc',
  'README.md',
  'demo.yml',
  'loom.yml',
  'package-lock.json',
  'package.json',
  'src/index.ts',
  'tests/index.test.ts',
  'tsconfig.build.json',
  'tsconfig.json',
]

const trees = mkdtempSync(join(tmpdir(), 'loom-scaffold-tree-'))
afterAll(() => rmSync(trees, { recursive: true, force: true }))

/** A folder as npm installs the CLI into one, with the packages a plugin project needs (content aside); `typescript` at this version. */
function installedCli(name: string, typescript = TYPESCRIPT_VERSION): string {
  const modules = join(trees, name, 'node_modules')
  const loom = { version: CLI.version, peerDependencies: { '@deepseek-ai/cordis': '^4.0.4', '@deepseek-ai/schemastery': '^3.18.4' } }
  writePackage(join(modules, '@loom/cli'), { name: '@loom/cli', ...loom, dependencies: { '@loom/scope': `^${CLI.version}` }, bin: { loom: 'bin/loom.js' } })
  writePackage(join(modules, '@loom/plugin'), { name: '@loom/plugin', ...loom, dependencies: { '@loom/scope': `^${CLI.version}` } })
  writePackage(join(modules, '@loom/testkit'), { name: '@loom/testkit', ...loom })
  writePackage(join(modules, '@loom/scope'), { name: '@loom/scope', version: CLI.version, peerDependencies: { '@deepseek-ai/cordis': '^4.0.4' } })
  writePackage(join(modules, '@deepseek-ai/cordis'), { name: '@deepseek-ai/cordis', version: CLI.dependencies['@deepseek-ai/cordis'] })
  writePackage(join(modules, '@deepseek-ai/schemastery'), { name: '@deepseek-ai/schemastery', version: CLI.dependencies['@deepseek-ai/schemastery'] })
  writePackage(join(modules, 'typescript'), { name: 'typescript', version: typescript })
  writePackage(join(modules, '@types/node'), { name: '@types/node', version: TYPES_NODE_VERSION })
  return join(modules, '@loom/cli')
}

const CLI_TREE = installedCli('cli')

/** `loom new plugin NAME` in `cwd`, a project folder of `project()` (its trust is recorded in that project's LOOM_HOME), with the CLI installed in CLI_TREE. */
async function scaffold(name: string, cwd: string, options: Partial<NewPluginOptions> = {}) {
  let stdout = ''
  let stderr = ''
  const io = { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => (stderr += text) } }
  const code = await newPlugin(name, { cwd, io, home: join(cwd, '..', 'home'), from: CLI_TREE, ...options })
  return { code, stdout, stderr }
}

/** Every file under `dir`, relative, sorted; the tarballs of .loom/packs apart. */
const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter(entry => entry.isFile())
    .map(entry => join(entry.parentPath, entry.name).slice(dir.length + 1))
    .filter(file => !file.startsWith('.loom/packs/'))
    .sort()

describe('loom new plugin', () => {
  it('creates the project and prints the next steps', async () => {
    const { cwd } = project()
    const run = await scaffold('@acme/word-count', cwd)
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(
      /cd word-count\n {2}npm install\n {2}npm test\n {2}npx loom prompt\n {2}npx loom run --patch demo\.yml "count the words of: the cat and the hat"\n$/,
    )
    const dir = join(cwd, 'word-count')
    expect(filesUnder(dir)).toEqual(FILES)

    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    const loomVersion = `^${CLI.version}`
    expect(pkg).toMatchObject({
      name: '@acme/word-count',
      version: '0.1.0',
      type: 'module',
      description: expect.any(String),
      keywords: ['loom-plugin'],
      exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
      files: ['dist'],
      scripts: { build: 'tsc -p tsconfig.build.json', typecheck: 'tsc --noEmit', test: 'node --test', prompt: 'loom prompt' },
      dependencies: { '@loom/plugin': loomVersion },
    })
    expect(Object.keys(pkg.peerDependencies).sort()).toEqual(['@deepseek-ai/cordis', '@deepseek-ai/schemastery'])
    expect(pkg.devDependencies).toEqual({
      '@deepseek-ai/cordis': CLI.dependencies['@deepseek-ai/cordis'],
      '@deepseek-ai/schemastery': CLI.dependencies['@deepseek-ai/schemastery'],
      '@loom/cli': loomVersion,
      '@loom/testkit': loomVersion,
      '@types/node': ROOT.devDependencies['@types/node'],
      typescript: ROOT.devDependencies.typescript,
    })

    const tsconfig = JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8'))
    expect(tsconfig.compilerOptions).toMatchObject({
      strict: true,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'ES2023',
      types: ['node'],
      noEmit: true,
    })
    expect(tsconfig.include).toEqual(['src', 'tests'])
    const build = JSON.parse(readFileSync(join(dir, 'tsconfig.build.json'), 'utf8'))
    expect(build).toMatchObject({ extends: './tsconfig.json', compilerOptions: { noEmit: false, declaration: true, outDir: 'dist' }, include: ['src'] })

    const source = readFileSync(join(dir, 'src/index.ts'), 'utf8')
    expect([...source.matchAll(/from '([^']+)'/g)].map(([, from]) => from)).toEqual(['@loom/plugin'])
    expect(readFileSync(join(dir, 'loom.yml'), 'utf8')).toMatch(/- insert:\n {4}- id: word-count\n {6}name: \.\/src\/index\.ts\n/)
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('node_modules\ndist\n')
    const readme = readFileSync(join(dir, 'README.md'), 'utf8')
    for (const command of ['npm install', 'npm test', 'npx loom prompt', 'npx loom run --patch demo.yml', 'npm run typecheck', 'npm publish']) {
      expect(readme).toContain(command)
    }
  })

  it('locks every package it needs to a tarball of .loom/packs, named in package.json as a registry install names it', async () => {
    const { cwd } = project()
    const run = await scaffold('@acme/word-count', cwd)
    expect(run.stderr).toBe('')
    expect(run.stdout).toContain('Its 8 packages are in .loom/packs, locked by package-lock.json: npm install needs no registry.')
    const dir = join(cwd, 'word-count')
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
    expect(JSON.stringify(pkg)).not.toContain('file:')
    const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8'))
    expect(lock.packages['']).toMatchObject({ dependencies: pkg.dependencies, devDependencies: pkg.devDependencies, peerDependencies: pkg.peerDependencies })
    const locked = Object.entries(lock.packages).slice(1) as [string, { resolved: string }][]
    expect(locked.map(([path]) => path)).toEqual([
      'node_modules/@deepseek-ai/cordis',
      'node_modules/@deepseek-ai/schemastery',
      'node_modules/@loom/cli',
      'node_modules/@loom/plugin',
      'node_modules/@loom/scope',
      'node_modules/@loom/testkit',
      'node_modules/@types/node',
      'node_modules/typescript',
    ])
    for (const [path, entry] of locked) expect(readdirSync(join(dir, '.loom/packs')), path).toContain(entry.resolved.replace('file:.loom/packs/', ''))
    expect(readFileSync(join(dir, '.npmrc'), 'utf8')).toBe(NPMRC)
  })

  it('names the toolchain it found next to the CLI, else the one the repository builds with', async () => {
    expect({ typescript: TYPESCRIPT_VERSION, '@types/node': TYPES_NODE_VERSION }).toEqual({
      typescript: ROOT.devDependencies.typescript,
      '@types/node': ROOT.devDependencies['@types/node'],
    })
    const { cwd } = project()
    expect((await scaffold('older', cwd, { from: installedCli('older', '5.8.2') })).code).toBe(0)
    expect(JSON.parse(readFileSync(join(cwd, 'older/package.json'), 'utf8')).devDependencies.typescript).toBe('5.8.2')
  })

  it('says which packages npm will fetch from the registry, and why', async () => {
    const { cwd } = project()
    const run = await scaffold('lonely', cwd, { from: join(trees, 'nothing-installed') })
    expect(run.code).toBe(0)
    expect(run.stderr).toMatch(/^loom: warning: npm install will fetch @loom\/plugin, @deepseek-ai\/cordis, .*, typescript from the registry:\n/)
    expect(run.stderr).toContain('  @loom/plugin (for lonely): not found next to the CLI\n')
    expect(run.stderr).toContain('The @loom packages are on no registry')
    expect(run.stdout).toContain('Its 0 packages are in .loom/packs, locked by package-lock.json: npm install needs the registry only for @loom/plugin,')
  })

  it('refuses a --packs folder it cannot use, writing nothing', async () => {
    const { cwd } = project()
    const run = await scaffold('word-count', cwd, { packs: 'no-such-folder' })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(`loom: new plugin: --packs ${join(cwd, 'no-such-folder')}: no such folder\n`)
    expect(readdirSync(cwd)).toEqual([])
  })

  it('is the project docs/plugin-authoring.md walks through', () => {
    const guide = readFileSync(join(REPO, 'docs/plugin-authoring.md'), 'utf8')
    const block = (opening: string) =>
      guide.includes(opening) ? guide.slice(guide.indexOf(opening) + opening.length).split(/^```$/m)[0] : `no block ${opening}`
    const files = projectFiles('@acme/word-count', CLI)
    expect(block('```ts\n// src/index.ts\n')).toBe(files['src/index.ts'])
    expect(block('```ts\n// tests/index.test.ts\n')).toBe(files['tests/index.test.ts'])
    expect(block('```yaml\n')).toBe(files['loom.yml'])
    expect(block('```yaml\n# demo.yml')).toBe(files['demo.yml'].slice('# demo.yml'.length))
  })

  it('creates an unscoped project in an empty folder of its name', async () => {
    const { cwd } = project()
    mkdirSync(join(cwd, 'hello'))
    const run = await scaffold('hello', cwd)
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(readFileSync(join(cwd, 'hello/package.json'), 'utf8')).name).toBe('hello')
  })

  it('refuses a folder that exists and is not empty, naming it', async () => {
    const { cwd } = project({ 'word-count/notes.txt': 'mine' })
    const run = await scaffold('@acme/word-count', cwd)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/\.\/word-count already exists and is not an empty folder/)
    expect(readdirSync(join(cwd, 'word-count'))).toEqual(['notes.txt'])
  })

  it.each([
    ['Word-Count', /\(it has "W", "C"\)/],
    ['my plugin', /\(it has " "\)/],
    ['.hidden', /neither part starting with "\." or "_"/],
    ['@acme', /not of the form name or @scope\/name/],
    ['fs', /reserved/],
  ])('refuses the name %j, naming the rule', async (name, reason) => {
    const { cwd } = project()
    const run = await scaffold(name, cwd)
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(reason)
    expect(run.stderr).toContain('an npm package name is lowercase letters, digits')
    expect(readdirSync(cwd)).toEqual([])
  })

  describe('the project, with the workspace packages installed', () => {
    let dir: string
    let home: string
    beforeAll(async () => {
      const made = project()
      home = made.home
      dir = join(made.cwd, 'word-count')
      expect((await scaffold('@acme/word-count', made.cwd)).code).toBe(0)
      const link = (name: string, target: string) => {
        mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true })
        symlinkSync(target, join(dir, 'node_modules', name), 'dir')
      }
      link('@loom/plugin', join(REPO, 'packages/plugin'))
      link('@loom/testkit', join(REPO, 'packages/testkit'))
      for (const name of ['typescript', '@types/node']) link(name, join(REPO, 'node_modules', name))
    })

    it('boots on the kit with its section and its tool', async () => {
      const plugin = await import(join(dir, 'src/index.ts'))
      const host = await createHost()
      try {
        const mounted = await host.mount(plugin)
        const delta = await mounted.delta()
        expect(delta.sections.map(section => [section.name, section.order, section.stability])).toEqual([['word-count:guidance', 200, 'static']])
        expect(delta.tools.map(tool => tool.name)).toEqual(['word-count'])
        expect(await host.callTool('word-count', { text: 'a b a' })).toMatchObject({
          isError: false,
          content: [{ type: 'text', text: 'words: 3, lines: 1, characters: 5. Most frequent: a (2), b (1).' }],
        })
        await mounted.dispose()
        await host.assertZeroResidue(mounted)
      } finally {
        await host.dispose()
      }
    })

    it('passes its own tests', async () => {
      // Node's test runner, as `npm test` runs it; the workspace's packages export their sources under this condition (dist/ is for installs).
      const run = await spawnRun(process.execPath, ['--conditions=loom-source', '--test'], { cwd: dir, home, env: { NO_COLOR: '1' } })
      expect(run.code, run.stdout + run.stderr).toBe(0)
      expect(run.stdout).toMatch(/^\S+ pass 7$/m)
    })

    it('typechecks under its own tsconfig', () => {
      const config = ts.getParsedCommandLineOfConfigFile(
        join(dir, 'tsconfig.json'),
        { customConditions: ['loom-source'] },
        {
          ...ts.sys,
          onUnRecoverableConfigFileDiagnostic: diagnostic => {
            throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'))
          },
        },
      )!
      expect(config.fileNames.map(file => file.slice(dir.length + 1)).sort()).toEqual(['src/index.ts', 'tests/index.test.ts'])
      const program = ts.createProgram(config.fileNames, config.options)
      // Only the project's own files: the workspace's are checked by its own build.
      const problems = [
        ...program.getOptionsDiagnostics(),
        ...program.getGlobalDiagnostics(),
        ...config.fileNames.flatMap(file => ts.getPreEmitDiagnostics(program, program.getSourceFile(file))),
      ].map(diagnostic => ts.formatDiagnostic(diagnostic, { getCanonicalFileName: f => f, getCurrentDirectory: () => dir, getNewLine: () => '\n' }))
      expect(problems).toEqual([])
    })

    it('shows its section and tool in `loom prompt`', async () => {
      const run = await loom(['prompt', '--json'], { cwd: dir, home })
      expect(run.code, run.stderr).toBe(0)
      const report = JSON.parse(run.stdout)
      expect(report.sections.map((section: { name: string }) => section.name)).toContain('word-count:guidance')
      expect(report.tools).toContainEqual(expect.objectContaining({ name: 'word-count', owner: '@acme/word-count' }))
    })

    it('`loom run --patch demo.yml` calls its tool through the scripted model', async () => {
      const run = await loom(['run', '--patch', 'demo.yml', 'count the words of: the cat and the hat'], { cwd: dir, home, env: { NO_COLOR: '1' } })
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain('→ word-count')
      expect(run.stdout).toContain('There are 5 words; "the" comes twice.')
      const shown = await loom(['sessions', 'show', 'last'], { cwd: dir, home })
      expect(shown.stdout).toContain('words: 5, lines: 1, characters: 19. Most frequent: the (2), cat (1), and (1), hat (1).')
    })
  })
})
