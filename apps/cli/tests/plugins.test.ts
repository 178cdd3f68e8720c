// `loom plugins`: the bundled plugins (every row of the CLI's bundles) and the
// installed ones (packages marked "loom-plugin" in node_modules from the
// working folder up, then from the CLI's folder up), each with its config keys; `loom schema` types their
// rows from the same catalogue.
import { entryListSchema } from '@deepseek-ai/cordis-plugin-include'
import { Ajv2020 } from 'ajv/dist/2020.js'
import yaml from 'js-yaml'
import { mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { loom, project } from './helpers.ts'

const CLI = fileURLToPath(new URL('..', import.meta.url))

/** Every plugin a row of the CLI's bundles names, read here independently of the catalogue. */
function bundledNames(): string[] {
  const names = new Set<string>()
  for (const file of readdirSync(join(CLI, 'bundles'))) {
    const patches = yaml.load(readFileSync(join(CLI, 'bundles', file), 'utf8'), { schema: entryListSchema }) as { insert?: { name: string }[] }[]
    for (const patch of patches) for (const row of patch.insert ?? []) names.add(row.name)
  }
  return [...names]
}

const GREETER = `import Schema from '@deepseek-ai/schemastery'
export const name = 'greeter'
export const Config = Schema.object({
  greeting: Schema.string().default('hello').description('What the greeter says.'),
  times: Schema.natural().min(1).default(1).description('How often it says it.'),
  style: Schema.object({ loud: Schema.boolean().default(false) }).description('How it says it.'),
})
export function apply() {}
`

const manifest = (name: string, extra: object = {}) =>
  JSON.stringify({ name, version: '1.0.0', type: 'module', keywords: ['loom-plugin'], exports: { '.': { default: './index.js' } }, ...extra })

/** A project with installed packages: two plugins (one scoped), one that fails to load, one that is not a plugin. */
function installedProject() {
  const at = project({
    'node_modules/@acme/loom-greeter/package.json': manifest('@acme/loom-greeter', { description: 'Greets the user in the prompt.' }),
    'node_modules/@acme/loom-greeter/index.js': GREETER,
    'node_modules/loom-notes/package.json': manifest('loom-notes'),
    'node_modules/loom-notes/index.js': "export const name = 'notes'\nexport function apply() {}\n",
    'node_modules/loom-broken/package.json': manifest('loom-broken'),
    'node_modules/loom-broken/index.js': "throw new Error('the broken plugin needs a fuse')\n",
    'node_modules/left-pad/package.json': JSON.stringify({ name: 'left-pad', version: '1.0.0', keywords: ['pad'] }),
    'sub/README.md': '# a subfolder\n',
  })
  // The plugins import schemastery as a peer: the project has it installed.
  mkdirSync(join(at.cwd, 'node_modules/@deepseek-ai'))
  symlinkSync(realpathSync(join(CLI, 'node_modules/@deepseek-ai/schemastery')), join(at.cwd, 'node_modules/@deepseek-ai/schemastery'), 'dir')
  return at
}

describe('loom plugins', () => {
  it('lists every bundled plugin with its config keys: type, default, description', async () => {
    const run = await loom(['plugins', '--json'], project())
    expect(run.code, run.stderr).toBe(0)
    const { plugins } = JSON.parse(run.stdout)
    const names = bundledNames()
    expect(names).toContain('@loom/cli/runner')
    expect(plugins.filter((plugin: any) => plugin.source === 'bundled').map((plugin: any) => plugin.name)).toEqual(names)
    for (const plugin of plugins) expect(plugin.error, plugin.name).toBeUndefined()
    const shell = plugins.find((plugin: any) => plugin.name === '@loom/tool-shell')
    expect(shell.description).toMatch(/bash/)
    expect(shell.keys).toContainEqual({
      key: 'timeoutMs',
      type: 'integer >= 1',
      default: 120_000,
      required: false,
      description: expect.stringContaining('Timeout'),
    })
    expect(shell.keys).toContainEqual(expect.objectContaining({ key: 'env.allow', type: 'string[]', default: [] }))
    expect(shell.keys).toContainEqual(expect.objectContaining({ key: 'sandbox', type: '"auto" | "bwrap" | "none"', default: 'auto' }))
    const jsonl = plugins.find((plugin: any) => plugin.name === '@loom/session-jsonl')
    expect(jsonl.keys).toContainEqual(expect.objectContaining({ key: 'root', required: true }))
    const runner = plugins.find((plugin: any) => plugin.name === '@loom/cli/runner')
    expect(runner.folder).toBe(realpathSync(CLI).replace(/\/$/, ''))
    expect(runner.keys.map((key: any) => key.key)).toContain('limits.maxSteps')
  })

  it('prints a table per plugin', async () => {
    const run = await loom(['plugins'], project())
    expect(run.stdout).toMatch(/^@loom\/tool-shell {2}bundled with the CLI, .+\/plugins\/tool-shell$/m)
    expect(run.stdout).toMatch(/^ {2}KEY +TYPE +DEFAULT +DESCRIPTION$/m)
    expect(run.stdout).toMatch(/^ {2}timeoutMs +integer >= 1 +120000 +Timeout of a call/m)
    expect(run.stdout).toMatch(/^ {2}root +string +required +/m)
    expect(run.stdout).toMatch(/plugins: \d+ bundled, \d+ installed\./)
  })

  it('finds the plugins installed from the working folder up, scoped ones too, and a broken one with its error', async () => {
    const { cwd, home } = installedProject()
    const run = await loom(['plugins', '--json'], { cwd: join(cwd, 'sub'), home })
    expect(run.code, run.stderr).toBe(0)
    // Only this project's: a folder above it may hold packages of its own.
    const installed = JSON.parse(run.stdout).plugins.filter((plugin: any) => plugin.source === 'installed' && plugin.folder.startsWith(realpathSync(cwd)))
    expect(installed.map((plugin: any) => plugin.name)).toEqual(['@acme/loom-greeter', 'loom-broken', 'loom-notes'])
    const [greeter, broken, notes] = installed
    expect(greeter).toMatchObject({ folder: join(realpathSync(cwd), 'node_modules/@acme/loom-greeter'), description: 'Greets the user in the prompt.' })
    expect(greeter.keys).toEqual([
      { key: 'greeting', type: 'string', default: 'hello', required: false, description: 'What the greeter says.' },
      { key: 'times', type: 'integer >= 1', default: 1, required: false, description: 'How often it says it.' },
      { key: 'style', type: 'object', required: false, description: 'How it says it.' },
      { key: 'style.loud', type: 'boolean', default: false, required: false },
    ])
    expect(broken.error).toBe('cannot load: the broken plugin needs a fuse')
    expect(notes).toMatchObject({ keys: [] })
    expect(notes.error).toBeUndefined()

    const text = await loom(['plugins'], { cwd, home })
    expect(text.stdout).toMatch(/^loom-broken {2}installed, .+loom-broken\n {2}error: cannot load: the broken plugin needs a fuse$/m)
    expect(text.stdout).toMatch(/^ {2}times +integer >= 1 +1 +How often it says it\.$/m)
  })

  it('lists the plugins installed next to the CLI too, where a row names them from any folder', async () => {
    // @loom/session-postgres: a dependency of the CLI that none of its bundles names.
    const run = await loom(['plugins', '--json'], project())
    const postgres = JSON.parse(run.stdout).plugins.find((plugin: any) => plugin.name === '@loom/session-postgres')
    expect(postgres).toMatchObject({ source: 'installed', folder: realpathSync(join(CLI, 'node_modules/@loom/session-postgres')) })
    expect(postgres.keys.map((key: any) => key.key)).toContain('url')
  })

  it("the schema types an installed plugin's rows, and warns about the one that does not load", async () => {
    const at = installedProject()
    const run = await loom(['schema'], at)
    expect(run.code).toBe(0)
    expect(run.stderr).toBe('loom: warning: plugin "loom-broken": cannot load: the broken plugin needs a fuse; its config is not checked\n')
    const validate = new Ajv2020().compile(JSON.parse(run.stdout))
    const rows = (config: string) => yaml.load(`- insert:\n    - { id: hi, name: '@acme/loom-greeter', config: ${config} }`, { schema: entryListSchema })
    expect(validate(rows('{ greeting: hey, times: 2, style: { loud: true } }'))).toBe(true)
    expect(validate(rows('{ times: 0 }'))).toBe(false)
    expect(validate(rows('{ style: { quiet: true } }'))).toBe(false)
    expect(validate(yaml.load('- insert: [{ name: loom-broken, config: { any: 1 } }]'))).toBe(true)
  })
})
