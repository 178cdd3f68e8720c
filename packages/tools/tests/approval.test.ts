// `ask` decisions and the approver (ctx.approver); the decision recorded in the result's meta.
import { describe, expect, it } from 'vitest'
import { type Context, Service } from '@deepseek-ai/cordis'
import type { AgentRef } from '@loom/scope'
import { defineTool, type ApprovalAnswer, type ApprovalRequest, type PreToolDecision } from '@loom/tools'
import { deferred, host, OBJECT, simple, text, type Host } from './helpers.ts'

const AGENT: AgentRef = { id: 'a1', sessionId: 's1' }
const OTHER_SESSION: AgentRef = { id: 'a2', sessionId: 's2' }

/** Provides `ctx.approver` answering with `answer`; records every request. */
async function approver(h: Host, answer: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>) {
  const requests: ApprovalRequest[] = []
  class TestApprover extends Service {
    static override readonly name = 'test-approver'
    constructor(ctx: Context) {
      super(ctx, 'approver')
    }
    async approve(request: ApprovalRequest) {
      requests.push(request)
      return answer(request)
    }
  }
  const fiber = await h.root.plugin(TestApprover)
  return { requests, dispose: () => fiber.dispose() }
}

/** A host whose only pre-execute listener returns `decide(args)`, with a tool `t` counting its runs. */
async function policy(decide: (args: unknown) => PreToolDecision) {
  const h = await host()
  const runs = { count: 0 }
  h.ctx.tools.register(
    defineTool({
      name: 't',
      description: 'the t tool',
      parameters: { type: 'object' },
      execute: () => {
        runs.count++
        return 'ran'
      },
    }),
  )
  h.ctx.on('tools/pre-execute', exec => decide(exec.arguments))
  return { h, runs }
}

describe('ask with an approver', () => {
  it('allow: the body runs, the approver saw the call, the decision is in the meta', async () => {
    const { h, runs } = await policy(() => ({ kind: 'ask', reason: 'it writes', rule: 'r1' }))
    const { requests } = await approver(h, () => ({ kind: 'allow' }))
    const result = await h.run('t', { x: 1 }, { callId: 'c9', agent: AGENT })
    expect(text(result)).toBe('ran')
    expect(runs.count).toBe(1)
    expect(result.meta).toEqual({ decision: { policy: 'ask', answer: 'allow', reason: 'it writes', rule: 'r1' } })
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({ tool: 't', callId: 'c9', args: { x: 1 }, reason: 'it writes', rule: 'r1', agent: AGENT, session: 's1' })
    expect(requests[0].signal).toBeInstanceOf(AbortSignal)
  })

  it('allow-session is remembered for the same tool, rule and session only', async () => {
    let rule = 'r1'
    const { h, runs } = await policy(() => ({ kind: 'ask', rule }))
    const { requests } = await approver(h, () => ({ kind: 'allow-session' }))
    expect((await h.run('t', {}, { agent: AGENT })).meta).toEqual({ decision: { policy: 'ask', answer: 'allow-session', rule: 'r1' } })
    expect((await h.run('t', {}, { agent: AGENT })).meta).toEqual({ decision: { policy: 'ask', answer: 'remembered', rule: 'r1' } })
    expect(requests).toHaveLength(1)
    // Another session, and another rule in the same session, are asked again.
    await h.run('t', {}, { agent: OTHER_SESSION })
    expect(requests).toHaveLength(2)
    rule = 'r2'
    await h.run('t', {}, { agent: AGENT })
    expect(requests).toHaveLength(3)
    expect(runs.count).toBe(4)
  })

  it('allow-session without a calling agent is not remembered', async () => {
    const { h } = await policy(() => ({ kind: 'ask' }))
    const { requests } = await approver(h, () => ({ kind: 'allow-session' }))
    await h.run('t')
    await h.run('t')
    expect(requests).toHaveLength(2)
  })

  it('deny: the body does not run; the model reads the reason and the note', async () => {
    const { h, runs } = await policy(() => ({ kind: 'ask', reason: 'rm is risky' }))
    await approver(h, () => ({ kind: 'deny', note: 'use git clean instead' }))
    const result = await h.run('t', {}, { agent: AGENT })
    expect(runs.count).toBe(0)
    expect(result).toEqual({
      isError: true,
      error: { message: 'tool "t" was not approved (rm is risky): use git clean instead' },
      content: [{ type: 'text', text: 'Error: tool "t" was not approved (rm is risky): use git clean instead' }],
      meta: { decision: { policy: 'ask', answer: 'deny', reason: 'rm is risky', note: 'use git clean instead' } },
    })
  })

  it('deny without a reason or note still names the tool', async () => {
    const { h } = await policy(() => ({ kind: 'ask' }))
    await approver(h, () => ({ kind: 'deny' }))
    expect(text(await h.run('t'))).toBe('Error: tool "t" was not approved')
  })

  it('the approver is looked up per call: once disposed, no one can approve', async () => {
    const { h, runs } = await policy(() => ({ kind: 'ask' }))
    const provided = await approver(h, () => ({ kind: 'allow' }))
    expect(text(await h.run('t'))).toBe('ran')
    await provided.dispose()
    expect(text(await h.run('t'))).toBe('Error: tool "t" requires approval, and no one can approve here (no approver is registered)')
    expect(runs.count).toBe(1)
  })

  it('an abort while the approver is asked settles the call before dispatch without waiting for the answer', async () => {
    const { h, runs } = await policy(() => ({ kind: 'ask' }))
    const never = deferred<ApprovalAnswer>()
    const asked = deferred()
    await approver(h, () => {
      asked.resolve()
      return never.promise
    })
    const controller = new AbortController()
    const call = h.run('t', {}, { signal: controller.signal })
    await asked.promise
    controller.abort()
    const result = await call
    expect(result.isError && result.error.info).toEqual({ name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' })
    expect(result.meta).toBeUndefined()
    expect(runs.count).toBe(0)
  })

  it('a malformed answer rejects the call, naming the tool', async () => {
    const { h } = await policy(() => ({ kind: 'ask' }))
    await approver(h, () => ({ kind: 'maybe' }) as never)
    await expect(h.run('t')).rejects.toThrow(/the approver answered .* for tool "t"/)
  })

  it('a failing approver rejects the call, naming the approver and the tool', async () => {
    const { h } = await policy(() => ({ kind: 'ask' }))
    await approver(h, () => {
      throw new Error('terminal closed')
    })
    await expect(h.run('t')).rejects.toThrow('the approver failed for tool "t": terminal closed')
  })

  it("an ask's unattended answer reaches the approver; a value other than allow or deny is a malformed decision", async () => {
    const { h } = await policy(args => ({ kind: 'ask', rule: 'r1', unattended: (args as { unattended: 'allow' }).unattended }))
    const { requests } = await approver(h, () => ({ kind: 'allow' }))
    await h.run('t', { unattended: 'allow' })
    expect(requests[0]).toMatchObject({ rule: 'r1', unattended: 'allow' })
    await h.run('t', {})
    expect(requests[1]).not.toHaveProperty('unattended')
    await expect(h.run('t', { unattended: 'sometimes' })).rejects.toThrow(/an ask with unattended "sometimes" \(expected 'allow' or 'deny'\) for tool "t"/)
  })

  it("an ask's refusal reaches the approver; a non-string one is a malformed decision", async () => {
    const { h } = await policy(args => ({ kind: 'ask', refusal: (args as { refusal: string }).refusal }))
    const { requests } = await approver(h, () => ({ kind: 'allow' }))
    await h.run('t', { refusal: 'only at the terminal' })
    expect(requests[0]).toMatchObject({ refusal: 'only at the terminal' })
    await expect(h.run('t', { refusal: 3 })).rejects.toThrow(/an ask with a non-string refusal for tool "t"/)
  })

  it('an ask with a non-string rule is a malformed decision', async () => {
    const { h } = await policy(() => ({ kind: 'ask', rule: 3 }) as never)
    await expect(h.run('t')).rejects.toThrow(/an ask with a non-string rule for tool "t"/)
  })
})

describe('the decision in the meta', () => {
  it('an explicit allow is recorded; a listener passing the default through records nothing', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    let decide = true
    h.ctx.on('tools/pre-execute', async (_exec, next) => (decide ? { kind: 'allow' } : next()))
    expect((await h.run('t')).meta).toEqual({ decision: { policy: 'allow' } })
    decide = false
    expect(await h.run('t')).not.toHaveProperty('meta')
  })

  it("joins the body's object meta, and keeps any other meta as value", async () => {
    const h = await host()
    let meta: unknown = { bytes: 3 }
    h.ctx.tools.register(defineTool({ name: 't', description: 'the t tool', parameters: { ...OBJECT }, execute: () => ({ content: 'ok', meta }) as never }))
    h.ctx.on('tools/pre-execute', () => ({ kind: 'allow' }))
    expect((await h.run('t')).meta).toEqual({ bytes: 3, decision: { policy: 'allow' } })
    meta = ['a']
    expect((await h.run('t')).meta).toEqual({ value: ['a'], decision: { policy: 'allow' } })
  })

  it('a post-execute block keeps the decision', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/pre-execute', () => ({ kind: 'allow' }))
    h.ctx.on('tools/post-execute', () => ({ kind: 'block', feedback: 'withheld' }))
    expect(await h.run('t')).toMatchObject({ isError: true, meta: { decision: { policy: 'allow' } } })
  })
})
