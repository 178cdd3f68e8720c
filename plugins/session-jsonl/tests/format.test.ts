import type { SessionEvent, SessionHeader } from '@loom/session'
import { describe, expect, it } from 'vitest'
import { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '../src/errors.ts'
import { decodeRecord, encodeEvents, encodeHeaderLine, parseHeaderRecord } from '../src/format.ts'

const LOCATION = '/logs/--proj--/s1/session.jsonl'

function rawHeader(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'session', version: 0, id: 's1', createdAt: 1000, cwd: '/proj', delegationDepth: 0, ...overrides }
}

function without(record: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy = { ...record }
  delete copy[key]
  return copy
}

let nextTime = 1_000
function ev(type: string, seq: number, data: unknown, extra: Record<string, unknown> = {}): SessionEvent {
  nextTime += 7
  return { type, seq, time: nextTime, data, ...extra } as unknown as SessionEvent
}
function text(seq: number, t: string, opts: { time?: number; kind?: 'text-delta' | 'reasoning-delta'; index?: number; step?: number } = {}): SessionEvent {
  return {
    type: 'assistant/chunk',
    seq,
    time: opts.time ?? seq * 10,
    data: { turn: 1, step: opts.step ?? 1, chunk: { type: opts.kind ?? 'text-delta', index: opts.index ?? 0, text: t } },
  } as unknown as SessionEvent
}
function toolDelta(seq: number, args: string, opts: { id?: string; name?: string; time?: number } = {}): SessionEvent {
  const chunk: Record<string, unknown> = { type: 'tool-call-delta', index: 1, id: opts.id ?? 'call-1' }
  if (opts.name !== undefined) chunk.name = opts.name
  chunk.argumentsDelta = args
  return { type: 'assistant/chunk', seq, time: opts.time ?? seq * 10, data: { turn: 1, step: 1, chunk } } as unknown as SessionEvent
}

function roundTrip(events: readonly SessionEvent[], packChunks = true): { lines: string[]; decoded: SessionEvent[] } {
  const lines = encodeEvents(events, { packChunks })
  const decoded = lines.flatMap(line => decodeRecord(JSON.parse(line)))
  return { lines, decoded }
}

function expectByteIdentical(decoded: readonly SessionEvent[], original: readonly SessionEvent[]): void {
  expect(decoded.map(e => JSON.stringify(e))).toEqual(original.map(e => JSON.stringify(e)))
}

function tags(lines: readonly string[]): string[] {
  return lines.map(line => (JSON.parse(line) as { type: string }).type)
}

describe('header encoding', () => {
  it('writes the keys in the fixed order with type session and delegationDepth 0 for top level', () => {
    const header: SessionHeader = {
      agentPreset: 'coder',
      origin: 'subagent',
      seedLength: 4,
      parentSession: 'p',
      cwd: '/proj',
      createdAt: 5,
      id: 's1',
      version: 0,
      delegationDepth: 2,
    }
    expect(encodeHeaderLine(header)).toBe(
      '{"type":"session","version":0,"id":"s1","createdAt":5,"cwd":"/proj","parentSession":"p","seedLength":4,"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}',
    )
    expect(encodeHeaderLine({ version: 0, id: 'top', createdAt: 0 })).toBe('{"type":"session","version":0,"id":"top","createdAt":0,"delegationDepth":0}')
  })

  it('round-trips through parseHeaderRecord', () => {
    const top: SessionHeader = { version: 0, id: 'top', createdAt: 12, cwd: '/w' }
    expect(parseHeaderRecord(JSON.parse(encodeHeaderLine(top)), LOCATION)).toEqual(top)
    const child: SessionHeader = {
      version: 0,
      id: 'c',
      createdAt: 12,
      parentSession: 'top',
      seedLength: 3,
      origin: 'subagent',
      delegationDepth: 1,
      agentPreset: 'x',
    }
    const parsed = parseHeaderRecord(JSON.parse(encodeHeaderLine(child)), LOCATION)
    expect(parsed).toEqual(child)
    expect(Object.keys(parsed)).toEqual(['version', 'id', 'createdAt', 'parentSession', 'seedLength', 'origin', 'delegationDepth', 'agentPreset'])
  })

  it('refuses to write a header the reader would refuse', () => {
    expect(() => encodeHeaderLine({ version: 0, id: 's', createdAt: -1 })).toThrow(/session header/)
    expect(() => encodeHeaderLine({ version: 0, id: 's', createdAt: 1, delegationDepth: 1.5 })).toThrow(/session header/)
    expect(() => encodeHeaderLine({ version: 1 as 0, id: 's', createdAt: 1 })).toThrow(/session header/)
  })
})

describe('header validation (contract 133)', () => {
  const invalid: [string, Record<string, unknown>][] = [
    ['createdAt 1.5', rawHeader({ createdAt: 1.5 })],
    ['createdAt -1', rawHeader({ createdAt: -1 })],
    ['createdAt -0', rawHeader({ createdAt: -0 })],
    ['createdAt unsafe', rawHeader({ createdAt: 2 ** 53 })],
    ['createdAt missing', without(rawHeader(), 'createdAt')],
    ['delegationDepth missing', without(rawHeader(), 'delegationDepth')],
    ["delegationDepth '1'", rawHeader({ delegationDepth: '1' })],
    ['delegationDepth 1.5', rawHeader({ delegationDepth: 1.5 })],
    ['delegationDepth -1', rawHeader({ delegationDepth: -1 })],
    ['delegationDepth -0', rawHeader({ delegationDepth: -0 })],
    ['agentPreset non-string', rawHeader({ agentPreset: 7 })],
    ['origin other than subagent', rawHeader({ origin: 'user' })],
    ['retired sandboxMode', rawHeader({ sandboxMode: 'workspace-write' })],
    ['retired approvalPolicy', rawHeader({ approvalPolicy: 'never' })],
    ['id missing', without(rawHeader(), 'id')],
    ['version missing', without(rawHeader(), 'version')],
    ['version non-number', rawHeader({ version: '0' })],
  ]
  it.each(invalid)('rejects %s', (_name, record) => {
    let error: unknown
    try {
      parseHeaderRecord(record, LOCATION)
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect((error as Error).message).toMatch(/session header/)
    expect((error as Error).message).toContain(`(raw log: ${LOCATION})`)
  })

  it('-0 survives JSON.parse, so a raw line with -0 is rejected too', () => {
    expect(() => parseHeaderRecord(JSON.parse('{"type":"session","version":0,"id":"s","createdAt":-0,"delegationDepth":0}'), LOCATION)).toThrow(
      /session header/,
    )
    expect(() => parseHeaderRecord(JSON.parse('{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":-0}'), LOCATION)).toThrow(
      /session header/,
    )
  })

  it('rejects records that are not session headers', () => {
    expect(() => parseHeaderRecord({ type: 'turn/start', seq: 0 }, LOCATION)).toThrow(/first line is not a session header/)
    expect(() => parseHeaderRecord([1], LOCATION)).toThrow(/first line is not a session header/)
  })

  it('accepts a valid header, tolerating unknown fields', () => {
    expect(parseHeaderRecord(rawHeader({ future: true, createdAt: 0 }), LOCATION)).toEqual({ version: 0, id: 's1', createdAt: 0, cwd: '/proj' })
  })
})

describe('version refusal (contract 139)', () => {
  function refusal(record: Record<string, unknown>): SessionFormatUnsupportedError {
    try {
      parseHeaderRecord(record, LOCATION)
    } catch (err) {
      expect(err).toBeInstanceOf(SessionFormatUnsupportedError)
      return err as SessionFormatUnsupportedError
    }
    throw new Error('expected a refusal')
  }

  it('refuses a newer version with the upgrade message', () => {
    const err = refusal(rawHeader({ version: 1 }))
    expect(err.name).toBe('SessionFormatUnsupportedError')
    expect(err.message).toBe(
      `session "s1" uses log format v1, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it (raw log: ${LOCATION})`,
    )
    expect(err.location).toBe(LOCATION)
  })

  it('refuses an older version with the no-upgrade-path message', () => {
    expect(refusal(rawHeader({ version: -1 })).message).toMatch(
      /^session "s1" uses log format v-1, .*older than the supported v0, and this build ships no upgrade path for it \(raw log: /,
    )
  })

  it('checks the version before the shape: a future header with a foreign shape is unsupported, not corrupt', () => {
    const err = refusal({ type: 'session', version: 2, id: 's1', createdAt: 'yesterday', sandboxMode: 'x', layout: { frames: true } })
    expect(err.message).toMatch(/uses log format v2, but this harness reads only v0/)
  })
})

describe('packed chunk rows', () => {
  it('packs a run of 3+ text deltas into one row and decodes it byte-identically', () => {
    const events = [text(0, 'He'), text(1, 'll'), text(2, 'o'), text(3, '!')]
    const { lines, decoded } = roundTrip(events)
    expect(lines).toEqual(['{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[10,10,10],"texts":["He","ll","o","!"]}}'])
    expectByteIdentical(decoded, events)
  })

  it('packs reasoning and tool-call deltas (with and without name)', () => {
    const reasoning = [0, 1, 2].map(i => text(i, `r${i}`, { kind: 'reasoning-delta' }))
    const named = [3, 4, 5].map(i => toolDelta(i, `{${i}`, { name: 'read' }))
    const unnamed = [6, 7, 8].map(i => toolDelta(i, `${i}}`))
    const events = [...reasoning, ...named, ...unnamed]
    const { lines, decoded } = roundTrip(events)
    expect(tags(lines)).toEqual(['reasoning-chunks', 'tool-call-chunks', 'tool-call-chunks'])
    expect(JSON.parse(lines[1]).data).toEqual({ turn: 1, step: 1, index: 1, id: 'call-1', name: 'read', dt: [10, 10], args: ['{3', '{4', '{5'] })
    expect(JSON.parse(lines[2]).data).not.toHaveProperty('name')
    expectByteIdentical(decoded, events)
  })

  it('leaves runs of 2 verbatim', () => {
    const events = [text(0, 'a'), text(1, 'b'), ev('step/end', 2, { turn: 1, step: 1 }), text(3, 'c'), text(4, 'd')]
    const { lines, decoded } = roundTrip(events)
    expect(lines).toEqual(events.map(e => JSON.stringify(e)))
    expectByteIdentical(decoded, events)
  })

  it('splits runs at a change of kind, index, step, tool id or name presence', () => {
    const events = [
      text(0, 'a'),
      text(1, 'b'),
      text(2, 'c'),
      ...[3, 4, 5, 6].map(seq => text(seq, 'r', { kind: 'reasoning-delta' })),
      text(7, 'i1', { index: 1 }),
      text(8, 'i1'),
      text(9, 'x', { step: 2 }),
      text(10, 'y', { step: 2 }),
      text(11, 'z', { step: 2 }),
      toolDelta(12, 'a'),
      toolDelta(13, 'b'),
      toolDelta(14, 'c', { id: 'call-2' }),
      toolDelta(15, 'd', { id: 'call-2', name: 'n' }),
    ]
    const { lines, decoded } = roundTrip(events)
    expect(tags(lines)).toEqual([
      'text-chunks',
      'reasoning-chunks',
      'assistant/chunk',
      'assistant/chunk',
      'text-chunks',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
      'assistant/chunk',
    ])
    expectByteIdentical(decoded, events)
  })

  it('alternating kinds never pack', () => {
    const events = [0, 1, 2, 3, 4, 5].map(i => text(i, 't', { kind: i % 2 ? 'reasoning-delta' : 'text-delta' }))
    const { lines, decoded } = roundTrip(events)
    expect(tags(lines).every(t => t === 'assistant/chunk')).toBe(true)
    expectByteIdentical(decoded, events)
  })

  it('keeps negative and zero time gaps exactly', () => {
    const events = [text(0, 'a', { time: 500 }), text(1, 'b', { time: 480 }), text(2, 'c', { time: 480 }), text(3, 'd', { time: 10_000 })]
    const { lines, decoded } = roundTrip(events)
    expect(JSON.parse(lines[0]).data.dt).toEqual([-20, 0, 9520])
    expectByteIdentical(decoded, events)
  })

  it('does not pack chunks whose exact shape it could not rebuild', () => {
    const reordered = [0, 1, 2].map(i => ({
      seq: i,
      type: 'assistant/chunk',
      time: i,
      data: { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } },
    }))
    const extraKey = [0, 1, 2].map(i => ({ ...(text(i, 'x') as object), ignorable: true }))
    const chunkKeyOrder = [0, 1, 2].map(i => ({
      type: 'assistant/chunk',
      seq: i,
      time: i,
      data: { turn: 1, step: 1, chunk: { index: 0, type: 'text-delta', text: 'x' } },
    }))
    const fractionalTime = [0, 1, 2].map(i => text(i, 'x', { time: i + 0.5 }))
    const gap = [text(0, 'a'), text(1, 'b'), text(3, 'c')]
    for (const events of [reordered, extraKey, chunkKeyOrder, fractionalTime, gap] as unknown as SessionEvent[][]) {
      const { lines, decoded } = roundTrip(events)
      expect(lines).toEqual(events.map(e => JSON.stringify(e)))
      expectByteIdentical(decoded, events)
    }
  })

  it('writes everything verbatim with packChunks: false', () => {
    const events = [text(0, 'a'), text(1, 'b'), text(2, 'c')]
    const { lines, decoded } = roundTrip(events, false)
    expect(lines).toEqual(events.map(e => JSON.stringify(e)))
    expectByteIdentical(decoded, events)
  })

  it('round-trips a realistic mixed log', () => {
    const events: SessionEvent[] = [
      ev('turn/start', 0, { turn: 1 }),
      ev('user/message', 1, { id: 'u1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' }),
      ev('step/start', 2, { turn: 1, step: 1 }),
      text(3, 'Hé', { time: 2000 }),
      text(4, 'llo 😀', { time: 2003 }),
      text(5, '\n"q"', { time: 2001 }),
      ev(
        'assistant/message',
        6,
        {
          turn: 1,
          step: 1,
          message: { id: 'a1', role: 'assistant', content: [{ type: 'text', text: 'Héllo 😀\n"q"' }], source: { kind: 'model', provider: 'p', model: 'm' } },
        },
        { surfaceOp: 'append' },
      ),
      ev('step/end', 7, { turn: 1, step: 1 }),
      ev('turn/end', 8, { turn: 1, reason: { kind: 'completed' } }),
    ]
    const { lines, decoded } = roundTrip(events)
    expect(lines).toHaveLength(7)
    expectByteIdentical(decoded, events)
  })
})

describe('decodeRecord', () => {
  const goodText = { type: 'text-chunks', seq0: 4, time0: 100, data: { turn: 1, step: 1, index: 0, dt: [1], texts: ['a', 'b'] } }
  const goodTool = { type: 'tool-call-chunks', seq0: 4, time0: 100, data: { turn: 1, step: 1, index: 0, id: 'c', dt: [1], args: ['a', 'b'] } }

  it('expands a row (any key order) into its events', () => {
    const reordered = { data: { texts: ['a', 'b'], dt: [1], index: 0, step: 1, turn: 1 }, time0: 100, seq0: 4, type: 'text-chunks' }
    for (const row of [goodText, reordered]) {
      expect(decodeRecord(row).map(e => JSON.stringify(e))).toEqual([
        '{"type":"assistant/chunk","seq":4,"time":100,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}',
        '{"type":"assistant/chunk","seq":5,"time":101,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}}',
      ])
    }
  })

  const malformed: [string, unknown][] = [
    ['text-chunks', { ...goodText, extra: 1 }],
    ['text-chunks', { ...goodText, seq0: -1 }],
    ['text-chunks', { ...goodText, seq0: '4' }],
    ['text-chunks', { ...goodText, time0: 1.5 }],
    ['text-chunks', { ...goodText, data: null }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, dt: [] } }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, dt: [1.5] } }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, texts: [], dt: [] } }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, texts: ['a', 3] } }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, turn: 'x' } }],
    ['text-chunks', { ...goodText, data: { ...goodText.data, name: 'n' } }],
    ['reasoning-chunks', { ...goodText, type: 'reasoning-chunks', data: { ...goodText.data, args: ['a', 'b'] } }],
    ['tool-call-chunks', { ...goodTool, data: { ...goodTool.data, id: 5 } }],
    ['tool-call-chunks', { ...goodTool, data: { ...goodTool.data, name: null } }],
    ['tool-call-chunks', { ...goodText, type: 'tool-call-chunks' }],
    ['tool-call-chunks', { ...goodTool, time0: Number.MAX_SAFE_INTEGER, data: { ...goodTool.data, dt: [1] } }],
  ]
  it.each(malformed)('rejects a malformed %s row', (tag, row) => {
    expect(() => decodeRecord(row)).toThrow(new RegExp(`^malformed ${tag} storage row: `))
  })

  it('passes verbatim events through and rejects non-event records', () => {
    const event = { type: 'future/thing', seq: 3, time: 1, data: { x: 1 }, ignorable: true }
    expect(decodeRecord(event)).toEqual([event])
    expect(() => decodeRecord(null)).toThrow(/malformed storage record/)
    expect(() => decodeRecord([])).toThrow(/malformed storage record/)
    expect(() => decodeRecord({ seq: 1, time: 1, data: {} })).toThrow(/malformed storage record/)
    expect(() => decodeRecord({ type: 'turn/start', seq: '1', time: 1, data: {} })).toThrow(/malformed storage record/)
    expect(() => decodeRecord({ type: 'turn/start', seq: 1, data: {} })).toThrow(/malformed storage record/)
    expect(() => decodeRecord({ type: 'turn/start', seq: 1, time: 1 })).toThrow(/malformed storage record/)
  })
})
