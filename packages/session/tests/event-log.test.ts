// The log of a session: an adopted prefix, never copied or changed, then its appends.
import { describe, expect, it } from 'vitest'
import { EventLog } from '../src/event-log.ts'
import type { SessionEvent } from '../src/events.ts'

const event = (seq: number) => ({ type: 'turn/start', seq, time: 0, data: { turn: seq } }) as SessionEvent

describe('EventLog', () => {
  // Not frozen: a log that pushed onto it or changed it would show here.
  const prefix = [0, 1, 2].map(event)
  const log = new EventLog(prefix)
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
    for (const from of [0, 1, 3, 4, 5, 9]) expect(log.slice(from).map(e => e.seq)).toEqual([0, 1, 2, 3, 4].slice(from))
    expect(log.slice()).not.toBe(prefix)
  })

  it('leaves the adopted array as it was', () => {
    expect(prefix.map(e => e.seq)).toEqual([0, 1, 2])
  })
})
