// The two canonical logs of the spec (section 2.10), event for event.
import { createHash } from 'node:crypto'
import { defineTool } from '@loom/tools'
import { userText } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import { harness, IDENTITY, textResponse, toolCallResponse } from './harness.ts'

describe('canonical logs', () => {
  it('(A) a one-step text turn writes exactly these 16 events', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const claimed: unknown[] = []
    h.agent.ctx.on('agent/inbox/claimed', ({ message, turn }) => claimed.push({ id: message.id, turn, after: h.types().at(-1) }))
    const message = userText('hi')
    h.agent.followup(message)
    await h.settle()

    const events = h.events()
    expect(events.map(e => e.type)).toEqual([
      'agent/inbox/spliced',
      'turn/start',
      'agent/inbox/spliced',
      'step/start',
      'user/message',
      'request/header',
      'request/context',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/message',
      'step/end',
      'turn/end',
    ])
    expect(events.map(e => e.seq)).toEqual(events.map((_, i) => i))
    expect(events[0].data).toEqual({ target: 'next-turn', start: 0, inserted: [message] })
    expect(events[1].data).toEqual({ turn: 1 })
    expect(events[2].data).toEqual({ target: 'next-turn', start: 0, removedCount: 1, inserted: [] })
    expect(events[3].data).toEqual({ turn: 1, step: 1 })
    expect(events[4].data).toEqual(message)
    expect(events[4].surfaceOp).toBe('append')
    expect(events[5].data).toEqual({
      header: { config: { provider: 'mock', model: 'mock' }, system: IDENTITY },
      reason: 'initial',
      sources: {
        sections: [
          {
            name: 'harness:identity',
            owner: '@loom/system-prompt',
            sha256: createHash('sha256').update(IDENTITY).digest('hex'),
            order: -100,
            stability: 'static',
            chars: IDENTITY.length,
            tokens: Math.ceil(IDENTITY.length / 4),
            trust: 'product',
            category: 'instructions',
          },
        ],
        tools: [],
        plugins: [{ name: '@loom/system-prompt', version: '0.1.0', digest: expect.stringMatching(/^[0-9a-f]{64}$/) }],
      },
    })
    expect(events[6].data).toEqual({ provider: 'mock', model: 'mock' })
    expect(events.slice(7, 13).map(e => (e.data as any).chunk.type)).toEqual(['block-start', 'text-delta', 'text-delta', 'block-end', 'usage', 'finish'])
    expect(events[13].data).toEqual({
      turn: 1,
      step: 1,
      message: {
        id: expect.any(String),
        role: 'assistant',
        content: [{ type: 'text', text: 'ok' }],
        source: { kind: 'model', provider: 'mock', model: 'mock' },
      },
      usage: { inputTokens: 10, outputTokens: 2 },
    })
    expect(events[13].surfaceOp).toBe('append')
    expect(events[13].sourceEventSeqs).toEqual([7, 8, 9, 10, 11, 12])
    expect(events[14].data).toEqual({ turn: 1, step: 1 })
    expect(events[15].data).toEqual({ turn: 1, reason: { kind: 'completed' } })

    expect(h.statuses).toEqual(['running', 'idle'])
    expect(claimed).toEqual([{ id: message.id, turn: 1, after: 'agent/inbox/spliced' }])

    const [request] = h.adapter.requests
    expect(Object.keys(request).sort()).toEqual(['messages', 'model', 'provider', 'sessionId', 'signal', 'system'])
    expect(request).toMatchObject({ provider: 'mock', model: 'mock', messages: [message], system: IDENTITY, sessionId: 'a1' })
    expect(Object.isFrozen(request)).toBe(true)
    expect(Object.isFrozen(request.messages)).toBe(true)
  })

  it('(B) one tool round trip', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'echo', { text: 'ping' }, 'calling echo'), textResponse('done')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'echo',
            description: 'Echo the text.',
            parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
            execute: (args: { text: string }) => [{ type: 'text', text: `echo: ${args.text}` }],
          }),
        )
      },
    })
    const preSteps: number[] = []
    h.agent.ctx.on('agent/pre-step', async (payload, next) => {
      preSteps.push(payload.messages.length)
      return next()
    })
    const prompt = userText('use the tool')
    h.agent.followup(prompt)
    await h.settle()

    const types = h.types()
    const step1 = types.slice(types.indexOf('step/start'), types.indexOf('step/end') + 1)
    expect(step1).toEqual([
      'step/start',
      'user/message',
      'request/header',
      'request/context',
      ...Array(9).fill('assistant/chunk'),
      'assistant/message',
      'tool/call',
      'tool/result',
      'step/end',
    ])
    const events = h.events()
    const call = events.find(e => e.type === 'tool/call')!
    expect(call.data).toEqual({ turn: 1, step: 1, callId: 'c1', name: 'echo', arguments: '{"text":"ping"}' })
    const result = events.find(e => e.type === 'tool/result')!
    expect(result.data).toEqual({
      turn: 1,
      step: 1,
      message: {
        id: expect.any(String),
        role: 'user',
        source: { kind: 'tool', callId: 'c1' },
        content: [{ type: 'tool-result', toolCallId: 'c1', isError: false, content: [{ type: 'text', text: 'echo: ping' }] }],
      },
    })
    expect(result.sourceEventSeqs).toEqual([call.seq])

    const secondStart = types.lastIndexOf('step/start')
    expect(types.slice(secondStart)).toEqual(['step/start', ...Array(8).fill('assistant/chunk'), 'assistant/message', 'step/end', 'turn/end'])
    expect((events.at(-1)!.data as any).reason).toEqual({ kind: 'completed' })
    expect(preSteps).toEqual([1, 0])

    const second = h.adapter.requests[1]
    expect(second.messages.map(m => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(second.messages[0]).toEqual(prompt)
    expect(second.messages[1].content).toEqual([
      { type: 'text', text: 'calling echo' },
      { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":"ping"}' },
    ])
    expect(second.messages[2].content[0]).toMatchObject({ type: 'tool-result', toolCallId: 'c1' })
  })
})
