// Run limits: a turn ends with reason `limit` before the request that would
// exceed its budget, after the tool results of the last step are logged.
import { defineTool } from '@loom/tools'
import type { SessionEvent } from '@loom/session'
import { describe, expect, it } from 'vitest'
import { harness, textResponse, toolCallResponse } from './harness.ts'

const echo = defineTool<{ n: number }>({
  name: 'echo',
  description: 'Echoes.',
  parameters: { type: 'object', properties: { n: { type: 'number' } } },
  execute: ({ n }) => `echo ${n}`,
})

/** A model that calls `echo` forever. */
const forever = Array.from({ length: 20 }, (_, i) => toolCallResponse(`c${i}`, 'echo', { n: i }))

const turnEnd = (events: readonly SessionEvent[]) => events.filter(event => event.type === 'turn/end').map(event => (event.data as any).reason)
const count = (events: readonly SessionEvent[], type: string) => events.filter(event => event.type === type).length

describe('run limits', () => {
  it('maxSteps ends a tool loop after that many requests, with every call answered', async () => {
    const h = await harness({
      script: forever,
      agent: { provider: 'mock', model: 'mock', limits: { maxSteps: 3 } },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('loop')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(3)
    expect(turnEnd(h.events())).toEqual([{ kind: 'limit', limit: 'max-steps', used: 3, max: 3 }])
    expect(count(h.events(), 'tool/result')).toBe(3)
  })

  it('the loop config gives the default maxSteps', async () => {
    const h = await harness({
      script: forever,
      loop: { maxSteps: 2 },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('loop')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(2)
    expect(turnEnd(h.events())[0]).toMatchObject({ kind: 'limit', limit: 'max-steps' })
  })

  it('a turn that finishes within the limit completes', async () => {
    const h = await harness({
      script: [forever[0], textResponse('done')],
      agent: { provider: 'mock', model: 'mock', limits: { maxSteps: 2 } },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('once')
    await h.settle()
    expect(turnEnd(h.events())).toEqual([{ kind: 'completed' }])
  })

  it('maxInputTokens counts the reported input, cache reads and writes', async () => {
    const h = await harness({
      script: forever,
      agent: { provider: 'mock', model: 'mock', limits: { maxInputTokens: 25 } },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('loop')
    await h.settle()
    // 10 input tokens a response: the third response reaches 30 ≥ 25.
    expect(h.adapter.requests).toHaveLength(3)
    expect(turnEnd(h.events())).toEqual([{ kind: 'limit', limit: 'max-input-tokens', used: 30, max: 25 }])
  })

  it('maxCostUsd prices the reported usage', async () => {
    const prices = { hit: 0, miss: 1_000_000, output: 0 } // $1 per input token
    const h = await harness({
      script: forever,
      agent: { provider: 'mock', model: 'mock', limits: { maxCostUsd: 15, prices } },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('loop')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(2)
    expect(turnEnd(h.events())).toEqual([{ kind: 'limit', limit: 'max-cost-usd', used: 20, max: 15 }])
  })

  it('a limited turn leaves the agent usable: the next turn runs', async () => {
    const h = await harness({
      script: [...forever.slice(0, 1), textResponse('next')],
      agent: { provider: 'mock', model: 'mock', limits: { maxSteps: 1 } },
      setup: ctx => {
        ctx.tools.register(echo)
      },
    })
    h.send('loop')
    await h.settle()
    h.send('again')
    await h.settle()
    expect(turnEnd(h.events()).map(reason => reason.kind)).toEqual(['limit', 'completed'])
  })
})
