// `loom new plugin NAME`: a plugin project to start from, with a tool, its
// guidance section, a test with the kit and a loom.yml that mounts it, so
// `npm install && npm test && npx loom prompt` work in it at once.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join } from 'node:path'
import type { Io } from './present/term.ts'
import { trustWritten } from './trust.ts'

// The toolchain of a new project: the versions this repository builds with
// (tests/scaffold.test.ts checks they equal the root package.json's).
export const TYPESCRIPT_VERSION = '5.9.3'
export const VITEST_VERSION = '4.1.12'
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

/** Creates the plugin project `./NAME` (`@scope/x` creates `./x`); resolves to the exit code. */
export async function newPlugin(name: string, options: { cwd: string; io: Io; home?: string }): Promise<number> {
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
  // The CLI's own package.json: the same path from src/ and from a compiled dist/.
  const cli = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as CliPackage
  for (const [path, text] of Object.entries(projectFiles(name, cli))) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  // Its loom.yml mounts the plugin by path: written here at the user's command, so trusted as written.
  try {
    trustWritten(join(dir, 'loom.yml'), options.home)
  } catch (error) {
    io.stderr.write(`loom: warning: ${(error as Error).message}; run loom trust in ./${folder} before loom prompt\n`)
  }
  io.stdout.write(
    `Created ./${folder}: the Loom plugin ${name}, with a tool, its guidance section, a test and a loom.yml (trusted as written: loom trust --list).\n\n` +
      `Next steps:\n  cd ${folder}\n  npm install\n  npm test\n  npx loom prompt      # the prompt the model gets, with your section and tool\n`,
  )
  return 0
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

/** Every file of the project, by path. */
export function projectFiles(name: string, cli: CliPackage): Record<string, string> {
  const folder = name.split('/').pop()!
  // The tool name rule of @loom/tools: [a-zA-Z0-9_-], at most 64 characters. Also the row id.
  const tool = folder.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64)
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
    scripts: { build: 'tsc -p tsconfig.build.json', typecheck: 'tsc --noEmit', test: 'vitest run', prompt: 'loom prompt' },
    dependencies: { '@loom/plugin': loom },
    peerDependencies: { '@deepseek-ai/cordis': peer(cordis), '@deepseek-ai/schemastery': peer(schemastery) },
    devDependencies: {
      '@deepseek-ai/cordis': cordis,
      '@deepseek-ai/schemastery': schemastery,
      '@loom/cli': loom,
      '@loom/testkit': loom,
      '@types/node': TYPES_NODE_VERSION,
      typescript: TYPESCRIPT_VERSION,
      vitest: VITEST_VERSION,
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
  return `import { createHost, type Host, manifestOutline } from '@loom/testkit'
import { afterEach, expect, it } from 'vitest'
import * as plugin from '../src/index.ts'

// A host with the real services and a scripted model: no network, no keys.
let host: Host
afterEach(() => host.dispose())

it('shows the model its guidance section and its tool', async () => {
  host = await createHost()
  await host.mount(plugin)
  host.scriptedModel([{ toolCalls: [{ name: '${tool}', arguments: { text: 'one two two' } }] }, 'There are 3 words.'])
  const run = await host.run('how many words are in "one two two"?')
  expect(run.reason).toEqual({ kind: 'completed' })
  const [first, second] = run.requests
  expect(first.system).toContain('Use \`${tool}\` to count the words of a text')
  expect(first.tools?.map(tool => tool.name)).toContain('${tool}')
  // The second request carries the tool's result back to the model.
  expect(JSON.stringify(second.messages)).toContain('words: 3, lines: 1, characters: 11. Most frequent: two (2), one (1).')
})

it('counts words through the tool runtime, with its config', async () => {
  host = await createHost()
  await host.mount(plugin, { top: 1 })
  expect(await host.callTool('${tool}', { text: 'the cat and the hat' })).toEqual({
    isError: false,
    content: [{ type: 'text', text: 'words: 5, lines: 1, characters: 19. Most frequent: the (2).' }],
  })
})

it('gives the model a readable error for bad arguments', async () => {
  host = await createHost()
  await host.mount(plugin)
  const result = await host.callTool('${tool}', {})
  expect(result.isError).toBe(true)
  expect(result.content[0]).toMatchObject({ type: 'text', text: expect.stringContaining("must have required property 'text'") })
})

it('rejects a bad config, naming the key', async () => {
  host = await createHost()
  await expect(host.mount(plugin, { top: -1 })).rejects.toThrow(/top/)
})

it('leaves nothing behind when unloaded', async () => {
  host = await createHost()
  const mounted = await host.mount(plugin)
  await mounted.dispose()
  await host.assertZeroResidue(mounted)
})

it('keeps the cached prompt prefix stable', async () => {
  host = await createHost()
  await host.mount(plugin)
  // Fails naming the section or variable that changes on its own (a clock, say).
  await host.assertStablePrompt()
})

it('puts its guidance and its tool where they belong', async () => {
  host = await createHost()
  await host.mount(plugin)
  // The structure of what it contributes, not the wording: a reworded sentence
  // keeps this green; a section that moves, vanishes or changes stability does not.
  expect(manifestOutline(await host.manifest(), '${name}')).toEqual([
    { kind: 'section', name: '${tool}:guidance', owner: '${name}', order: 200, stability: 'static', trust: 'deployment', category: 'instructions' },
    { kind: 'tool', name: '${tool}', owner: '${name}', order: expect.any(Number), stability: null, trust: 'deployment', category: 'tools' },
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

function readme(name: string, tool: string): string {
  return `# ${name}

A [Loom](https://www.npmjs.com/package/@loom/cli) plugin. It gives the model the
\`${tool}\` tool, which counts the words, lines and characters of a text, and a
guidance section that tells the model when to use it.

| file | what it is |
|---|---|
| \`src/index.ts\` | the plugin: \`name\`, \`inject\`, \`Config\` and \`apply\`, which registers the section and the tool |
| \`tests/index.test.ts\` | tests with \`@loom/testkit\`: a host with the real services and a scripted model |
| \`loom.yml\` | the default deployment plus this plugin, for \`loom prompt\` and \`loom run\` in this folder |

## Develop

\`\`\`sh
npm install
npm test                                  # the tests, offline
npx loom prompt                           # the system text and tools the model gets, with yours in them
npx loom run "count the words of README.md"
\`\`\`

Without an API key, \`loom run\` answers with an offline demo model; set
\`DEEPSEEK_API_KEY\` or \`ANTHROPIC_API_KEY\` for a real one.

## Publish

\`\`\`sh
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
`
}
