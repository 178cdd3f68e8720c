// `loom config`: the rows composed from bundle + loom.yml + --patch layers,
// printed exactly as they boot, and `loom prompt` on the same layers.
import { entryListSchema } from '@deepseek-ai/cordis-plugin-include'
import yaml from 'js-yaml'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loom, project } from './helpers.ts'

const DEFAULT_IDS = [
  'prompt',
  'session',
  'session-jsonl',
  'llm',
  'deepseek',
  'anthropic',
  'openai',
  'scripted',
  'tools',
  'agents',
  'compaction',
  'fs',
  'shell',
  'search',
  'web-fetch',
  'time',
  'workspace',
  'instructions',
  'skills',
  'permissions',
  'runner',
]

const HELLO = `
export const name = 'hello'
export const inject = ['systemPrompt']
export function apply(ctx, config) {
  ctx.systemPrompt.section({ name: 'hello', order: 200, text: 'Hello from ' + config.who + '.' })
}
`

const layered = () =>
  project({
    'plugins/hello.mjs': HELLO,
    'loom.yml': `
# the project's layer
- id: shell
  disabled: true
- insert:
    - id: hello
      name: ./plugins/hello.mjs
      config: { who: the project }
`,
    'patches/a.yml': `
- id: hello
  config: { who: patch a }
- id: prompt
  config:
    persona: A patched persona in {{cwd}}.
`,
    'patches/b.yml': `
- id: fs
  name: '@loom/not-tool-fs'
  disabled: true
`,
  })

describe('loom config', () => {
  it('prints the default bundle rows, with the keyless fallback expressions', async () => {
    const { cwd, home } = project()
    const run = await loom(['config', '--json'], { cwd, home })
    expect(run.code).toBe(0)
    const { layers, rows } = JSON.parse(run.stdout)
    expect(layers).toEqual([{ kind: 'bundle', label: 'default', file: expect.stringMatching(/bundles\/default\.yml$/) }])
    expect(rows.map((row: { id: string }) => row.id)).toEqual(DEFAULT_IDS)
    const byId = Object.fromEntries(rows.map((row: { id: string }) => [row.id, row]))
    expect(byId.deepseek).toMatchObject({ name: '@loom/llm-openai', disabled: { __jsExpr: '!process.env.DEEPSEEK_API_KEY' }, config: { provider: 'deepseek' } })
    expect(byId.openai.config).toMatchObject({ provider: 'openai', baseUrlEnv: 'OPENAI_BASE_URL', apiKeyEnv: 'OPENAI_API_KEY' })
    expect(byId.scripted).toMatchObject({ name: '@loom/cli/demo-model' })
    expect(byId['session-jsonl'].config.root.__jsExpr).toContain('LOOM_HOME')
    expect(byId.runner.name).toBe('@loom/cli/runner')
  })

  it('layers: bundle, then loom.yml, then each --patch in order; names relative to their file', async () => {
    const { cwd, home } = layered()
    const run = await loom(['config', '--json', '--patch', 'patches/a.yml', '--patch', 'patches/b.yml'], { cwd, home })
    expect(run.code).toBe(0)
    const { layers, rows } = JSON.parse(run.stdout)
    expect(layers.map((layer: { kind: string; label: string }) => `${layer.kind}:${layer.label}`)).toEqual([
      'bundle:default',
      'project:loom.yml',
      'patch:patches/a.yml',
      'patch:patches/b.yml',
    ])
    const byId = Object.fromEntries(rows.map((row: { id: string }) => [row.id, row]))
    expect(rows.map((row: { id: string }) => row.id)).toEqual([...DEFAULT_IDS, 'hello'])
    // An id replaces the row's whole config; `disabled` switches it off.
    expect(byId.shell.disabled).toBe(true)
    expect(byId.hello).toEqual({ id: 'hello', name: join(cwd, 'plugins/hello.mjs'), config: { who: 'patch a' } })
    expect(byId.prompt.config).toEqual({ persona: 'A patched persona in {{cwd}}.' })
    // A patch asserting another package warns and changes nothing.
    expect(byId.fs.disabled).toBeUndefined()
    expect(run.stderr).toContain('patch: name mismatch for "fs" (expected "@loom/tool-fs", got "@loom/not-tool-fs"), skipping')

    // The YAML form is the include's own dialect and holds the same rows.
    const text = await loom(['config', '--patch', 'patches/a.yml', '--patch', 'patches/b.yml'], { cwd, home })
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^# The deployment as it boots/)
    expect(text.stdout).toContain("disabled: !!js '!process.env.DEEPSEEK_API_KEY'")
    expect(JSON.parse(JSON.stringify(yaml.load(text.stdout, { schema: entryListSchema })))).toEqual(rows)
    // Each row says which layer files wrote it.
    expect(text.stdout).toContain(`# from ${join(cwd, 'loom.yml')}, ${join(cwd, 'patches/a.yml')}\n- id: hello\n`)
    expect(text.stdout).toContain(`# from <loom>/bundles/default.yml, ${join(cwd, 'loom.yml')}\n- id: shell\n`)
    expect(text.stdout).toContain('# from <loom>/bundles/default.yml\n- id: session\n')
    expect(JSON.parse(run.stdout).sources.prompt).toEqual([expect.stringMatching(/bundles\/default\.yml$/), join(cwd, 'patches/a.yml')])
  })

  it('a patch of a row that does not exist fails, naming the file and the likely row; a bundle may patch rows a base lacks', async () => {
    const { cwd, home } = project({ 'loom.yml': '- id: shel\n  disabled: true\n' })
    const run = await loom(['config'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(`${join(cwd, 'loom.yml')}: no row "shel" to change (did you mean "shell"?); to add a row, list it under "- insert:"`)
  })

  it('a config value or key that the boot refuses: the rows are printed, and it exits 1 naming the row and key, as run does', async () => {
    const { cwd, home } = project({ 'loom.yml': '- id: fs\n  config:\n    timeoutMs: fast\n' })
    const run = await loom(['config'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stdout).toContain('- id: fs\n')
    expect(run.stderr).toBe('loom: row "fs" (@loom/tool-fs): invalid config: $.timeoutMs expected number but got fast\n')
    // The same line as the boot's, which fails run.
    const ran = await loom(['run', 'hi'], { cwd, home })
    expect(ran.code).toBe(1)
    expect(ran.stderr).toContain('row "fs" (@loom/tool-fs): invalid config: $.timeoutMs expected number but got fast')
    // An unknown key, from a --patch file, named with its file and the nearest key.
    const patched = project({ 'typo.yml': '- id: fs\n  config:\n    timeoutMS: 5\n' })
    const typo = await loom(['config', '--patch', 'typo.yml'], patched)
    expect(typo.code).toBe(1)
    expect(typo.stderr).toMatch(/^loom: .*typo\.yml: row "fs" \(@loom\/tool-fs\): unknown config key "timeoutMS" \(did you mean "timeoutMs"\?\); it has: /)
    // A valid value, a plugin mounted by path in the trusted loom.yml, a !!js value (evaluated only at boot): exit 0.
    const valid = layered()
    expect((await loom(['config'], valid)).code).toBe(0)
    const js = project({ 'loom.yml': "- id: fs\n  config:\n    timeoutMs: !!js '1000 * 5'\n" })
    expect(await loom(['config'], js)).toMatchObject({ code: 0, stderr: '' })
  })

  it('a plugin mounted by path from an untrusted layer is not loaded to check its config', async () => {
    const { cwd, home } = project(
      {
        'plugins/loud.mjs':
          "import { writeFileSync } from 'node:fs'\nwriteFileSync(new URL('../loaded', import.meta.url), 'yes')\nexport const name = 'loud'\nexport function apply() {}\n",
        'loom.yml': '- insert:\n    - id: loud\n      name: ./plugins/loud.mjs\n      config: { any: 1 }\n',
      },
      { trusted: false },
    )
    const run = await loom(['config'], { cwd, home })
    expect(run.code).toBe(0)
    expect(run.stderr).toContain('trust')
    expect(existsSync(join(cwd, 'loaded'))).toBe(false)
  })

  it('loom prompt boots the same layers: the patched persona, the project plugin, no bash', async () => {
    const { cwd, home } = layered()
    const run = await loom(['prompt', '--json', '--patch', 'patches/a.yml', '--patch', 'patches/b.yml'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report.system).toContain(`A patched persona in ${cwd}.`)
    expect(report.system).toContain('Hello from patch a.')
    expect(report.sections.find((section: { name: string }) => section.name === 'hello')).toEqual({
      name: 'hello',
      order: 200,
      owner: 'hello',
      stability: 'static',
    })
    const tools = report.tools.map((tool: { name: string }) => tool.name)
    expect(tools).not.toContain('bash')
    expect(tools).toContain('read')
  })

  it('the same rows in another order give the same request', async () => {
    const plugin = (section: string) =>
      `export const name = '${section}'\nexport const inject = ['systemPrompt']\nexport function apply(ctx) { ctx.systemPrompt.section({ name: '${section}', order: 250, text: 'Section ${section}.' }) }\n`
    const row = (id: string) => `    - id: ${id}\n      name: ./${id}.mjs\n`
    const { cwd, home } = project({
      'alpha.mjs': plugin('alpha'),
      'beta.mjs': plugin('beta'),
      'ab.yml': `- insert:\n${row('alpha')}${row('beta')}`,
      'ba.yml': `- id: fs\n  disabled: true\n- insert:\n${row('beta')}${row('alpha')}\n- id: fs\n  disabled: false\n`,
    })
    const [a, b] = await Promise.all(
      ['ab.yml', 'ba.yml'].map(async patch => {
        const run = await loom(['prompt', '--json', '--patch', patch], { cwd, home })
        expect(run.code, run.stderr).toBe(0)
        const { system, tools, sections } = JSON.parse(run.stdout)
        return { system, tools, sections }
      }),
    )
    expect(a.system).toContain('Section alpha.\n\nSection beta.')
    expect(b).toEqual(a)
  })

  it('a bundle shipped by a package in the project, named <package>#<name>', async () => {
    const { cwd, home } = project({
      'node_modules/acme-loom/package.json': JSON.stringify({ name: 'acme-loom', version: '1.0.0', loom: { bundle: { extra: './extra.yml' } } }),
      'node_modules/acme-loom/extra.yml': '- id: shell\n  disabled: true\n- insert:\n    - id: acme\n      name: ./plugin.js\n',
    })
    const run = await loom(['config', '--json', '--bundle', 'minimal', '--bundle', 'acme-loom#extra'], { cwd, home })
    expect(run.code).toBe(0)
    const { layers, rows } = JSON.parse(run.stdout)
    expect(layers.map((layer: { label: string }) => layer.label)).toEqual(['minimal', 'acme-loom#extra'])
    expect(rows.map((row: { id: string }) => row.id)).toEqual(['prompt', 'session', 'llm', 'scripted', 'tools', 'agents', 'runner', 'acme'])
    expect(rows.at(-1).name).toBe(join(cwd, 'node_modules/acme-loom/plugin.js'))
    expect(run.stderr).toContain(`${join(cwd, 'node_modules/acme-loom/extra.yml')}: no row "shell" to change`)
  })
})
