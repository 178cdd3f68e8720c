// Loom outside its own repository, as a stranger meets it: the packages are
// packed, the CLI is installed from the tarballs into a folder of its own (the
// README's global install, with the TypeScript toolchain plugin projects use),
// `loom new plugin` makes a plugin project in a temp folder, and every command
// of its README works there with the npm registry unreachable and an empty npm
// cache: npm install, npm test, npx loom prompt, npx loom run (its tool called
// by the scripted model of demo.yml), typecheck and build. Then deployments load
// it by path (its own loom.yml) and, packed and installed next to the CLI, by
// package name. Nothing here resolves into the workspace.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TYPES_NODE_VERSION, TYPESCRIPT_VERSION } from '../src/scaffold.ts'
import { scriptedModel } from './helpers.ts'
import { offlineEnv } from './npm-offline.ts'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))
const PNPM = `pnpm@${(JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { packageManager: string }).packageManager.split('@')[1]}`
// One command's limit: npm installing every tarball's dependencies with a cold cache (a new
// user's) on a loaded machine takes minutes. A test's or hook's limit is above the few commands it
// runs, so a slow command is named by its own limit, not hidden in a hook timeout.
const COMMAND_MS = 480_000
const STEP_MS = 6 * COMMAND_MS

const base = mkdtempSync(join(tmpdir(), 'loom-outside-'))
// Two installed node_modules trees: removing them can take longer than the
// default hook timeout on a loaded machine.
afterAll(() => rm(base, { recursive: true, force: true }), STEP_MS)

/**
 * The environment of a stranger's shell: this Node first on PATH, no workspace
 * source condition, no API keys, sessions in the temp folder.
 */
const env: NodeJS.ProcessEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(NODE_OPTIONS|npm_|VITEST|DEEPSEEK_|ANTHROPIC_|OPENAI_)/.test(key))),
  PATH: [dirname(process.execPath), process.env.PATH].join(delimiter),
  LOOM_HOME: join(base, 'home'),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
}

function sh(command: string, args: string[], cwd: string, environment = env): string {
  try {
    return execFileSync(command, args, { cwd, env: environment, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: COMMAND_MS })
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string; code?: string }
    const why = failed.code === 'ETIMEDOUT' ? `ran out of time after ${COMMAND_MS / 1000} s` : `failed: ${failed.message}`
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) ${why}\n${failed.stdout ?? ''}\n${failed.stderr ?? ''}`)
  }
}

const packs = join(REPO, 'packs')
let tarballs: string[] = []
const cli = join(base, 'cli')
const loomBin = join(cli, 'node_modules', '.bin', 'loom')
const plugin = join(base, 'hello-loom')

describe('a plugin in its own project', { timeout: STEP_MS }, () => {
  beforeAll(() => {
    rmSync(packs, { recursive: true, force: true })
    sh('npx', ['-y', PNPM, 'build'], REPO)
    sh('npx', ['-y', PNPM, 'pack-all'], REPO)
    tarballs = readdirSync(packs).map(name => join(packs, name))
    mkdirSync(cli)
    // With the toolchain of plugin projects, as the README installs it for writing plugins offline.
    sh('npm', ['install', '--prefer-offline', '--prefix', cli, ...tarballs, `typescript@${TYPESCRIPT_VERSION}`, `@types/node@${TYPES_NODE_VERSION}`], base)
  }, STEP_MS)

  it('the installed CLI runs compiled code, from any folder', () => {
    expect(sh(loomBin, ['--version'], base)).toMatch(/^loom \d+\.\d+\.\d+ \(node v\d+/)
    const installed = join(cli, 'node_modules', '@loom', 'cli')
    expect(readdirSync(join(installed, 'dist'))).toContain('main.js')
    expect(sh(loomBin, ['--bundle', 'minimal', 'prompt'], base)).toContain('You are an AI agent powered by Loom.')
    // Nothing written into the install.
    expect(readdirSync(installed).sort()).toEqual(['README.md', 'bin', 'bundles', 'dist', 'package.json', 'src'])
  })

  it('`loom new plugin` makes a project whose README commands all work with no registry', () => {
    // Everything from here on with the registry unreachable and an empty cache.
    const offline = offlineEnv(env)
    const made = sh(loomBin, ['new', 'plugin', 'hello-loom'], base, offline)
    expect(made).toMatch(/Its \d+ packages are in \.loom\/packs, locked by package-lock\.json: npm install needs no registry\./)
    const pkg = JSON.parse(readFileSync(join(plugin, 'package.json'), 'utf8'))
    expect(pkg.dependencies).toEqual({ '@loom/plugin': '^0.1.0' })
    expect(JSON.stringify(pkg)).not.toContain('file:')

    // Every command of the README but npm publish, as written.
    const output = new Map(
      readmeCommands(readFileSync(join(plugin, 'README.md'), 'utf8')).map(command => [command, sh('sh', ['-c', command], plugin, offline)]),
    )
    expect([...output.keys()]).toEqual([
      'npm install',
      'npm test',
      'npx loom prompt',
      'npx loom run --patch demo.yml "count the words of: the cat and the hat"',
      'npm run typecheck',
      'npm run build',
    ])
    expect(output.get('npm test')).toMatch(/^\S+ pass 7$/m)
    expect(output.get('npx loom prompt')).toContain('hello-loom:guidance')
    const run = output.get('npx loom run --patch demo.yml "count the words of: the cat and the hat"')
    expect(run).toContain('→ hello-loom')
    expect(run).toContain('✓')
    expect(run).toContain('There are 5 words; "the" comes twice.')
    expect(sh('npx', ['loom', 'sessions', 'show', 'last'], plugin, offline)).toContain('words: 5, lines: 1, characters: 19. Most frequent: the (2)')
    expect(readdirSync(join(plugin, 'dist'))).toEqual(expect.arrayContaining(['index.js', 'index.d.ts']))
    // npm kept every package where the lockfile put it.
    const lock = JSON.parse(readFileSync(join(plugin, 'package-lock.json'), 'utf8')) as { packages: Record<string, { resolved?: string }> }
    const resolved = Object.entries(lock.packages).slice(1)
    expect(resolved.length).toBeGreaterThan(100)
    for (const [path, entry] of resolved) expect(entry.resolved, path).toMatch(/^file:\.loom\/packs\/.+\.tgz$/)
  })

  it('its loom.yml mounts it by path: `loom prompt` shows its section and its tool', () => {
    // The project's own CLI (a devDependency): one tree, one copy of Cordis.
    const prompt = sh('npx', ['loom', 'prompt', '--json'], plugin)
    const request = JSON.parse(prompt) as { tools: { name: string }[]; manifest: { rows: { kind: string; name: string; owner: string }[] } }
    expect(request.tools.map(tool => tool.name)).toContain('hello-loom')
    expect(request.manifest.rows).toContainEqual(expect.objectContaining({ kind: 'section', name: 'hello-loom:guidance', owner: 'hello-loom' }))
  })

  it('packed and installed next to the CLI, a deployment anywhere loads it by package name and `loom run` calls its tool', () => {
    const packed = sh('npm', ['pack', '--pack-destination', base], plugin).trim().split('\n').pop()!
    // Into the CLI's own folder, as the README's global install adds plugins: one tree, one copy of
    // Cordis. The packs are named again: npm re-resolves a relative tarball of the first install wrongly.
    sh('npm', ['install', '--prefer-offline', '--prefix', cli, join(base, packed), ...tarballs], base)
    const deployment = join(base, 'deployment')
    mkdirSync(deployment)
    writeFileSync(
      join(deployment, 'loom.yml'),
      `${scriptedModel(`
- text: Counting.
  toolCalls:
    - { name: hello-loom, arguments: { text: 'one two two' } }
- Done counting.
`)}- insert:\n    - id: hello\n      name: hello-loom\n`,
    )
    expect(sh(loomBin, ['plugins'], deployment)).toMatch(/^hello-loom {2}installed, .+cli\/node_modules\/hello-loom$/m)
    expect(sh(loomBin, ['prompt'], deployment)).toContain('hello-loom')
    const run = sh(loomBin, ['run', 'count the words'], deployment)
    expect(run).toContain('→ hello-loom')
    expect(run).toContain('✓')
    expect(run).toContain('Done counting.')
  })
})

/** The commands of a project README's shell blocks, as written, without their comments; `npm publish` aside (it needs a registry and an account). */
function readmeCommands(readme: string): string[] {
  return [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap(([, block]) => block.split('\n'))
    .map(line => line.replace(/\s+# .*$/, '').trim())
    .filter(line => line !== '' && !line.startsWith('npm publish'))
}
