// Request header helpers: canonicalHeader, headerEquals, foldRequestHeader (spec §1.7; contract 123).
import type { LlmCallConfig, ToolSchema } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import { lastEventOfType, type RequestHeader, type SessionEvent } from '../src/events.ts'
import { canonicalHeader, foldRequestHeader, headerEquals } from '../src/header.ts'
import { Session } from '../src/session.ts'

const config: LlmCallConfig = { provider: 'p', model: 'm' }
const tool = (name: string, description = name): ToolSchema => ({ name, description, parameters: { type: 'object' } })
const h = (over: Partial<RequestHeader> = {}, cfg: Partial<LlmCallConfig> = {}): RequestHeader => ({ config: { ...config, ...cfg }, ...over })

describe('canonicalHeader (123)', () => {
  it('drops an empty system text and an empty tool list', () => {
    expect(canonicalHeader({ config, system: '', tools: [] })).toEqual({ config })
    expect(Object.keys(canonicalHeader({ config, system: '', tools: [] }))).toEqual(['config'])
  })

  it('keeps a non-empty system text and tool list', () => {
    const tools = [tool('a')]
    expect(canonicalHeader({ config, system: 'sys', tools })).toEqual({ config, system: 'sys', tools })
  })

  it('keeps adapterDefaults only when a marker is true', () => {
    expect(canonicalHeader({ config, adapterDefaults: {} })).toEqual({ config })
    const withEffort = h({ adapterDefaults: { reasoningEffort: true } }, { reasoningEffort: 'high' })
    expect(canonicalHeader(withEffort).adapterDefaults).toEqual({ reasoningEffort: true })
    const withBoth = h({ adapterDefaults: { reasoningEffort: true, maxTokens: true } }, { reasoningEffort: 'high', maxTokens: 10 })
    expect(canonicalHeader(withBoth).adapterDefaults).toEqual({ reasoningEffort: true, maxTokens: true })
  })
})

describe('headerEquals', () => {
  it('equals itself and a structurally equal header', () => {
    const a = h({ system: 's', tools: [tool('a')] }, { temperature: 0.5, stop: ['x'] })
    expect(headerEquals(a, structuredClone(a))).toBe(true)
  })

  it.each<[string, Partial<LlmCallConfig>, Partial<LlmCallConfig>]>([
    ['provider', { provider: 'p' }, { provider: 'q' }],
    ['model', { model: 'm' }, { model: 'n' }],
    ['reasoningEffort', { reasoningEffort: 'low' }, { reasoningEffort: 'high' }],
    ['reasoningEffort presence', {}, { reasoningEffort: 'low' }],
    ['temperature', { temperature: 0 }, { temperature: 1 }],
    ['maxTokens', { maxTokens: 10 }, { maxTokens: 11 }],
  ])('tells headers apart by config %s', (_, a, b) => {
    expect(headerEquals(h({}, a), h({}, b))).toBe(false)
  })

  it('compares stop arrays element-wise', () => {
    expect(headerEquals(h({}, { stop: ['a', 'b'] }), h({}, { stop: ['a', 'b'] }))).toBe(true)
    expect(headerEquals(h({}, { stop: ['a', 'b'] }), h({}, { stop: ['b', 'a'] }))).toBe(false)
    expect(headerEquals(h({}, { stop: ['a'] }), h({}, { stop: ['a', 'b'] }))).toBe(false)
  })

  it('tells an absent stop list from an empty one', () => {
    expect(headerEquals(h(), h({}, { stop: [] }))).toBe(false)
    expect(headerEquals(h({}, { stop: [] }), h({}, { stop: [] }))).toBe(true)
  })

  it('compares both adapterDefaults markers', () => {
    const cfg = { reasoningEffort: 'low', maxTokens: 5 }
    expect(headerEquals(h({ adapterDefaults: { reasoningEffort: true } }, cfg), h({}, cfg))).toBe(false)
    expect(headerEquals(h({ adapterDefaults: { maxTokens: true } }, cfg), h({}, cfg))).toBe(false)
    expect(headerEquals(h({ adapterDefaults: { maxTokens: true } }, cfg), h({ adapterDefaults: { reasoningEffort: true } }, cfg))).toBe(false)
    expect(headerEquals(h({ adapterDefaults: {} }, cfg), h({}, cfg))).toBe(true)
    expect(headerEquals(h({ adapterDefaults: { maxTokens: true } }, cfg), h({ adapterDefaults: { maxTokens: true } }, cfg))).toBe(true)
  })

  it('compares the system text', () => {
    expect(headerEquals(h({ system: 'a' }), h({ system: 'a' }))).toBe(true)
    expect(headerEquals(h({ system: 'a' }), h({ system: 'b' }))).toBe(false)
    expect(headerEquals(h({ system: 'a' }), h())).toBe(false)
  })

  it('treats an absent tool list as equal to an empty one (123)', () => {
    expect(headerEquals(h(), h({ tools: [] }))).toBe(true)
    expect(headerEquals(h({ tools: [] }), h())).toBe(true)
  })

  it('compares tools in order (123)', () => {
    expect(headerEquals(h({ tools: [tool('a'), tool('b')] }), h({ tools: [tool('a'), tool('b')] }))).toBe(true)
    expect(headerEquals(h({ tools: [tool('a'), tool('b')] }), h({ tools: [tool('b'), tool('a')] }))).toBe(false)
    expect(headerEquals(h({ tools: [tool('a')] }), h({ tools: [tool('a'), tool('b')] }))).toBe(false)
  })

  it('tools whose fields are the very same values are equal; one field apart, they differ', () => {
    const parameters = { type: 'object', properties: { x: { type: 'string' } } }
    const a = { name: 'a', description: 'one', parameters }
    expect(headerEquals(h({ tools: [a] }), h({ tools: [{ ...a }] }))).toBe(true)
    expect(headerEquals(h({ tools: [a] }), h({ tools: [{ ...a, description: 'two' }] }))).toBe(false)
    expect(headerEquals(h({ tools: [a] }), h({ tools: [{ ...a, parameters: { ...parameters, required: ['x'] } }] }))).toBe(false)
    expect(headerEquals(h({ tools: [a] }), h({ tools: [{ ...a, extra: 1 } as typeof a] }))).toBe(false)
  })

  it('compares each tool in full', () => {
    expect(headerEquals(h({ tools: [tool('a', 'one')] }), h({ tools: [tool('a', 'two')] }))).toBe(false)
    const other = { ...tool('a'), parameters: { type: 'object', required: ['x'] } }
    expect(headerEquals(h({ tools: [tool('a')] }), h({ tools: [other] }))).toBe(false)
  })
})

describe('foldRequestHeader', () => {
  const log = (...headers: RequestHeader[]): readonly SessionEvent[] => {
    const session = Session.create('s')
    session.append('turn/start', { turn: 1 })
    headers.forEach((header, i) => session.append('request/header', { header, reason: i ? 'change' : 'initial' }))
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    return session.events
  }

  it('returns the canonical header of the last request/header', () => {
    const events = log(h({ system: 'first' }), h({ system: '', tools: [] }, { model: 'second' }))
    expect(foldRequestHeader(events)).toEqual({ config: { provider: 'p', model: 'second' } })
  })

  it('prefers a logged header over the fallback', () => {
    expect(foldRequestHeader(log(h({ system: 'logged' })), h({ system: 'from' }))).toEqual(h({ system: 'logged' }))
  })

  it('returns the fallback, as given, when no header was logged', () => {
    const from = h({ system: '' })
    expect(foldRequestHeader(log(), from)).toBe(from)
    expect(foldRequestHeader([], from)).toBe(from)
  })

  it('returns undefined without a logged header or a fallback', () => {
    expect(foldRequestHeader(log())).toBeUndefined()
  })
})

describe('lastEventOfType', () => {
  it('returns the last event of the type, narrowed, or undefined', () => {
    const session = Session.create('s')
    session.append('turn/start', { turn: 1 })
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    session.append('turn/start', { turn: 2 })
    session.append('turn/end', { turn: 2, reason: { kind: 'blocked' } })
    expect(lastEventOfType(session.events, 'turn/start')?.data.turn).toBe(2)
    expect(lastEventOfType(session.events, 'turn/end')?.data.reason).toEqual({ kind: 'blocked' })
    expect(lastEventOfType(session.events, 'request/header')).toBeUndefined()
    expect(lastEventOfType([], 'turn/end')).toBeUndefined()
  })
})
