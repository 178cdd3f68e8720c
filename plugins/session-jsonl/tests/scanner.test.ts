import type { SessionEvent } from '@loom/session'
import { describe, expect, it } from 'vitest'
import { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '../src/errors.ts'
import { encodeEvents, encodeHeaderLine } from '../src/format.ts'
import { scanLog } from '../src/scanner.ts'

const LOCATION = '/logs/--proj--/s1/session.jsonl'
const HEADER = encodeHeaderLine({ version: 0, id: 's1', createdAt: 1000, cwd: '/proj' })

function ev(type: string, seq: number, data: unknown = {}): SessionEvent {
  return { type, seq, time: 1000 + seq, data } as unknown as SessionEvent
}
const turnStart = (seq: number, turn = 1) => ev('turn/start', seq, { turn })
const turnEnd = (seq: number, turn = 1) => ev('turn/end', seq, { turn, reason: { kind: 'completed' } })
const stepStart = (seq: number) => ev('step/start', seq, { turn: 1, step: 1 })
const stepEnd = (seq: number) => ev('step/end', seq, { turn: 1, step: 1 })
const chunk = (seq: number, text: string) => ev('assistant/chunk', seq, { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text } })

/** A log of newline-terminated lines (plus an optional torn fragment). */
function log(lines: readonly string[], fragment = ''): string {
  return [HEADER, ...lines].map(line => line + '\n').join('') + fragment
}
const line = (event: SessionEvent) => JSON.stringify(event)
const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

// One complete turn, seqs 0..5.
const TURN_1 = [turnStart(0), stepStart(1), chunk(2, 'a'), chunk(3, 'b'), stepEnd(4), turnEnd(5)]

function scanError(text: string): Error {
  try {
    scanLog(text, LOCATION)
  } catch (err) {
    return err as Error
  }
  throw new Error('expected the scan to throw')
}

describe('scanLog', () => {
  it('reads a clean log, packed rows included', () => {
    const text = log(encodeEvents(TURN_1.concat([turnStart(6, 2), chunk(7, 'x'), chunk(8, 'y'), chunk(9, 'z'), turnEnd(10, 2)])))
    const result = scanLog(text, LOCATION)
    expect(result.header).toEqual({ version: 0, id: 's1', createdAt: 1000, cwd: '/proj' })
    expect(result.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(result.committedBytes).toBe(bytes(text))
  })

  it('a header-only log has no events and commits exactly the header line', () => {
    const result = scanLog(HEADER + '\n', LOCATION)
    expect(result.events).toEqual([])
    expect(result.committedBytes).toBe(bytes(HEADER) + 1)
  })

  it('ignores a torn final fragment', () => {
    const committed = log(TURN_1.map(line).concat([line(turnStart(6, 2)), line(stepStart(7))]))
    const text = committed + '{"type":"assistant/chunk","seq":8,"ti'
    const result = scanLog(text, LOCATION)
    expect(result.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(result.committedBytes).toBe(bytes(committed))
    expect(result.committedBytes).toBeLessThan(bytes(text))
  })

  it('counts committedBytes in UTF-8 bytes, not characters', () => {
    const committed = log([line(turnStart(0)), line(chunk(1, 'héllo — 😀 日本語'))])
    const text = committed + '{"type":"assistant/chunk","data":"ü'
    const result = scanLog(text, LOCATION)
    expect(result.events).toHaveLength(2)
    expect(result.committedBytes).toBe(Buffer.byteLength(committed))
    expect(result.committedBytes).toBeGreaterThan(committed.length)
    // Cutting the raw bytes there leaves exactly the committed text.
    expect(Buffer.from(text).subarray(0, result.committedBytes).toString('utf8')).toBe(committed)
  })

  it('reports the first committed event of an unknown type, and none in the torn tail', () => {
    const types = new Set(['turn/start', 'turn/end', 'step/start', 'step/end', 'assistant/chunk'])
    const known = (type: string) => types.has(type)
    const future = (seq: number, extra: object = {}) => ({ ...ev('future/thing', seq, { x: seq }), ...extra }) as SessionEvent
    expect(scanLog(log(encodeEvents(TURN_1)), LOCATION, known).unknown).toBeUndefined()
    expect(scanLog(log(encodeEvents([...TURN_1, future(6, { ignorable: true })])), LOCATION, known).unknown).toBeUndefined()
    const both = scanLog(log(encodeEvents([...TURN_1, future(6), future(7)])), LOCATION, known)
    expect(both.unknown?.seq).toBe(6)
    expect(both.events).toHaveLength(8)
    // Past a seq gap nothing is committed, so nothing there is reported.
    const tail = scanLog(log([...TURN_1.map(line), line(future(7))]), LOCATION, known)
    expect(tail.unknown).toBeUndefined()
    expect(tail.events).toHaveLength(6)
    // Without the predicate nothing is checked.
    expect(scanLog(log(encodeEvents([...TURN_1, future(6)])), LOCATION).unknown).toBeUndefined()
  })

  describe('damage after the last turn/end is a crash tail', () => {
    it('tolerates a seq gap after the last turn/end, keeping the prefix before it', () => {
      const prefix = log(TURN_1.map(line))
      const text = prefix + line(turnStart(7, 2)) + '\n' + line(stepStart(8)) + '\n'
      const result = scanLog(text, LOCATION)
      expect(result.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
      expect(result.committedBytes).toBe(bytes(prefix))
    })

    it('tolerates a seq gap when there is no turn/end at all', () => {
      const result = scanLog(log([line(turnStart(0)), line(stepStart(1)), line(chunk(3, 'x'))]), LOCATION)
      expect(result.events.map(e => e.seq)).toEqual([0, 1])
    })

    it('tolerates an unparsable line after the last turn/end', () => {
      const prefix = log(TURN_1.map(line).concat(line(turnStart(6, 2))))
      const result = scanLog(prefix + '{"partial\n' + line(stepStart(7)) + '\n', LOCATION)
      expect(result.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
      expect(result.committedBytes).toBe(bytes(prefix))
    })

    it('ignores every line after the first issue, even well-formed contiguous ones', () => {
      const result = scanLog(log([line(turnStart(0)), 'not json', line(stepStart(1)), line(stepStart(2))]), LOCATION)
      expect(result.events.map(e => e.seq)).toEqual([0])
    })

    it('treats a malformed packed row as unparsable', () => {
      const result = scanLog(log([line(turnStart(0)), '{"type":"text-chunks","seq0":1}']), LOCATION)
      expect(result.events.map(e => e.seq)).toEqual([0])
    })
  })

  describe('damage before a committed turn/end is corruption', () => {
    it('throws on a seq gap followed later by a turn/end', () => {
      const err = scanError(log([line(turnStart(0)), line(stepStart(2)), line(stepEnd(3)), line(turnEnd(4))]))
      expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
      expect(err.name).toBe('SessionPersistenceCorruptionError')
      expect(err.message).toMatch(/seq gap in committed region/)
      expect(err.message).toContain('at line 3 (expected 1, got 2)')
      expect(err.message).toContain(`(raw log: ${LOCATION})`)
    })

    it('throws at once when the mismatching row itself contains a turn/end', () => {
      const err = scanError(log([line(turnStart(0)), line(turnEnd(5))]))
      expect(err.message).toMatch(/seq gap in committed region at line 3 \(expected 1, got 5\)/)
    })

    it('throws on a duplicated seq (a replayed batch) before a turn/end', () => {
      expect(scanError(log([line(turnStart(0)), line(stepStart(1)), line(stepStart(1)), line(turnEnd(2))])).message).toMatch(
        /seq gap in committed region at line 4 \(expected 2, got 1\)/,
      )
    })

    it('throws on a corrupt line before a turn/end, naming the corrupt line', () => {
      const err = scanError(log([line(turnStart(0)), line(stepStart(1)), '{"type":"assistant/ch', line(stepEnd(3)), line(turnEnd(4))]))
      expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
      expect(err.message).toMatch(/unparsable committed event at line 4\b/)
    })

    it('looks past ignored packed rows for a later turn/end', () => {
      const rows = encodeEvents([chunk(2, 'a'), chunk(3, 'b'), chunk(4, 'c')])
      expect(rows).toHaveLength(1)
      // Without a later turn/end the damage is a tail; with one it is corruption.
      expect(scanLog(log([line(turnStart(0)), 'garbage', ...rows]), LOCATION).events.map(e => e.seq)).toEqual([0])
      expect(scanError(log([line(turnStart(0)), 'garbage', ...rows, line(turnEnd(5))])).message).toMatch(/unparsable committed event at line 3\b/)
    })
  })

  describe('header rules', () => {
    it('rejects an empty or header-less log', () => {
      expect(scanError('').message).toMatch(/^empty or header-less session log/)
      expect(scanError(HEADER).message).toMatch(/^empty or header-less session log/)
      expect(scanError('\n' + HEADER + '\n').message).toMatch(/^empty or header-less session log/)
    })

    it('rejects a header line that is not JSON or not a session header', () => {
      expect(scanError('{"type":"sess\n').message).toMatch(/^corrupt session log: header line is not valid JSON/)
      expect(scanError(line(turnStart(0)) + '\n').message).toMatch(/^corrupt session log: first line is not a session header/)
      expect(scanError('[]\n').message).toMatch(/^corrupt session log: first line is not a session header/)
    })

    it('rejects invalid header shapes', () => {
      for (const bad of [
        '{"type":"session","version":0,"id":"s1","createdAt":1.5,"delegationDepth":0}',
        '{"type":"session","version":0,"id":"s1","createdAt":-0,"delegationDepth":0}',
        '{"type":"session","version":0,"id":"s1","createdAt":1}',
        '{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":"1"}',
        '{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"agentPreset":false}',
      ]) {
        const err = scanError(bad + '\n')
        expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
        expect(err.message).toMatch(/session header/)
      }
    })

    it('refuses a newer format version before looking at anything else', () => {
      const err = scanError('{"type":"session","version":1,"id":"s1","frames":"zstd"}\n\u0000\u0001binary\n')
      expect(err).toBeInstanceOf(SessionFormatUnsupportedError)
      expect(err.message).toBe(
        `session "s1" uses log format v1, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it (raw log: ${LOCATION})`,
      )
    })
  })
})
