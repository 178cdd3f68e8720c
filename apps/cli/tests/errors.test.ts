// Startup and config errors fail loud before any model call: one clear message
// naming the file, row, module or key, a non-zero exit, and no session written.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { events, loom, loomProcess, project, sessionFiles, type Run } from './helpers.ts'

async function fails(files: Record<string, string>, args: string[] = ['run', 'what is in this directory?']): Promise<Run & { cwd: string }> {
  const { cwd, home } = project(files)
  const run = await loom(args, { cwd, home })
  expect(run.code, run.stderr).not.toBe(0)
  expect(run.stdout).toBe('')
  // Nothing reached a model: no session was written.
  expect(sessionFiles(home)).toEqual([])
  return { ...run, cwd }
}

/** Nine levels, each repeating the one before nine times: 9^9 values once expanded, from 400 bytes. */
const LEVELS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']
const repeated = (i: number) =>
  Array(9)
    .fill(i ? `*${LEVELS[i - 1]}` : 'lol')
    .join(', ')
const ALIAS_BOMB = `- id: shell\n  config:\n${LEVELS.map((level, i) => `    ${level}: &${level} [${repeated(i)}]\n`).join('')}`

describe('startup errors', () => {
  it('an unknown plugin names the row and the module', async () => {
    const run = await fails({ 'loom.yml': "- insert:\n    - id: extra\n      name: '@loom/does-not-exist'\n" })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('loom: the deployment failed to start:')
    expect(run.stderr).toContain('row "extra" (@loom/does-not-exist): cannot load module "@loom/does-not-exist": no such package or file')
  })

  it('a missing plugin file names the row and the resolved path', async () => {
    const run = await fails({ 'loom.yml': '- insert:\n    - id: mine\n      name: ./plugins/mine.ts\n' })
    expect(run.stderr).toContain(`row "mine" (${join(run.cwd, 'plugins/mine.ts')}): cannot load module`)
  })

  it('a TypeScript plugin file that does not parse: its file, line and error, then the code frame on lines of their own', async () => {
    const { cwd, home } = project({
      'loom.yml': '- insert:\n    - id: mine\n      name: ./plugins/mine.ts\n',
      'plugins/mine.ts': "export const name = 'mine'\nexport const broken = (\n  1 +\n",
    })
    const run = await loomProcess(['run', 'hi'], { cwd, home })
    expect(run.code).toBe(1)
    const mine = join(cwd, 'plugins/mine.ts')
    expect(run.stderr).toContain(
      `row "mine" (${mine}): cannot load module "${mine}": ${mine}:3: SyntaxError [ERR_INVALID_TYPESCRIPT_SYNTAX]: Expression expected\n      1 +\n`,
    )
  })

  it('an invalid config value names the row and the key path', async () => {
    const run = await fails({ 'loom.yml': '- id: agents\n  config:\n    maxParallelToolCalls: 0\n' })
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/row "agents" \(@loom\/agent-loop\): invalid config: \$\.maxParallelToolCalls expected .*0/)
  })

  it('a wrong type deep in a config names its key path', async () => {
    const run = await fails({ 'loom.yml': '- id: shell\n  config:\n    timeoutMs: soon\n' })
    expect(run.stderr).toMatch(/row "shell" \(@loom\/tool-shell\): invalid config: \$\.timeoutMs expected number but got soon/)
  })

  it('an unknown config key (a typo, or a nested one) names the row, the key, the likely one and the known ones', async () => {
    const run = await fails({ 'loom.yml': '- id: shell\n  config:\n    timeoutMS: 5000\n- id: compaction\n  config:\n    pruner: { headChar: 10 }\n' })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain(
      `${join(run.cwd, 'loom.yml')}: row "shell" (@loom/tool-shell): unknown config key "timeoutMS" (did you mean "timeoutMs"?); it has: root, timeoutMs,`,
    )
    expect(run.stderr).toContain(
      'row "compaction" (@loom/compaction): unknown config key "pruner.headChar" (did you mean "headChars"?); it has: thresholdChars, headChars, tailChars',
    )
  })

  it('a plugin whose apply throws names the row and the error', async () => {
    const run = await fails({
      'boom.mjs': "export const name = 'boom'\nexport function apply() { throw new Error('kaboom: the boom plugin needs a fuse') }\n",
      'loom.yml': '- insert:\n    - id: boom\n      name: ./boom.mjs\n',
    })
    expect(run.stderr).toContain(`row "boom" (${join(run.cwd, 'boom.mjs')}): failed to start: kaboom: the boom plugin needs a fuse`)
  })

  it('a missing required service is one line naming the service and every row that waits for it', async () => {
    const run = await fails({ 'loom.yml': '- id: llm\n  disabled: true\n' })
    expect(run.code).toBe(1)
    // The runner also waits for "agents", which waits for "llm": one root cause, one line.
    expect(run.stderr).toBe(
      'loom: the deployment failed to start:\n  no running row provides the service "llm", so rows "scripted", "agents", "compaction", "runner" did not start (is its row disabled or missing?)\n',
    )
  })

  it('rows that wait for a failed row are one line after its error, not one each', async () => {
    const run = await fails({ 'loom.yml': '- id: prompt\n  config:\n    identity: 5\n' })
    const lines = run.stderr.trim().split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[1]).toBe('  row "prompt" (@loom/system-prompt): invalid config: $.identity expected string but got 5')
    expect(lines[2]).toMatch(/^ {2}11 rows "tools", "agents", .*"runner" did not start: they wait for services that a failed row above provides$/)
  })

  it('a config key for a built-in plugin that takes no config is refused: it would do nothing', async () => {
    const run = await fails({ 'loom.yml': '- id: session\n  config:\n    bogus: 1\n' })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('row "session" (@loom/session): unknown config key "bogus"; it takes no config')
  })

  it('malformed YAML in loom.yml names the file and the line', async () => {
    const run = await fails({ 'loom.yml': '- id: shell\n  config: { timeoutMs: 5\n- id: fs\n' })
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(
      new RegExp(`loom: malformed YAML in ${join(run.cwd, 'loom.yml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} at line 3, column \\d+: `),
    )
  })

  it('malformed YAML in a --patch file names that file', async () => {
    const run = await fails({ 'extra.yml': '- id: fs\n   disabled: true\n' }, ['--patch', 'extra.yml', 'run', 'hi'])
    expect(run.stderr).toContain(`malformed YAML in ${join(run.cwd, 'extra.yml')} at line 2`)
  })

  it('an alias bomb in loom.yml (9 levels) is refused naming the file and the line, by a process that never grows big', async () => {
    const { cwd, home } = project()
    writeFileSync(join(cwd, 'loom.yml'), ALIAS_BOMB)
    // A small heap: expanding the aliases (hundreds of millions of values) would run out of memory instead.
    const run = await loomProcess(['prompt'], { cwd, home, env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=128` } })
    expect(run.stderr).toContain(
      `loom: ${join(cwd, 'loom.yml')}: YAML aliases expand it by more than 100000 values, the limit for a config layer (the node at line 7, 66430 values, is repeated by aliases)`,
    )
    expect(run.code).toBe(1)
    expect(sessionFiles(home)).toEqual([])
  })

  it('a layer over 1 MiB, and an alias inside its own anchor, are refused naming the file', async () => {
    const big = await fails({ 'big.yml': `# ${'x'.repeat(1024 * 1024)}\n[]\n` }, ['--patch', 'big.yml', 'prompt'])
    expect(big.stderr).toContain(`loom: ${join(big.cwd, 'big.yml')} is 1048582 bytes, more than the 1048576-byte limit for a config layer`)
    const loop = await fails({ 'extra.yml': '- id: fs\n  config:\n    a: &a\n      - *a\n' }, ['--patch', 'extra.yml', 'prompt'])
    expect(loop.stderr).toContain(`loom: ${join(loop.cwd, 'extra.yml')}: a YAML alias refers to a node that contains it at line 4`)
  })

  it('an empty layer, a row without a name, a misspelt key are refused with the file', async () => {
    const empty = await fails({ 'loom.yml': '# nothing here yet\n' })
    expect(empty.stderr).toContain('loom.yml is empty: a layer is a YAML list of patches; write [] for a layer that changes nothing')
    const nameless = await fails({ 'loom.yml': '- insert:\n    - id: x\n' })
    expect(nameless.stderr).toContain('loom.yml: patch 1, row 1 ("x") needs a name')
    const typo = await fails({ 'loom.yml': '- id: shell\n  disable: true\n' })
    expect(typo.stderr).toContain('loom.yml: patch 1 has unknown key "disable"')
  })

  it('a prompt that does not assemble fails before any model call, naming the variable and the section', async () => {
    const persona = "- id: prompt\n  config:\n    persona: 'Model: {{modle}}'\n"
    const { cwd, home } = project({ 'loom.yml': persona })
    const run = await loom(['run', 'what is in this directory?'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toMatch(
      /loom: the turn ended: error: UNKNOWN: unknown prompt variable "\{\{modle\}\}" in section "deployment:persona"; registered variables: .*cwd.*model/,
    )
    // The loop assembles once per step and ends the turn when that fails: logged, with no request in it.
    const log = events(sessionFiles(home)[0])
    expect(log.filter(event => ['request/header', 'assistant/chunk', 'assistant/message'].includes(event.type))).toEqual([])
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'error', error: { message: expect.stringContaining('"{{modle}}"') } } } })

    const prompt = await fails({ 'loom.yml': persona }, ['prompt'])
    expect(prompt.stderr).toContain('unknown prompt variable "{{modle}}" in section "deployment:persona"')
  })

  it('an unknown bundle lists the shipped ones', async () => {
    const run = await fails({}, ['--bundle', 'nope', 'run', 'hi'])
    expect(run.stderr).toContain('unknown bundle "nope": the CLI ships default, minimal')
  })

  it('usage errors exit 2', async () => {
    const { cwd, home } = project()
    const unknown = await loom(['frobnicate'], { cwd, home })
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('unknown command "frobnicate"')
    const flag = await loom(['run', '--fast', 'hi'], { cwd, home })
    expect(flag.code).toBe(2)
    expect(flag.stderr).toContain("Unknown option '--fast'")
  })
})
