// The conversation as a person at a terminal meets it (issue 30): approvals they
// can decide on, a route switched in the open session, clean interruption,
// multi-line input, `@file`, completion, the status line, history across
// restarts and `-c` after `/resume`. Driven in tmux; the model is a fixture
// plugin (tests/fixtures/terminal-model.ts) that answers from the message it got.
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'
import { closeTerminals, open, TMUX } from './tmux.ts'

afterEach(closeTerminals)

const MODEL = fileURLToPath(new URL('./fixtures/terminal-model.ts', import.meta.url))
/** The MCP server of @loom/mcp's tests (SDK-built; prompts `review <file> [focus]`, `greet`, `broken`), run by this Node. */
const MCP_SERVER = fileURLToPath(new URL('../../../plugins/mcp/tests/fixtures/server.ts', import.meta.url))

/** The fixture model as the route, priced, and `extra` rows. */
const FIXTURE = (extra = '') => `
- id: scripted
  disabled: true
- insert:
    - id: model
      name: ${MODEL}
- id: runner
  config:
    provider: fixture
    prices:
      fixture/fixture-1: { hit: 0.1, miss: 1, output: 2 }
      fixture/fixture-2: { hit: 0.2, miss: 2, output: 4 }
${extra}`

/** The user messages of a log that are not runtime-context snapshots. */
function typed(file: string): string[] {
  return events(file)
    .filter(event => event.type === 'user/message' && event.data.source?.kind !== 'plugin')
    .map(event => event.data.content.map((block: { text?: string }) => block.text ?? '').join(''))
}

describe.skipIf(!TMUX)('the conversation at a terminal (tmux)', () => {
  it('shows what the model wrote before a call above the question, which one key answers; another key asks again, ? explains; a write shows its diff or its content', async () => {
    const layer = `${scriptedModel(`
- text: I will look at the notes first.
  toolCalls:
    - { id: c1, name: bash, arguments: { command: 'echo hi' } }
- toolCalls:
    - { id: w1, name: write, arguments: { path: notes.txt, content: "first line\\n2nd line\\n" } }
    - { id: w2, name: write, arguments: { path: fresh.txt, content: "alpha\\nbeta\\n" } }
- Done.
`)}
- id: permissions
  config:
    default: allow
    rules:
      - { tool: bash, action: ask }
      - { tool: write, action: ask }
`
    const { terminal, ...at } = open({ 'loom.yml': layer, 'notes.txt': 'first line\nsecond line\n' })
    await terminal.prompt(0)
    terminal.line('tidy the notes')
    // The text streamed before the call, and the call, are on screen before the question.
    let screen = await terminal.waitFor(/^I will look at the notes first\.\n→ bash: echo hi\n\? bash wants to run: echo hi .*\[n\] deny: $/m)
    terminal.send('x')
    screen = await terminal.waitFor(/deny: x\n {2}answer y, a or n \(\? explains them\)\n {2}\[y\] allow once .*\[n\] deny: $/m)
    terminal.send('?')
    screen = await terminal.waitFor(/deny: \?\n {2}y {2}allow this call once\n[\s\S]*Ctrl-C or Esc cancels the turn\n {2}\[y\] allow once .*\[n\] deny: $/m)
    // One key, no Enter.
    terminal.send('y')
    screen = await terminal.waitFor(
      /\? write wants to write notes\.txt[^\n]*\n {4}replaces 2 lines, 23 bytes with 2 lines, 20 bytes:\n {6}first line\n {4}- second line\n {4}\+ 2nd line\n {2}\[y\] allow once .*\[n\] deny: $/m,
    )
    terminal.send('y')
    screen = await terminal.waitFor(
      /\? write wants to write fresh\.txt[^\n]*\n {4}a new file, 2 lines, 11 bytes:\n {4}\+ alpha\n {4}\+ beta\n {2}\[y\] allow once .*\[n\] deny: $/m,
    )
    terminal.send('n')
    await terminal.waitFor(/^note for the model \(optional\): $/m)
    terminal.line('not that one')
    screen = await terminal.waitFor(/Done\.\n.*session \S+ ·/)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const decisions = events(sessionFiles(at.home)[0])
      .filter(event => event.type === 'tool/result')
      .map(event => event.data.meta.decision)
    expect(decisions).toMatchObject([{ answer: 'allow' }, { answer: 'allow' }, { answer: 'deny', note: 'not that one' }])
  })

  it('/model and /provider switch the route of the open session: logged, and the next header change names the switch', async () => {
    const other = `- insert:
    - id: other
      name: '@loom/llm-scripted'
      config: { provider: other, model: other-1, script: [From the other provider.] }
`
    const { terminal, ...at } = open({ 'loom.yml': FIXTURE(other) })
    await terminal.prompt(0)
    terminal.line('hello')
    let screen = await terminal.waitFor(/Echo from fixture-1: 1 lines/)
    await terminal.prompt(screen.indexOf('Echo from fixture-1'))
    terminal.line('/model fixture-2')
    screen = await terminal.waitFor(/^the next requests use fixture\/fixture-2$/m)
    await terminal.prompt(screen.indexOf('the next requests use'))
    terminal.line('again')
    screen = await terminal.waitFor(/Echo from fixture-2: 1 lines, starting "again"\.\n.*session \S+ · fixture\/fixture-2 ·/)
    expect(screen.slice(screen.lastIndexOf('> again'))).toMatch(
      /↻ request header changed \(route switched from fixture\/fixture-1 to fixture\/fixture-2 by \/model\)\n/,
    )
    await terminal.prompt(screen.lastIndexOf('Echo from fixture-2'))
    // A route the deployment does not serve is refused, and the route stays.
    terminal.line('/provider nowhere')
    screen = await terminal.waitFor(/^loom: provider "nowhere" is not served by this deployment \(available: fixture, other\)$/m)
    await terminal.prompt(screen.indexOf('"nowhere" is not served'))
    terminal.line('/provider other')
    screen = await terminal.waitFor(/^the next requests use other\/other-1$/m)
    await terminal.prompt(screen.indexOf('use other/other-1'))
    terminal.line('third')
    screen = await terminal.waitFor(/From the other provider\.\n.*session \S+ · other\/other-1 ·/)
    expect(screen.slice(screen.lastIndexOf('> third'))).toMatch(
      /↻ request header changed \(route switched from fixture\/fixture-2 to other\/other-1 by \/provider\)\n/,
    )
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const log = events(sessionFiles(at.home)[0])
    const switches = log.filter(event => event.type === 'agent/route')
    expect(switches.map(event => event.data)).toEqual([
      { provider: 'fixture', model: 'fixture-2', from: { provider: 'fixture', model: 'fixture-1' }, by: '/model' },
      { provider: 'other', model: 'other-1', from: { provider: 'fixture', model: 'fixture-2' }, by: '/provider' },
    ])
    const changes = log.filter(event => event.type === 'request/header' && event.data.reason === 'change')
    expect(changes.map(event => event.data.changes.route)).toEqual([
      { ...switches[0].data, seq: switches[0].seq },
      { ...switches[1].data, seq: switches[1].seq },
    ])
  })

  it('Ctrl-C mid-stream: the spinner line cleared, the streamed text above the note; Esc cancels too; two Ctrl-C quit', async () => {
    const { terminal, ...at } = open({ 'loom.yml': FIXTURE() })
    await terminal.prompt(0)
    terminal.line('please stream slowly')
    // While it waits, the spinner carries the status.
    await terminal.waitFor(/^> please stream slowly\n.*writing( \d+s)? · fixture\/fixture-1$/m)
    terminal.send('C-c')
    let screen = await terminal.waitFor(/the turn ended: aborted \(user\)\n.*session \S+ ·/)
    const cancelled = screen.slice(screen.indexOf('> please stream slowly'))
    expect(cancelled).toMatch(
      /^> please stream slowly\nPartial answer, still streaming\nloom: cancelling the turn \(Ctrl-C again to quit\)\nloom: the turn ended: aborted \(user\)\n/,
    )
    expect(cancelled).not.toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]|\^C/)
    await terminal.prompt(screen.indexOf('the turn ended'))

    terminal.line('stream slowly once more')
    await terminal.waitFor(/^> stream slowly once more\n.*writing( \d+s)? · fixture\/fixture-1/m)
    // Typed while the turn runs: not shown over it, and waiting at the next prompt.
    terminal.send('-l', 'next idea')
    terminal.send('Escape')
    screen = await terminal.waitFor(
      /^> stream slowly once more\nPartial answer, still streaming\nloom: cancelling the turn \(Esc\)\nloom: the turn ended: aborted \(user\)\n/m,
    )
    await terminal.waitFor(/^> next idea$/m, screen.lastIndexOf('the turn ended'))
    terminal.send('C-u')
    await terminal.prompt(screen.lastIndexOf('the turn ended'))

    terminal.line('stream slowly to the end')
    await terminal.waitFor(/^> stream slowly to the end\n.*writing( \d+s)? · fixture\/fixture-1/m)
    terminal.send('C-c', 'C-c')
    screen = await terminal.waitFor(/exited 130/)
    expect(screen.slice(screen.lastIndexOf('> stream slowly to the end'))).toMatch(/loom: cancelling the turn \(Ctrl-C again to quit\)\nloom: quitting\n/)
    const ends = events(sessionFiles(at.home)[0]).filter(event => event.type === 'turn/end')
    expect(ends.map(event => event.data.reason.kind)).toEqual(['aborted', 'aborted', 'aborted'])
  })

  it('a paste of three lines is one message; a trailing backslash continues a line; the status line shows route, context, cache hits and cost; Ctrl-L clears', async () => {
    const { terminal, ...at } = open({ 'loom.yml': FIXTURE() })
    await terminal.prompt(0)
    terminal.paste('line one\nline two\nline three')
    await terminal.waitFor(/^> line one\n… line two\n… line three$/m)
    terminal.send('Enter')
    let screen = await terminal.waitFor(/Echo from fixture-1: 3 lines, starting "line one"\./)
    // Above the next prompt: 4000 tokens in and 200 out of a 128k window, 3000 of them cache reads, $0.0017.
    screen = await terminal.waitFor(/^fixture\/fixture-1 · context 4\.2k of 128k tokens \(3%\) · cache hit 75% · \$0\.0017\n> $/m)
    terminal.line('first part \\')
    await terminal.waitFor(/^> first part $\n^… $/m)
    terminal.line('second part')
    screen = await terminal.waitFor(/Echo from fixture-1: 2 lines, starting "first part "\./)
    await terminal.waitFor(/· \$0\.0034\n> $/m)
    terminal.send('C-l')
    await expect.poll(() => terminal.visible().split('\n').slice(0, 2).join('\n'), { timeout: 30_000 }).toMatch(/^fixture\/fixture-1 · context .*\n> $/)
    terminal.send('C-d')
    await terminal.waitFor(/exited 0/)
    expect(typed(sessionFiles(at.home)[0])).toEqual(['line one\nline two\nline three', 'first part \nsecond part'])
  })

  it('@path attaches a file; one too large, or one the tools may not read, is not attached, with a note; Tab completes commands and paths', async () => {
    const files = {
      'loom.yml': FIXTURE('- id: tools\n  config:\n    denyRead: [secret.txt]\n'),
      'notes.txt': 'first line\nsecond line\n',
      'big.log': 'x'.repeat(60_000),
      'secret.txt': 'the password\n',
    }
    const { terminal, ...at } = open(files)
    await terminal.prompt(0)
    terminal.send('-l', '/mo')
    terminal.send('Tab')
    await terminal.waitFor(/^> \/model $/m)
    terminal.send('C-u')
    terminal.send('-l', 'compare @no')
    terminal.send('Tab')
    await terminal.waitFor(/^> compare @notes\.txt $/m)
    terminal.line('@big.log @secret.txt')
    const screen = await terminal.waitFor(
      /Echo from fixture-1: \d+ lines, starting "compare @notes\.txt @big\.log @secret\.txt"\. Attached notes\.txt: first line\n/,
    )
    expect(screen).toMatch(/^ {2}\+ @notes\.txt \(2 lines, 23 bytes\)$/m)
    expect(screen).toMatch(
      /^loom: @big\.log is not attached: 58\.6 KB is more than the 50\.0 KB a file may have; the model can read it in parts with the read tool$/m,
    )
    expect(screen).toMatch(/^loom: @secret\.txt is not attached: tools may not read it \(the deployment lists it under denyRead \(@loom\/tools\)\)$/m)
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    const [message] = typed(sessionFiles(at.home)[0])
    expect(message).toBe('compare @notes.txt @big.log @secret.txt\n\n<attached-file path="notes.txt">\nfirst line\nsecond line\n</attached-file>')
  })

  it('MCP prompts are commands: /help lists them, Tab completes them, one runs as the message of a turn (its @ attaches nothing); a refusal is one line', async () => {
    // The deployment waits for the server at start, so the first /help already lists its prompts.
    const mcp = `- insert:
    - id: mcp
      name: '@loom/mcp'
      config:
        startupWaitMs: 120000
        servers:
          docs:
            command: ${JSON.stringify(process.execPath)}
            args: [${JSON.stringify(MCP_SERVER)}]
`
    const { terminal, ...at } = open({ 'loom.yml': FIXTURE(mcp), 'notes.txt': 'first line\n' })
    await terminal.prompt(0)
    terminal.line('/help')
    let screen = await terminal.waitFor(/^prompts of MCP servers/m)
    expect(screen.slice(screen.indexOf('prompts of MCP servers'))).toMatch(
      /^prompts of MCP servers \(the text is sent as your message\):\n {2}\/mcp__docs__broken {17}Always fails\.\n {2}\/mcp__docs__greet {18}A greeting and its answer\.\n {2}\/mcp__docs__review <file> \[focus\] {2}Asks for a review of a file\.\nkeys:\n/,
    )
    await terminal.prompt(screen.indexOf('prompts of MCP servers'))

    terminal.send('-l', '/mcp__docs__r')
    terminal.send('Tab')
    await terminal.waitFor(/^> \/mcp__docs__review $/m)
    terminal.line('@notes.txt error handling')
    screen = await terminal.waitFor(/Echo from fixture-1: 1 lines, starting "Review @notes\.txt, looking at error handling\."\.\n/)
    const ran = screen.slice(screen.indexOf('> /mcp__docs__review @notes.txt'))
    expect(ran).toMatch(/^> \/mcp__docs__review @notes\.txt error handling\n {2}│ Review @notes\.txt, looking at error handling\.\n/)
    expect(ran).not.toContain('Attached')
    await terminal.prompt(screen.indexOf('Echo from fixture-1'))

    terminal.line('/mcp__docs__review')
    screen = await terminal.waitFor(
      /^loom: \/mcp__docs__review \(prompt "review" of MCP server "docs"\) needs argument "file"; usage: \/mcp__docs__review <file> \[focus\]$/m,
    )
    await terminal.prompt(screen.indexOf('needs argument "file"'))
    terminal.line('/mcp__docs__broken')
    screen = await terminal.waitFor(/^loom: MCP server "docs": prompt "broken" failed: .*the template is missing/m)
    await terminal.prompt(screen.indexOf('prompt "broken" failed'))
    terminal.line('/mcp__docs__nope')
    screen = await terminal.waitFor(
      /^loom: no MCP prompt \/mcp__docs__nope: the connected servers offer \/mcp__docs__broken, \/mcp__docs__greet, \/mcp__docs__review$/m,
    )
    await terminal.prompt(screen.indexOf('no MCP prompt'))
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
    // One turn: the prompt's text is the message, as the server wrote it.
    expect(typed(sessionFiles(at.home)[0])).toEqual(['Review @notes.txt, looking at error handling.'])
  })

  it('without MCP servers, /help lists no prompts and /mcp__… says the deployment has none', async () => {
    const { terminal } = open({ 'loom.yml': FIXTURE() })
    await terminal.prompt(0)
    terminal.line('/help')
    let screen = await terminal.waitFor(/^keys:$/m)
    expect(screen).not.toContain('prompts of MCP servers')
    await terminal.prompt(screen.indexOf('keys:'))
    terminal.line('/mcp__docs__review a.ts')
    screen = await terminal.waitFor(/^loom: no MCP prompt \/mcp__docs__review: this deployment has no MCP servers \(@loom\/mcp\)$/m)
    await terminal.prompt(screen.indexOf('no MCP prompt'))
    terminal.line('/quit')
    await terminal.waitFor(/exited 0/)
  })

  it('loom -c continues the session used last, not the one started last (after /resume of an older one); the input history is kept across restarts', async () => {
    const at = project({ 'loom.yml': FIXTURE() })
    const older = await loom(['run', 'the older session'], at)
    expect(older.code, older.stderr).toBe(0)
    // A session id starts with the second it was made in: the newer one must be made in a later second to sort after.
    await new Promise(resolve => setTimeout(resolve, 1100))
    const newer = await loom(['run', 'the newer session'], at)
    expect(newer.code, newer.stderr).toBe(0)
    const id = (stdout: string) => /session (\S+) ·/.exec(stdout)?.[1]
    const [olderId, newerId] = [id(older.stderr), id(newer.stderr)]
    expect(olderId && newerId && olderId < newerId).toBe(true)

    const first = open({}, [], at)
    await first.terminal.prompt(0)
    first.terminal.line(`/resume ${olderId}`)
    let screen = await first.terminal.waitFor(new RegExp(`session ${olderId} resumed \\(1 turns so far\\)`))
    await first.terminal.prompt(screen.indexOf('resumed'))
    first.terminal.line('/model fixture-2')
    screen = await first.terminal.waitFor(/the next requests use fixture\/fixture-2/)
    await first.terminal.prompt(screen.indexOf('the next requests use'))
    first.terminal.line('back to the older one')
    screen = await first.terminal.waitFor(/route switched from fixture\/fixture-1 to fixture\/fixture-2 by \/model[\s\S]*Echo from fixture-2/)
    first.terminal.line('/quit')
    await first.terminal.waitFor(/exited 0/)

    const { terminal } = open({}, ['-c'], at)
    screen = await terminal.waitFor(new RegExp(`loom: session ${olderId} \\(2 turns so far\\) · fixture/fixture-2`))
    await terminal.prompt(0)
    // Up recalls what was typed in this project before, in the conversation that ended.
    terminal.send('Up')
    await terminal.waitFor(/^> \/quit$/m)
    terminal.send('Up')
    await terminal.waitFor(/^> back to the older one$/m)
    terminal.send('C-u')
    terminal.send('C-d')
    await terminal.waitFor(/exited 0/)
  })
})
