// Session: append, seeds, snapshots and validation (spec §1.4, §1.5, §3.7; contracts 117–120, 124).
import { Context } from '@deepseek-ai/cordis'
import { userText, type UserMessage } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import type { JsonValue, RequestHeader, SessionEvent } from '../src/events.ts'
import { bindPublisher, Session } from '../src/session.ts'
import { SessionStore } from '../src/store.ts'
import { appendToolTurn, assistantData, isDeepFrozen, MODEL, toolResultData } from './helpers.ts'

const twoTurns = () => {
  const session = Session.create('orig')
  appendToolTurn(session, 1)
  appendToolTurn(session, 2)
  return session
}

/** A seed event as a stored log would hold it. */
const raw = (seq: number, type: string, data: unknown, extra: Record<string, unknown> = {}) =>
  ({ type, seq, time: 1000 + seq, data, ...extra }) as unknown as SessionEvent

const header = (over: Partial<RequestHeader['config']> = {}): RequestHeader => ({ config: { ...MODEL, ...over } })

describe('seeds', () => {
  it('replays a seed: same prefix, an end-seed marker, the same history (117)', () => {
    const original = twoTurns()
    const E = original.events
    const n = E.length
    const replay = Session.create('r', [...E])
    expect(replay.events.slice(0, n)).toEqual(E)
    expect(replay.seq).toBe(n + 1)
    expect(replay.firstLiveSeq).toBe(n)
    expect(replay.events.at(-1)).toMatchObject({ type: 'session/end-seed', seq: n, data: {} })
    expect(replay.events.at(-1)!.data).toEqual({})
    expect(replay.deriveMessages()).toEqual(original.deriveMessages())
    expect(replay.surface).toEqual(original.surface)
  })

  it('gives a fresh session no events and an empty seed only the end-seed marker (118)', () => {
    const fresh = Session.create('a')
    expect(fresh.events).toEqual([])
    expect(fresh.firstLiveSeq).toBe(0)
    const empty = Session.create('b', [])
    expect(empty.events).toHaveLength(1)
    expect(empty.events[0]).toMatchObject({ type: 'session/end-seed', seq: 0, data: {} })
    expect(empty.firstLiveSeq).toBe(0)
  })

  it('adds no second marker when a seed already ends with session/end-seed (118)', () => {
    const empty = Session.create('b', [])
    const reopened = Session.create('c', empty.events)
    expect(reopened.events).toEqual(empty.events)
    expect(reopened.firstLiveSeq).toBe(1)
    expect(reopened.seq).toBe(1)
  })

  it('copies seed events rather than keeping the caller objects', () => {
    const seed = [raw(0, 'turn/start', { turn: 1 })]
    const session = Session.create('s', seed)
    expect(session.events[0]).not.toBe(seed[0])
    expect(session.events[0]).toEqual(seed[0])
    expect(Object.isFrozen(seed[0])).toBe(false)
    expect(isDeepFrozen(session.events)).toBe(true)
  })

  it('rejects a seed whose seqs are not contiguous from 0', () => {
    const seed = [raw(0, 'turn/start', { turn: 1 }), raw(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })]
    expect(() => Session.create('s', seed)).toThrow(/seed event at index 1 has seq 2 \(expected 1\); seed must be contiguous from 0/)
    expect(() => Session.create('s', [raw(1, 'turn/start', { turn: 1 })])).toThrow(/index 0 has seq 1 \(expected 0\)/)
  })

  it('rejects seed events with unknown envelope keys', () => {
    expect(() => Session.create('s', [raw(0, 'turn/start', { turn: 1 }, { extra: 1, other: 2 })])).toThrow(
      /seed event at index 0 has unknown envelope keys extra, other/,
    )
  })

  it.each([
    ['no type', { seq: 0, time: 1, data: {} }, /has no type/],
    ['a negative seq', { type: 'turn/start', seq: -1, time: 1, data: {} }, /has an invalid seq/],
    ['a fractional time', { type: 'turn/start', seq: 0, time: 1.5, data: {} }, /has an invalid time/],
    ['no data', { type: 'turn/start', seq: 0, time: 1 }, /has no data/],
    ['ignorable: false', { type: 'turn/start', seq: 0, time: 1, data: {}, ignorable: false }, /invalid ignorable marker/],
    ['a non-object', 'turn/start', /is not an object/],
  ])('rejects a seed event envelope with %s', (_, event, error) => {
    expect(() => Session.create('s', [event as unknown as SessionEvent])).toThrow(error)
  })

  it('accepts an ignorable event of an unknown type in a seed', () => {
    const session = Session.create('s', [raw(0, 'plugin/note', { n: 1 }, { ignorable: true })])
    expect(session.events[0]).toMatchObject({ type: 'plugin/note', ignorable: true })
  })

  const user = userText('hi')
  const assistant = assistantData(1, 1, [{ type: 'text', text: 'ok' }]).message
  const result = toolResultData(1, 1, 'call-1').message
  const block = result.content[0]
  it.each([
    ['user/message', 'an empty message id', { ...user, id: '' }, /message id must be a non-empty string/],
    ['user/message', 'the assistant role', { ...user, role: 'assistant' }, /message role must be "user"/],
    ['user/message', 'a source without kind', { ...user, source: {} }, /message source must have a kind/],
    ['user/message', 'non-array content', { ...user, content: 'hi' }, /message content must be an array/],
    ['assistant/message', 'a non-object data', 'hi', /data is not an object/],
    ['assistant/message', 'the user role', { turn: 1, step: 1, message: { ...assistant, role: 'user' } }, /message role must be "assistant"/],
    ['assistant/message', 'a user source', { turn: 1, step: 1, message: { ...assistant, source: { kind: 'user' } } }, /source must be \{kind: "model"\}/],
    [
      'assistant/message',
      'a source without model',
      { turn: 1, step: 1, message: { ...assistant, source: { kind: 'model', provider: 'p' } } },
      /with a provider and a model/,
    ],
    ['tool/result', 'a user source', { turn: 1, step: 1, message: { ...result, source: { kind: 'user' } } }, /source must be \{kind: "tool", callId\}/],
    ['tool/result', 'two blocks', { turn: 1, step: 1, message: { ...result, content: [block, block] } }, /exactly one tool-result block/],
    ['tool/result', 'a text block', { turn: 1, step: 1, message: { ...result, content: [{ type: 'text', text: 'x' }] } }, /exactly one tool-result block/],
    [
      'tool/result',
      'a mismatched toolCallId',
      { turn: 1, step: 1, message: { ...result, content: [{ ...block, toolCallId: 'other' }] } },
      /toolCallId must equal source.callId/,
    ],
    [
      'tool/result',
      'non-array block content',
      { turn: 1, step: 1, message: { ...result, content: [{ ...block, content: 'x' }] } },
      /block content must be an array/,
    ],
  ])('rejects a seed %s with %s', (type, _, data, error) => {
    const seed = [raw(0, type, data, { surfaceOp: 'append' })]
    expect(() => Session.create('s', seed)).toThrow(new RegExp(`seed event at index 0 \\("${type}"\\) .*${error.source}`))
  })

  it.each([
    ['without provider', { header: { config: { model: 'm' } }, reason: 'initial' }, /needs a non-empty provider and model/],
    ['with an empty model', { header: { config: { provider: 'p', model: '' } }, reason: 'initial' }, /needs a non-empty provider and model/],
    [
      'with an empty reasoningEffort',
      { header: { config: { ...MODEL, reasoningEffort: '' } }, reason: 'initial' },
      /reasoningEffort must be a non-empty string/,
    ],
    [
      'with an adapter default for an unset field',
      { header: { config: MODEL, adapterDefaults: { maxTokens: true } }, reason: 'initial' },
      /adapterDefaults.maxTokens is invalid/,
    ],
    [
      'with an unknown adapter default',
      { header: { config: { ...MODEL, temperature: 1 }, adapterDefaults: { temperature: true } }, reason: 'initial' },
      /adapterDefaults.temperature is invalid/,
    ],
  ])('rejects a seed request/header %s', (_, data, error) => {
    expect(() => Session.create('s', [raw(0, 'request/header', data)])).toThrow(error)
  })

  it('rejects a live request/header without a provider', () => {
    const session = Session.create('s')
    expect(() => session.append('request/header', { header: { config: { model: 'm' } } as RequestHeader, reason: 'initial' })).toThrow(
      /session event "request\/header" header config needs a non-empty provider and model/,
    )
    expect(session.events).toEqual([])
  })

  it('rejects a seed with non-JSON data, naming the event type', () => {
    expect(() => Session.create('s', [raw(0, 'turn/start', { turn: 1n })])).toThrow(/session event "turn\/start" carries non-JSON-serializable data/)
  })

  it('validates the surface of seed events', () => {
    const seed = [raw(0, 'user/message', userText('hi'))]
    expect(() => Session.create('s', seed)).toThrow(/surface-eligible and requires a surfaceOp marker/)
  })

  it('rejects a header whose id is not the session id', () => {
    expect(() => Session.create('a', [], { version: 0, id: 'b', createdAt: 1 })).toThrow(/header id "b" does not match session id "a"/)
  })

  it('synthesizes a frozen header when none is given', () => {
    const before = Date.now()
    const session = Session.create('s')
    expect(session.header).toMatchObject({ version: 0, id: 's' })
    expect(session.header.createdAt).toBeGreaterThanOrEqual(before)
    expect(session.id).toBe('s')
    expect(Object.isFrozen(session.header)).toBe(true)
  })

  it('adopts restored events and header in place, freezing them', () => {
    const events = [raw(0, 'turn/start', { turn: 1 }), raw(1, 'user/message', JSON.parse(JSON.stringify(userText('hi'))), { surfaceOp: 'append' })]
    const meta = { version: 0 as const, id: 'r', createdAt: 5, cwd: '/w' }
    const session = Session.fromRestore('r', events, meta)
    expect(session.events[0]).toBe(events[0])
    expect(session.events[1]).toBe(events[1])
    expect(session.header).toBe(meta)
    expect(isDeepFrozen(events[1])).toBe(true)
    expect(Object.isFrozen(meta)).toBe(true)
    expect(session.events[2]).toMatchObject({ type: 'session/end-seed', seq: 2 })
    expect(session.deriveMessages()[0]).toBe(events[1].data)
  })

  it('freezes each adopted event it hands out, whichever way is asked, and only those', () => {
    const restored = () => [
      raw(0, 'turn/start', { turn: 1 }),
      raw(1, 'request/context', { ...MODEL, contextWindow: 10 }),
      raw(2, 'user/message', JSON.parse(JSON.stringify(userText('hi'))), { surfaceOp: 'append' }),
      raw(3, 'step/start', { turn: 1, step: 1 }),
    ]
    const meta = { version: 0 as const, id: 'r', createdAt: 5 }
    const byMessages = restored()
    expect(isDeepFrozen(Session.fromRestore('r', byMessages, { ...meta }).deriveMessages()[0])).toBe(true)
    expect(byMessages.map(event => Object.isFrozen(event))).toEqual([false, false, false, false])
    const byContext = restored()
    expect(isDeepFrozen(Session.fromRestore('r', byContext, { ...meta }).requestContext())).toBe(true)
    expect(byContext.map(isDeepFrozen)).toEqual([false, false, false, false])
    const byOne = restored()
    const one = Session.fromRestore('r', byOne, { ...meta })
    expect(isDeepFrozen(one.eventAt(1))).toBe(true)
    expect(isDeepFrozen(one.lastOfType('turn/start'))).toBe(true)
    expect(one.eventsOfType('step/start').every(isDeepFrozen)).toBe(true)
    expect(byOne.map(isDeepFrozen)).toEqual([true, true, false, true])
    expect(one.eventsFrom(2).every(isDeepFrozen)).toBe(true)
    expect(byOne.every(isDeepFrozen)).toBe(true)
    const byEvents = restored()
    expect(Session.fromRestore('r', byEvents, { ...meta }).events.every(isDeepFrozen)).toBe(true)
    expect(byEvents.every(isDeepFrozen)).toBe(true)
  })

  it('finds events by type through appends, replacements and seeds, newest first or from a seq on', () => {
    const session = Session.create('t', [raw(0, 'turn/start', { turn: 1 }), raw(1, 'turn/end', { turn: 1, reason: { kind: 'completed' } })])
    expect(session.lastOfType('turn/start')?.seq).toBe(0)
    expect(session.lastOfType('user/message')).toBeUndefined()
    session.append('turn/start', { turn: 2 })
    session.append('user/message', userText('a'), { surfaceOp: 'append' })
    session.append('user/message', userText('b'), { surfaceOp: 'append' })
    expect(session.lastOfType('turn/start')?.data.turn).toBe(2)
    expect(session.eventsOfType('user/message').map(event => event.seq)).toEqual([4, 5])
    expect(session.eventsOfType('user/message', 5).map(event => event.seq)).toEqual([5])
    expect(session.lastOfType('user/message', 5)?.seq).toBe(4)
    expect(session.lastOfType('user/message', 4)).toBeUndefined()
    expect(session.eventsOfType('turn/start').map(event => event.seq)).toEqual([0, 3])
    expect(session.eventAt(2)?.type).toBe('session/end-seed')
    expect(session.eventAt(99)).toBeUndefined()
    expect(session.eventsFrom(4).map(event => event.seq)).toEqual([4, 5])
    expect(session.eventsFrom(4)).toEqual(session.events.slice(4))
  })

  it('projects a restored history with replacements once, as live appends would', () => {
    const live = Session.create('r')
    appendToolTurn(live, 1)
    appendToolTurn(live, 2)
    const turn1 = live.surface.nodes.slice(0, 3)
    live.append('user/message', userText('summary'), { surfaceOp: { op: 'replace', start: turn1[0], end: turn1[2] }, sourceEventSeqs: turn1 })
    appendToolTurn(live, 3)
    const restored = Session.fromRestore('r', JSON.parse(JSON.stringify(live.events)), JSON.parse(JSON.stringify(live.header)))
    expect(restored.deriveMessages()).toEqual(live.deriveMessages())
    expect(restored.surface).toEqual({ ...live.surface, replaceGeneration: 1 })
  })

  it('still validates restored events', () => {
    expect(() => Session.fromRestore('r', [raw(1, 'turn/start', { turn: 1 })], { version: 0, id: 'r', createdAt: 1 })).toThrow(/seed must be contiguous from 0/)
  })
})

describe('append', () => {
  it('assigns dense seqs from 0 and tracks the next seq', () => {
    const session = Session.create('s')
    expect(session.seq).toBe(0)
    const seqs = Object.values(appendToolTurn(session, 1))
    expect(seqs).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(session.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(session.seq).toBe(8)
  })

  it('stamps the append time', () => {
    const session = Session.create('s')
    const before = Date.now()
    const event = session.append('turn/start', { turn: 1 })
    expect(event.time).toBeGreaterThanOrEqual(before)
    expect(event.time).toBeLessThanOrEqual(Date.now())
  })

  it('stores a deep-frozen event whose data is a copy of the caller object', () => {
    const session = Session.create('s')
    const data = { id: 'm1', role: 'user' as const, source: { kind: 'user' as const }, content: [{ type: 'text' as const, text: 'hi' }] }
    const sources = [0]
    session.append('turn/start', { turn: 1 })
    const event = session.append('user/message', data, { surfaceOp: 'append', sourceEventSeqs: sources })
    expect(event.data).not.toBe(data)
    expect(event.data).toEqual(data)
    expect(event.sourceEventSeqs).not.toBe(sources)
    expect(isDeepFrozen(event)).toBe(true)
    expect(Object.isFrozen(data)).toBe(false)
    data.content[0].text = 'changed'
    sources.push(99)
    expect((event.data.content[0] as { text: string }).text).toBe('hi')
    expect(event.sourceEventSeqs).toEqual([0])
    expect(session.events[1]).toBe(event)
  })

  it('keeps the events snapshot until the next append, and freezes it', () => {
    const session = Session.create('s')
    session.append('turn/start', { turn: 1 })
    const first = session.events
    expect(session.events).toBe(first)
    expect(Object.isFrozen(first)).toBe(true)
    expect(() => (first as SessionEvent[]).push(first[0])).toThrow(TypeError)
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    const second = session.events
    expect(second).not.toBe(first)
    expect(first).toHaveLength(1)
    expect(second).toHaveLength(2)
    expect(second[0]).toBe(first[0])
  })

  it('requires a surfaceOp marker on a surface event (120)', () => {
    const session = Session.create('s')
    session.append('turn/start', { turn: 1 })
    const append = session.append as (type: string, data: unknown) => unknown
    expect(() => append.call(session, 'user/message', userText('hi'))).toThrow(/surface-eligible and requires a surfaceOp marker/)
    expect(session.events).toHaveLength(1)
    expect(session.seq).toBe(1)
  })

  describe('JSON guard (119)', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    class Box {
      value = 1
    }
    const decorated = Object.assign([1, 2], { extra: true })
    it.each([
      ['a bigint', 1n],
      ['a function', () => 1],
      ['a symbol', Symbol('x')],
      ['a Map', new Map([[1, 2]])],
      ['undefined', undefined],
      ['Infinity', Infinity],
      ['a sparse array', [1, , 3]], // eslint-disable-line no-sparse-arrays
      ['an array holding a bigint', [1, 2n, 3]],
      ['a nested function', { deep: { fn: () => 1 } }],
      ['a cycle', cycle],
      ['-0', -0],
      ['NaN', NaN],
      ['a Set', new Set([1])],
      ['a Date', new Date(0)],
      ['a class instance', new Box()],
      ['a decorated array', decorated],
    ])('rejects %s and keeps the log empty', (_, value) => {
      const session = Session.create('s')
      const data = { ...userText('hi'), extra: value } as UserMessage
      expect(() => session.append('user/message', data, { surfaceOp: 'append' })).toThrow(/session event "user\/message" carries non-JSON-serializable data/)
      expect(session.events).toEqual([])
      expect(session.seq).toBe(0)
      expect(session.surface.nodes).toEqual([])
    })
  })

  it('names the offending path in the JSON error', () => {
    const session = Session.create('s')
    expect(() => session.append('user/message', { ...userText('hi'), extra: { list: [1, 2n] } } as UserMessage, { surfaceOp: 'append' })).toThrow(
      /a value of type bigint at \/extra\/list\/1/,
    )
  })

  it('rejects non-JSON surface metadata, naming the event type', () => {
    const session = Session.create('s')
    expect(() => session.append('user/message', userText('hi'), { surfaceOp: 'append', sourceEventSeqs: [NaN] })).toThrow(
      /session event "user\/message" carries non-JSON-serializable surface metadata/,
    )
    expect(session.events).toEqual([])
  })

  it('accepts null-prototype objects and reads each getter once', () => {
    const session = Session.create('s')
    const meta = Object.assign(Object.create(null) as { [key: string]: JsonValue }, { a: 1 })
    let reads = 0
    const data = { ...toolResultData(1, 1, 'c'), meta }
    Object.defineProperty(meta, 'b', { enumerable: true, get: () => ++reads })
    const event = session.append('tool/result', data, { surfaceOp: 'append' })
    expect(reads).toBe(1)
    expect(event.data.meta).toEqual({ a: 1, b: 1 })
  })

  it('rejects the legacy request/header-delta type on append and in a seed (124)', () => {
    const session = Session.create('s')
    const append = session.append as (type: string, data: unknown) => unknown
    expect(() => append.call(session, 'request/header-delta', { delta: {} })).toThrow(/unsupported legacy request\/header-delta format/)
    expect(session.events).toEqual([])
    expect(() => Session.create('t', [raw(0, 'request/header-delta', { delta: {} })])).toThrow(/unsupported legacy request\/header-delta format/)
  })

  it('rejects a request/header with reason "fallback" on append and in a seed (124)', () => {
    const session = Session.create('s')
    const data = { header: header(), reason: 'fallback' } as unknown as { header: RequestHeader; reason: 'initial' }
    expect(() => session.append('request/header', data)).toThrow(/unsupported request\/header reason "fallback"/)
    expect(session.events).toEqual([])
    expect(() => Session.create('t', [raw(0, 'request/header', data)])).toThrow(/reason "fallback"/)
  })
})

describe('request header and context', () => {
  it('are undefined before any request event', () => {
    const session = Session.create('s')
    expect(session.requestHeader()).toBeUndefined()
    expect(session.requestContext()).toBeUndefined()
  })

  it('requestHeader() follows the latest request/header, canonical and frozen', () => {
    const session = Session.create('s')
    session.append('request/header', { header: { ...header(), system: '', tools: [] }, reason: 'initial' })
    const first = session.requestHeader()
    expect(first).toEqual({ config: MODEL })
    expect(isDeepFrozen(first)).toBe(true)
    const tools = [{ name: 't', description: 'd', parameters: {} }]
    session.append('request/header', { header: { ...header({ model: 'm2' }), system: 'be brief', tools }, reason: 'change' })
    expect(session.requestHeader()).toEqual({ config: { ...MODEL, model: 'm2' }, system: 'be brief', tools })
    expect(isDeepFrozen(session.requestHeader())).toBe(true)
    session.append('turn/start', { turn: 1 })
    expect(session.requestHeader()!.config.model).toBe('m2')
  })

  it('requestContext() follows the latest request/context and is frozen', () => {
    const session = Session.create('s')
    session.append('request/context', { ...MODEL, contextWindow: 1000 })
    session.append('request/context', { provider: 'p2', model: 'm2' })
    expect(session.requestContext()).toEqual({ provider: 'p2', model: 'm2' })
    expect(Object.isFrozen(session.requestContext())).toBe(true)
  })

  it('are rebuilt from a seed', () => {
    const seed = [
      raw(0, 'request/header', { header: { ...header(), system: '' }, reason: 'initial' }),
      raw(1, 'request/context', { ...MODEL, contextWindow: 10 }),
    ]
    const session = Session.create('s', seed)
    expect(session.requestHeader()).toEqual({ config: MODEL })
    expect(session.requestContext()).toEqual({ ...MODEL, contextWindow: 10 })
  })
})

describe('publication', () => {
  it('refuses a reentrant append from a session/event listener', async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    const fiber = await root.plugin({ name: 'host', inject: ['sessions'], apply() {} })
    const ctx = fiber.ctx
    const session = ctx.sessions.create('s')
    const caught: unknown[] = []
    ctx.on('session/event', (s, event) => {
      if (event.type !== 'turn/start') return
      try {
        s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      } catch (error) {
        caught.push(error)
      }
    })
    session.append('turn/start', { turn: 1 })
    expect(caught).toHaveLength(1)
    expect(String(caught[0])).toMatch(/session append cannot reenter while another append is being published/)
    expect(session.events.map(e => e.type)).toEqual(['turn/start'])
    // Once the publication is over, appending works again.
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    expect(session.events.map(e => e.seq)).toEqual([0, 1])
  })

  it('refuses a reentrant append from the bound publisher itself', () => {
    const session = Session.create('s')
    const caught: unknown[] = []
    const published: number[] = []
    bindPublisher(session, (s, event) => {
      published.push(event.seq)
      try {
        s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      } catch (error) {
        caught.push(error)
      }
    })
    const event = session.append('turn/start', { turn: 1 })
    expect(String(caught[0])).toMatch(/cannot reenter while another append is being published/)
    expect(published).toEqual([0])
    expect(session.events).toEqual([event])
  })
})
