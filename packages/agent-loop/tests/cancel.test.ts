// Cancellation: spec section 5.5 (contracts 80–100), plus an abort while the
// model was emitting a tool call.
import { userText, type StreamChunk, type UserMessage } from '@loom/llm'
import type { AgentCancelCause, SessionEvent } from '@loom/session'
import { defineTool } from '@loom/tools'
import type { Agent } from '@loom/agent-loop'
import { describe, expect, it } from 'vitest'
import { hanging, harness, textResponse, toolCallResponse, userTexts, type Harness, type ScriptStep } from './harness.ts'
import {
  collect,
  contextMessage,
  danglingToolCalls,
  finishWith,
  gate,
  logProblems,
  nextEvent,
  ofType,
  pluginTexts,
  rawToolCall,
  sleep,
  textChunks,
  textOf,
  textsOf,
  turnEndReasons,
  untilAbort,
} from './failure-kit.ts'

const USER = { kind: 'aborted', reason: { kind: 'user' } }

/** Waits until the agent has logged the chunk of type `type` (the stream is then hanging, say). */
function chunkLogged(agent: Agent, type: StreamChunk['type']): Promise<SessionEvent> {
  return nextEvent(agent, event => event.type === 'assistant/chunk' && (event.data as any).chunk.type === type)
}

/** A harness whose first turn (`active`) hangs in the stream after a text delta; later requests answer `ok`. */
async function hangingHarness(extra: ScriptStep[] = [textResponse('ok'), textResponse('ok')]): Promise<Harness> {
  const h = await harness({ script: [hanging(textChunks('working').slice(0, 2)), ...extra] })
  const delivered = chunkLogged(h.agent, 'text-delta')
  h.send('active')
  await delivered
  return h
}

/** A harness whose first turn (`active`) completes its step and then sits in a turn-stopping listener that ignores the signal. */
async function slowAbortHarness() {
  const h = await harness({ script: [textResponse('done'), textResponse('ok'), textResponse('ok')] })
  const held = gate()
  const entered = gate()
  let first = true
  h.agent.ctx.on('agent/turn-stopping', async () => {
    if (!first) return
    first = false
    entered.release()
    await held.promise
  })
  h.send('active')
  await entered.promise
  return { h, release: held.release }
}

describe('cancellation (5.5)', () => {
  it('a cancel of an idle agent is a no-op (80)', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    h.agent.cancel({ kind: 'user' })
    expect(h.events()).toEqual([])
    h.send('real prompt')
    await h.settle()

    expect(userTexts(h.events())).toEqual(['real prompt'])
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'completed' }])
    expect(h.adapter.requests).toHaveLength(1)
  })

  it('a cancel right after a waking send aborts the opened turn and discards the queued prompt (81)', async () => {
    const h = await harness({ script: [textResponse('never'), textResponse('never')] })
    const discarded = collect<{ message: UserMessage }>(h.agent, 'agent/inbox/discarded')
    const second = userText('drop me second')
    h.send('drop me first')
    h.agent.followup(second)
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    expect(h.types()).toEqual(['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'agent/inbox/spliced', 'agent/inbox/spliced', 'turn/end'])
    expect(ofType(events, 'step/start')).toHaveLength(0)
    expect(ofType(events, 'user/message')).toHaveLength(0)
    expect(turnEndReasons(events)).toEqual([USER])
    expect(h.agent.status).toBe('idle')
    expect(events[4].data).toEqual({ target: 'next-turn', start: 0, removedCount: 1, inserted: [], outcome: 'canceled' })
    expect(discarded.map(payload => payload.message.id)).toEqual([second.id])
    expect(h.adapter.requests).toHaveLength(0)
  })

  it('keepInbox cannot restore already-claimed work (82)', async () => {
    const h = await harness({ script: [textResponse('never')] })
    h.send('preserved')
    h.agent.cancel({ kind: 'user' }, { keepInbox: true })
    await h.settle()

    const events = h.events()
    expect(ofType(events, 'agent/inbox/spliced').filter(event => event.data.outcome === 'canceled')).toEqual([])
    expect(h.agent.inbox.nextTurn).toEqual([])
    expect(turnEndReasons(events)).toEqual([USER])
    expect(ofType(events, 'user/message')).toEqual([])
    expect(h.adapter.requests).toHaveLength(0)
  })

  it('a cancel mid-stream finalizes the visible prefix as an interrupted message (83)', async () => {
    const h = await harness({
      script: [
        hanging([
          { type: 'block-start', index: 0, blockType: 'text' },
          { type: 'text-delta', index: 0, text: 'partial' },
        ]),
        textResponse('ok'),
      ],
    })
    const delivered = chunkLogged(h.agent, 'text-delta')
    h.send('start')
    await delivered
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    const [message] = ofType(events, 'assistant/message')
    expect((message.data as any).message.content).toEqual([{ type: 'text', text: 'partial' }])
    expect((message.data as any).interrupted).toBe(true)
    expect(message.sourceEventSeqs).toEqual(ofType(events, 'assistant/chunk').map(event => event.seq))
    const stepEnd = ofType(events, 'step/end')[0]
    const turnEnd = ofType(events, 'turn/end')[0]
    expect(message.seq).toBeLessThan(stepEnd.seq)
    expect(stepEnd.seq).toBeLessThan(turnEnd.seq)
    expect((turnEnd.data as any).reason).toEqual(USER)
    expect(logProblems(events)).toEqual([])

    h.send('next')
    await h.settle()
    const next = h.adapter.requests[1]
    expect(next.messages.map(m => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(next.messages[1].content).toEqual([{ type: 'text', text: 'partial' }])
  })

  it('a reasoning-only prefix is finalized with its usage (84)', async () => {
    const h = await harness({
      script: [
        hanging([
          { type: 'block-start', index: 0, blockType: 'reasoning' },
          { type: 'reasoning-delta', index: 0, text: 'thinking about it' },
          { type: 'usage', usage: { inputTokens: 7, outputTokens: 4 } },
        ]),
      ],
    })
    const delivered = chunkLogged(h.agent, 'usage')
    h.send('start')
    await delivered
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const [message] = ofType(h.events(), 'assistant/message')
    expect((message.data as any).message.content).toEqual([{ type: 'reasoning', text: 'thinking about it' }])
    expect((message.data as any).usage).toEqual({ inputTokens: 7, outputTokens: 4 })
    expect((message.data as any).interrupted).toBe(true)
  })

  it('a half tool call is dropped from the interrupted message (85)', async () => {
    const h = await harness({ script: [hanging([...textChunks('reading the file'), ...rawToolCall('c1', 'read', '{"pa', 1).slice(0, 2)])] })
    const delivered = chunkLogged(h.agent, 'tool-call-delta')
    h.send('start')
    await delivered
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    const messages = ofType(events, 'assistant/message')
    expect(messages).toHaveLength(1)
    expect((messages[0].data as any).message.content).toEqual([{ type: 'text', text: 'reading the file' }])
    expect(ofType(events, 'tool/call')).toEqual([])
  })

  it('nothing visible, nothing finalized (86)', async () => {
    const h = await harness({ script: [hanging(rawToolCall('c1', 'read', '{"pa').slice(1, 2))] })
    const delivered = chunkLogged(h.agent, 'tool-call-delta')
    h.send('start')
    await delivered
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    expect(ofType(events, 'assistant/chunk')).toHaveLength(1)
    expect(ofType(events, 'assistant/message')).toEqual([])
    expect(ofType(events, 'tool/call')).toEqual([])
    expect(turnEndReasons(events)).toEqual([USER])
  })

  it('a cancel during request-error finalizes nothing and aborts the turn (87)', async () => {
    const h = await harness({
      script: [
        [...textChunks('doomed partial').slice(0, 2), finishWith('error', { message: 'overloaded', code: 'SERVICE_UNAVAILABLE' })],
        textResponse('never'),
      ],
    })
    h.agent.ctx.on('agent/request-error', () => {
      h.agent.cancel({ kind: 'user' })
      return undefined
    })
    h.send('start')
    await h.settle()

    expect(ofType(h.events(), 'assistant/message')).toEqual([])
    expect(turnEndReasons(h.events())).toEqual([USER])
    expect(h.adapter.requests).toHaveLength(1)
  })

  it('a cancel drops the queued tail and the steering (88)', async () => {
    const h = await hangingHarness()
    h.send('queued tail')
    h.agent.steer(userText('steer me'))
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    expect(ofType(events, 'turn/start')).toHaveLength(1)
    expect(userTexts(events)).toEqual(['active'])
    expect(h.agent.inbox.hasPending).toBe(false)
    expect(h.agent.status).toBe('idle')
    expect(h.adapter.requests).toHaveLength(1)
    expect(turnEndReasons(events)).toEqual([USER])
  })

  it('keepInbox parks queued work until the next wake (89)', async () => {
    const h = await hangingHarness()
    h.send('preserved')
    h.agent.cancel({ kind: 'user' }, { keepInbox: true })
    await h.settle()

    expect(textsOf(h.agent.inbox.nextTurn)).toEqual(['preserved'])
    expect(h.adapter.requests).toHaveLength(1)
    expect(ofType(h.events(), 'turn/start')).toHaveLength(1)

    h.send('wake it')
    await h.settle()
    expect(userTexts(h.events())).toEqual(['active', 'preserved', 'wake it'])
    expect(h.adapter.requests).toHaveLength(3)
    expect(turnEndReasons(h.events())).toEqual([USER, { kind: 'completed' }, { kind: 'completed' }])
  })

  it('a wake during an abort is latched and replayed (90)', async () => {
    // Same tick as the cancel, while the stream hangs.
    const h = await hangingHarness()
    h.agent.cancel({ kind: 'user' }, { keepInbox: true })
    h.send('B')
    await h.settle()
    expect(userTexts(h.events())).toEqual(['active', 'B'])
    expect(turnEndReasons(h.events())).toEqual([USER, { kind: 'completed' }])
    expect(h.adapter.requests).toHaveLength(2)
    expect(h.agent.inbox.nextTurn).toEqual([])

    // 10 ms into a slow abort.
    const slow = await slowAbortHarness()
    slow.h.agent.cancel({ kind: 'user' }, { keepInbox: true })
    await sleep(10)
    slow.h.send('B')
    slow.release()
    await slow.h.settle()
    expect(userTexts(slow.h.events())).toEqual(['active', 'B'])
    expect(turnEndReasons(slow.h.events())).toEqual([USER, { kind: 'completed' }])
    expect(slow.h.adapter.requests).toHaveLength(2)
    expect(slow.h.agent.inbox.nextTurn).toEqual([])
  })

  it('a later non-keep cancel, or removing the message, clears the latch (91)', async () => {
    const h = await hangingHarness()
    h.agent.cancel({ kind: 'user' }, { keepInbox: true })
    h.send('B')
    h.agent.cancel({ kind: 'user' })
    await h.settle()
    expect(userTexts(h.events())).toEqual(['active'])
    expect(ofType(h.events(), 'turn/start')).toHaveLength(1)
    expect(h.adapter.requests).toHaveLength(1)
    expect(h.agent.inbox.hasPending).toBe(false)

    const r = await hangingHarness()
    r.agent.cancel({ kind: 'user' }, { keepInbox: true })
    const b = userText('B')
    r.agent.followup(b)
    expect(r.agent.inbox.remove(b.id)).toBe(true)
    await r.settle()
    expect(userTexts(r.events())).toEqual(['active'])
    expect(ofType(r.events(), 'turn/start')).toHaveLength(1)
    expect(r.adapter.requests).toHaveLength(1)
  })

  it('disposal never latches a wake (92)', async () => {
    const h = await hangingHarness()
    const disposed = h.agent.dispose()
    h.send('late wake')
    await disposed
    expect(h.adapter.requests).toHaveLength(1)
    expect(userTexts(h.events())).toEqual(['active'])
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'aborted', reason: { kind: 'disposed' } }])

    const slow = await slowAbortHarness()
    const done = slow.h.agent.dispose()
    await sleep(10)
    slow.h.send('late wake')
    slow.release()
    await done
    await slow.h.settle()
    expect(slow.h.adapter.requests).toHaveLength(1)
    expect(userTexts(slow.h.events())).toEqual(['active'])
    expect(ofType(slow.h.events(), 'turn/start')).toHaveLength(1)
    expect(turnEndReasons(slow.h.events())).toEqual([{ kind: 'aborted', reason: { kind: 'disposed' } }])
  })

  it('the first cause wins (93)', async () => {
    const h = await hangingHarness()
    const parent: AgentCancelCause = { kind: 'parent' }
    h.agent.cancel(parent)
    h.agent.cancel({ kind: 'user' })
    await h.settle()
    expect(h.adapter.requests[0].signal!.reason).toBe(parent)
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'aborted', reason: { kind: 'parent' } }])

    const d = await hangingHarness()
    d.agent.cancel({ kind: 'user' })
    await d.agent.dispose()
    expect(turnEndReasons(d.events())).toEqual([USER])
  })

  it('a cancel from an assistant/message observer aborts the tools before dispatch (94)', async () => {
    let runs = 0
    const h = await harness({
      script: [toolCallResponse('c1', 'danger', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'danger',
            description: 'Does something dangerous.',
            parameters: { type: 'object', properties: {} },
            execute: () => {
              runs++
              return 'done'
            },
          }),
        )
      },
    })
    let canceled = false
    h.agent.ctx.on('session/event', (session, event) => {
      if (session !== h.agent.session || event.type !== 'assistant/message' || canceled) return
      canceled = true
      h.agent.cancel({ kind: 'user' })
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(runs).toBe(0)
    const [call] = ofType(events, 'tool/call')
    expect((call.data as any).callId).toBe('c1')
    const [result] = ofType(events, 'tool/result')
    expect(result.data).toMatchObject({
      message: { source: { kind: 'tool', callId: 'c1' }, content: [{ type: 'tool-result', toolCallId: 'c1', isError: true }] },
      error: { name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' },
    })
    expect((result.data as any).message.content[0].content).toEqual([{ type: 'text', text: 'Error: tool call aborted before dispatch' }])
    expect(turnEndReasons(events)).toEqual([USER])
    expect(logProblems(events)).toEqual([])

    h.send('next')
    await h.settle()
    const request = h.adapter.requests[1]
    const toolResult = request.messages.flatMap(m => m.content).find(block => block.type === 'tool-result')
    expect(toolResult).toEqual({
      type: 'tool-result',
      toolCallId: 'c1',
      isError: true,
      content: [{ type: 'text', text: 'Error: tool call aborted before dispatch' }],
    })
  })

  it('a cancel in turn-stopping aborts the turn after one step (95)', async () => {
    const h = await harness({ script: [textResponse('done'), textResponse('never')] })
    h.agent.ctx.on('agent/turn-stopping', () => {
      h.agent.cancel({ kind: 'user' })
    })
    h.send('go')
    await h.settle()

    expect(ofType(h.events(), 'step/start')).toHaveLength(1)
    expect(turnEndReasons(h.events())).toEqual([USER])
    expect(h.events().at(-1)!.type).toBe('turn/end')
  })

  it('a cancel from the running-status listener prevents the turn (96)', async () => {
    const h = await harness({ script: [textResponse('never')] })
    h.agent.ctx.on('agent/status', ({ status }: { status: string }) => {
      if (status === 'running') h.agent.cancel({ kind: 'user' })
    })
    h.send('go')
    await h.settle()
    expect(h.types()).not.toContain('turn/start')
    expect(h.types()).not.toContain('assistant/chunk')
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.status).toBe('idle')

    const b = await harness({ script: [textResponse('ok'), textResponse('never')] })
    let first = true
    b.agent.ctx.on('agent/status', ({ status }: { status: string }) => {
      if (status !== 'running' || !first) return
      first = false
      b.agent.cancel({ kind: 'user' })
      b.send('B')
    })
    b.send('go')
    await b.settle()
    expect(userTexts(b.events())).toEqual(['B'])
    expect(b.adapter.requests).toHaveLength(1)
    expect(ofType(b.events(), 'turn/start')).toHaveLength(1)
    expect(turnEndReasons(b.events())).toEqual([{ kind: 'completed' }])
  })

  it('disposal of the owning fiber during a tool parks the context accepted during disposal (97)', async () => {
    const entered = gate()
    const h = await harness({
      script: [toolCallResponse('c1', 'slow', {})],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'slow',
            description: 'Waits for its signal.',
            parameters: { type: 'object', properties: {} },
            async execute(_args, exec) {
              ;(exec.agent as Agent).inject(contextMessage('accepted before disposal'))
              entered.release()
              await untilAbort(exec.signal)
              return 'stopped'
            },
          }),
        )
      },
    })
    const owner = await h.root.plugin({ name: 'owner', inject: ['agents'], apply() {} })
    const agent = owner.ctx.agents.create('a2', { provider: 'mock', model: 'mock' })
    let reviewed = 0
    agent.ctx.on('tools/post-execute', async () => {
      reviewed++
      return { kind: 'accept', additionalContexts: [contextMessage('accepted result context during disposal')] }
    })
    agent.followup(userText('go'))
    await entered.promise
    await owner.dispose()
    await agent.idle()

    const events = agent.session.events
    expect(pluginTexts(events)).toEqual([])
    expect(reviewed, 'post-execute reviews the in-flight call committed during disposal').toBe(1)
    expect(textsOf(agent.inbox.nextStep)).toEqual(['accepted result context during disposal'])
    expect(ofType(events, 'turn/start')).toHaveLength(1)
    expect(turnEndReasons(events)).toEqual([{ kind: 'aborted', reason: { kind: 'disposed' } }])
  })

  it('an abort inside a tool discards the context accepted earlier in the step (98)', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'first', {}), textResponse('never')],
      setup: ctx => {
        ctx.tools.register(defineTool({ name: 'first', description: 'First tool.', parameters: { type: 'object', properties: {} }, execute: () => 'one' }))
        ctx.tools.register(
          defineTool({
            name: 'stopper',
            description: 'Cancels its agent.',
            parameters: { type: 'object', properties: {} },
            execute: (_args, exec) => {
              ;(exec.agent as Agent).cancel({ kind: 'user' })
              return 'two'
            },
          }),
        )
      },
    })
    h.adapter.script[0] = [...rawToolCall('c1', 'first', '{}', 0), ...rawToolCall('c2', 'stopper', '{}', 1), { type: 'finish', reason: { kind: 'tool-calls' } }]
    const discarded = collect<{ message: UserMessage }>(h.agent, 'agent/inbox/discarded')
    h.agent.ctx.on('tools/post-execute', async (exec: any) =>
      exec.name === 'first' ? { kind: 'accept', additionalContexts: [contextMessage('c1 context')] } : { kind: 'accept' },
    )
    h.send('go')
    await h.settle()

    const events = h.events()
    const firstCall = ofType(events, 'tool/call')[0]
    const filtered = events.filter(
      event => event.seq > firstCall.seq && ['tool/result', 'user/message', 'step/start', 'step/end', 'turn/end'].includes(event.type),
    )
    expect(filtered.map(event => event.type)).toEqual(['tool/result', 'tool/result', 'step/end', 'turn/end'])
    expect(pluginTexts(events)).toEqual([])
    expect(discarded.map(payload => textOf(payload.message))).toEqual(['c1 context'])
    expect(h.agent.inbox.nextStep).toEqual([])
    expect(turnEndReasons(events)).toEqual([USER])
  })

  it('a context accepted after the abort stays parked for the next wake (99)', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'quitter', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'quitter',
            description: 'Injects, then cancels its agent.',
            parameters: { type: 'object', properties: {} },
            execute: (_args, exec) => {
              const agent = exec.agent as Agent
              agent.inject(contextMessage('injected by the tool'))
              agent.cancel({ kind: 'user' })
              return 'quit'
            },
          }),
        )
      },
    })
    let reviewed = 0
    h.agent.ctx.on('tools/post-execute', async () => {
      reviewed++
      return { kind: 'accept', additionalContexts: [contextMessage('accepted result context after abort')] }
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    const call = ofType(events, 'tool/call')[0]
    const filtered = events.filter(event => event.seq > call.seq && ['tool/result', 'user/message', 'step/start', 'step/end', 'turn/end'].includes(event.type))
    expect(filtered.map(event => event.type)).toEqual(['tool/result', 'step/end', 'turn/end'])
    expect(pluginTexts(events)).toEqual([])
    expect(turnEndReasons(events)).toEqual([USER])
    expect(reviewed, 'post-execute reviews the in-flight call committed after the abort').toBe(1)
    expect(textsOf(h.agent.inbox.nextStep)).toEqual(['accepted result context after abort'])

    const before = h.events().length
    h.send('wake')
    await h.settle()
    const entered = h
      .events()
      .slice(before)
      .filter(event => event.type === 'user/message')
      .map(event => textOf(event.data as any))
    expect(entered).toEqual(['accepted result context after abort', 'wake'])
  })

  it('every cooperative boundary settles on a cancel (100)', async () => {
    const boundaries: Record<string, (h: Harness, entered: () => void) => void> = {
      'pre-step': (h, entered) =>
        h.agent.ctx.on('agent/pre-step', async (payload, next) => {
          entered()
          await untilAbort(payload.signal)
          return next()
        }),
      assemble: (h, entered) =>
        h.agent.ctx.on('system-prompt/assemble', async (_assembly, context, next) => {
          entered()
          await untilAbort(context.signal!)
          return next()
        }),
      request: (h, entered) =>
        h.agent.ctx.on('agent/request', async (payload, next) => {
          entered()
          await untilAbort(payload.signal)
          return next()
        }),
      'turn-stopping': (h, entered) =>
        h.agent.ctx.on('agent/turn-stopping', async payload => {
          entered()
          await untilAbort(payload.signal)
        }),
      'tool body': (h, entered) =>
        h.ctx.tools.register(
          defineTool({
            name: 'wait',
            description: 'Waits for its signal.',
            parameters: { type: 'object', properties: {} },
            async execute(_args, exec) {
              entered()
              await untilAbort(exec.signal)
              return 'late'
            },
          }),
        ),
    }
    const outcomes: Record<string, unknown> = {}
    for (const [name, install] of Object.entries(boundaries)) {
      const h = await harness({ script: [name === 'tool body' ? toolCallResponse('c1', 'wait', {}) : textResponse('ok'), textResponse('never')] })
      const entered = gate()
      install(h, entered.release)
      h.send('go')
      await entered.promise
      h.agent.cancel({ kind: 'user' })
      await h.settle()
      const events = h.events()
      outcomes[name] = {
        ends: turnEndReasons(events),
        last: h.types().at(-1),
        status: h.agent.status,
        problems: logProblems(events),
        steps: ofType(events, 'step/start').length,
        requests: h.adapter.requests.length,
        results: ofType(events, 'tool/result').map(event => (event.data as any).error?.code),
      }
    }
    const settled = { ends: [USER], last: 'turn/end', status: 'idle', problems: [] }
    expect(outcomes).toEqual({
      'pre-step': { ...settled, steps: 0, requests: 0, results: [] },
      assemble: { ...settled, steps: 0, requests: 0, results: [] },
      request: { ...settled, steps: 1, requests: 0, results: [] },
      'turn-stopping': { ...settled, steps: 1, requests: 1, results: [] },
      'tool body': { ...settled, steps: 1, requests: 1, results: ['ABORTED'] },
    })
  })

  it('an abort while the model emits a tool call leaves no tool call without a result', async () => {
    // A closed tool-call block and a half one, both before finish: neither may reach the log as a call.
    const h = await harness({
      script: [
        hanging([...textChunks('two reads'), ...rawToolCall('c1', 'read', '{"path":"a"}', 1), ...rawToolCall('c2', 'read', '{"path":"b', 2).slice(0, 2)]),
        textResponse('ok'),
      ],
      setup: ctx => {
        ctx.tools.register(defineTool({ name: 'read', description: 'Reads.', parameters: { type: 'object', properties: {} }, execute: () => 'content' }))
      },
    })
    const delivered = nextEvent(h.agent, event => event.type === 'assistant/chunk' && (event.data as any).chunk.id === 'c2')
    h.send('go')
    await delivered
    h.agent.cancel({ kind: 'user' })
    await h.settle()

    const events = h.events()
    expect(ofType(events, 'tool/call')).toEqual([])
    expect(ofType(events, 'tool/result')).toEqual([])
    const [message] = ofType(events, 'assistant/message')
    expect((message.data as any).message.content).toEqual([{ type: 'text', text: 'two reads' }])
    expect(logProblems(events)).toEqual([])
    expect(danglingToolCalls(h.agent.session.deriveMessages())).toEqual([])
    expect(turnEndReasons(events)).toEqual([USER])

    h.send('again')
    await h.settle()
    expect(danglingToolCalls(h.adapter.requests[1].messages)).toEqual([])
    expect(h.adapter.requests[1].messages.flatMap(m => m.content).filter(block => block.type === 'tool-call')).toEqual([])
  })
})
