// `loom new plugin NAME`: a plugin project to start from, with a tool, its
// guidance section, a test with the kit, a loom.yml that mounts it and a
// scripted model that calls the tool, so `npm install && npm test && npx loom
// prompt` and `npx loom run --patch demo.yml ...` work in it at once. The
// packages it depends on come from next to the CLI (or --packs DIR), so its
// install needs no registry (offline-install.ts).
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Manifest, packageSources, type Sources, versionFound, writeOfflineInstall } from './offline-install.ts'
import type { Io } from './present/term.ts'
import { trustWritten } from './trust.ts'

// The toolchain of a new project: the versions this repository builds with
// (tests/scaffold.test.ts checks they equal the root package.json's), unless
// the CLI's folder (or --packs) holds others, which the project then names.
export const TYPESCRIPT_VERSION = '5.9.3'
export const TYPES_NODE_VERSION = '24.19.4'

// npm's rule for new packages: lowercase, URL-safe, not starting with "." or "_",
// at most 214 characters, optionally under one scope.
const PACKAGE_NAME = /^(?:@[a-z0-9-][a-z0-9-._]*\/)?[a-z0-9-][a-z0-9-._]*$/
const NAME_RULE =
  'an npm package name is lowercase letters, digits, "-", "." and "_" (not first), at most 214 characters, optionally under a scope as in @acme/word-count'

/** What a project takes from the CLI's package.json: its version and its Cordis and schemastery versions. */
export interface CliPackage {
  version: string
  dependencies: Record<string, string>
}

/** The versions of the project's toolchain. */
export interface Toolchain {
  typescript: string
  typesNode: string
}

export interface NewPluginOptions {
  cwd: string
  io: Io
  home?: string
  /** A folder of package tarballs the project's packages come from first (`--packs`). */
  packs?: string
  /** Where the installed packages are looked up from (default: the CLI's own folder). */
  from?: string
}

/** The CLI's own package folder: the same from src/ and from a compiled dist/. */
const CLI_FOLDER = realpathSync(fileURLToPath(new URL('..', import.meta.url)))

/** Creates the plugin project `./NAME` (`@scope/x` creates `./x`); resolves to the exit code. */
export async function newPlugin(name: string, options: NewPluginOptions): Promise<number> {
  const { io } = options
  const problem = invalidName(name)
  if (problem) {
    io.stderr.write(`loom: new plugin: "${name}" is not a valid npm package name (${problem}): ${NAME_RULE}\n`)
    return 1
  }
  const folder = name.split('/').pop()!
  const dir = join(options.cwd, folder)
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    io.stderr.write(`loom: new plugin: ./${folder} already exists and is not an empty folder; choose another name or run it elsewhere\n`)
    return 1
  }
  const cli = JSON.parse(readFileSync(join(CLI_FOLDER, 'package.json'), 'utf8')) as CliPackage
  let sources: Sources
  let files: Record<string, string>
  try {
    // A bad --packs stops here, before any file is written.
    sources = packageSources(options.from ?? CLI_FOLDER, options.packs && resolve(options.cwd, options.packs))
    // The toolchain versions the project can get without a registry, if any.
    const toolchain = {
      typescript: versionFound('typescript', sources) ?? TYPESCRIPT_VERSION,
      typesNode: versionFound('@types/node', sources) ?? TYPES_NODE_VERSION,
    }
    files = projectFiles(name, cli, toolchain)
  } catch (error) {
    io.stderr.write(`loom: new plugin: ${(error as Error).message}\n`)
    return 1
  }
  const existed = existsSync(dir)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  let install: ReturnType<typeof writeOfflineInstall>
  try {
    install = writeOfflineInstall(dir, JSON.parse(files['package.json']) as Manifest, sources)
  } catch (error) {
    // Nothing half made: the folder is left as it was, empty or absent.
    for (const entry of readdirSync(dir)) rmSync(join(dir, entry), { recursive: true, force: true })
    if (!existed) rmSync(dir, { recursive: true, force: true })
    io.stderr.write(`loom: new plugin: cannot gather the packages the project installs: ${(error as Error).message}\n`)
    return 1
  }
  // Its loom.yml mounts the plugin by path: written here at the user's command, so trusted as written.
  try {
    trustWritten(join(dir, 'loom.yml'), options.home)
  } catch (error) {
    io.stderr.write(`loom: warning: ${(error as Error).message}; run loom trust in ./${folder} before loom prompt\n`)
  }
  if (install.fromRegistry.length > 0) io.stderr.write(registryWarning(install))
  const registry = install.fromRegistry.length > 0 ? `the registry only for ${install.fromRegistry.join(', ')} (above)` : 'no registry'
  io.stdout.write(
    `Created ./${folder}: the Loom plugin ${name}, with a tool, its guidance section, a test, a loom.yml (trusted as written: loom trust --list) and demo.yml, a scripted model that calls the tool.\n` +
      `Its ${install.locked} packages are in .loom/packs, locked by package-lock.json: npm install needs ${registry}.\n\n` +
      `Next steps:\n  cd ${folder}\n${DEVELOP.map(line => `  ${line}\n`).join('')}`,
  )
  return 0
}

/** The text the scripted model of `demo.yml` has the tool count. */
const DEMO_TEXT = 'the cat and the hat'

/** The commands of the README's Develop section, with their notes; printed without them once the project is made. */
const DEVELOP_WITH_NOTES = [
  'npm install                               # from .loom/packs: no registry needed',
  'npm test                                  # the tests (node --test), offline',
  'npx loom prompt                           # the system text and tools the model gets, with yours in them',
  `npx loom run --patch demo.yml "count the words of: ${DEMO_TEXT}"`,
]
const DEVELOP = DEVELOP_WITH_NOTES.map(line => line.replace(/ +#.*$/, ''))

/** Which of the project's dependencies npm will fetch, and why they were not found here. */
function registryWarning(install: { fromRegistry: string[]; missing: string[] }): string {
  const loom = install.fromRegistry.filter(name => name.startsWith('@loom/'))
  return (
    `loom: warning: npm install will fetch ${install.fromRegistry.join(', ')} from the registry:\n` +
    install.missing.map(line => `  ${line}\n`).join('') +
    (loom.length > 0
      ? '  The @loom packages are on no registry: run loom new plugin with a loom installed from its tarballs (pnpm pack-all; see its README), or pass --packs with a folder of them.\n'
      : '')
  )
}

/** Why `name` is not a valid name for a new npm package (undefined when it is). */
export function invalidName(name: string): string | undefined {
  if (name.length === 0) return 'it is empty'
  if (name.length > 214) return `it is ${name.length} characters long`
  const bad = [...new Set(name.replace(/[a-z0-9-._@/]/g, ''))]
  if (bad.length > 0) return `it has ${bad.map(char => JSON.stringify(char)).join(', ')}`
  if (!PACKAGE_NAME.test(name)) return 'it is not of the form name or @scope/name, neither part starting with "." or "_"'
  if (['node_modules', 'favicon.ico'].includes(name.split('/').pop()!) || builtinModules.includes(name)) return 'that name is reserved'
  return undefined
}

/** Every file of the project, by path (the packages it installs are written apart). */
export function projectFiles(
  name: string,
  cli: CliPackage,
  toolchain: Toolchain = { typescript: TYPESCRIPT_VERSION, typesNode: TYPES_NODE_VERSION },
): Record<string, string> {
  const folder = name.split('/').pop()!
  // The tool name rule of @loom/tools: [a-zA-Z0-9_-], at most 64 characters. Also the row id.
  const tool = folder.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64)
  // Named as a registry install names them; package-lock.json says where they come from.
  const loom = `^${cli.version}`
  const peer = (version: string) => (/^\d/.test(version) ? `^${version}` : version)
  const cordis = cli.dependencies['@deepseek-ai/cordis']
  const schemastery = cli.dependencies['@deepseek-ai/schemastery']
  const pkg = {
    name,
    version: '0.1.0',
    description: `A Loom plugin: the ${tool} tool and its guidance for the model.`,
    type: 'module',
    keywords: ['loom-plugin'],
    engines: { node: '>=22.18' },
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    files: ['dist'],
    // Node's own test runner: Node >= 22.18 runs the TypeScript tests as they are.
    scripts: { build: 'tsc -p tsconfig.build.json', typecheck: 'tsc --noEmit', test: 'node --test', prompt: 'loom prompt' },
    dependencies: { '@loom/plugin': loom },
    peerDependencies: { '@deepseek-ai/cordis': peer(cordis), '@deepseek-ai/schemastery': peer(schemastery) },
    devDependencies: {
      '@deepseek-ai/cordis': cordis,
      '@deepseek-ai/schemastery': schemastery,
      '@loom/cli': loom,
      '@loom/testkit': loom,
      '@types/node': toolchain.typesNode,
      typescript: toolchain.typescript,
    },
  }
  const tsconfig = {
    compilerOptions: {
      target: 'ES2023',
      module: 'nodenext',
      moduleResolution: 'nodenext',
      strict: true,
      // Node runs src/index.ts as is (loom.yml mounts it): only erasable syntax.
      erasableSyntaxOnly: true,
      verbatimModuleSyntax: true,
      isolatedModules: true,
      allowImportingTsExtensions: true,
      skipLibCheck: true,
      types: ['node'],
      noEmit: true,
    },
    include: ['src', 'tests'],
  }
  const tsconfigBuild = {
    extends: './tsconfig.json',
    compilerOptions: { noEmit: false, declaration: true, rewriteRelativeImportExtensions: true, rootDir: 'src', outDir: 'dist' },
    include: ['src'],
  }
  return {
    'package.json': json(pkg),
    'tsconfig.json': json(tsconfig),
    'tsconfig.build.json': json(tsconfigBuild),
    'src/index.ts': pluginSource(name, tool),
    'tests/index.test.ts': testSource(name, tool),
    'loom.yml': loomYml(tool),
    'demo.yml': demoYml(tool),
    'README.md': readme(name, tool),
    '.gitignore': 'node_modules\ndist\n',
  }
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`

function pluginSource(name: string, tool: string): string {
  return `// A Loom plugin: the \`${tool}\` tool and a guidance section that tells the model
// when to use it. Everything registered through \`ctx\` is removed when the
// plugin unloads (or hot-reloads): there is no cleanup code to write.
import { type Context, defineTool, Schema } from '@loom/plugin'

/** The owner of everything this plugin registers, as prompts and logs name it. */
export const name = '${name}'
/** The services this plugin uses: ctx.systemPrompt and ctx.tools. */
export const inject = ['systemPrompt', 'tools']

export interface Config {
  top: number
}

/** Validates the plugin's row in loom.yml before \`apply\` runs, and fills in defaults. */
export const Config: Schema<Config> = Schema.object({
  top: Schema.natural().default(5).description('How many of the most frequent words the tool lists.'),
})

export function apply(ctx: Context, config: Config) {
  // System text in the third-party band (200..299); it never changes between steps.
  ctx.systemPrompt.section({
    name: '${tool}:guidance',
    order: 200,
    text: 'Use \`${tool}\` to count the words of a text instead of counting them yourself.',
  })

  ctx.tools.register(
    defineTool<{ text: string }>({
      name: '${tool}',
      description: 'Counts the words, lines and characters of a text and lists its most frequent words.',
      parameters: {
        type: 'object',
        properties: { text: { type: 'string', description: 'The text to count.' } },
        required: ['text'],
        additionalProperties: false,
      },
      isConcurrencySafe: true, // it only reads its arguments
      effects: ['read'], // what the approval gate reads: nothing changes, so no one is asked
      execute: ({ text }) => {
        const words = text.toLowerCase().match(/[\\p{L}\\p{N}']+/gu) ?? []
        const counts = new Map<string, number>()
        for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1)
        const frequent = [...counts]
          .sort((a, b) => b[1] - a[1])
          .slice(0, config.top)
          .map(([word, count]) => \`\${word} (\${count})\`)
        const lines = text === '' ? 0 : text.split('\\n').length
        const summary = \`words: \${words.length}, lines: \${lines}, characters: \${text.length}\`
        return frequent.length > 0 ? \`\${summary}. Most frequent: \${frequent.join(', ')}.\` : \`\${summary}.\`
      },
    }),
  )
}
`
}

function testSource(name: string, tool: string): string {
  return `import assert from 'node:assert/strict'
import { afterEach, test } from 'node:test'
import { createHost, type Host, manifestOutline } from '@loom/testkit'
import * as plugin from '../src/index.ts'

// A host with the real services and a scripted model: no network, no keys.
let host: Host
afterEach(() => host.dispose())

test('shows the model its guidance section and its tool', async () => {
  host = await createHost()
  await host.mount(plugin)
  host.scriptedModel([{ toolCalls: [{ name: '${tool}', arguments: { text: 'one two two' } }] }, 'There are 3 words.'])
  const run = await host.run('how many words are in "one two two"?')
  assert.deepEqual(run.reason, { kind: 'completed' })
  const [first, second] = run.requests
  assert.ok(first.system?.includes('Use \`${tool}\` to count the words of a text'), 'the system text has the guidance')
  assert.ok(first.tools?.some(tool => tool.name === '${tool}'), 'the request offers the tool')
  // The second request carries the tool's result back to the model.
  const result = 'words: 3, lines: 1, characters: 11. Most frequent: two (2), one (1).'
  assert.ok(JSON.stringify(second.messages).includes(result), 'the second request has the result')
})

test('counts words through the tool runtime, with its config', async () => {
  host = await createHost()
  await host.mount(plugin, { top: 1 })
  assert.deepEqual(await host.callTool('${tool}', { text: 'the cat and the hat' }), {
    isError: false,
    content: [{ type: 'text', text: 'words: 5, lines: 1, characters: 19. Most frequent: the (2).' }],
  })
})

test('gives the model a readable error for bad arguments', async () => {
  host = await createHost()
  await host.mount(plugin)
  const result = await host.callTool('${tool}', {})
  assert.equal(result.isError, true)
  assert.match(JSON.stringify(result.content), /must have required property 'text'/)
})

test('rejects a bad config, naming the key', async () => {
  host = await createHost()
  await assert.rejects(host.mount(plugin, { top: -1 }), /top/)
})

test('leaves nothing behind when unloaded', async () => {
  host = await createHost()
  const mounted = await host.mount(plugin)
  await mounted.dispose()
  await host.assertZeroResidue(mounted)
})

test('keeps the cached prompt prefix stable', async () => {
  host = await createHost()
  await host.mount(plugin)
  // Fails naming the section or variable that changes on its own (a clock, say).
  await host.assertStablePrompt()
})

test('puts its guidance and its tool where they belong', async () => {
  host = await createHost()
  await host.mount(plugin)
  // The structure of what it contributes, not the wording: a reworded sentence
  // keeps this green; a section that moves, vanishes or changes stability does not.
  // A tool's order is its place among the request's tools, so it is left out.
  const rows = manifestOutline(await host.manifest(), '${name}').map(({ order, ...row }) => (row.kind === 'tool' ? row : { ...row, order }))
  assert.deepEqual(rows, [
    { kind: 'section', name: '${tool}:guidance', owner: '${name}', order: 200, stability: 'static', trust: 'deployment', category: 'instructions' },
    { kind: 'tool', name: '${tool}', owner: '${name}', stability: null, trust: 'deployment', category: 'tools' },
  ])
})
`
}

function loomYml(tool: string): string {
  return `# loom.yml: this project's layer over Loom's default bundle, so \`npx loom prompt\`
# and \`npx loom run\` here run the default deployment with this plugin added.
# Node (>= 22.18) runs the TypeScript source as is: no build needed.
- insert:
    - id: ${tool}
      name: ./src/index.ts
      config:
        top: 5
`
}

function demoYml(tool: string): string {
  return `# demo.yml: a scripted model in place of the real ones, to see the plugin work in
# a turn with no API key: npx loom run --patch demo.yml "count the words of: ${DEMO_TEXT}"
# It calls ${tool} on that text whatever the task says, then answers. Without
# --patch demo.yml, a real model (an API key set) decides when to call the tool.
- id: deepseek
  disabled: true
- id: anthropic
  disabled: true
- id: openai
  disabled: true
- id: scripted
  disabled: true
- insert:
    - id: demo-model
      name: '@loom/llm-scripted'
      config:
        provider: scripted
        model: demo
        script:
          - text: Let me count them with ${tool}.
            toolCalls:
              - { name: ${tool}, arguments: { text: ${DEMO_TEXT} } }
          - There are 5 words; "the" comes twice.
`
}

function readme(name: string, tool: string): string {
  return `# ${name}

A Loom plugin. It gives the model the \`${tool}\` tool, which counts the words,
lines and characters of a text, and a guidance section that tells the model when
to use it.

| file | what it is |
|---|---|
| \`src/index.ts\` | the plugin: \`name\`, \`inject\`, \`Config\` and \`apply\`, which registers the section and the tool |
| \`tests/index.test.ts\` | tests with \`@loom/testkit\` on Node's test runner: a host with the real services and a scripted model |
| \`loom.yml\` | the default deployment plus this plugin, for \`loom prompt\` and \`loom run\` in this folder |
| \`demo.yml\` | a layer with a scripted model that calls the tool, for \`loom run\` with no API key |
| \`.loom/packs/\`, \`package-lock.json\`, \`.npmrc\` | the Loom packages and the packages they need, as tarballs, and the lockfile that installs them from there (below) |

## Develop

\`\`\`sh
${DEVELOP_WITH_NOTES.join('\n')}
\`\`\`

\`demo.yml\` puts a scripted model in place of the real ones: it calls
\`${tool}\` on "${DEMO_TEXT}" whatever the task says, then answers. Without
it, \`npx loom run "count the words of README.md"\` asks a real model (set
\`DEEPSEEK_API_KEY\` or \`ANTHROPIC_API_KEY\`), which decides when to call the
tool; with no key set, Loom's offline demo model only lists and reads files.

## Typecheck and publish

\`\`\`sh
npm run typecheck                         # tsc on src/ and tests/
npm run build                             # dist/: the JavaScript and its type declarations
npm publish${name.startsWith('@') ? ' --access public' : ''}
\`\`\`

A project then installs the package and adds a row to its \`loom.yml\`:

\`\`\`yaml
- insert:
    - id: ${tool}
      name: '${name}'
      config:
        top: 5
\`\`\`

The \`loom-plugin\` keyword in package.json is how \`loom plugins\` finds it.

## Where the packages come from

The \`@loom\` packages are on no registry yet. \`loom new plugin\` copied them,
and every package they need, from the folder its \`loom\` is installed in (or
from the tarballs of its \`--packs\` folder) into \`.loom/packs/\`, and wrote a \`package-lock.json\` that locks each one to its
tarball there, while \`package.json\` names them as a registry install would
(\`"@loom/plugin": "^0.1.0"\`). npm installs a locked package from where the
lockfile says, without asking a registry, so \`npm install\` and \`npm ci\` work
offline. \`.npmrc\` keeps npm from dropping those locations when it rewrites the
lockfile. Keep all three in git, and a clone installs the same way. A package
you add later comes from the registry as usual.
`
}
