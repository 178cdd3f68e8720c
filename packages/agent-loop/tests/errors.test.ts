// Errors and recovery: spec section 5.4 (contracts 68–79), plus adapter failures
// that must leave a consistent log.
import { LlmError, userText, type StreamChunk } from '@loom/llm'
import type { SessionEvent } from '@loom/session'
import { defineTool } from '@loom/tools'
import { describe, expect, it } from 'vitest'
import { harness, MockAdapter, textResponse, toolCallResponse } from './harness.ts'
import { collect, danglingToolCalls, finishWith, logProblems, ofType, rawToolCall, textChunks, turnEndReasons } from './failure-kit.ts'

type ErrorPayload = { turn: number; step: number; error: unknown }

/** Makes `session.append(type, …)` throw `error` the first time `type` is appended. */
function vetoOnce(h: { agent: { session: { append: (...args: any[]) => SessionEvent } } }, type: string, error: unknown) {
  const session = h.agent.session
  const original = session.append.bind(session)
  let vetoed = 0
  session.append = (kind: string, ...rest: any[]) => {
    if (kind === type && !vetoed++) throw error
    return original(kind, ...rest)
  }
}

describe('errors and recovery (5.4)', () => {
  it('a finish-error chunk ends the turn with that exact failure (68)', async () => {
    const failure = { message: 'provider 401', code: 'AUTH', status: 401, providerRetryAfterMs: 2000, requestId: 'finish-request-1' }
    const h = await harness({ script: [[finishWith('error', failure)]] })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    h.send('hi')
    await h.settle()

    const events = h.events()
    expect(events.at(-1)!.type).toBe('turn/end')
    expect((events.at(-1)!.data as any).reason).toEqual({ kind: 'error', error: failure })
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ turn: 1, step: 1 })
    expect(errors[0].error).toBeInstanceOf(LlmError)
    expect((errors[0].error as LlmError).failure).toEqual(failure)
    expect(ofType(events, 'assistant/message')).toEqual([])
    const chunks = ofType(events, 'assistant/chunk')
    expect(chunks.map(event => (event.data as any).chunk)).toEqual([finishWith('error', failure)])
    expect(logProblems(events)).toEqual([])
  })

  it('a finish-aborted chunk without a user cancel is an error, not an abort (69)', async () => {
    const h = await harness({ script: [[finishWith('aborted', { message: 'model stream aborted', code: 'ABORTED' })]] })
    h.send('hi')
    await h.settle()

    expect(turnEndReasons(h.events())).toEqual([{ kind: 'error', error: { message: 'model stream aborted', code: 'ABORTED' } }])
  })

  it('a section that changes on its own under the error check ends the turn with code PROMPT_UNSTABLE, naming it', async () => {
    let tick = 0
    const h = await harness({
      script: [toolCallResponse('c1', 'noop', {}), textResponse('never reached')],
      prompt: { stabilityCheck: 'error' },
      setup: ctx => {
        ctx.systemPrompt.section({ name: 'clock:now', order: 10, text: () => `tick ${++tick}` })
        ctx.tools.register(defineTool({ name: 'noop', description: 'Does nothing.', parameters: { type: 'object', properties: {} }, execute: () => 'ok' }))
      },
    })
    h.send('hi')
    await h.settle()

    // The second step's assembly is the first that can tell: the turn ends there, before its request.
    expect(h.adapter.requests).toHaveLength(1)
    const [reason] = turnEndReasons(h.events()) as { kind: 'error'; error: { message: string; code: string } }[]
    expect(reason.error.code).toBe('PROMPT_UNSTABLE')
    expect(reason.error.message).toMatch(/^prompt section "clock:now" \(plugin "[^"]+", static\) changed between two assemblies with no registration change/)
  })

  it('an adapter throw becomes an LlmError with code UNKNOWN (70)', async () => {
    const h = await harness({ script: [] })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    h.send('hi')
    await h.settle()

    expect(errors).toHaveLength(1)
    expect(errors[0].error).toBeInstanceOf(LlmError)
    expect((errors[0].error as LlmError).failure).toEqual({ message: 'MockAdapter: script exhausted', code: 'UNKNOWN' })
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'error', error: { message: 'MockAdapter: script exhausted', code: 'UNKNOWN' } }])
  })

  it('a request-error listener retries in place, in the same step (71)', async () => {
    const h = await harness({
      script: [
        () => {
          throw new LlmError('rate limited', 'RATE_LIMIT')
        },
        () => {
          throw new LlmError('overloaded', 'SERVICE_UNAVAILABLE')
        },
        textResponse('ok'),
      ],
    })
    const seen: unknown[] = []
    h.agent.ctx.on('agent/request-error', payload => {
      seen.push({ turn: payload.turn, step: payload.step, code: payload.failure.code, mode: payload.retryPolicy?.mode })
      return { kind: 'retry' }
    })
    h.send('hi')
    await h.settle()

    expect(seen).toEqual([
      { turn: 1, step: 1, code: 'RATE_LIMIT', mode: 'normal' },
      { turn: 1, step: 1, code: 'SERVICE_UNAVAILABLE', mode: 'normal' },
    ])
    expect(h.adapter.requests).toHaveLength(3)
    expect(ofType(h.events(), 'turn/start')).toHaveLength(1)
    expect(ofType(h.events(), 'step/start')).toHaveLength(1)
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'completed' }])
    expect(h.statuses).toEqual(['running', 'idle'])
  })

  it('a retry discards the failed attempt: one message, citing only the retry (72)', async () => {
    const h = await harness({
      script: [[...textChunks('doomed partial').slice(0, 2), finishWith('error', { message: 'connection reset', code: 'NETWORK' })], textResponse('recovered')],
    })
    h.agent.ctx.on('agent/request-error', () => ({ kind: 'retry' }))
    h.send('hi')
    await h.settle()

    const events = h.events()
    const messages = ofType(events, 'assistant/message')
    expect(messages).toHaveLength(1)
    expect((messages[0].data as any).message.content).toEqual([{ type: 'text', text: 'recovered' }])
    expect(messages[0].data).not.toHaveProperty('interrupted')
    const chunks = ofType(events, 'assistant/chunk')
    const doomed = chunks.find(event => (event.data as any).chunk.text === 'doomed partial')!
    const failed = chunks.find(event => (event.data as any).chunk.type === 'finish' && (event.data as any).chunk.reason.kind === 'error')!
    expect(doomed).toBeDefined()
    expect(messages[0].sourceEventSeqs).not.toContain(doomed.seq)
    expect(messages[0].sourceEventSeqs).toEqual(chunks.filter(event => event.seq > failed.seq).map(event => event.seq))
    expect(turnEndReasons(events)).toEqual([{ kind: 'completed' }])
  })

  it('a cancel in the request-error listener beats its retry (73)', async () => {
    const h = await harness({ script: [[finishWith('error', { message: 'rate limited', code: 'RATE_LIMIT' })], textResponse('never')] })
    h.agent.ctx.on('agent/request-error', () => {
      h.agent.cancel({ kind: 'user' })
      return { kind: 'retry' }
    })
    h.send('hi')
    await h.settle()

    expect(h.adapter.requests).toHaveLength(1)
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'aborted', reason: { kind: 'user' } }])
  })

  it('a failing or silent request-error listener leaves the failure terminal (74)', async () => {
    const failure = { message: 'rate limited', code: 'RATE_LIMIT' }
    const throwing = await harness({ script: [[finishWith('error', failure)], textResponse('never')] })
    throwing.agent.ctx.on('agent/request-error', () => {
      throw new Error('recovery failed')
    })
    throwing.send('hi')
    await throwing.settle()
    expect(throwing.adapter.requests).toHaveLength(1)
    expect(turnEndReasons(throwing.events())).toEqual([{ kind: 'error', error: { message: 'recovery failed', code: 'UNKNOWN' } }])

    const silent = await harness({ script: [[finishWith('error', failure)], textResponse('never')] })
    silent.agent.ctx.on('agent/request-error', () => undefined)
    silent.send('hi')
    await silent.settle()
    expect(silent.adapter.requests).toHaveLength(1)
    expect(turnEndReasons(silent.events())).toEqual([{ kind: 'error', error: failure }])
  })

  it('a failing agent/request middleware is not a request error (75)', async () => {
    const h = await harness({ script: [textResponse('never')] })
    let requestErrors = 0
    h.agent.ctx.on('agent/request-error', (_payload, next) => (requestErrors++, next()))
    h.agent.ctx.on('agent/request', () => {
      throw new LlmError('middleware failed', 'MIDDLEWARE')
    })
    h.send('hi')
    await h.settle()

    expect(requestErrors).toBe(0)
    expect(h.adapter.requests).toHaveLength(0)
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'error', error: { message: 'middleware failed', code: 'MIDDLEWARE' } }])
  })

  it('a coded plugin error keeps its code in the turn end (76)', async () => {
    const h = await harness({ script: [textResponse('never')] })
    h.agent.ctx.on('agent/request', () => {
      throw new LlmError('server overloaded', 'RATE_LIMIT')
    })
    h.send('hi')
    await h.settle()

    expect((h.events().at(-1)!.data as any).reason.error).toEqual({ message: 'server overloaded', code: 'RATE_LIMIT' })
  })

  it('a non-Error throw is recorded as [object Object] with code UNKNOWN (77)', async () => {
    const h = await harness({ script: [textResponse('never')] })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    const thrown = { code: 500 }
    h.agent.ctx.on('agent/request', () => {
      throw thrown
    })
    h.send('hi')
    await h.settle()

    expect(turnEndReasons(h.events())).toEqual([{ kind: 'error', error: { message: '[object Object]', code: 'UNKNOWN' } }])
    expect(errors.map(payload => payload.error)).toEqual([thrown])
    expect(errors[0].error).toBe(thrown)
  })

  it('a failed turn/start append reports once and claims nothing (78)', async () => {
    const h = await harness({ script: [textResponse('never'), textResponse('never')] })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    vetoOnce(h as any, 'turn/start', 'naked string error')
    h.send('first')
    h.send('second')
    await h.settle()

    expect(errors).toHaveLength(1)
    expect(errors[0].error).toBe('naked string error')
    expect(errors[0]).toMatchObject({ turn: 0, step: 0 })
    const types = h.types()
    expect(types).not.toContain('turn/start')
    expect(types).not.toContain('turn/end')
    expect(types).not.toContain('user/message')
    expect(h.agent.inbox.nextTurn).toHaveLength(2)
    expect(h.adapter.requests).toHaveLength(0)
    expect(h.agent.status).toBe('idle')
  })

  it('a failed turn/end append is contained: reported, and the driver reaches idle (79)', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    vetoOnce(h as any, 'turn/end', new Error('reject turn end'))
    h.send('hi')
    await h.settle()

    expect(errors.map(payload => (payload.error as Error).message)).toEqual(['reject turn end'])
    expect(h.agent.status).toBe('idle')
    expect(h.statuses).toEqual(['running', 'idle'])
    expect(h.adapter.requests).toHaveLength(1)
  })

  it('an adapter failure mid-turn ends the turn with the error and leaves a consistent log', async () => {
    const h = await harness({
      script: [
        toolCallResponse('c1', 'echo', { text: 'ping' }),
        // Step 2: text, a half tool call, then the connection dies.
        async function* (): AsyncIterable<StreamChunk> {
          yield* textChunks('let me call again')
          yield* rawToolCall('c2', 'echo', '{"text":"po').slice(0, 2)
          throw new Error('connection reset')
        },
      ],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'echo',
            description: 'Echo the text.',
            parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
            execute: (args: { text: string }) => `echo: ${args.text}`,
          }),
        )
      },
    })
    const errors = collect<ErrorPayload>(h.agent, 'agent/error')
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(h.adapter.requests).toHaveLength(2)
    expect(events.at(-1)!.type).toBe('turn/end')
    expect(turnEndReasons(events)).toEqual([{ kind: 'error', error: { message: 'connection reset', code: 'UNKNOWN' } }])
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ turn: 1, step: 2 })
    expect((errors[0].error as LlmError).failure).toEqual({ message: 'connection reset', code: 'UNKNOWN' })
    expect(logProblems(events)).toEqual([])
    expect(ofType(events, 'step/start')).toHaveLength(2)
    expect(ofType(events, 'tool/call').map(event => (event.data as any).callId)).toEqual(['c1'])
    expect(ofType(events, 'tool/result').map(event => (event.data as any).message.source.callId)).toEqual(['c1'])
    expect(ofType(events, 'assistant/message')).toHaveLength(1)
    expect(danglingToolCalls(h.agent.session.deriveMessages())).toEqual([])

    // A model that cannot even be resolved fails the turn the same, balanced way.
    const broken = new MockAdapter([textResponse('never')])
    broken.resolveModel = async () => {
      throw new LlmError('bad key', 'AUTH')
    }
    const h2 = await harness({
      agent: { provider: 'broken', model: 'm' },
      setup: ctx => {
        ctx.llm.registerAdapter(['broken'], broken)
      },
    })
    h2.send('hi')
    await h2.settle()
    expect(broken.requests).toHaveLength(0)
    expect(h2.events().at(-1)!.type).toBe('turn/end')
    expect(turnEndReasons(h2.events())).toEqual([{ kind: 'error', error: { message: 'bad key', code: 'AUTH' } }])
    expect(logProblems(h2.events())).toEqual([])
    expect(h2.agent.status).toBe('idle')
    h2.agent.followup(userText('again'))
    await h2.settle()
    expect(ofType(h2.events(), 'turn/start')).toHaveLength(2)
  })
})
