// The approver of `loom serve --approve api` on its own: live sessions in a
// session store, the hosted sessions reduced to which of them run here. A
// question is an `approval/requested` event in the hosted session's log; an
// answer, the deadline or an abort settles it, each once. The route and the
// stream are tested through `loom serve` (apps/cli/tests/serve-approvals.test.ts).
import { Context } from '@deepseek-ai/cordis'
import { type Session, SessionStore } from '@loom/session'
import { MemoryPersistence, meta, raw, shortTurn } from '@loom/session/testing'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeEach, describe, expect, it } from 'vitest'
import { ApiApprovals, type AskedCall } from '../src/approvals.ts'
import { ApiError } from '../src/http.ts'
import { HostedSessions, type Persistence } from '../src/sessions.ts'

describe('approvals over the API', () => {
  let home: Context
  let served: Session
  let reported: unknown[]
  /** What `session/flush` does: nothing (durable at once), or fail. */
  let flush: () => Promise<void>

  beforeEach(async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    await root.plugin(MemoryPersistence, { logs: new Map() })
    const fiber = await root.plugin({ name: 'host', inject: ['sessions', 'sessionPersistence'], apply() {} })
    home = fiber.ctx
    served = home.sessions.create('served', { meta: { cwd: '/workspace' } })
    flush = async () => {}
    home.on('session/flush', () => flush())
    reported = []
  })

  /** Only `served` runs here; any other session runs nowhere. */
  const approvals = (deadlineMs = 60_000) => {
    const hosted = {
      agentOf: (id: string) => (id === served.id ? { session: served } : undefined),
      locate: async (id: string) => hosted.agentOf(id),
    } as unknown as HostedSessions
    return new ApiApprovals(home, hosted, { deadlineMs, report: error => reported.push(error) })
  }

  const ask = (overrides: Partial<AskedCall> = {}): AskedCall => ({
    tool: 'bash',
    callId: 'c1',
    args: { command: 'npm test' },
    reason: 'bash command "npm test" needs approval under permissions rule 1',
    rule: 'permissions rule 1',
    effects: ['execute'],
    session: served.id,
    signal: new AbortController().signal,
    ...overrides,
  })

  const logged = (type: string) => served.events.filter(event => event.type === type).map(event => event.data)

  /** The question of `callId` is in the log (the approver appends it before it waits). */
  const asked = (callId: string) => logged('approval/requested').some(data => (data as { callId: string }).callId === callId)

  const refusal = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => undefined,
      caught => caught,
    )
    expect(error).toBeInstanceOf(ApiError)
    return error as ApiError
  }

  it('records the question, and the answer a client gives (who, where) before the call goes on; then the question is gone', async () => {
    const api = approvals()
    const answer = api.approve(ask())
    expect(logged('approval/requested')).toEqual([
      {
        callId: 'c1',
        tool: 'bash',
        preview: 'npm test',
        reason: 'bash command "npm test" needs approval under permissions rule 1',
        rule: 'permissions rule 1',
        unattended: 'deny',
        deadlineMs: 60_000,
        effects: ['execute'],
      },
    ])
    expect(await api.answer(served.id, 'c1', { decision: 'allow', by: 'ana' })).toEqual({ id: served.id, callId: 'c1', decision: 'allow' })
    expect(await answer).toEqual({ kind: 'allow' })
    expect(logged('approval/answered')).toEqual([{ callId: 'c1', decision: 'allow', source: 'client', by: 'ana', host: hostname() }])

    const again = await refusal(api.answer(served.id, 'c1', { decision: 'deny' }))
    expect([again.status, again.code]).toEqual([404, 'APPROVAL_NOT_FOUND'])
    expect(again.message).toContain('session served has no open approval for call "c1"')
    expect(logged('approval/answered')).toHaveLength(1)
  })

  it("a denial carries the client's note to the model; allow-session is passed through for the tool runtime to remember", async () => {
    const api = approvals()
    const denied = api.approve(ask())
    await api.answer(served.id, 'c1', { decision: 'deny', note: 'run the unit tests only' })
    expect(await denied).toEqual({ kind: 'deny', note: 'run the unit tests only' })
    const session = api.approve(ask({ callId: 'c2' }))
    await api.answer(served.id, 'c2', { decision: 'allow-session' })
    expect(await session).toEqual({ kind: 'allow-session' })
    expect(logged('approval/answered').map(data => (data as { decision: string }).decision)).toEqual(['deny', 'allow-session'])
  })

  it("no answer within the deadline: the rule's unattended answer, or deny noting the wait; both recorded as the deadline's", async () => {
    const api = approvals(20)
    expect(await api.approve(ask({ unattended: 'allow' }))).toEqual({ kind: 'allow' })
    expect(await api.approve(ask({ callId: 'c2' }))).toEqual({ kind: 'deny', note: 'no answer within 0.02 s' })
    // An ask that says how a person lets such a call run (a protected path): the model reads it too.
    expect(await api.approve(ask({ callId: 'c3', refusal: 'only at the terminal' }))).toEqual({
      kind: 'deny',
      note: 'no answer within 0.02 s; only at the terminal',
    })
    expect(logged('approval/answered')).toEqual([
      { callId: 'c1', decision: 'allow', source: 'deadline', note: "no answer within 0.02 s; the rule's unattended answer: allow", host: hostname() },
      { callId: 'c2', decision: 'deny', source: 'deadline', note: "no answer within 0.02 s; the rule's unattended answer: deny", host: hostname() },
      { callId: 'c3', decision: 'deny', source: 'deadline', note: "no answer within 0.02 s; the rule's unattended answer: deny", host: hostname() },
    ])
    expect((await refusal(api.answer(served.id, 'c2', { decision: 'allow' }))).status).toBe(404)
  })

  it('an aborted call stops waiting, and its question can no longer be answered', async () => {
    const api = approvals()
    const abort = new AbortController()
    const answer = api.approve(ask({ signal: abort.signal }))
    expect(asked('c1')).toBe(true)
    abort.abort()
    expect(await answer).toEqual({ kind: 'deny' })
    expect((await refusal(api.answer(served.id, 'c1', { decision: 'allow' }))).code).toBe('APPROVAL_NOT_FOUND')
    expect(logged('approval/answered')).toEqual([])
  })

  it("a subagent's question goes to the stream of the session served here, naming the subagent's session", async () => {
    const child = home.sessions.create('served-task-1', { meta: { cwd: '/workspace', parentSession: served.id } })
    const grandchild = home.sessions.create('served-task-2', { meta: { cwd: '/workspace', parentSession: child.id } })
    const api = approvals()
    const answer = api.approve(ask({ session: grandchild.id, agent: { id: 'a2', name: 'explorer' }, args: { path: 'src/a.ts', content: 'x' } }))
    expect(logged('approval/requested')).toMatchObject([{ callId: 'c1', preview: 'src/a.ts', session: grandchild.id, agent: 'explorer' }])
    expect(grandchild.events.some(event => event.type === 'approval/requested')).toBe(false)
    await api.answer(served.id, 'c1', { decision: 'allow' })
    expect(await answer).toEqual({ kind: 'allow' })
  })

  it('a session no client of this server follows gets the unattended answer at once, and nothing is logged', async () => {
    const other = home.sessions.create('elsewhere', { meta: { cwd: '/workspace' } })
    const api = approvals()
    expect(await api.approve(ask({ session: other.id, unattended: 'allow' }))).toEqual({ kind: 'allow' })
    expect(await api.approve(ask({ session: other.id }))).toEqual({ kind: 'deny', note: 'no client of this server follows the session that asked' })
    expect(other.events).toEqual([])
  })

  it('an answer the store cannot take is refused and the question stays open; the retry finishes the first answer, recorded once', async () => {
    const api = approvals()
    const answer = api.approve(ask())
    let settled = false
    void answer.then(() => {
      settled = true
    })
    flush = () => Promise.reject(Object.assign(new Error('the store is down'), { code: 'STORE_UNAVAILABLE' }))
    await expect(api.answer(served.id, 'c1', { decision: 'deny', note: 'not now' })).rejects.toThrow('the store is down')
    await Promise.resolve()
    expect(settled).toBe(false)
    flush = async () => {}
    expect(await api.answer(served.id, 'c1', { decision: 'allow' })).toEqual({ id: served.id, callId: 'c1', decision: 'deny', note: 'not now' })
    expect(await answer).toEqual({ kind: 'deny', note: 'not now' })
    expect(logged('approval/answered')).toHaveLength(1)
  })

  it('a keyed retry gets the first answer; the same key with another body is 422', async () => {
    const api = approvals()
    const answer = api.approve(ask())
    const first = await api.answer(served.id, 'c1', { decision: 'allow' }, 'key-1')
    await answer
    expect(await api.answer(served.id, 'c1', { decision: 'allow' }, 'key-1')).toEqual(first)
    expect((await refusal(api.answer(served.id, 'c1', { decision: 'deny' }, 'key-1'))).status).toBe(422)
  })

  it("an answer for a session running on another host is 409 naming it; one running nowhere 404; another project's 404 as unknown", async () => {
    const project = realpathSync(mkdtempSync(join(tmpdir(), 'loom-serve-approvals-')))
    const logs = new Map([
      ['mine', { header: meta('mine', { cwd: project }), events: raw(0, sink => shortTurn(sink, 1)) }],
      ['theirs', { header: meta('theirs', { cwd: '/elsewhere' }), events: raw(0, sink => shortTurn(sink, 1)) }],
    ])
    const root = new Context()
    await root.plugin(SessionStore)
    await root.plugin(MemoryPersistence, { logs })
    const fiber = await root.plugin({ name: 'host', inject: ['sessions', 'sessionPersistence'], apply() {} })
    let holder: { pid: number; host: string; since: number; command: string } | undefined
    const store: Persistence = Object.assign(fiber.ctx.sessionPersistence, { holder: async () => holder })
    const opener = { open: () => Promise.reject(new Error('no agent opens in this test')) }
    const hosted = new HostedSessions(fiber.ctx, opener, store, { cwd: project, route: {}, idleReleaseMs: 5000, tailIntervalMs: 50 })
    const api = new ApiApprovals(fiber.ctx, hosted, { deadlineMs: 60_000, report: error => reported.push(error) })

    expect((await refusal(api.answer('mine', 'c1', { decision: 'allow' }))).code).toBe('APPROVAL_NOT_FOUND')
    holder = { pid: process.pid + 1, host: 'web-2', since: 0, command: 'loom serve http://web-2:8080' }
    const held = await refusal(api.answer('mine', 'c1', { decision: 'allow' }))
    expect([held.status, held.code, held.details?.holder]).toEqual([409, 'SESSION_LEASE_HELD', holder])
    expect(held.message).toContain('loom serve http://web-2:8080')
    expect((await refusal(api.answer('theirs', 'c1', { decision: 'allow' }))).code).toBe('SESSION_NOT_FOUND')
    rmSync(project, { recursive: true, force: true })
  })
})
