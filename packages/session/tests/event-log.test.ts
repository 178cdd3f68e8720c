// The log of a session: an adopted prefix, in blocks, never copied or changed, then its appends.
import { describe, expect, it } from 'vitest'
import { appendToBlocks, EVENT_BLOCK, EventLog, joinBlocks } from '../src/event-log.ts'
import type { SessionEvent } from '../src/events.ts'

const event = (seq: number) => ({ type: 'turn/start', seq, time: 0, data: { turn: seq } }) as SessionEvent
const events = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => event(from + k))
const seqs = (list: readonly SessionEvent[]) => list.map(e => e.seq)

describe('EventLog', () => {
  // Not frozen: a log that pushed onto it or changed it would show here.
  const prefix = events(0, 3)
  const log = new EventLog([prefix])
  log.push(event(3))
  log.push(event(4))

  it('reads each seq from the prefix or the appends, and nothing past the end', () => {
    expect(log.length).toBe(5)
    expect([0, 1, 2, 3, 4].map(seq => log.get(seq)?.seq)).toEqual([0, 1, 2, 3, 4])
    expect(log.get(2)).toBe(prefix[2])
    expect(log.get(5)).toBeUndefined()
    expect(log.get(-1)).toBeUndefined()
  })

  it('slices from any seq into a new array', () => {
    for (const from of [0, 1, 3, 4, 5, 9]) expect(seqs(log.slice(from))).toEqual([0, 1, 2, 3, 4].slice(from))
    expect(log.slice()).not.toBe(prefix)
  })

  it('leaves the adopted array as it was', () => {
    expect(seqs(prefix)).toEqual([0, 1, 2])
  })

  it('reads a prefix of several blocks by seq, across their edges', () => {
    const blocks = [events(0, EVENT_BLOCK), events(EVENT_BLOCK, 2 * EVENT_BLOCK), events(2 * EVENT_BLOCK, 2 * EVENT_BLOCK + 5)]
    const long = new EventLog(blocks)
    long.push(event(2 * EVENT_BLOCK + 5))
    expect(long.length).toBe(2 * EVENT_BLOCK + 6)
    for (const seq of [0, EVENT_BLOCK - 1, EVENT_BLOCK, 2 * EVENT_BLOCK - 1, 2 * EVENT_BLOCK, 2 * EVENT_BLOCK + 5]) expect(long.get(seq)?.seq).toBe(seq)
    expect(long.get(EVENT_BLOCK)).toBe(blocks[1][0])
    expect(long.get(2 * EVENT_BLOCK + 6)).toBeUndefined()
    expect(long.get(-1)).toBeUndefined()
    for (const from of [0, 1, EVENT_BLOCK - 1, EVENT_BLOCK, 2 * EVENT_BLOCK + 3]) {
      expect(seqs(long.slice(from))).toEqual(Array.from({ length: 2 * EVENT_BLOCK + 6 - from }, (_, k) => from + k))
    }
    expect(blocks.map(block => block.length)).toEqual([EVENT_BLOCK, EVENT_BLOCK, 5])
  })

  it('refuses blocks that are not full before the last, which seqs could not find', () => {
    expect(() => new EventLog([events(0, 3), events(3, 5)])).toThrow(/event block 0 holds 3 events; every block but the last holds 4096/)
  })
})

describe('blocks', () => {
  it('appends events after blocks, sharing the full ones and filling the last', () => {
    const blocks = [events(0, EVENT_BLOCK), events(EVENT_BLOCK, EVENT_BLOCK + 2)]
    const appended = appendToBlocks(blocks, events(EVENT_BLOCK + 2, 2 * EVENT_BLOCK + 1))
    expect(appended.map(block => block.length)).toEqual([EVENT_BLOCK, EVENT_BLOCK, 1])
    expect(appended[0]).toBe(blocks[0])
    expect(seqs(joinBlocks(appended))).toEqual(Array.from({ length: 2 * EVENT_BLOCK + 1 }, (_, k) => k))
    // The blocks given are left as they were.
    expect(blocks.map(block => block.length)).toEqual([EVENT_BLOCK, 2])
    expect(appendToBlocks(blocks, [])).toBe(blocks)
    expect(seqs(joinBlocks(appendToBlocks([], events(0, 2))))).toEqual([0, 1])
    expect(appendToBlocks([events(0, EVENT_BLOCK)], [event(EVENT_BLOCK)]).map(block => block.length)).toEqual([EVENT_BLOCK, 1])
    expect(appendToBlocks([[]], events(0, 2)).map(block => block.length)).toEqual([2])
  })

  it('joins blocks into a new array', () => {
    const one = events(0, 2)
    expect(joinBlocks([one])).not.toBe(one)
    expect(seqs(joinBlocks([one]))).toEqual([0, 1])
  })
})
