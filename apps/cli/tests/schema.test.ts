// `loom schema`: a JSON Schema of loom.yml that accepts what composes and
// boots and refuses what the composition or a plugin's Config refuses, checked
// here with Ajv on layers parsed in the include's own YAML dialect.
import { entryListSchema } from '@deepseek-ai/cordis-plugin-include'
import { Ajv2020 } from 'ajv/dist/2020.js'
import yaml from 'js-yaml'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { readLayer } from '../src/compose.ts'
import { loom, project } from './helpers.ts'

const BUNDLES = fileURLToPath(new URL('../bundles/', import.meta.url))

type Validate = ((data: unknown) => boolean) & { errors?: unknown[] | null }

function compile(text: string): { schema: Record<string, any>; validate: Validate } {
  const schema = JSON.parse(text)
  return { schema, validate: new Ajv2020({ allErrors: true }).compile(schema) }
}

/** A layer as compose.ts reads it: `!!js` values are expression objects. */
const layer = (text: string) => yaml.load(text, { schema: entryListSchema })

describe('loom schema', () => {
  const at = project()
  let validate: Validate
  let schema: Record<string, any>

  beforeAll(async () => {
    const run = await loom(['schema'], at)
    expect(run.code, run.stderr).toBe(0)
    ;({ schema, validate } = compile(run.stdout))
  })

  it('is a draft 2020-12 schema of a list of patches', () => {
    expect(schema).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema', $id: expect.any(String), title: 'loom.yml', type: 'array' })
  })

  it("accepts the CLI's own bundles and a loom.yml using every kind of patch", () => {
    for (const bundle of ['default.yml', 'minimal.yml']) {
      const data = layer(readFileSync(join(BUNDLES, bundle), 'utf8'))
      expect(validate(data), `${bundle}: ${JSON.stringify(validate.errors)}`).toBe(true)
    }
    const valid = layer(`
- id: shell
  config:
    timeoutMs: 5000
    sandbox: none
    env: { allow: [GITHUB_TOKEN] }
- id: search
  disabled: true
- id: fs
  name: '@loom/tool-fs'
  config: { readLimit: 100 }
- id: deepseek
  disabled: !!js "!process.env.DEEPSEEK_API_KEY"
- insert:
    - id: mine
      name: ./plugins/mine.ts
      config: { anything: [1, 2] }
    - id: time2
      name: '@loom/context-time'
      config: { precision: hour, timeZone: !!js "process.env.TZ" }
    - id: tools-group
      name: cordis:group
      group: true
      config:
        - { id: grep2, name: '@loom/tool-search', config: { ignore: [dist] } }
- id: tools-group
  insert:
    - { id: later, name: '@loom/tool-shell' }
`)
    expect(validate(valid), JSON.stringify(validate.errors)).toBe(true)
  })

  it("refuses an unknown config key or a wrong type, by the row's plugin or by the id of a bundle row", () => {
    const refused = [
      '- id: shell\n  config: { timeotMs: 5 }',
      '- id: shell\n  config: { timeoutMs: soon }',
      '- id: shell\n  config: { env: { alow: [X] } }',
      '- id: shell\n  config: { sandbox: maybe }',
      "- insert:\n    - { id: x, name: '@loom/tool-fs', config: { readLimit: 0 } }",
      "- insert:\n    - { id: x, name: '@loom/context-time', config: { precision: day } }",
      "- insert:\n    - { id: g, name: 'cordis:group', group: true, config: [{ name: '@loom/tool-fs', config: { nope: 1 } }] }",
    ]
    for (const text of refused) expect(validate(layer(text)), text).toBe(false)
  })

  it('refuses what the composition refuses: unknown keys, a row without a name, a patch with neither id nor insert', () => {
    const refused = [
      "- insert:\n    - { id: x, name: './x.ts', disable: true }",
      '- insert:\n    - { id: x }',
      "- insert:\n    - { id: x, name: '' }",
      '- { name: x }',
      '- { id: 7 }',
      '- insert: { id: x, name: y }',
      '- shell',
      '{ id: shell }',
      // Next to `insert`, the include reads only the group id: a field that does nothing is flagged.
      '- insert: []\n  disabled: true',
    ]
    for (const text of refused) expect(validate(layer(text)), text).toBe(false)
  })

  it('a row takes exactly the keys the composition accepts', () => {
    const { cwd } = project({ 'odd.yml': '- insert:\n    - { name: x, bogus: 1 }\n' })
    let known: string[] = []
    try {
      readLayer(join(cwd, 'odd.yml'))
    } catch (error) {
      known = /\(known: ([^)]*)\)/.exec((error as Error).message)?.[1].split(', ') ?? []
    }
    expect(known).toContain('disabled')
    expect(Object.keys(schema.$defs.row.properties).sort()).toEqual(known.sort())
    expect(Object.keys(schema.$defs.change.properties).sort()).toEqual(known.sort())
  })

  it('types a patch by id with the plugin of that row in the bundles given by --bundle', async () => {
    const scripted = layer('- id: scripted\n  config: { loop: true, script: [hello] }')
    // `scripted` is the demo model in the default bundle, which has no such keys; @loom/llm-scripted in minimal.
    expect(validate(scripted)).toBe(false)
    const minimal = await loom(['schema', '--bundle', 'minimal'], at)
    expect(compile(minimal.stdout).validate(scripted)).toBe(true)
  })

  it('refuses what the boot refuses', async () => {
    const bad = '- id: shell\n  config: { timeoutMs: soon }\n'
    expect(validate(layer(bad))).toBe(false)
    const { cwd, home } = project({ 'loom.yml': bad })
    const run = await loom(['prompt'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('row "shell" (@loom/tool-shell): invalid config')
  })

  it('--out writes the file and says how an editor uses it', async () => {
    const { cwd, home } = project({ 'loom.yml': '[]\n' })
    const run = await loom(['schema', '--out', 'schemas/loom.schema.json'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('make this the first line of loom.yml:\n# yaml-language-server: $schema=./schemas/loom.schema.json\n')
    const written = readFileSync(join(cwd, 'schemas/loom.schema.json'), 'utf8')
    expect(compile(written).validate(layer('- id: shell\n  config: { timeoutMs: soon }'))).toBe(false)
    // The first line is a comment: the layer still composes.
    writeFileSync(join(cwd, 'loom.yml'), '# yaml-language-server: $schema=./schemas/loom.schema.json\n- id: shell\n  disabled: true\n')
    expect((await loom(['config'], { cwd, home })).code).toBe(0)
  })
})
