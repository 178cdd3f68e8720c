// `loom serve --approve api`: a tool call the policy asks about waits for the
// session's client. The scripted model calls bash; the client (`@loom/client`)
// reads `approval/requested` from the event stream and answers over the API (allow,
// allow for the session, deny with a note the model reads), cancels while it
// waits, or does not answer, and the deadline gives the rule's unattended
// answer. Each decision is in the tool result's `meta.decision` as a terminal
// answer would be, and the answer in `approval/answered`.
import { type Decision, LoomClient, type SessionEvent } from '@loom/client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loom, loomProcess, project, type Run, scriptedModel } from './helpers.ts'
import { endsTurn, eventually, readUntil } from './serve-client.ts'

const TOKEN = 'serve-approvals-token-0123456789'

const bash = (id: string, command: string) => `- toolCalls:\n    - { id: ${id}, name: bash, arguments: { command: '${command}' } }`

/** The default bundle's policy patched: bash asks, with no unattended answer (deny) unless it runs `echo`. */
const POLICY = `
- id: permissions
  config:
    default: allow
    rules:
      - { tool: bash, action: ask, commands: [echo], unattended: allow }
      - { tool: bash, action: ask }
`

/** `loom serve` with `args` in a project whose model plays `script`, and its typed client; stopped (drained) after the block. */
function served(script: string, args: string[]) {
  const at = project({ 'loom.yml': scriptedModel(script) + POLICY })
  const server: { api: LoomClient; stdout: () => string; at: typeof at } = { api: undefined!, stdout: () => '', at }
  let signal: (signal: NodeJS.Signals) => void
  let run: Promise<Run>
  beforeAll(async () => {
    run = loom(['serve', '--port', '0', '--drain-ms', '1000', ...args], {
      ...at,
      env: { LOOM_SERVE_TOKEN: TOKEN },
      onStart: running => {
        signal = running.signal
        server.stdout = running.stdout
      },
    })
    const url = await eventually(() => /listening on (http:\S+)/.exec(server.stdout())?.[1], 30_000, 'the server to listen')
    server.api = new LoomClient({ url, token: TOKEN })
  })
  afterAll(async () => {
    signal?.('SIGTERM')
    expect((await run).code).toBe(0)
  })
  return server
}

const ofType = (events: SessionEvent[], type: string) => events.filter(event => event.type === type).map(event => event.data as any)
const asks = (callId: string) => (event: SessionEvent) => event.type === 'approval/requested' && (event.data as { callId: string }).callId === callId
const resultOf = (events: SessionEvent[], callId: string) => ofType(events, 'tool/result').find(data => data.message.source.callId === callId)
const text = (result: { message: { content: { content: { text: string }[] }[] } }) => result.message.content[0].content.map(block => block.text).join('')
/** The events of `id`'s first turn, to its end. */
const firstTurn = async (api: LoomClient, id: string) => {
  const events = api.events(id)
  const read = await readUntil(events, endsTurn(1))
  await events.return()
  return read
}

describe('loom serve --approve api: the client answers', () => {
  const server = served(
    [
      bash('c1', 'echo approved-and-ran'),
      bash('c2', 'echo remembered-for-the-session'),
      '- Both ran.',
      bash('c1', 'ls -a'),
      '- I will not list the folder.',
      bash('c1', 'echo waits-for-a-cancel'),
    ].join('\n'),
    ['--approve', 'api'],
  )

  it('says at start who answers; the question is on the stream, and allow-session lets the next call of the rule run unasked', async () => {
    const { api } = server
    expect(server.stdout()).toContain('approvals: over the API, 300 s to answer')
    const { id } = await api.createSession({ task: 'run it' })
    const events = api.events(id)
    const question = await readUntil(events, asks('c1'))
    const requested = ofType(question, 'approval/requested')[0]
    expect(requested).toEqual({
      callId: 'c1',
      tool: 'bash',
      preview: 'echo approved-and-ran',
      reason: expect.stringContaining('needs approval under permissions rule 1'),
      rule: expect.any(String),
      unattended: 'allow',
      deadlineMs: 300_000,
      effects: ['execute'],
    })
    // The call waits: its tool/call is there, its result is not.
    expect(ofType(question, 'tool/call').map(data => data.callId)).toEqual(['c1'])
    expect(resultOf(question, 'c1')).toBeUndefined()

    expect(await api.answerApproval(id, 'c1', 'allow-session', { by: 'ana' })).toEqual({ id, callId: 'c1', decision: 'allow-session' })
    // The same stream goes on with the rest of the turn.
    const turn = [...question, ...(await readUntil(events, endsTurn(1)))]
    await events.return()
    expect(ofType(turn, 'approval/answered')).toEqual([{ callId: 'c1', decision: 'allow-session', source: 'client', by: 'ana', host: expect.any(String) }])
    const first = resultOf(turn, 'c1')
    expect(text(first)).toContain('approved-and-ran')
    expect(first.meta.decision).toEqual({ policy: 'ask', answer: 'allow-session', reason: requested.reason, rule: requested.rule })
    // Same tool, same rule: remembered, not asked again.
    expect(ofType(turn, 'approval/requested')).toHaveLength(1)
    const second = resultOf(turn, 'c2')
    expect(text(second)).toContain('remembered-for-the-session')
    expect(second.meta.decision).toMatchObject({ policy: 'ask', answer: 'remembered' })

    // Answered: 404, as for a call that never asked; a session of no one's, 404 too.
    for (const [session, callId] of [
      [id, 'c1'],
      [id, 'nope'],
      ['no-such-session', 'c1'],
    ]) {
      const again = await api.answerApproval(session, callId, 'deny').catch(error => error)
      expect(again.status, `${session} ${callId}`).toBe(404)
      expect(['APPROVAL_NOT_FOUND', 'SESSION_NOT_FOUND']).toContain(again.code)
    }
    const bad = await api.answerApproval(id, 'c1', 'yes' as Decision).catch(error => error)
    expect(bad).toMatchObject({
      code: 'INVALID_REQUEST',
      field: 'decision',
      message: 'field "decision" must be one of allow, allow-session, deny, got "yes"',
    })
  })

  it('deny with a note: the command does not run, and the model reads the note', async () => {
    const { api } = server
    const { id } = await api.createSession({ task: 'list the folder' })
    const events = api.events(id)
    await readUntil(events, asks('c1'))
    expect(await api.answerApproval(id, 'c1', 'deny', { note: 'read the README instead' })).toEqual({
      id,
      callId: 'c1',
      decision: 'deny',
      note: 'read the README instead',
    })
    const turn = await readUntil(events, endsTurn(1))
    await events.return()
    const result = resultOf(turn, 'c1')
    expect(text(result)).toMatch(/tool "bash" was not approved .*: read the README instead/)
    expect(result.meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'read the README instead' })
    expect(ofType(turn, 'turn/end')[0].reason).toEqual({ kind: 'completed' })
    // The transcript has the question and its answer, between the call and its result (a process of its own: the server holds this one).
    const shown = await loomProcess(['sessions', 'show', id], server.at)
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(
      /→ bash: ls -a\n\[approval asked\] bash: ls -a · [^\n]*needs approval under permissions rule 2[^\n]* · unanswered in 300 s: deny\n\[approval answered\] deny, by a client: read the README instead\n {2}✗ bash/,
    )
  })

  it('a cancel ends the wait: the turn is aborted, and the question can no longer be answered', async () => {
    const { api } = server
    const { id } = await api.createSession({ task: 'wait for me' })
    const events = api.events(id)
    await readUntil(events, asks('c1'))
    await events.return()
    expect(await api.cancel(id)).toEqual({ id, cancelled: true })
    const late = await api.answerApproval(id, 'c1', 'allow').catch(error => error)
    expect(late.code).toBe('APPROVAL_NOT_FOUND')
    const read = await api.getSession(id)
    expect(read.session.lastTurn).toEqual({ turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })
    expect(read.events.filter(event => event.type === 'approval/answered')).toEqual([])
  })
})

describe('loom serve --approve api: nobody answers in time', () => {
  const server = served([bash('c1', 'echo ran-unattended'), '- It ran.', bash('c1', 'ls -a'), '- Not listed.'].join('\n'), [
    '--approve',
    'api',
    '--approve-deadline-ms',
    '300',
  ])

  it("the rule's unattended answer: allow runs the call, deny tells the model nobody answered", async () => {
    const { api } = server
    const allowed = (await api.createSession({ task: 'run it' })).id
    const ran = await firstTurn(api, allowed)
    expect(ofType(ran, 'approval/answered')).toEqual([
      { callId: 'c1', decision: 'allow', source: 'deadline', note: "no answer within 0.3 s; the rule's unattended answer: allow", host: expect.any(String) },
    ])
    expect(text(resultOf(ran, 'c1'))).toContain('ran-unattended')
    expect(resultOf(ran, 'c1').meta.decision).toMatchObject({ policy: 'ask', answer: 'allow' })

    const denied = (await api.createSession({ task: 'list the folder' })).id
    const refused = await firstTurn(api, denied)
    const result = resultOf(refused, 'c1')
    expect(text(result)).toMatch(/tool "bash" was not approved .*: no answer within 0.3 s$/)
    expect(result.meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'no answer within 0.3 s' })
    expect(ofType(refused, 'approval/answered')[0]).toMatchObject({ decision: 'deny', source: 'deadline' })
    const shown = await loomProcess(['sessions', 'show', allowed], server.at)
    expect(shown.stdout).toContain("[approval answered] allow, at the deadline: no answer within 0.3 s; the rule's unattended answer: allow\n")
  })
})

describe('--approve api is for loom serve', () => {
  it('loom run refuses it, and serve refuses a deadline without it: exit 2, naming the flag', async () => {
    const at = project()
    const run = await loom(['run', '--approve', 'api', 'hi'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('--approve api is for loom serve, whose clients answer over its API; here it is one of never, policy, all')
    const deadline = await loom(['serve', '--approve-deadline-ms', '1000'], { ...at, env: { LOOM_SERVE_TOKEN: TOKEN } })
    expect(deadline.code).toBe(2)
    expect(deadline.stderr).toContain('serve: --approve-deadline-ms is the deadline of --approve api, and this server runs with --approve policy')
  })
})
