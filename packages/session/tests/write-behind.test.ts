// SessionWriteBehind: batching window, failure pause and flush barrier (spec §3.2, contract 136).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { SessionEvent } from '../src/events.ts'
import { SessionWriteBehind } from '../src/write-behind.ts'

const ev = (seq: number): SessionEvent => ({ type: 'turn/start', seq, time: 0, data: { turn: 1 } })

interface PendingWrite {
  seqs: number[]
  resolve: () => void
  reject: (error: unknown) => void
}

/**
 * A write-behind over a recording `write`. By default writes succeed at once; `hold()` makes the next
 * write wait for a manual `resolve`/`reject`, `failNext(err)` makes it reject at once.
 */
function harness(maxDelayMs?: number) {
  const written: number[][] = []
  const attempts: number[][] = []
  const held: PendingWrite[] = []
  const plan: Array<'hold' | { fail: unknown }> = []
  const reported: unknown[] = []
  const write = vi.fn((batch: readonly SessionEvent[]): Promise<void> => {
    const seqs = batch.map(e => e.seq)
    attempts.push(seqs)
    const step = plan.shift()
    if (step === 'hold') {
      return new Promise<void>((resolve, reject) => {
        held.push({
          seqs,
          resolve: () => {
            written.push(seqs)
            resolve()
          },
          reject,
        })
      })
    }
    if (step) return Promise.reject(step.fail)
    written.push(seqs)
    return Promise.resolve()
  })
  const wb = new SessionWriteBehind({
    ...(maxDelayMs === undefined ? {} : { maxDelayMs }),
    write,
    reportBackgroundFailure: error => {
      reported.push(error)
    },
  })
  return {
    wb,
    write,
    written,
    attempts,
    held,
    reported,
    hold: () => {
      plan.push('hold')
    },
    failNext: (error: unknown) => {
      plan.push({ fail: error })
    },
  }
}

/** Advances fake time to the absolute instant `t` (ms since the test started), running microtasks. */
async function at(t: number) {
  const now = Date.now() - start
  if (t < now) throw new Error(`cannot go back in time: ${t} < ${now}`)
  await vi.advanceTimersByTimeAsync(t - now)
}

let start = 0
beforeEach(() => {
  vi.useFakeTimers()
  start = Date.now()
})
afterEach(() => {
  vi.useRealTimers()
})

describe('SessionWriteBehind window (contract 136)', () => {
  it('writes nothing at t=199 and one batch [0,1] at t=200 for enqueues at 0 and 150', async () => {
    const h = harness(200)
    h.wb.enqueue(ev(0))
    await at(150)
    h.wb.enqueue(ev(1))
    await at(199)
    expect(h.written).toEqual([])
    expect(h.wb.pending).toBe(2)
    await at(200)
    expect(h.written).toEqual([[0, 1]])
    expect(h.wb.pending).toBe(0)
    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(1)
  })

  it('defaults maxDelayMs to 200', async () => {
    const h = harness()
    h.wb.enqueue(ev(0))
    await at(199)
    expect(h.written).toEqual([])
    await at(200)
    expect(h.written).toEqual([[0]])
  })

  it('20 events enqueued 10 ms apart form one 20-event batch at t=200 (later events do not reset the deadline)', async () => {
    const h = harness(200)
    for (let i = 0; i < 20; i++) {
      await at(i * 10)
      h.wb.enqueue(ev(i))
    }
    await at(199)
    expect(h.written).toEqual([])
    await at(200)
    expect(h.written).toEqual([Array.from({ length: 20 }, (_, i) => i)])
  })

  it('two concurrent flush() calls return the same promise and write once', async () => {
    const h = harness(200)
    h.wb.enqueue(ev(0))
    h.wb.enqueue(ev(1))
    const a = h.wb.flush()
    const b = h.wb.flush()
    expect(a).toBe(b)
    await a
    expect(h.written).toEqual([[0, 1]])
    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(1)
  })

  it('after a failed background write nothing retries on its own; the next enqueue restarts the window and [0,1] is written at its deadline', async () => {
    const h = harness(200)
    const boom = new Error('disk full')
    h.failNext(boom)
    h.wb.enqueue(ev(0))
    await at(200)
    expect(h.attempts).toEqual([[0]])
    expect(h.written).toEqual([])
    expect(h.reported).toEqual([boom])
    expect(h.wb.pending).toBe(1)

    await at(5000)
    expect(h.write).toHaveBeenCalledTimes(1)

    h.wb.enqueue(ev(1))
    await at(5199)
    expect(h.write).toHaveBeenCalledTimes(1)
    await at(5200)
    expect(h.written).toEqual([[0, 1]])
    expect(h.reported).toHaveLength(1)
    expect(h.wb.pending).toBe(0)
  })
})

describe('SessionWriteBehind failures', () => {
  it('puts a failed batch back at the head, ahead of events enqueued during the write (order preserved)', async () => {
    const h = harness(200)
    h.hold()
    h.wb.enqueue(ev(0))
    h.wb.enqueue(ev(1))
    await at(200)
    expect(h.held.map(w => w.seqs)).toEqual([[0, 1]])
    h.wb.enqueue(ev(2))
    h.wb.enqueue(ev(3))
    await at(250)
    h.held[0]!.reject(new Error('EIO'))
    await at(260)
    expect(h.reported).toHaveLength(1)
    expect(h.wb.pending).toBe(4)

    // Paused: the tail's own timer (deadline 450) does not write either.
    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(1)

    h.wb.enqueue(ev(4))
    await at(1200)
    expect(h.written).toEqual([[0, 1, 2, 3, 4]])
  })

  it('reports each failed background write once and keeps pausing after repeated failures', async () => {
    const h = harness(200)
    h.failNext(new Error('first'))
    h.failNext(new Error('second'))
    h.wb.enqueue(ev(0))
    await at(200)
    h.wb.enqueue(ev(1))
    await at(400)
    expect(h.attempts).toEqual([[0], [0, 1]])
    expect(h.reported.map(e => (e as Error).message)).toEqual(['first', 'second'])
    await at(2000)
    expect(h.write).toHaveBeenCalledTimes(2)
    await h.wb.flush()
    expect(h.written).toEqual([[0, 1]])
  })

  it('a write that throws synchronously is treated like a rejected write', async () => {
    const reported: unknown[] = []
    let calls = 0
    const batches: number[][] = []
    const wb = new SessionWriteBehind({
      write: batch => {
        calls++
        if (calls === 1) throw new Error('sync')
        batches.push(batch.map(e => e.seq))
        return Promise.resolve()
      },
      reportBackgroundFailure: error => {
        reported.push(error)
      },
    })
    wb.enqueue(ev(0))
    await at(200)
    expect(reported).toHaveLength(1)
    expect(wb.pending).toBe(1)
    await wb.flush()
    expect(batches).toEqual([[0]])
  })
})

describe('SessionWriteBehind flush', () => {
  it('resolves at once with nothing queued, without writing', async () => {
    const h = harness(200)
    await h.wb.flush()
    expect(h.write).not.toHaveBeenCalled()
  })

  it('writes events enqueued during the flush before resolving, and cancels the window timer', async () => {
    const h = harness(200)
    h.hold()
    h.wb.enqueue(ev(0))
    await at(50)
    let resolved = false
    const flushed = h.wb.flush().then(() => {
      resolved = true
    })
    await at(60)
    expect(h.held.map(w => w.seqs)).toEqual([[0]])
    h.wb.enqueue(ev(1))
    h.wb.enqueue(ev(2))
    h.held[0]!.resolve()
    await flushed
    expect(resolved).toBe(true)
    expect(h.written).toEqual([[0], [1, 2]])
    expect(h.wb.pending).toBe(0)
    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(2)
  })

  it('rejects when its write fails, keeps the batch pending without reporting, and a later flush writes it', async () => {
    const h = harness(200)
    const boom = new Error('ENOSPC')
    h.failNext(boom)
    h.wb.enqueue(ev(0))
    h.wb.enqueue(ev(1))
    await expect(h.wb.flush()).rejects.toBe(boom)
    expect(h.wb.pending).toBe(2)
    expect(h.reported).toEqual([])

    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(1)

    await h.wb.flush()
    expect(h.written).toEqual([[0, 1]])
    expect(h.wb.pending).toBe(0)
  })

  it('after a failed flush a new enqueue restarts the window for old and new events', async () => {
    const h = harness(200)
    h.failNext(new Error('ENOSPC'))
    h.wb.enqueue(ev(0))
    await expect(h.wb.flush()).rejects.toThrow('ENOSPC')
    await at(100)
    h.wb.enqueue(ev(1))
    await at(299)
    expect(h.written).toEqual([])
    await at(300)
    expect(h.written).toEqual([[0, 1]])
  })

  it('an event enqueued after a flush starts a fresh timer (the cancelled window does not fire)', async () => {
    const h = harness(200)
    h.wb.enqueue(ev(0))
    await at(100)
    await h.wb.flush()
    expect(h.written).toEqual([[0]])
    await at(150)
    h.wb.enqueue(ev(1))
    await at(200)
    expect(h.written).toEqual([[0]])
    await at(349)
    expect(h.written).toEqual([[0]])
    await at(350)
    expect(h.written).toEqual([[0], [1]])
  })

  it('waits for the active background write and ignores its failure, then writes the returned batch', async () => {
    const h = harness(200)
    h.hold()
    h.wb.enqueue(ev(0))
    await at(200)
    h.wb.enqueue(ev(1))
    const flushed = h.wb.flush()
    expect(h.write).toHaveBeenCalledTimes(1)
    h.held[0]!.reject(new Error('background'))
    await flushed
    expect(h.reported).toHaveLength(1)
    expect(h.written).toEqual([[0, 1]])
    expect(h.wb.pending).toBe(0)
    // Not paused any more: the next event gets a normal window.
    await at(300)
    h.wb.enqueue(ev(2))
    await at(500)
    expect(h.written).toEqual([[0, 1], [2]])
  })
})

describe('SessionWriteBehind deadline during an active write', () => {
  it('starts the next batch as soon as the active write finishes when the tail deadline already expired', async () => {
    const h = harness(200)
    h.hold()
    h.wb.enqueue(ev(0))
    await at(200)
    expect(h.attempts).toEqual([[0]])
    await at(250)
    h.wb.enqueue(ev(1)) // its own deadline: 450
    await at(500)
    expect(h.attempts).toEqual([[0]])
    h.held[0]!.resolve()
    await at(500)
    expect(h.written).toEqual([[0], [1]])
  })

  it('an unexpired tail keeps its own timer after the active write finishes', async () => {
    const h = harness(200)
    h.hold()
    h.wb.enqueue(ev(0))
    await at(200)
    await at(250)
    h.wb.enqueue(ev(1)) // deadline 450
    await at(300)
    h.held[0]!.resolve()
    await at(449)
    expect(h.written).toEqual([[0]])
    await at(450)
    expect(h.written).toEqual([[0], [1]])
  })
})

describe('SessionWriteBehind enqueue and close', () => {
  it("enqueue stores a copy: mutating the caller's event afterwards does not change what is written", async () => {
    const batches: SessionEvent[][] = []
    const wb = new SessionWriteBehind({
      write: async batch => {
        batches.push([...batch])
      },
      reportBackgroundFailure: () => {},
    })
    const event = { type: 'turn/start' as const, seq: 0, time: 0, data: { turn: 1 } }
    wb.enqueue(event)
    event.seq = 99
    event.data.turn = 42
    await wb.flush()
    expect(batches).toEqual([[ev(0)]])
    expect(batches[0]![0]).not.toBe(event)
  })

  it("keeps a frozen event (a session's, deep-frozen) as it is, without a copy", async () => {
    const batches: SessionEvent[][] = []
    const wb = new SessionWriteBehind({
      write: async batch => {
        batches.push([...batch])
      },
      reportBackgroundFailure: () => {},
    })
    const event = Object.freeze({ type: 'turn/start' as const, seq: 0, time: 0, data: Object.freeze({ turn: 1 }) })
    wb.enqueue(event)
    await wb.flush()
    expect(batches[0]![0]).toBe(event)
  })

  it('close() flushes pending events, then enqueue throws a clear error', async () => {
    const h = harness(200)
    h.wb.enqueue(ev(0))
    await h.wb.close()
    expect(h.written).toEqual([[0]])
    expect(() => h.wb.enqueue(ev(1))).toThrow(/closed.*seq 1/)
    expect(h.wb.pending).toBe(0)
    await at(1000)
    expect(h.write).toHaveBeenCalledTimes(1)
  })
})
