// The gate by effect: tools declare what a call may do; an approver that allows only reads
// refuses the rest before any listener; a tool that needs a person asks ahead of the rules; the
// question carries the effects, the origin and whether the tool may destroy data.
import { describe, expect, it } from 'vitest'
import { type Context, Service } from '@deepseek-ai/cordis'
import { defineTool, isRead, type ApprovalAnswer, type ApprovalRequest, type ToolEffect } from '@loom/tools'
import { host, type Host } from './helpers.ts'

/** Provides `ctx.approver`: answers with `answer`, records each request; `readsOnly` as given. */
async function approver(h: Host, answer: ApprovalAnswer, readsOnly?: string) {
  const requests: ApprovalRequest[] = []
  class TestApprover extends Service {
    static override readonly name = 'test-approver'
    readonly readsOnly = readsOnly
    constructor(ctx: Context) {
      super(ctx, 'approver')
    }
    async approve(request: ApprovalRequest) {
      requests.push(request)
      return answer
    }
  }
  await h.root.plugin(TestApprover)
  return requests
}

/** Registers `name` declaring `effects` (omitted: none declared); returns the names of the calls that ran. */
function tool(h: Host, name: string, effects?: readonly ToolEffect[], extra: Record<string, unknown> = {}) {
  const runs: string[] = []
  h.ctx.tools.register(
    defineTool({
      name,
      description: `the ${name} tool`,
      parameters: { type: 'object', properties: { inner: { type: 'string' } } },
      ...(effects && { effects }),
      ...extra,
      execute: () => {
        runs.push(name)
        return 'ran'
      },
    }),
  )
  return runs
}

describe('tool effects', () => {
  it('are checked when a tool is defined, naming the tool', () => {
    const define = (effects: unknown) => () =>
      defineTool({ name: 'bad', description: 'bad', parameters: { type: 'object' }, effects: effects as ToolEffect[], execute: () => 'ran' })
    expect(define(['read', 'delete'])).toThrow(
      'invalid tool definition "bad": effects must be a non-empty list of "read", "write", "execute", "network", "outside"',
    )
    expect(define([])).toThrow('effects must be a non-empty list')
    expect(define('read')).toThrow('effects must be a non-empty list')
    expect(define(['read', 'network'])).not.toThrow()
  })

  it('effectsOf: declared, computed from the arguments, or unknown', async () => {
    const h = await host()
    tool(h, 'look', ['read'])
    tool(h, 'mystery')
    // A dispatcher takes the effects of the tool it would run; an unknown inner tool is unknown.
    tool(h, 'dispatch', undefined, {
      effects: (args: { inner: string }) => h.ctx.tools.effectsOf({ name: args.inner, arguments: {} }) ?? [],
    })
    tool(h, 'broken', undefined, {
      effects: () => {
        throw new Error('no')
      },
    })
    expect(h.tools.effectsOf({ name: 'look', arguments: {} })).toEqual(['read'])
    expect(h.tools.effectsOf({ name: 'mystery', arguments: {} })).toBeUndefined()
    expect(h.tools.effectsOf({ name: 'nothing', arguments: {} })).toBeUndefined()
    expect(h.tools.effectsOf({ name: 'dispatch', arguments: { inner: 'look' } })).toEqual(['read'])
    expect(h.tools.effectsOf({ name: 'dispatch', arguments: { inner: 'mystery' } })).toBeUndefined()
    // Arguments the tool would refuse, or a declaration that throws: unknown.
    expect(h.tools.effectsOf({ name: 'dispatch', arguments: { inner: 3 } })).toBeUndefined()
    expect(h.tools.effectsOf({ name: 'broken', arguments: {} })).toBeUndefined()
    expect([isRead(['read']), isRead(['read', 'write']), isRead(undefined), isRead([])]).toEqual([true, false, false, false])
  })

  it('an approver that allows only reads: every other call is refused before any listener, unknown effects included', async () => {
    const h = await host()
    const runs = {
      look: tool(h, 'look', ['read']),
      change: tool(h, 'change', ['write']),
      fetch: tool(h, 'fetch', ['read', 'network']),
      mystery: tool(h, 'mystery'),
    }
    const heard: string[] = []
    h.ctx.on('tools/pre-execute', exec => {
      heard.push(exec.name)
      return { kind: 'allow' }
    })
    await approver(h, { kind: 'allow' }, 'approvals are off')
    expect((await h.run('look')).isError).toBe(false)
    for (const name of ['change', 'fetch', 'mystery']) {
      const result = await h.run(name)
      expect(result.isError).toBe(true)
      expect(result.content).toEqual([{ type: 'text', text: `Error: tool "${name}" does more than read, and approvals are off` }])
      expect(result.meta).toMatchObject({ decision: { policy: 'deny' } })
    }
    expect(heard).toEqual(['look'])
    expect(runs.look).toEqual(['look'])
    expect([...runs.change, ...runs.fetch, ...runs.mystery]).toEqual([])
  })

  it('requiresApproval asks ahead of the rules, with its unattended answer; the question names effects, origin and destruction', async () => {
    const h = await host()
    let confined = false
    const runs = tool(h, 'shell', ['execute'], {
      requiresApproval: () => (confined ? undefined : { reason: 'no sandbox here', rule: 'unconfined', unattended: 'deny' }),
    })
    tool(h, 'drop_table', ['outside'], { origin: 'MCP server "db"', destructive: true })
    // A rule that allows everything does not get to decide the unconfined call.
    h.ctx.on('tools/pre-execute', exec => (exec.name === 'drop_table' ? { kind: 'ask', reason: 'acts outside' } : { kind: 'allow' }))
    const requests = await approver(h, { kind: 'deny', note: 'no' })
    expect((await h.run('shell')).meta).toMatchObject({ decision: { policy: 'ask', answer: 'deny', rule: 'unconfined', reason: 'no sandbox here' } })
    expect(requests[0]).toMatchObject({ tool: 'shell', unattended: 'deny', effects: ['execute'], rule: 'unconfined' })
    await h.run('drop_table')
    expect(requests[1]).toMatchObject({ tool: 'drop_table', effects: ['outside'], origin: 'MCP server "db"', destructive: true })
    confined = true
    expect((await h.run('shell')).isError).toBe(false)
    expect(runs).toEqual(['shell'])
    expect(requests).toHaveLength(2)
  })
})

describe('the paths a question names', () => {
  it('a tool that declares writes gives the approver the paths it resolved; one it cannot resolve asks without them', async () => {
    const h = await host()
    tool(h, 'save', ['write'], {
      writes: (args: { inner?: string }) => (args.inner === 'bad' ? Promise.reject(new Error('outside')) : [`/workspace/${args.inner}`]),
    })
    h.ctx.on('tools/pre-execute', () => ({ kind: 'ask', reason: 'it writes' }))
    const requests = await approver(h, { kind: 'deny' })
    await h.run('save', { inner: 'notes.txt' })
    await h.run('save', { inner: 'bad' })
    expect(requests.map(request => request.writes)).toEqual([['/workspace/notes.txt'], undefined])
  })
})
