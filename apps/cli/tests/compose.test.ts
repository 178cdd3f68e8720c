// In-process: the layer semantics, the argument parser, the demo model's
// decisions, and boot/recompose of a running deployment.
import type { GenerateOptions, Message } from '@loom/llm'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { boot, locateModule, type Deployment } from '../src/boot.ts'
import { parse } from '../src/parse.ts'
import { applyLayers, compose, findProjectLayer, readLayer, type Layer } from '../src/compose.ts'
import { DEMO_LABEL, demoReply, parseListing } from '../src/demo-model.ts'
import { BootError, ConfigError } from '../src/errors.ts'
import { freshSessionId, newSessionId } from '../src/runner.ts'

const folders: string[] = []
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

function layer(patches: unknown[], label = 'patch'): Layer {
  const kind = (['bundle', 'user', 'project'] as const).find(kind => kind === label) ?? 'patch'
  return { kind, label, file: `/layers/${label}.yml`, patches: patches as Layer['patches'] }
}

function dir(files: Record<string, string>): string {
  const path = mkdtempSync(join(tmpdir(), 'loom-cli-unit-'))
  folders.push(path)
  for (const [name, text] of Object.entries(files)) writeFileSync(join(path, name), text)
  return path
}

describe('layers', () => {
  it('insert adds rows; an id replaces whole fields; later layers win; inserted rows are targets at once', () => {
    const warnings: string[] = []
    const rows = applyLayers(
      [
        layer(
          [
            {
              insert: [
                { id: 'a', name: 'pkg-a', config: { x: 1, y: 2 } },
                { id: 'b', name: 'pkg-b' },
              ],
            },
            { id: 'zzz', disabled: true },
          ],
          'bundle',
        ),
        layer([{ id: 'a', config: { y: 3 } }, { insert: [{ id: 'c', name: 'pkg-c' }] }, { id: 'c', disabled: true }], 'project'),
        layer([{ id: 'a', name: 'pkg-other', config: {} }], 'patch'),
      ],
      text => warnings.push(text),
    )
    expect(rows).toEqual([
      { id: 'a', name: 'pkg-a', config: { y: 3 } },
      { id: 'b', name: 'pkg-b' },
      { id: 'c', name: 'pkg-c', disabled: true },
    ])
    // A bundle may patch a row its base lacks: a warning, not an error.
    expect(warnings).toEqual([
      '/layers/bundle.yml: no row "zzz" to change; to add a row, list it under "- insert:"',
      '/layers/patch.yml: patch: name mismatch for "a" (expected "pkg-a", got "pkg-other"), skipping',
    ])
    // In the project's layer or a --patch, it is an error.
    const base = layer([{ insert: [{ id: 'shell', name: 'pkg-shell' }] }], 'bundle')
    expect(() => applyLayers([base, layer([{ id: 'shel', disabled: true }], 'project')], () => {})).toThrow(
      '/layers/project.yml: no row "shel" to change (did you mean "shell"?)',
    )
  })

  it('a layer file: relative module names resolve against its folder; !!js is kept', () => {
    const folder = dir({
      'l.yml': '- insert:\n    - id: x\n      name: ./x.ts\n      disabled: !!js "!process.env.X"\n- id: x\n  name: ./x.ts\n  config: { a: 1 }\n',
    })
    const patches = readLayer(join(folder, 'l.yml'))
    expect(patches).toEqual([
      { insert: [{ id: 'x', name: join(folder, 'x.ts'), disabled: { __jsExpr: '!process.env.X' } }] },
      { id: 'x', name: join(folder, 'x.ts'), config: { a: 1 } },
    ])
  })

  it('refuses a layer that is not a list, and a patch with neither id nor insert', () => {
    const folder = dir({ 'map.yml': 'id: x\n', 'anon.yml': '- disabled: true\n' })
    expect(() => readLayer(join(folder, 'map.yml'))).toThrow(
      new ConfigError(`${join(folder, 'map.yml')} must be a YAML list of patches ({ insert: [rows] }, or { id, ... } to replace a row), got a mapping`),
    )
    expect(() => readLayer(join(folder, 'anon.yml'))).toThrow(/patch 1 needs an id \(to replace or disable that row\) or an insert list/)
  })

  it('compose: bundles in order, then loom.yml of the project, then patches', () => {
    const folder = dir({ 'loom.yml': '- id: shell\n  disabled: true\n', 'p.yml': '- id: runner\n  config: { provider: scripted }\n' })
    const { layers, rows } = compose({ cwd: folder, bundles: ['default'], patches: ['p.yml'], warn: () => {} })
    expect(layers.map(l => `${l.kind}:${l.label}`)).toEqual(['bundle:default', 'project:loom.yml', 'patch:p.yml'])
    expect(rows.find(row => row.id === 'shell')?.disabled).toBe(true)
    expect(rows.find(row => row.id === 'runner')?.config).toEqual({ provider: 'scripted' })
    expect(compose({ cwd: folder, project: false, warn: () => {} }).layers).toHaveLength(1)
    // Two bundles inserting the same ids would silently collapse into one row each: refused.
    expect(() => compose({ cwd: folder, bundles: ['minimal', 'default'], warn: () => {} })).toThrow(
      /two rows have the id "prompt" \(inserted by .*minimal\.yml and .*default\.yml\): ids must be unique/,
    )
  })
})

describe('finding the layers', () => {
  const rowOf = (rows: readonly { id?: string }[], id: string) => rows.find(row => row.id === id) as Record<string, unknown>

  it("a subfolder gets the project's loom.yml (the nearest one up to the .git folder), under the operator's own", () => {
    const project = dir({ 'loom.yml': '- id: shell\n  disabled: true\n' })
    mkdirSync(join(project, '.git'))
    mkdirSync(join(project, 'src', 'deep'), { recursive: true })
    const home = dir({ 'loom.yml': '- id: shell\n  config: { timeoutMs: 5000 }\n- id: search\n  disabled: true\n' })
    const saved = process.env.LOOM_HOME
    process.env.LOOM_HOME = home
    try {
      const { layers, rows } = compose({ cwd: join(project, 'src', 'deep') })
      expect(layers.map(({ kind, file }) => [kind, file])).toEqual([
        ['bundle', expect.stringMatching(/default\.yml$/)],
        ['user', join(home, 'loom.yml')],
        ['project', join(project, 'loom.yml')],
      ])
      expect(layers.at(-1)!.label).toBe(join('..', '..', 'loom.yml'))
      // The project wins over the operator; what only the operator set stays.
      expect(rowOf(rows, 'shell')).toMatchObject({ disabled: true, config: { timeoutMs: 5000 } })
      expect(rowOf(rows, 'search')).toMatchObject({ disabled: true })
    } finally {
      if (saved === undefined) delete process.env.LOOM_HOME
      else process.env.LOOM_HOME = saved
    }
  })

  it('stops at the project root: a loom.yml above the .git folder belongs to another project', () => {
    const outer = dir({ 'loom.yml': '- id: shell\n  disabled: true\n' })
    mkdirSync(join(outer, 'repo', '.git'), { recursive: true })
    expect(findProjectLayer(join(outer, 'repo'))).toBeUndefined()
    expect(findProjectLayer(outer)).toBe(join(outer, 'loom.yml'))
  })
})

describe('arguments', () => {
  it('ignores the literal -- that pnpm passes through, and collects repeated layers', () => {
    expect(parse(['--', 'run', '--json', '--patch', 'a.yml', '--patch', 'b.yml', 'what', 'is', 'this?'])).toMatchObject({
      command: ['run', 'what', 'is', 'this?'],
      json: true,
      patches: ['a.yml', 'b.yml'],
      bundles: [],
    })
  })

  it('refuses an option the command does not use, naming the commands it is for', () => {
    expect(() => parse(['config', '--model', 'foo'])).toThrow(
      'config: --model does not apply here (it is for: run, resume, prompt, dev, sessions resume, sessions compact)',
    )
    expect(() => parse(['sessions', 'list', '--max-cost', '1'])).toThrow('sessions list: --max-cost does not apply here')
    expect(() => parse(['run', 'hi', '--hit-price', '1'])).toThrow('run: --hit-price does not apply here (it is for: sessions stats)')
    expect(() => parse(['dev', '--json'])).toThrow('dev: --json does not apply here')
    // What each command does use, and the options of every command, pass.
    expect(parse(['sessions', 'resume', 'id', 'go', '--thinking', 'off', '--max-steps', '3']).maxSteps).toBe(3)
    expect(parse(['sessions', 'stats', 'id', '--hit-price', '0.01', '--json']).prices.hit).toBe('0.01')
    expect(parse(['config', '--bundle', 'minimal', '--patch', 'p.yml', '--json']).json).toBe(true)
    expect(parse(['dev', '--model', 'm']).model).toBe('m')
  })

  it('session ids sort by time', () => {
    expect(newSessionId(new Date('2026-11-29T13:42:21.123Z'))).toMatch(/^20261129-134221-[0-9a-f]{6}$/)
    // Two sessions of one second may draw the same bytes: a new one never takes a live agent's id.
    const drawn = ['20261129-134221-aaaaaa', '20261129-134221-aaaaaa', '20261129-134221-bbbbbb']
    expect(
      freshSessionId(
        id => id.endsWith('aaaaaa'),
        () => drawn.shift()!,
      ),
    ).toBe('20261129-134221-bbbbbb')
  })
})

describe('the demo model', () => {
  const tools = ['bash', 'glob', 'read'].map(name => ({ name, description: name, parameters: { type: 'object' } }))
  const user = (text: string): Message => ({ id: 'u', role: 'user', source: { kind: 'user' }, content: [{ type: 'text', text }] })
  const call = (id: string, name: string, args: object): Message => ({
    id: `a-${id}`,
    role: 'assistant',
    source: { kind: 'model', provider: 'scripted', model: 'm' },
    content: [{ type: 'tool-call', id, name, arguments: JSON.stringify(args) }],
  })
  const result = (id: string, text: string, isError = false): Message => ({
    id: `r-${id}`,
    role: 'user',
    source: { kind: 'tool', callId: id },
    content: [{ type: 'tool-result', toolCallId: id, content: [{ type: 'text', text }], isError }],
  })
  const request = (messages: Message[], toolList = tools) => ({ provider: 'scripted', model: 'm', messages, tools: toolList }) as GenerateOptions
  const LISTING =
    'total 8\ndrwxr-xr-x 2 u g 4096 Nov 29 13:00 .\ndrwxr-xr-x 9 u g 4096 Nov 29 13:00 ..\n-rw-r--r-- 1 u g 120 Nov 29 13:00 README.md\ndrwxr-xr-x 2 u g 4096 Nov 29 13:00 src\nlrwxrwxrwx 1 u g 5 Nov 29 13:00 link -> src\n[exit code: 0]'

  it('lists, then reads the README, then answers from what it found', () => {
    expect(demoReply(request([user('what is here?')]))).toEqual({
      text: 'Let me look at the current directory.',
      toolCalls: [{ name: 'bash', arguments: { command: 'ls -la' } }],
    })
    const listed = [user('what is here?'), call('c1', 'bash', { command: 'ls -la' }), result('c1', LISTING)]
    expect(demoReply(request(listed))).toEqual({
      text: 'There is a README.md; let me read it.',
      toolCalls: [{ name: 'read', arguments: { path: 'README.md' } }],
    })
    const read = [
      ...listed,
      call('c2', 'read', { path: 'README.md' }),
      result('c2', '     1\t# Widget\n     2\t\n     3\tWidget turns sprockets into gears, quickly and with very little noise.\n'),
    ]
    const answer = demoReply(request(read)).text!
    expect(answer.startsWith(DEMO_LABEL)).toBe(true)
    expect(answer).toContain('The directory has 3 entries: 1 folder and 2 files.')
    expect(answer).toContain('README.md is titled "Widget"; it begins: "Widget turns sprockets into gears')
    expect(answer).toContain('You asked: "what is here?"')
  })

  it('decides from the last user prompt only: a resumed session starts over', () => {
    const earlier = [user('first'), call('c1', 'bash', { command: 'ls -la' }), result('c1', LISTING)]
    expect(demoReply(request([...earlier, user('second')])).toolCalls?.[0].name).toBe('bash')
  })

  it('falls back to glob, and says so when it has no tools', () => {
    expect(
      demoReply(
        request(
          [user('x')],
          tools.filter(t => t.name !== 'bash'),
        ),
      ).toolCalls,
    ).toEqual([{ name: 'glob', arguments: { pattern: '*' } }])
    expect(demoReply(request([user('x')], []))).toEqual({ text: expect.stringContaining('This deployment gives me no tools') })
    expect(parseListing('src/\nREADME.md\nFound 2 files', 'glob')).toEqual([
      { name: 'src', dir: true },
      { name: 'README.md', dir: false },
    ])
  })

  it('reports a failed listing', () => {
    const failed = [user('x'), call('c1', 'bash', { command: 'ls -la' }), result('c1', 'Error: permission denied', true)]
    expect(demoReply(request(failed)).text).toContain('Listing the directory failed: Error: permission denied')
  })
})

describe('boot', () => {
  const deployments: Deployment[] = []
  // Trust is recorded in LOOM_HOME: a folder of these tests', not the user's.
  const saved = process.env.LOOM_HOME
  beforeAll(() => {
    process.env.LOOM_HOME = dir({})
  })
  afterAll(async () => {
    for (const deployment of deployments) await deployment.dispose()
    if (saved === undefined) delete process.env.LOOM_HOME
    else process.env.LOOM_HOME = saved
  })

  it('boots the layers and recompose() applies an edited layer to the running deployment', async () => {
    const folder = dir({
      'greet.mjs':
        "export const name = 'greet'\nexport const inject = ['systemPrompt']\nexport function apply(ctx, config) { ctx.systemPrompt.section({ name: 'greet', order: 200, text: config.text + ' ' + ctx.baseUrl }) }\n",
      'loom.yml': '[]\n',
    })
    // The edit below mounts a plugin by path: asked about, and trusted, as on a terminal.
    const asked: string[] = []
    const trust = { ask: async ({ shown }: { shown: string }) => asked.push(shown) > 0 }
    const deployment = await boot({ cwd: folder, bundles: ['minimal'], log: () => {}, trust })
    deployments.push(deployment)
    const system = async () => (await deployment.root.get('systemPrompt')!.assemble()).sections.map((s: { name: string }) => s.name)
    expect(await system()).not.toContain('greet')

    writeFileSync(join(folder, 'loom.yml'), '- insert:\n    - id: greet\n      name: ./greet.mjs\n      config: { text: Hello. }\n')
    const protectedPaths = () =>
      deployment.root
        .get('tools')!
        .protectedPaths()
        .map(entry => entry.path)
    expect(protectedPaths()).not.toContain(join(folder, 'greet.mjs'))
    await deployment.recompose()
    expect(asked).toEqual(['./loom.yml'])
    expect(await system()).toContain('greet')
    expect(deployment.composition.rows.at(-1)).toMatchObject({ id: 'greet', config: { text: 'Hello.' } })
    // The plugin mounted by path is out of the agent's reach from now on.
    expect(protectedPaths()).toContain(join(folder, 'greet.mjs'))
    // A plugin's relative paths resolve against the project folder.
    const greet = (await deployment.root.get('systemPrompt')!.assemble()).sections.find((s: { name: string }) => s.name === 'greet')
    expect(greet?.text).toBe(`Hello. ${pathToFileURL(folder).href}/`)

    // A layer that does not parse changes nothing.
    writeFileSync(join(folder, 'loom.yml'), '- id: [\n')
    await expect(deployment.recompose()).rejects.toThrow(/malformed YAML in .*loom\.yml at line 2/)
    expect(await system()).toContain('greet')

    writeFileSync(join(folder, 'loom.yml'), '[]\n')
    await deployment.recompose()
    expect(await system()).not.toContain('greet')
    expect(protectedPaths()).not.toContain(join(folder, 'greet.mjs'))
    expect(protectedPaths()).toContain(join(folder, 'loom.yml'))
    expect(await deployment.problems()).toEqual([])
  })

  it('the rows that boot are the rows `loom config` prints, each package located as a file', async () => {
    const folder = dir({})
    const deployment = await boot({ cwd: folder, log: () => {} })
    deployments.push(deployment)
    const mounted = [...deployment.root.loader.entries()].filter(entry => entry.id.startsWith('deployment:'))
    const strip = (row: object) => JSON.parse(JSON.stringify(row))
    const composed = compose({ cwd: folder, warn: () => {} }).rows
    expect(mounted.map(entry => strip(entry.options))).toEqual(composed.map(row => strip({ ...row, name: locateModule(row.name, folder) })))
    for (const entry of mounted) expect(entry.options.name).toMatch(/^file:\/\//)
  })

  it('a failed boot throws a BootError and unloads what started', async () => {
    const folder = dir({ 'loom.yml': "- id: agents\n  config: { maxParallelToolCalls: 0 }\n- insert:\n    - id: ghost\n      name: '@loom/ghost'\n" })
    const error = await boot({ cwd: folder, bundles: ['minimal'], log: () => {} }).catch(e => e)
    expect(error).toBeInstanceOf(BootError)
    expect(error.problems).toEqual([
      expect.stringMatching(/^row "agents" \(@loom\/agent-loop\): invalid config: \$\.maxParallelToolCalls expected/),
      'row "ghost" (@loom/ghost): cannot load module "@loom/ghost": no such package or file',
      'row "runner" did not start: it waits for services that a failed row above provides',
    ])
  })
})
