// `loom` on a terminal: a conversation. Driven in a real terminal (tmux): the
// keys typed, what the screen shows, and the session log it leaves. The prefix
// rules of `loom resume` and `/resume` are checked in this process.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SESSION_FORMAT_VERSION, type SessionHeader } from '@loom/session'
import { afterEach, describe, expect, it } from 'vitest'
import { resolveSessionRef } from '../src/session-ref.ts'
import { SLOW_MODEL, bashAskedByPolicy, events, loom, scriptedModel, sessionFiles } from './helpers.ts'
import { closeTerminals, open, TMUX } from './tmux.ts'

afterEach(closeTerminals)

const header = (id: string, createdAt: number, cwd = '/p', subagent = false): SessionHeader => ({
  version: SESSION_FORMAT_VERSION,
  id,
  createdAt,
  cwd,
  ...(subagent && { origin: 'subagent' as const, parentSession: 'x' }),
})

describe('a session named by id, prefix or last', () => {
  const headers = [
    header('20261129-134221-5be15d', 1),
    header('20261129-134221-77aa01', 2),
    header('20261130-090000-abcdef', 3, '/q'),
    header('20261201-1', 4, '/p', true),
  ]

  it('an id, or a prefix naming one session, is that session', () => {
    expect(resolveSessionRef(headers, '20261129-134221-5be15d', '/p')).toBe('20261129-134221-5be15d')
    expect(resolveSessionRef(headers, '20261130', '/p')).toBe('20261130-090000-abcdef')
    expect(resolveSessionRef(headers, '20261129-134221-7', '/p')).toBe('20261129-134221-77aa01')
  })

  it('an ambiguous prefix is an error that lists the sessions it names; an unknown one says so', () => {
    expect(() => resolveSessionRef(headers, '20261129', '/p')).toThrow(
      'the id prefix "20261129" names 2 sessions: 20261129-134221-5be15d, 20261129-134221-77aa01; give more of the id',
    )
    expect(() => resolveSessionRef(headers, 'nope', '/p')).toThrow('session "nope" not found')
  })

  it('last is the session of this folder used most recently (else started), not a subagent of it', () => {
    expect(resolveSessionRef(headers, 'last', '/p')).toBe('20261129-134221-77aa01')
    expect(resolveSessionRef(headers, 'last', '/q')).toBe('20261130-090000-abcdef')
    expect(() => resolveSessionRef(headers, 'last', '/r')).toThrow('no stored session was started in /r')
    // The older session was used after the newer one started; the subagent's later use does not count.
    const used = new Map([
      ['20261129-134221-5be15d', 10],
      ['20261129-134221-77aa01', 5],
      ['20261201-1', 20],
    ])
    expect(resolveSessionRef(headers, 'last', '/p', used)).toBe('20261129-134221-5be15d')
  })
})

const THREE_ANSWERS = scriptedModel(`
- First answer.
- Second answer.
- Third answer.
`)

/** A model calling bash `echo hi`, which the policy asks about, then answering. */
const ASKED = bashAskedByPolicy('echo hi')

async function sessions(at: { cwd: string; home: string }): Promise<{ id: string; turns: number; lastStatus: string }[]> {
  const list = await loom(['sessions', 'list', '--json'], at)
  return JSON.parse(list.stdout)
}

describe.skipIf(!TMUX)('loom on a terminal (tmux; CI installs it)', () => {
  it('runs a turn per line, in one session, with a footer after each; /quit exits 0', async () => {
    const { terminal, ...at } = open({ 'loom.yml': THREE_ANSWERS })
    let screen = await terminal.waitFor(/loom: a new session · scripted\/scripted-1/)
    await terminal.prompt(0)
    terminal.line('hello')
    screen = await terminal.waitFor(/First answer\.\n.*session \S+ · scripted\/scripted-1 · \d+ in .* out tokens\n/)
    let from = screen.indexOf('First answer.')
    await terminal.prompt(from)
    terminal.line('and again')
    screen = await terminal.waitFor(/Second answer\./)
    from = screen.indexOf('Second answer.')
    await terminal.prompt(from)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const stored = await sessions(at)
    expect(stored.map(session => [session.turns, session.lastStatus])).toEqual([[2, 'completed']])
  })

  it('Ctrl-C cancels the running turn and the conversation goes on; Ctrl-D exits 0', async () => {
    const { terminal, ...at } = open({ 'loom.yml': SLOW_MODEL })
    await terminal.prompt(0)
    terminal.line('sleep please')
    // The default bundle asks before bash runs.
    await terminal.waitFor(/\? bash wants to run: sleep 30 .*\[n\] deny: $/m)
    terminal.send('y')
    let screen = await terminal.waitFor(/→ bash: sleep 30/)
    // While the tool runs, the spinner says so, with the seconds it has waited.
    await terminal.waitFor(/running bash \d+s/)
    terminal.send('C-c')
    screen = await terminal.waitFor(/the turn ended: .*\n.*session \S+ ·/)
    await terminal.prompt(screen.indexOf('the turn ended'))
    terminal.line('and now?')
    screen = await terminal.waitFor(/Woke up\.\n.*session \S+ ·/)
    await terminal.prompt(screen.indexOf('Woke up.'))
    terminal.send('C-d')
    await terminal.waitFor(/exited 0/)
    const [file, ...others] = sessionFiles(at.home)
    expect(others).toEqual([])
    const ends = events(file).filter(event => event.type === 'turn/end')
    expect(ends.map(event => event.data.reason.kind)).toEqual(['aborted', 'completed'])
  })

  it('Ctrl-C at an empty prompt exits 0, storing nothing', async () => {
    const { terminal, ...at } = open({ 'loom.yml': THREE_ANSWERS })
    await terminal.prompt(0)
    terminal.send('C-c')
    await terminal.waitFor(/exited 0/)
    expect(sessionFiles(at.home)).toEqual([])
  })

  it('asks about a tool call the policy asks about: n and a note deny it, and the model reads the note', async () => {
    const { terminal, ...at } = open({ 'loom.yml': ASKED })
    await terminal.prompt(0)
    terminal.line('say hi')
    let screen = await terminal.waitFor(
      /\? bash wants to run: echo hi {2}\[runs programs\] {2}\(.*needs approval.*\) {2}\[y\] allow once {2}\[a\] allow for this session {2}\[n\] deny: $/m,
    )
    terminal.send('n')
    screen = await terminal.waitFor(/^note for the model \(optional\): $/m)
    terminal.line('not now')
    screen = await terminal.waitFor(/Done\.\n.*session \S+ ·/)
    expect(screen).toMatch(/✗ Error: tool "bash" was not approved \(.*\): not now/)
    expect(screen).not.toContain('✓')
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const result = events(sessionFiles(at.home)[0]).find(event => event.type === 'tool/result')!
    expect(result.data.meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'not now' })
    const [block] = result.data.message.content
    expect(block.isError).toBe(true)
    expect(block.content[0].text).toMatch(/^Error: tool "bash" was not approved \(.*\): not now$/)
  })

  it('asks about a tool call: y runs it, recorded as allowed by the answer', async () => {
    const { terminal, ...at } = open({ 'loom.yml': ASKED })
    await terminal.prompt(0)
    terminal.line('say hi')
    await terminal.waitFor(/\? bash wants to run: echo hi .*\[n\] deny: $/m)
    terminal.send('y')
    const screen = await terminal.waitFor(/Done\.\n.*session \S+ ·/)
    // The call's line comes before its question, the result after the answer.
    expect(screen).toMatch(/→ bash: echo hi\n\? bash wants to run: echo hi .*\[n\] deny: y\n {2}✓ /)
    expect(screen).not.toContain('note for the model')
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const result = events(sessionFiles(at.home)[0]).find(event => event.type === 'tool/result')!
    expect(result.data.meta.decision).toMatchObject({ policy: 'ask', answer: 'allow' })
    const [block] = result.data.message.content
    expect(block.isError).toBe(false)
    expect(block.content[0].text).toMatch(/^hi$/m)
  })

  it('Ctrl-C at the question cancels the turn and closes the question; the next line is a turn again', async () => {
    const { terminal, ...at } = open({ 'loom.yml': ASKED })
    await terminal.prompt(0)
    terminal.line('say hi')
    await terminal.waitFor(/\[n\] deny: $/m)
    terminal.send('C-c')
    let screen = await terminal.waitFor(/the turn ended: aborted.*\n.*session \S+ ·/)
    // The note starts under the question's line.
    expect(screen).toMatch(/\[n\] deny: \nloom: cancelling the turn \(Ctrl-C again to quit\)\n/)
    await terminal.prompt(screen.indexOf('the turn ended'))
    terminal.line('and now?')
    screen = await terminal.waitFor(/^> and now\?\nDone\.\n.*session \S+ ·/m)
    expect(screen).not.toContain('note for the model')
    terminal.send('C-d')
    await terminal.waitFor(/exited 0/)
    const ends = events(sessionFiles(at.home)[0]).filter(event => event.type === 'turn/end')
    expect(ends.map(event => event.data.reason.kind)).toEqual(['aborted', 'completed'])
  })

  it('loom -c continues the last session of this folder; /prompt shows the system text', async () => {
    const first = open({ 'loom.yml': THREE_ANSWERS })
    await first.terminal.prompt(0)
    first.terminal.line('hello')
    await first.terminal.waitFor(/First answer\./)
    first.terminal.send('C-d')
    await first.terminal.waitFor(/exited 0/)
    const [{ id }] = await sessions(first)

    const { terminal } = open({}, ['-c'], { cwd: first.cwd, home: first.home })
    let screen = await terminal.waitFor(new RegExp(`loom: session ${id} \\(1 turns so far\\)`))
    await terminal.prompt(0)
    terminal.line('/prompt')
    screen = await terminal.waitFor(/── system ─+\n[\s\S]*── tools, in request order/)
    expect(screen).toMatch(/── route: scripted\/scripted-1/)
    // From the echoed command on: the rest of /prompt's output may still be arriving.
    await terminal.prompt(screen.lastIndexOf('> /prompt'))
    terminal.line('/manifest')
    screen = await terminal.waitFor(/^> \/manifest\n\n── manifest .*\n.*TRUST +CATEGORY +AGE/m)
    await terminal.prompt(screen.lastIndexOf('── manifest'))
    terminal.line('more')
    screen = await terminal.waitFor(/^> more\n.*answer\.\n.*session \S+ ·/m)
    expect(screen).toContain(`session ${id} · scripted/scripted-1`)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    expect((await sessions(first)).map(session => [session.id, session.turns])).toEqual([[id, 2]])
  })

  it("renders the answer as markdown, and shows an edit's diff before asking about it", async () => {
    const layer = scriptedModel(`
- toolCalls:
    - { id: e1, name: edit, arguments: { path: notes.txt, old_string: "second line", new_string: "2nd line" } }
- "## Summary\\n\\nThe **notes** now say \`2nd line\`.\\n\\n- one change\\n- no other"
`)
    const { terminal, ...at } = open({ 'loom.yml': layer, 'notes.txt': 'first line\nsecond line\nthird line\n' })
    await terminal.prompt(0)
    terminal.line('fix the notes')
    let screen = await terminal.waitFor(/\[n\] deny: $/m)
    expect(screen).toMatch(/\? edit wants to change notes\.txt {2}\[writes files\] {2}\(.*\)\n {4}- second line\n {4}\+ 2nd line\n {2}\[y\] allow once/)
    terminal.send('y')
    screen = await terminal.waitFor(/Summary\n\nThe notes now say 2nd line\.\n\n• one change\n• no other\n.*session \S+ ·/)
    // Shown in the question, the diff is not repeated under the result.
    expect(screen.match(/\+ 2nd line/g)).toHaveLength(1)
    expect(screen).not.toContain('**')
    expect(screen).not.toContain('## ')
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    expect(readFileSync(join(at.cwd, 'notes.txt'), 'utf8')).toBe('first line\n2nd line\nthird line\n')
  })
})

/** A plugin contributing the section `name` with `text`. */
const greeter = (name: string, text: string) => `import type { Context } from '@deepseek-ai/cordis'
export const name = 'greeter'
export const inject = ['systemPrompt']
export function apply(ctx: Context) {
  ctx.systemPrompt.section({ name: '${name}', order: 200, text: '${text}' })
}
`

const DEV_LAYER = `${THREE_ANSWERS}
- insert:
    - id: greeter
      name: ./greeter.ts
`

describe.skipIf(!TMUX)('loom dev on a terminal (tmux)', () => {
  it('a plugin edit mid-conversation keeps the agent and session; the next turn names the plugin that changed the request', async () => {
    const { terminal, ...at } = open({ 'loom.yml': DEV_LAYER, 'greeter.ts': greeter('greeter:one', 'Hello v1') }, ['dev'])
    await terminal.waitFor(/loom dev: watching/)
    await terminal.prompt(0)
    terminal.line('hello')
    let screen = await terminal.waitFor(/First answer\.\n.*session (\S+) ·/)
    const id = /session (\S+) ·/.exec(screen)![1]
    await terminal.prompt(screen.indexOf('First answer.'))

    writeFileSync(join(at.cwd, 'greeter.ts'), greeter('greeter:two', 'Hello v2'))
    screen = await terminal.waitFor(/reloaded greeter\.ts/)
    terminal.line('again')
    screen = await terminal.waitFor(/Second answer\.\n.*session \S+ ·/)
    const turn = screen.slice(screen.lastIndexOf('> again'))
    expect(turn).toMatch(/↻ request header changed \(section "greeter:two" of plugin "greeter" added; section "greeter:one" of plugin "greeter" removed/)
    expect(turn).toContain(`session ${id} ·`)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)

    expect((await sessions(at)).map(session => [session.id, session.turns])).toEqual([[id, 2]])
    const headers = events(sessionFiles(at.home)[0]).filter(event => event.type === 'request/header')
    expect(headers.map(event => event.data.reason)).toEqual(['initial', 'change'])
    expect(headers[1].data.header.system).toContain('Hello v2')
  })

  it("the agent's edit of the plugin under development asks first, showing why and the diff; a yes applies it and dev reloads it", async () => {
    const layer = `${scriptedModel(`
- toolCalls:
    - { id: c1, name: edit, arguments: { path: greeter.ts, old_string: 'Hello v1', new_string: 'Hello v2' } }
- Edited.
`)}
- insert:
    - id: greeter
      name: ./greeter.ts
`
    const { terminal, ...at } = open({ 'loom.yml': layer, 'greeter.ts': greeter('greeter:one', 'Hello v1') }, ['dev'])
    await terminal.waitFor(/loom dev: watching/)
    await terminal.prompt(0)
    terminal.line('say hello v2')
    // A plugin the deployment mounts by path is protected: asked about before any rule, whatever the rules say.
    const screen = await terminal.waitFor(
      /\? edit wants to change greeter\.ts {2}\[writes files\] {2}\(edit would change .*greeter\.ts.*which is protected.*\)\n {4}- .*Hello v1.*\n {4}\+ .*Hello v2.*\n {2}\[y\] allow once/,
    )
    expect(screen).toContain('protected')
    terminal.send('y')
    await terminal.waitFor(/reloaded greeter\.ts/)
    await terminal.waitFor(/Edited\.\n.*session \S+ ·/)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    expect(readFileSync(join(at.cwd, 'greeter.ts'), 'utf8')).toContain('Hello v2')
  })

  it('with pinPrompt the open conversation keeps its prompt across a reload', async () => {
    const pinned = `${DEV_LAYER}- id: runner\n  config: { pinPrompt: true }\n`
    const { terminal, ...at } = open({ 'loom.yml': pinned, 'greeter.ts': greeter('greeter:one', 'Hello v1') }, ['dev'])
    await terminal.prompt(0)
    terminal.line('hello')
    let screen = await terminal.waitFor(/First answer\.\n.*session \S+ ·/)
    await terminal.prompt(screen.indexOf('First answer.'))
    writeFileSync(join(at.cwd, 'greeter.ts'), greeter('greeter:two', 'Hello v2'))
    await terminal.waitFor(/reloaded greeter\.ts/)
    terminal.line('again')
    screen = await terminal.waitFor(/Second answer\.\n.*session \S+ ·/)
    expect(screen).not.toContain('request header changed')
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const headers = events(sessionFiles(at.home)[0]).filter(event => event.type === 'request/header')
    expect(headers.map(event => event.data.reason)).toEqual(['initial'])
    expect(headers[0].data.header.system).toContain('Hello v1')
  })
})
