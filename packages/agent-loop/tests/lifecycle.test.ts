// Contracts 2–34 of the spec (section 5.1): turn and step lifecycle.
// Contract 1 (the exact simple-turn log) lives in canonical.test.ts.
import { createUserMessage, userText, type GenerateOptions, type Message, type StreamChunk, type UserMessage } from '@loom/llm'
import { eventsOfType, Session, type SessionEvent, type SessionEventType } from '@loom/session'
import { defineTool, type ToolRunContext } from '@loom/tools'
import { Agent } from '@loom/agent-loop'
import { describe, expect, it } from 'vitest'
import { harness, textResponse, toolCallResponse, type Harness } from './harness.ts'

// ---- helpers (local to this file) ----

function plugin(text: string): UserMessage {
  return createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: 'test' } })
}

function textOf(message: Message): string {
  return message.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

function ofType<K extends SessionEventType>(h: Harness, type: K): SessionEvent<K>[] {
  return eventsOfType(h.events(), type)
}

/** user/message texts grouped by turn (index 0 is turn 1 of this harness). */
function userTextsByTurn(events: readonly SessionEvent[]): string[][] {
  const turns: string[][] = []
  for (const event of events) {
    if (event.type === 'turn/start') turns.push([])
    else if (event.type === 'user/message') turns.at(-1)!.push(textOf(event.data as UserMessage))
  }
  return turns
}

/** user/message texts grouped by step/start. */
function userTextsByStep(events: readonly SessionEvent[]): string[][] {
  const steps: string[][] = []
  for (const event of events) {
    if (event.type === 'step/start') steps.push([])
    else if (event.type === 'user/message') steps.at(-1)!.push(textOf(event.data as UserMessage))
  }
  return steps
}

const BOUNDARIES = new Set(['turn/start', 'turn/end', 'step/start', 'step/end'])
const boundaries = (h: Harness) => h.types().filter(type => BOUNDARIES.has(type))

/** Every text the model saw in a request's messages. */
function requestTexts(request: GenerateOptions): string[] {
  return request.messages.map(textOf)
}

function turnEndReasons(h: Harness): unknown[] {
  return ofType(h, 'turn/end').map(event => (event.data as any).reason)
}

function withFinish(chunks: StreamChunk[], reason: Extract<StreamChunk, { type: 'finish' }>['reason']): StreamChunk[] {
  return chunks.map(chunk => (chunk.type === 'finish' ? { type: 'finish', reason } : chunk))
}

/** Several tool calls in one assistant message. */
function toolCallsResponse(calls: Array<[id: string, name: string, args: unknown]>): StreamChunk[] {
  const chunks: StreamChunk[] = []
  calls.forEach(([id, name, args], index) => {
    const json = JSON.stringify(args)
    chunks.push(
      { type: 'block-start', index, blockType: 'tool-call' },
      { type: 'tool-call-delta', index, id, name, argumentsDelta: json },
      { type: 'block-end', index, block: { type: 'tool-call', id, name, arguments: json } },
    )
  })
  chunks.push({ type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } }, { type: 'finish', reason: { kind: 'tool-calls' } })
  return chunks
}

const echoTool = () =>
  defineTool({
    name: 'echo',
    description: 'Echo the text.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: (args: { text: string }) => [{ type: 'text', text: `echo: ${args.text}` }],
  })

function tool(name: string, execute: (args: any, exec: ToolRunContext) => any) {
  return defineTool({ name, description: `The ${name} tool.`, parameters: { type: 'object', properties: {} }, execute })
}

const tick = () => new Promise(resolve => setTimeout(resolve, 0))

describe('5.1 turn and step lifecycle', () => {
  it('(2) a turn opens synchronously inside the waking send', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const claimed: Array<{ id: string; turn: number; log: string[] }> = []
    h.agent.ctx.on('agent/inbox/claimed', ({ message, turn }) => {
      claimed.push({ id: message.id, turn, log: h.types() })
    })
    const message = userText('x')
    h.agent.followup(message)

    expect(h.agent.status).toBe('running')
    expect(h.statuses).toEqual(['running'])
    expect(h.types()).toEqual(['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced'])
    expect(h.events()[1].data).toEqual({ turn: 1 })
    expect(h.events()[2].data).toEqual({ target: 'next-turn', start: 0, removedCount: 1, inserted: [] })
    expect(claimed).toEqual([{ id: message.id, turn: 1, log: ['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced'] }])
    await h.settle()
    expect(h.statuses).toEqual(['running', 'idle'])
  })

  it('(3) one queued message per turn', async () => {
    const h = await harness({ script: [textResponse('1'), textResponse('2'), textResponse('3')] })
    h.send('a')
    h.send('b')
    h.send('c')
    await h.settle()

    expect(ofType(h, 'turn/start').map(event => (event.data as any).turn)).toEqual([1, 2, 3])
    expect(userTextsByTurn(h.events())).toEqual([['a'], ['b'], ['c']])
    const insertions = ofType(h, 'agent/inbox/spliced').filter(event => event.data.inserted.length > 0)
    expect(insertions.map(event => [(event.data as any).target, textOf(event.data.inserted[0])])).toEqual([
      ['next-turn', 'a'],
      ['next-turn', 'b'],
      ['next-turn', 'c'],
    ])
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }, { kind: 'completed' }, { kind: 'completed' }])
    expect(h.adapter.requests).toHaveLength(3)
  })

  it('(4) the claim takes next-step before next-turn', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const context = plugin('ctx')
    const prompt = userText('p')
    h.agent.inject(context)
    h.agent.followup(prompt)
    await h.settle()

    const claims = ofType(h, 'agent/inbox/spliced').filter(event => event.data.removedCount)
    expect(claims.map(event => event.data)).toEqual([
      { target: 'next-step', start: 0, removedCount: 1, inserted: [] },
      { target: 'next-turn', start: 0, removedCount: 1, inserted: [] },
    ])
    // both claims happen after turn/start and before step/start
    const types = h.types()
    expect(types.slice(0, 6)).toEqual(['agent/inbox/spliced', 'agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'agent/inbox/spliced', 'step/start'])
    expect(ofType(h, 'user/message').map(event => event.data)).toEqual([context, prompt])
    expect(h.adapter.requests[0].messages).toEqual([context, prompt])
  })

  it('(5) inject while idle does not wake', async () => {
    const h = await harness({ script: [textResponse('never')] })
    const m = plugin('background')
    h.agent.inject(m)
    await tick()
    await h.settle()

    expect(h.events().map(event => [event.type, event.data])).toEqual([['agent/inbox/spliced', { target: 'next-step', start: 0, inserted: [m] }]])
    expect(h.agent.status).toBe('idle')
    expect(h.statuses).toEqual([])
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.inbox.nextStep).toEqual([m])
  })

  it('(6) steer while idle wakes into a turn', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const m = userText('steer me')
    h.agent.steer(m)
    await h.settle()

    expect(ofType(h, 'turn/start')).toHaveLength(1)
    expect(ofType(h, 'user/message').map(event => event.data)).toEqual([m])
    expect(h.adapter.requests).toHaveLength(1)
    expect(h.adapter.requests[0].messages).toEqual([m])
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
    expect(h.statuses).toEqual(['running', 'idle'])
  })

  it('(7) steering during the pre-step joins the next step of the same turn', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    h.agent.steer(userText('first'))
    h.agent.steer(userText('second'))
    await h.settle()

    expect(ofType(h, 'turn/start')).toHaveLength(1)
    expect(userTextsByStep(h.events())).toEqual([['first'], ['second']])
    const [r1, r2] = h.adapter.requests
    expect(requestTexts(r1)).toContain('first')
    expect(requestTexts(r1)).not.toContain('second')
    expect(requestTexts(r2)).toContain('second')
    expect(h.adapter.requests).toHaveLength(2)
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
  })

  it('(8) steering during a tool call enters the next step', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'steerer', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          tool('steerer', (_args, exec) => {
            ;(exec.agent as Agent).steer(userText('change of plans'))
            return 'steered'
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    const steps = ofType(h, 'step/start')
    expect(steps).toHaveLength(2)
    const steering = ofType(h, 'user/message').find(event => textOf(event.data as UserMessage) === 'change of plans')!
    expect(steering).toBeDefined()
    expect(steering.seq).toBeGreaterThan(steps[1].seq)
    expect(requestTexts(h.adapter.requests[1])).toContain('change of plans')
    expect(requestTexts(h.adapter.requests[0])).not.toContain('change of plans')
    expect(ofType(h, 'turn/start')).toHaveLength(1)
  })

  it('(9) inject during a tool call is appended after the tool result', async () => {
    const a = {
      id: 'ctx-a',
      role: 'user' as const,
      content: [{ type: 'text' as const, text: 'mid-turn notice' }],
      source: { kind: 'plugin' as const, plugin: 'test' },
    }
    const b = plugin('second notice')
    let pluginMessagesWhileRunning = -1
    const h = await harness({
      script: [toolCallResponse('c1', 'notifier', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          tool('notifier', (_args, exec) => {
            const agent = exec.agent as Agent
            agent.inject(a)
            agent.inject(b)
            a.content[0].text = 'mutated by caller'
            pluginMessagesWhileRunning = agent.session.events.filter(
              event => event.type === 'user/message' && (event.data as UserMessage).source.kind === 'plugin',
            ).length
            return 'done'
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    expect(pluginMessagesWhileRunning).toBe(0)
    const result = ofType(h, 'tool/result')[0]
    const messages = ofType(h, 'user/message')
    const aEvent = messages.find(event => (event.data as UserMessage).id === 'ctx-a')!
    const bEvent = messages.find(event => (event.data as UserMessage).id === b.id)!
    expect(result.seq).toBeLessThan(aEvent.seq)
    expect(aEvent.seq).toBeLessThan(bEvent.seq)
    expect(textOf(aEvent.data as UserMessage)).toBe('mid-turn notice')

    const r2 = h.adapter.requests[1]
    expect(r2.messages.map(m => (m.source as any).kind)).toEqual(['user', 'model', 'tool', 'plugin', 'plugin'])
    expect(r2.messages.slice(3).map(textOf)).toEqual(['mid-turn notice', 'second notice'])
  })

  it('(10) tool contexts come after all results, in deferral order', async () => {
    const h = await harness({
      script: [
        toolCallsResponse([
          ['c1', 'deferrer', {}],
          ['c2', 'deferrer', {}],
        ]),
        textResponse('ok'),
      ],
      setup: ctx => {
        ctx.tools.register(
          tool('deferrer', (_args, exec) => {
            exec.deferContext(plugin(`defer-${exec.callId}`))
            return `ran ${exec.callId}`
          }),
        )
        ctx.on('tools/post-execute', async (exec, _result, next) => {
          const decision = await next()
          return { ...decision, additionalContexts: [...(decision.additionalContexts ?? []), plugin(`ctx-${exec.callId}`)] } as any
        })
      },
    })
    h.send('go')
    await h.settle()

    const interesting = h
      .events()
      .filter(event => ['tool/call', 'tool/result', 'step/start', 'user/message'].includes(event.type))
      .map(event => {
        if (event.type === 'tool/call') return `call ${(event.data as any).callId}`
        if (event.type === 'tool/result') return `result ${(event.data as any).message.source.callId}`
        if (event.type === 'step/start') return `step ${(event.data as any).step}`
        return `user ${textOf(event.data as UserMessage)}`
      })
    expect(interesting).toEqual([
      'step 1',
      'user go',
      'call c1',
      'result c1',
      'call c2',
      'result c2',
      'step 2',
      'user defer-c1',
      'user ctx-c1',
      'user defer-c2',
      'user ctx-c2',
    ])
    const r2 = h.adapter.requests[1]
    expect(r2.messages.map(m => (m.source as any).kind)).toEqual(['user', 'model', 'tool', 'tool', 'plugin', 'plugin', 'plugin', 'plugin'])
  })

  it('(11) pre-step coordinates', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'echo', { text: 'hi' }), textResponse('done')],
      setup: ctx => {
        ctx.tools.register(echoTool())
      },
    })
    const seen: unknown[] = []
    h.agent.ctx.on('agent/pre-step', async (payload, next) => {
      seen.push({ turn: payload.turn, step: payload.step, messages: payload.messages.length })
      return next()
    })
    h.send('go')
    await h.settle()
    expect(seen).toEqual([
      { turn: 1, step: 1, messages: 1 },
      { turn: 1, step: 2, messages: 0 },
    ])
  })

  it('(12) the pre-step runs before step/start', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'echo', { text: 'hi' }), textResponse('done')],
      setup: ctx => {
        ctx.tools.register(echoTool())
      },
    })
    const last: string[] = []
    h.agent.ctx.on('agent/pre-step', async (_payload, next) => {
      last.push(h.types().at(-1)!)
      return next()
    })
    h.send('go')
    await h.settle()
    expect(last).toHaveLength(2)
    expect(last).not.toContain('step/start')
    expect(last).toEqual(['agent/inbox/spliced', 'step/end'])
  })

  it('(13) the pre-step payload is frozen and keeps identity', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const original = userText('freeze me')
    const checks: Record<string, unknown> = {}
    // `any`: the test tries the mutations the types forbid.
    h.agent.ctx.on('agent/pre-step', async (payload: any) => {
      const m = payload.messages[0]
      checks.messages = Object.isFrozen(payload.messages)
      checks.message = Object.isFrozen(m)
      checks.content = Object.isFrozen(m.content)
      checks.block = Object.isFrozen(m.content[0])
      checks.source = Object.isFrozen(m.source)
      checks.id = m.id
      expect(() => {
        m.content[0].text = 'changed'
      }).toThrow(TypeError)
      expect(() => {
        m.source.kind = 'plugin'
      }).toThrow(TypeError)
      expect(() => {
        m.content.push({ type: 'text', text: 'more' })
      }).toThrow(TypeError)
      return { kind: 'enter', messages: [original] }
    })
    h.agent.followup(original)
    await h.settle()

    expect(checks).toEqual({ messages: true, message: true, content: true, block: true, source: true, id: original.id })
    expect(Object.isFrozen(original)).toBe(true)
    expect(Object.isFrozen(original.content[0])).toBe(true)
    const [recorded] = ofType(h, 'user/message')
    expect(recorded.data).toEqual(original)
    expect((recorded.data as UserMessage).id).toBe(original.id)
    expect(h.adapter.requests[0].messages).toEqual([original])
  })

  it('(14) a pre-step reject blocks the turn and drops the claimed message', async () => {
    const h = await harness({ script: [] })
    h.agent.ctx.on('agent/pre-step', async () => ({ kind: 'reject' }))
    h.send('do something')
    await h.settle()

    expect(boundaries(h)).toEqual(['turn/start', 'turn/end'])
    expect(ofType(h, 'turn/end')[0].data).toEqual({ turn: 1, reason: { kind: 'blocked' } })
    expect(ofType(h, 'user/message')).toHaveLength(0)
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.inbox.nextTurn).toEqual([])
    expect(h.agent.inbox.nextStep).toEqual([])
    expect(h.agent.inbox.hasPending).toBe(false)
    expect(h.agent.session.deriveMessages()).toEqual([])
    expect(h.statuses).toEqual(['running', 'idle'])
  })

  it('(15) a reject stops the driver; later work stays queued', async () => {
    const h = await harness({ script: [textResponse('ok safe'), textResponse('ok wake')] })
    h.agent.ctx.on('agent/pre-step', async (payload, next) => (payload.messages.some((m: UserMessage) => textOf(m) === 'secret') ? { kind: 'reject' } : next()))
    h.send('secret')
    h.send('safe')
    await h.settle()

    expect(ofType(h, 'turn/start')).toHaveLength(1)
    expect(turnEndReasons(h)).toEqual([{ kind: 'blocked' }])
    expect(h.agent.inbox.nextTurn.map(textOf)).toEqual(['safe'])
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.status).toBe('idle')

    h.send('wake')
    await h.settle()
    const first = requestTexts(h.adapter.requests[0])
    expect(first).toContain('safe')
    expect(first).not.toContain('secret')
    expect(userTextsByTurn(h.events())).toEqual([[], ['safe'], ['wake']])
    expect(turnEndReasons(h)).toEqual([{ kind: 'blocked' }, { kind: 'completed' }, { kind: 'completed' }])
  })

  it('(16) a reject after earlier steps ends the turn blocked', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    let forced = false
    h.agent.ctx.on('agent/turn-stopping', ({ agent }: { agent: Agent }) => {
      if (!forced) {
        forced = true
        agent.inject(plugin('more'))
      }
    })
    h.agent.ctx.on('agent/pre-step', async (payload, next) => (payload.step >= 2 ? { kind: 'reject' } : next()))
    h.send('go')
    await h.settle()

    expect(h.adapter.requests).toHaveLength(1)
    expect(boundaries(h)).toEqual(['turn/start', 'step/start', 'step/end', 'turn/end'])
    expect(ofType(h, 'turn/end')[0].data).toEqual({ turn: 1, reason: { kind: 'blocked' } })
  })

  it('(17) an empty first step ends the turn completed with no step', async () => {
    const h = await harness({ script: [] })
    h.agent.ctx.on('agent/pre-step', async () => ({ kind: 'enter', messages: [] }))
    h.send('go')
    await h.settle()

    expect(boundaries(h)).toEqual(['turn/start', 'turn/end'])
    expect(ofType(h, 'turn/end')[0].data).toEqual({ turn: 1, reason: { kind: 'completed' } })
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.inbox.nextTurn).toEqual([])
    expect(ofType(h, 'user/message')).toHaveLength(0)
  })

  it('(18) an empty continuation closes the turn without another step', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    let forced = false
    h.agent.ctx.on('agent/turn-stopping', ({ agent }: { agent: Agent }) => {
      if (!forced) {
        forced = true
        agent.inject(plugin('extra context'))
      }
    })
    h.agent.ctx.on('agent/pre-step', async (payload, next) => (payload.step >= 2 ? { kind: 'enter', messages: [] } : next()))
    h.send('finish once')
    await h.settle()

    expect(forced).toBe(true)
    expect(ofType(h, 'step/start')).toHaveLength(1)
    expect(h.adapter.requests).toHaveLength(1)
    expect(boundaries(h)).toEqual(['turn/start', 'step/start', 'step/end', 'turn/end'])
    expect(ofType(h, 'turn/end')[0].data).toEqual({ turn: 1, reason: { kind: 'completed' } })
    expect(h.agent.inbox.hasPending).toBe(false)
  })

  it('(19) an enter decision may rewrite the messages', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    h.agent.ctx.on('agent/pre-step', async payload => ({
      kind: 'enter',
      messages: [{ ...payload.messages[0], content: [{ type: 'text', text: 'REWRITTEN' }] }],
    }))
    h.send('original text')
    await h.settle()

    const messages = ofType(h, 'user/message')
    expect(messages).toHaveLength(1)
    expect((messages[0].data as UserMessage).content).toEqual([{ type: 'text', text: 'REWRITTEN' }])
    const texts = requestTexts(h.adapter.requests[0])
    expect(texts).toEqual(['REWRITTEN'])
    expect(JSON.stringify(h.adapter.requests[0].messages)).not.toContain('original text')
  })

  it('(20) an enter decision may add context', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    h.agent.ctx.on('agent/pre-step', async (_payload, next) => {
      const decision = await next()
      return decision.kind === 'enter' ? { kind: 'enter', messages: [...decision.messages, plugin('added')] } : decision
    })
    h.send('hello')
    await h.settle()

    const messages = ofType(h, 'user/message').map(event => event.data as UserMessage)
    expect(messages.map(textOf)).toEqual(['hello', 'added'])
    expect(messages[0].source).toEqual({ kind: 'user' })
    expect(messages[1].source).toEqual({ kind: 'plugin', plugin: 'test' })
    expect(requestTexts(h.adapter.requests[0])).toEqual(['hello', 'added'])
  })

  it('(21) a throwing pre-step listener errors the turn without a request', async () => {
    const h = await harness({ script: [] })
    const boom = new Error('prompt hook broke')
    let thrown = false
    h.agent.ctx.on('agent/pre-step', async (_payload, next) => {
      if (!thrown) {
        thrown = true
        throw boom
      }
      return next()
    })
    const errors: any[] = []
    h.agent.ctx.on('agent/error', payload => {
      errors.push(payload)
    })
    h.send('first')
    h.send('second')
    await h.settle()

    expect(errors).toHaveLength(1)
    expect(errors[0].error).toBe(boom)
    expect(errors[0].turn).toBe(1)
    expect(errors[0].step).toBe(0)
    expect(turnEndReasons(h)).toEqual([{ kind: 'error', error: { message: 'prompt hook broke', code: 'UNKNOWN' } }])
    expect(boundaries(h)).toEqual(['turn/start', 'turn/end'])
    expect(h.statuses).toEqual(['running', 'idle'])
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.inbox.nextTurn.map(textOf)).toEqual(['second'])
  })

  it('(22) turn-stopping can force more steps', async () => {
    const h = await harness({ script: [textResponse('1'), textResponse('2'), textResponse('3')] })
    h.agent.ctx.on('agent/turn-stopping', ({ agent }: { agent: Agent }) => {
      if (ofType(h, 'step/end').length < 3) agent.steer(userText('continue'))
    })
    h.send('go')
    await h.settle()

    expect(ofType(h, 'step/start')).toHaveLength(3)
    expect(h.adapter.requests).toHaveLength(3)
    expect(ofType(h, 'turn/start')).toHaveLength(1)
    expect(userTextsByStep(h.events())).toEqual([['go'], ['continue'], ['continue']])
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
  })

  it('(23) concludeTurn ends the turn after one request', async () => {
    let executions = 0
    const h = await harness({
      script: [toolCallResponse('c1', 'finish', {})],
      setup: ctx => {
        ctx.tools.register(
          tool('finish', (_args, exec) => {
            executions++
            exec.concludeTurn()
            return 'finished'
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    expect(executions).toBe(1)
    expect(h.adapter.requests).toHaveLength(1)
    expect(ofType(h, 'tool/result')).toHaveLength(1)
    expect(ofType(h, 'step/start')).toHaveLength(1)
    expect(h.types().slice(-3)).toEqual(['tool/result', 'step/end', 'turn/end'])
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
  })

  it('(24) a conclusion does not swallow steering', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'finish', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          tool('finish', (_args, exec) => {
            exec.concludeTurn()
            ;(exec.agent as Agent).steer(userText('late steering'))
            return 'finished'
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    expect(h.adapter.requests).toHaveLength(2)
    expect(ofType(h, 'turn/end')).toHaveLength(1)
    expect(requestTexts(h.adapter.requests[1])).toContain('late steering')
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
  })

  it('(25) a max-tokens finish surfaces as the turn reason', async () => {
    const h = await harness({ script: [withFinish(textResponse('cut off'), { kind: 'max-tokens' })] })
    h.send('go')
    await h.settle()
    expect(ofType(h, 'turn/end').map(event => event.data)).toEqual([{ turn: 1, reason: { kind: 'max-tokens' } }])
  })

  it('(26) max-tokens is sticky within a turn only', async () => {
    const h = await harness({
      script: [withFinish(textResponse('first half'), { kind: 'max-tokens' }), textResponse('second half'), textResponse('next turn')],
    })
    let forced = false
    h.agent.ctx.on('agent/turn-stopping', ({ agent }: { agent: Agent }) => {
      if (!forced) {
        forced = true
        agent.inject(plugin('continue after truncation'))
      }
    })
    const go = userText('go')
    h.agent.followup(go)
    await h.settle()

    expect(ofType(h, 'step/start')).toHaveLength(2)
    expect(turnEndReasons(h)).toEqual([{ kind: 'max-tokens' }])
    const r2 = h.adapter.requests[1].messages
    expect(r2).toHaveLength(3)
    expect(r2[0]).toEqual(go)
    expect(r2[1]).toEqual({
      id: expect.any(String),
      role: 'assistant',
      content: [{ type: 'text', text: 'first half' }],
      source: { kind: 'model', provider: 'mock', model: 'mock' },
    })
    expect(r2[2].role).toBe('user')
    expect(textOf(r2[2])).toBe('continue after truncation')
    expect(r2[2].source).toEqual({ kind: 'plugin', plugin: 'test' })

    h.send('again')
    await h.settle()
    expect(turnEndReasons(h)).toEqual([{ kind: 'max-tokens' }, { kind: 'completed' }])
  })

  it('(27) truncated tool calls never run', async () => {
    let executions = 0
    const h = await harness({
      script: [withFinish(toolCallResponse('c1', 'echo', { text: 'x' }), { kind: 'max-tokens' })],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'echo',
            description: 'Echo the text.',
            parameters: { type: 'object', properties: { text: { type: 'string' } } },
            execute: () => {
              executions++
              return 'echoed'
            },
          }),
        )
      },
    })
    const go = userText('go')
    h.agent.followup(go)
    await h.settle()

    expect(executions).toBe(0)
    expect(ofType(h, 'tool/call')).toHaveLength(0)
    expect(ofType(h, 'tool/result')).toHaveLength(0)
    expect(ofType(h, 'assistant/message')[0].data).toEqual({
      turn: 1,
      step: 1,
      message: { id: expect.any(String), role: 'assistant', content: [], source: { kind: 'model', provider: 'mock', model: 'mock' } },
      usage: { inputTokens: 10, outputTokens: 5 },
    })
    expect(h.agent.session.deriveMessages()).toEqual([go])
    expect(turnEndReasons(h)).toEqual([{ kind: 'max-tokens' }])
    expect(h.adapter.requests).toHaveLength(1)
  })

  it('(28) an empty successful completion is still anchored', async () => {
    const h = await harness({ script: [[{ type: 'finish', reason: { kind: 'stop' } }]] })
    const go = userText('go')
    h.agent.followup(go)
    await h.settle()

    const [message] = ofType(h, 'assistant/message')
    expect(message.data).toEqual({
      turn: 1,
      step: 1,
      message: { id: expect.any(String), role: 'assistant', content: [], source: { kind: 'model', provider: 'mock', model: 'mock' } },
    })
    expect('usage' in (message.data as object)).toBe(false)
    expect(message.sourceEventSeqs).toHaveLength(1)
    expect(message.sourceEventSeqs).toEqual([ofType(h, 'assistant/chunk')[0].seq])
    expect(h.agent.session.deriveMessages()).toEqual([go])
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])
  })

  it('(29) replay state is pruned in step with dropped blocks', async () => {
    const truncated: StreamChunk[] = [
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text: 'partial answer' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'partial answer' } },
      { type: 'block-start', index: 1, blockType: 'tool-call' },
      { type: 'tool-call-delta', index: 1, id: 'c1', name: 'echo', argumentsDelta: '{"te' },
      { type: 'finish', reason: { kind: 'max-tokens' }, replayState: { response: { responseId: 'resp-1' }, blocks: ['text-meta', 'tool-meta'] } },
    ]
    const h = await harness({ script: [truncated, textResponse('ok')] })
    h.send('go')
    await h.settle()

    const expected = { kind: 'model', provider: 'mock', model: 'mock', replayState: { response: { responseId: 'resp-1' }, blocks: ['text-meta'] } }
    const stored = (ofType(h, 'assistant/message')[0].data as any).message
    expect(stored.source).toEqual(expected)
    expect(stored.content).toEqual([{ type: 'text', text: 'partial answer' }])

    h.send('next')
    await h.settle()
    const replayed = h.adapter.requests[1].messages[1]
    expect(replayed.role).toBe('assistant')
    expect(replayed.source).toEqual(expected)
  })

  it('(30) raw chunks are logged', async () => {
    const h = await harness({ script: [textResponse('abc')] })
    h.send('go')
    await h.settle()

    const chunks = ofType(h, 'assistant/chunk').map(event => (event.data as any).chunk as StreamChunk)
    expect(chunks).toHaveLength(7)
    expect(chunks).toEqual(textResponse('abc'))
    expect(
      chunks
        .filter(chunk => chunk.type === 'text-delta')
        .map(chunk => (chunk as any).text)
        .join(''),
    ).toBe('abc')
    expect(ofType(h, 'assistant/chunk').every(event => (event.data as any).turn === 1 && (event.data as any).step === 1)).toBe(true)
  })

  it('(31) turn numbering continues over a seed', async () => {
    const first = await harness({ script: [textResponse('ok')] })
    first.send('hi')
    await first.settle()
    expect(ofType(first, 'turn/start').map(event => event.data)).toEqual([{ turn: 1 }])

    const h = await harness({ script: [textResponse('again')] })
    const session = Session.create('seeded', first.events())
    const agent = new Agent(h.ctx.agents, h.root, session, Object.freeze({ provider: 'mock', model: 'mock' }))
    agent.followup(userText('more'))
    await agent.idle()

    const starts = session.events.filter(event => event.type === 'turn/start').map(event => event.data)
    expect(starts).toEqual([{ turn: 1 }, { turn: 2 }])
    const ends = session.events.filter(event => event.type === 'turn/end').map(event => event.data)
    expect(ends).toEqual([
      { turn: 1, reason: { kind: 'completed' } },
      { turn: 2, reason: { kind: 'completed' } },
    ])
    expect(h.adapter.requests).toHaveLength(1)
    await agent.dispose()
  })

  it('(32) observer failures cannot change outcomes', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'echo', { text: 'hi' }), textResponse('done'), textResponse('later')],
      setup: ctx => {
        ctx.tools.register(echoTool())
      },
    })
    let throws = 0
    h.ctx.on('session/event', (_session, event) => {
      if (event.type === 'step/end' || event.type === 'turn/start' || event.type === 'turn/end') {
        throws++
        throw new Error(`observer broke on ${event.type}`)
      }
    })
    h.send('go')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(2)
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }])

    h.send('later')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(3)
    expect(turnEndReasons(h)).toEqual([{ kind: 'completed' }, { kind: 'completed' }])
    expect(throws).toBe(2 + 2 + 1 + 2) // turn 1: start, 2 step/ends, end; turn 2: start, step/end, end
    expect(h.statuses).toEqual(['running', 'idle', 'running', 'idle'])
  })

  it('(33) a reentrant append from an observer is rejected and contained', async () => {
    const h = await harness({ script: [textResponse('ok'), textResponse('unexpected')] })
    let nested: unknown
    let fired = false
    h.ctx.on('session/event', (session, event) => {
      if (session !== h.agent.session || fired) return
      if (event.type === 'agent/inbox/spliced' && event.data.inserted.length > 0) {
        fired = true
        try {
          h.send('nested message')
        } catch (error) {
          nested = error
          throw error
        }
      }
    })
    h.send('outer message')
    await h.settle()

    expect(fired).toBe(true)
    expect(nested).toBeInstanceOf(Error)
    expect((nested as Error).message).toMatch(/^session append cannot reenter/)
    expect(ofType(h, 'turn/start')).toHaveLength(1)
    expect(ofType(h, 'user/message').map(event => (event.data as UserMessage).content)).toEqual([[{ type: 'text', text: 'outer message' }]])
    expect(h.adapter.requests).toHaveLength(1)
    expect(h.agent.inbox.hasPending).toBe(false)
  })

  it('(34) sends from the adapter callback or a microtask go to the next turn', async () => {
    for (const via of ['callback', 'microtask'] as const) {
      let h: Harness
      const send = () => h.send(`sent from ${via}`)
      h = await harness({
        script: [
          () => {
            if (via === 'callback') send()
            else queueMicrotask(send)
            return textResponse('first')
          },
          textResponse('second'),
        ],
      })
      h.send('start')
      await h.settle()

      expect(
        ofType(h, 'turn/start').map(event => event.data),
        via,
      ).toEqual([{ turn: 1 }, { turn: 2 }])
      expect(userTextsByTurn(h.events()), via).toEqual([['start'], [`sent from ${via}`]])
      expect(h.adapter.requests, via).toHaveLength(2)
      expect(turnEndReasons(h), via).toEqual([{ kind: 'completed' }, { kind: 'completed' }])
    }
  })
})
