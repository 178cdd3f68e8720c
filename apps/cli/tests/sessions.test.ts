// `loom sessions list|show|resume|verify|repair` on a real session directory:
// sessions written by `loom run`, then torn, left open and corrupted by hand;
// reading them mounts the store rows only.
import { createHash } from 'node:crypto'
import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { DEMO_LABEL } from '../src/demo-model.ts'
import { events, loom, loomProcess, project, sessionFiles } from './helpers.ts'

const sha = (text: string) => createHash('sha256').update(text).digest('hex')

describe('loom sessions', () => {
  const { cwd, home } = project({ 'README.md': '# Sessions sample\n\nA folder whose sessions the tests inspect, repair and resume.\n' })
  const at = { cwd, home }
  let id = ''
  let file = ''

  beforeAll(async () => {
    const run = await loom(['run', '--json', 'what is in this directory?'], at)
    expect(run.code).toBe(0)
    id = JSON.parse(run.stdout).sessionId
    file = sessionFiles(home)[0]
  })

  it('list shows id, created, cwd and turns', async () => {
    const run = await loom(['sessions', 'list'], at)
    expect(run.code).toBe(0)
    const [head, row] = run.stdout.trim().split('\n')
    expect(head).toMatch(/^ID\s+CREATED\s+TURNS\s+LAST\s+CWD$/)
    expect(row).toMatch(new RegExp(`^${id}\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC\\s+1\\s+completed\\s+${cwd}$`))
    const json = JSON.parse((await loom(['sessions', 'list', '--json'], at)).stdout)
    expect(json).toEqual([{ id, createdAt: expect.any(Number), cwd, turns: 1, events: expect.any(Number), lastStatus: 'completed' }])
  })

  it('show prints the transcript: header, user text, tool calls with results, the answer, the end', async () => {
    const run = await loom(['sessions', 'show', id], at)
    expect(run.code).toBe(0)
    const text = run.stdout
    for (const piece of [
      `session ${id}`,
      `  cwd      ${cwd}`,
      '── turn 1 ',
      'user: what is in this directory?',
      '[runtime context]',
      `Working directory: ${cwd}`,
      '[request header, initial] scripted/loom-demo · system ',
      'tools: bash, edit, glob, grep',
      'assistant: Let me look at the current directory.',
      '→ bash: ls -la',
      '  ✓ bash',
      '    │ total ',
      '→ read: README.md',
      '    │      1\t# Sessions sample',
      `assistant: ${DEMO_LABEL}`,
      'turn 1 ended: completed',
    ])
      expect(text, piece).toContain(piece)
    expect(text.indexOf('→ bash')).toBeLessThan(text.indexOf('→ read'))
  })

  it('resume continues the session with a new task, printed like run', async () => {
    const run = await loom(['sessions', 'resume', id, 'and what about the README?'], at)
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('→ bash: ls -la')
    expect(run.stdout).toContain(DEMO_LABEL)
    expect(run.stderr).toContain(`session ${id} · scripted/loom-demo`)
    expect(sessionFiles(home)).toEqual([file])
    const shown = (await loom(['sessions', 'show', id], at)).stdout
    expect(shown).toContain('── resumed ──')
    expect(shown).toContain('[request header, resume]')
    expect(shown).toContain('user: and what about the README?')
    expect(shown).toContain('turn 2 ended: completed')
    const turns = events(file)
      .filter(event => event.type === 'turn/end')
      .map(event => event.data.turn)
    expect(turns).toEqual([1, 2])
  })

  it('a resume on other plugins says so before the turn: added, removed, upgraded; every first-party plugin has its version', async () => {
    const first = await loomProcess(['run', '--json', 'what is here?'], at)
    const ran = JSON.parse(first.stdout).sessionId as string
    const header = events(sessionFiles(home).find(file => file.includes(ran))!).find(event => event.type === 'request/header')!
    const plugins = header.data.sources.plugins as { name: string; version?: string }[]
    expect(plugins.map(plugin => plugin.name)).toContain('@loom/tool-search')
    expect(plugins.filter(plugin => plugin.name.startsWith('@loom/') && plugin.version === undefined)).toEqual([])

    writeFileSync(join(cwd, 'loom.yml'), '- id: search\n  disabled: true\n')
    try {
      const resumed = await loomProcess(['sessions', 'resume', ran, 'again'], at)
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(resumed.stderr).toMatch(
        new RegExp(`loom: warning: \\[runner\\] session ${ran} last ran on other plugins: removed @loom/tool-search \\d+\\.\\d+\\.\\d+\n`),
      )
      // Said from the log: the loop recorded it on the resumed request's header.
      const shown = await loom(['sessions', 'show', ran], at)
      expect(shown.stdout).toMatch(
        /\[request header, resume\] .* · other plugins than before: removed @loom\/tool-search \d+\.\d+\.\d+ · request header changed \(section "tool:glob" of plugin "@loom\/tool-search" removed; /,
      )
    } finally {
      rmSync(join(cwd, 'loom.yml'))
    }
  })

  it('a resume after an edit of a plugin loaded by path names it by its source, and attributes the changed request to it', async () => {
    const greeter = (text: string) =>
      `export const name = 'greeter'\nexport const inject = ['systemPrompt']\nexport function apply(ctx: any) {\n  ctx.systemPrompt.section({ name: 'greeter:one', order: 200, text: '${text}' })\n}\n`
    const before = greeter('Hello v1')
    const at = project({ 'loom.yml': '- insert:\n    - id: greeter\n      name: ./greeter.ts\n', 'greeter.ts': before })
    const first = await loomProcess(['run', '--json', 'hello'], at)
    expect(first.code, first.stderr).toBe(0)
    const ran = JSON.parse(first.stdout).sessionId as string
    const header = events(sessionFiles(at.home)[0]).find(event => event.type === 'request/header')!
    expect(header.data.sources.plugins).toContainEqual(expect.objectContaining({ name: 'greeter', sourceHash: sha(before) }))

    const after = greeter('Hello v2')
    writeFileSync(join(at.cwd, 'greeter.ts'), after)
    const resumed = await loomProcess(['sessions', 'resume', ran, 'again'], at)
    expect(resumed.code, resumed.stderr).toBe(0)
    const edited = `edited greeter (source ${sha(before).slice(0, 12)} → ${sha(after).slice(0, 12)})`
    expect(resumed.stderr).toContain(`session ${ran} last ran on other plugins: `)
    expect(resumed.stderr).toContain(edited)
    // The resumed request breaks the cached prefix, and the break names the plugin and its section.
    expect(resumed.stdout).toMatch(
      /↻ request header changed \(other plugins than before: .*edited greeter .*; section "greeter:one" of plugin "greeter" changed; first difference at byte \d+\)/,
    )
    const shown = await loom(['sessions', 'show', ran], at)
    expect(shown.stdout).toMatch(
      /\[request header, resume\] .* · other plugins than before: .*edited greeter .* · request header changed \(section "greeter:one" of plugin "greeter" changed/,
    )
  })

  it('verify: clean exits 0; a torn tail exits 1; repair cuts it', async () => {
    const clean = await loom(['sessions', 'verify', id], at)
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain(`session ${id}: clean`)

    const before = readFileSync(file, 'utf8')
    const partial = '{"type":"turn/start","seq":99'
    appendFileSync(file, partial)
    const torn = await loom(['sessions', 'verify', id, '--json'], at)
    expect(torn.code).toBe(1)
    expect(JSON.parse(torn.stdout)).toMatchObject({ id, clean: false, tornBytes: partial.length, openTurn: null, corruption: null })
    // verify writes nothing.
    expect(readFileSync(file, 'utf8')).toBe(before + partial)

    const repaired = await loom(['sessions', 'repair', id], at)
    expect(repaired.code).toBe(0)
    expect(repaired.stdout).toContain(`repaired session ${id}: cut a torn tail of ${partial.length} bytes`)
    expect(repaired.stdout).toContain('the log is clean now')
    expect(readFileSync(file, 'utf8')).toBe(before)
    const again = await loom(['sessions', 'repair', id], at)
    expect(again.stdout).toContain('is clean: nothing to repair')
  })

  it('verify reports an open turn (a crash mid tool call); repair closes it with explicit results', async () => {
    const last = events(file).at(-1)!.seq
    const now = Date.now()
    const lines = [
      { type: 'turn/start', seq: last + 1, time: now, data: { turn: 3 } },
      { type: 'step/start', seq: last + 2, time: now, data: { turn: 3, step: 1 } },
      {
        type: 'assistant/message',
        seq: last + 3,
        time: now,
        surfaceOp: 'append',
        data: {
          turn: 3,
          step: 1,
          message: {
            id: 'm-crash',
            role: 'assistant',
            source: { kind: 'model', provider: 'scripted', model: 'loom-demo' },
            content: [{ type: 'tool-call', id: 'c-crash', name: 'bash', arguments: '{"command":"make"}' }],
          },
        },
      },
      { type: 'tool/call', seq: last + 4, time: now, data: { turn: 3, step: 1, callId: 'c-crash', name: 'bash', arguments: '{"command":"make"}' } },
    ]
    appendFileSync(file, lines.map(line => JSON.stringify(line) + '\n').join(''))
    const open = await loom(['sessions', 'verify', id], at)
    expect(open.code).toBe(1)
    expect(open.stdout).toContain(`session ${id}: NOT clean`)
    expect(open.stdout).toContain('turn 3 is open; repair appends error result for tool call c-crash (TOOL_OUTCOME_UNKNOWN), step/end, turn/end (interrupted)')

    const repaired = await loom(['sessions', 'repair', id, '--json'], at)
    expect(repaired.code).toBe(0)
    expect(JSON.parse(repaired.stdout)).toMatchObject({ before: { clean: false, openTurn: { turn: 3 } }, after: { clean: true } })
    const shown = (await loom(['sessions', 'show', id], at)).stdout
    expect(shown).toContain('→ bash: make')
    expect(shown).toContain('  ✗ bash (TOOL_OUTCOME_UNKNOWN)')
    expect(shown).toContain('turn 3 ended: interrupted')
    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)
  })

  it('corruption before a committed turn end: verify and repair exit 1 and leave the file alone', async () => {
    const { cwd: other, home: otherHome } = project()
    const run = await loom(['run', '--json', 'list it'], { cwd: other, home: otherHome })
    const broken = JSON.parse(run.stdout).sessionId
    const path = sessionFiles(otherHome)[0]
    const lines = readFileSync(path, 'utf8').split('\n')
    lines[3] = '{"this is": not json'
    writeFileSync(path, lines.join('\n'))
    const damaged = readFileSync(path, 'utf8')
    const verify = await loom(['sessions', 'verify', broken], { cwd: other, home: otherHome })
    expect(verify.code).toBe(1)
    expect(verify.stdout).toContain('corrupt  corrupt session log: unparsable committed event at line 4')
    const repair = await loom(['sessions', 'repair', broken], { cwd: other, home: otherHome })
    expect(repair.code).toBe(1)
    expect(repair.stdout).toContain(`session ${broken} cannot be repaired: corrupt session log`)
    expect(readFileSync(path, 'utf8')).toBe(damaged)
  })

  it('show, stats, verify and manifest take a unique prefix or last, as resume does', async () => {
    const byId = (await loom(['sessions', 'show', id], at)).stdout
    // Not the timestamp alone: another session of this file may have started in the same second.
    expect((await loom(['sessions', 'show', id.slice(0, -2)], at)).stdout).toBe(byId)
    const last = await loom(['sessions', 'stats', 'last', '--json'], at)
    expect(last.code, last.stderr).toBe(0)
    // `last` is the session of this folder used most recently (its last event), as for `loom -c`.
    const used = sessionFiles(home)
      .map(file => ({ header: JSON.parse(readFileSync(file, 'utf8').split('\n')[0]), time: (events(file).at(-1) as { time?: number } | undefined)?.time ?? 0 }))
      .filter(({ header }) => header.cwd === cwd && header.origin !== 'subagent')
      .sort((a, b) => b.time - a.time)
    expect(JSON.parse(last.stdout).id).toBe(used[0].header.id)
    expect((await loom(['sessions', 'verify', 'last'], at)).code).toBe(0)
    expect(JSON.parse((await loom(['sessions', 'manifest', 'last', '--json'], at)).stdout).id).toBe(JSON.parse(last.stdout).id)
  })

  it('an unknown id fails with the root it looked in', async () => {
    const run = await loom(['sessions', 'show', 'no-such-session'], at)
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('session "no-such-session" not found in')
  })

  it('reading a session mounts only the store: a broken row elsewhere stops run, not list, show, verify, stats or repair', async () => {
    const broken = project({ 'loom.yml': "- insert:\n    - id: extra\n      name: '@loom/does-not-exist'\n" })
    const there = { cwd: broken.cwd, home }
    const run = await loom(['run', 'hi'], there)
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('row "extra" (@loom/does-not-exist): cannot load module')

    const list = await loom(['sessions', 'list'], there)
    expect(list.stderr).toBe('')
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s`, 'm'))
    for (const command of ['show', 'verify', 'stats', 'repair']) {
      const done = await loom(['sessions', command, id], there)
      expect(done.code, `${command}: ${done.stderr}`).toBe(0)
      expect(done.stdout).toContain(`session ${id}`)
    }
  })

  it('a deployment without a session store says so', async () => {
    const run = await loom(['--bundle', 'minimal', 'sessions', 'list'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('this deployment stores no sessions: add a session persistence row (@loom/session-jsonl or @loom/session-postgres)')
  })
})
