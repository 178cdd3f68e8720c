// `loom serve --approve api`: a tool call the policy asks about waits for the
// session's client. The scripted model calls bash; the client reads
// `approval/requested` from the event stream and answers over the API (allow,
// allow for the session, deny with a note the model reads), cancels while it
// waits, or does not answer, and the deadline gives the rule's unattended
// answer. Each decision is in the tool result's `meta.decision` as a terminal
// answer would be, and the answer in `approval/answered`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loom, project, type Run, scriptedModel } from './helpers.ts'
import { client, eventually, type Frame, turnEnded } from './serve-client.ts'

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

/** `loom serve` with `args` in a project whose model plays `script`; stopped (drained) after the block. */
function served(script: string, args: string[]) {
  const at = project({ 'loom.yml': scriptedModel(script) + POLICY })
  const server: { api: ReturnType<typeof client>; stdout: () => string } = { api: undefined!, stdout: () => '' }
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
    server.api = client(url, TOKEN)
  })
  afterAll(async () => {
    signal?.('SIGTERM')
    expect((await run).code).toBe(0)
  })
  return server
}

const ofType = (frames: Frame[], type: string) => frames.filter(frame => frame.event.type === type).map(frame => frame.event.data)
const asked = (callId: string) => (frames: Frame[]) => ofType(frames, 'approval/requested').some(data => data.callId === callId)
const resultOf = (frames: Frame[], callId: string) => ofType(frames, 'tool/result').find(data => data.message.source.callId === callId)
const text = (result: { message: { content: { content: { text: string }[] }[] } }) => result.message.content[0].content.map(block => block.text).join('')

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
    const id = (await api.request('POST', '/v1/sessions', { task: 'run it' })).body.id
    const question = await api.events(id, { until: asked('c1') })
    const requested = ofType(question.frames, 'approval/requested')[0]
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
    expect(ofType(question.frames, 'tool/call').map(data => data.callId)).toEqual(['c1'])
    expect(resultOf(question.frames, 'c1')).toBeUndefined()

    const answered = await api.request('POST', `/v1/sessions/${id}/approvals/c1`, { decision: 'allow-session', by: 'ana' })
    expect(answered).toMatchObject({ status: 200, body: { id, callId: 'c1', decision: 'allow-session' } })
    const turn = await api.events(id, { until: turnEnded(1) })
    expect(ofType(turn.frames, 'approval/answered')).toEqual([
      { callId: 'c1', decision: 'allow-session', source: 'client', by: 'ana', host: expect.any(String) },
    ])
    const first = resultOf(turn.frames, 'c1')
    expect(text(first)).toContain('approved-and-ran')
    expect(first.meta.decision).toEqual({ policy: 'ask', answer: 'allow-session', reason: requested.reason, rule: requested.rule })
    // Same tool, same rule: remembered, not asked again.
    expect(ofType(turn.frames, 'approval/requested')).toHaveLength(1)
    const second = resultOf(turn.frames, 'c2')
    expect(text(second)).toContain('remembered-for-the-session')
    expect(second.meta.decision).toMatchObject({ policy: 'ask', answer: 'remembered' })

    // Answered: 404, as for a call that never asked; a session of no one's, 404 too.
    for (const path of [`/v1/sessions/${id}/approvals/c1`, `/v1/sessions/${id}/approvals/nope`, '/v1/sessions/no-such-session/approvals/c1']) {
      const again = await api.request('POST', path, { decision: 'deny' })
      expect(again.status, path).toBe(404)
      expect(['APPROVAL_NOT_FOUND', 'SESSION_NOT_FOUND']).toContain(again.body.error.code)
    }
    const bad = await api.request('POST', `/v1/sessions/${id}/approvals/c1`, { decision: 'yes' })
    expect(bad.body.error).toMatchObject({
      code: 'INVALID_REQUEST',
      field: 'decision',
      message: 'field "decision" must be one of allow, allow-session, deny, got "yes"',
    })
  })

  it('deny with a note: the command does not run, and the model reads the note', async () => {
    const { api } = server
    const id = (await api.request('POST', '/v1/sessions', { task: 'list the folder' })).body.id
    await api.events(id, { until: asked('c1') })
    const denied = await api.request('POST', `/v1/sessions/${id}/approvals/c1`, { decision: 'deny', note: 'read the README instead' })
    expect(denied.body).toEqual({ id, callId: 'c1', decision: 'deny', note: 'read the README instead' })
    const turn = await api.events(id, { until: turnEnded(1) })
    const result = resultOf(turn.frames, 'c1')
    expect(text(result)).toMatch(/tool "bash" was not approved .*: read the README instead/)
    expect(result.meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'read the README instead' })
    expect(ofType(turn.frames, 'turn/end')[0].reason).toEqual({ kind: 'completed' })
  })

  it('a cancel ends the wait: the turn is aborted, and the question can no longer be answered', async () => {
    const { api } = server
    const id = (await api.request('POST', '/v1/sessions', { task: 'wait for me' })).body.id
    await api.events(id, { until: asked('c1') })
    expect((await api.request('POST', `/v1/sessions/${id}/cancel`)).body).toEqual({ id, cancelled: true })
    const late = await api.request('POST', `/v1/sessions/${id}/approvals/c1`, { decision: 'allow' })
    expect(late.body.error.code).toBe('APPROVAL_NOT_FOUND')
    const read = (await api.request('GET', `/v1/sessions/${id}`)).body
    expect(read.session.lastTurn).toEqual({ turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })
    expect(read.events.filter((event: { type: string }) => event.type === 'approval/answered')).toEqual([])
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
    const allowed = (await api.request('POST', '/v1/sessions', { task: 'run it' })).body.id
    const ran = await api.events(allowed, { until: turnEnded(1) })
    expect(ofType(ran.frames, 'approval/answered')).toEqual([
      { callId: 'c1', decision: 'allow', source: 'deadline', note: "no answer within 0.3 s; the rule's unattended answer: allow", host: expect.any(String) },
    ])
    expect(text(resultOf(ran.frames, 'c1'))).toContain('ran-unattended')
    expect(resultOf(ran.frames, 'c1').meta.decision).toMatchObject({ policy: 'ask', answer: 'allow' })

    const denied = (await api.request('POST', '/v1/sessions', { task: 'list the folder' })).body.id
    const refused = await api.events(denied, { until: turnEnded(1) })
    const result = resultOf(refused.frames, 'c1')
    expect(text(result)).toMatch(/tool "bash" was not approved .*: no answer within 0.3 s$/)
    expect(result.meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'no answer within 0.3 s' })
    expect(ofType(refused.frames, 'approval/answered')[0]).toMatchObject({ decision: 'deny', source: 'deadline' })
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
