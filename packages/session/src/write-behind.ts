// Per-session write-behind queue (spec §3.2). Every session event is meant to reach durable storage,
// but one durable write per event (often a chunk) would be far too slow. Events are therefore batched:
// the first event into an empty queue opens a window of `maxDelayMs`, and the whole queue is written as
// one batch when it ends. The price is that a crash can lose at most one window of events, unless a
// checkpoint (`flush()`, e.g. from the checkpoint policy before a model call or tool) made them durable.
import type { SessionEvent } from './events.ts'

export interface SessionWriteBehindOptions {
  /** How long the first event of a window may wait before its batch is written. Default 200. */
  maxDelayMs?: number
  /** Writes one batch durably; resolves once it is durable. */
  write: (batch: readonly SessionEvent[]) => Promise<void>
  /** Called once for each failed background (timer-driven) write. Flush failures reject the flush instead. */
  reportBackgroundFailure: (error: unknown) => void
}

const DEFAULT_MAX_DELAY_MS = 200

const ignore = () => {}

/**
 * Batches one live session's events before they are written durably.
 *
 * * `enqueue` stores a copy (a frozen event, as a Session's are deep-frozen, is kept as it is). The first event into an empty queue starts one timer; later events do
 *   not move the deadline.
 * * At the deadline the whole queue is written as one background batch; if a write is still running,
 *   the expiry is remembered and the next batch starts as soon as that write finishes.
 * * A failed write puts its batch back at the head of the queue and pauses automatic writing until the
 *   next `enqueue`, which opens a fresh window covering the old and the new events.
 * * `flush()` writes everything now (including events enqueued while it runs); concurrent calls share
 *   one promise.
 */
export class SessionWriteBehind {
  readonly #maxDelayMs: number
  readonly #write: (batch: readonly SessionEvent[]) => Promise<void>
  readonly #report: (error: unknown) => void

  #queue: SessionEvent[] = []
  #timer: ReturnType<typeof setTimeout> | undefined
  /** The window's deadline passed while a write was active: write the queue as soon as it finishes. */
  #deadlineExpired = false
  /** A write failed: no automatic writing until the next enqueue. */
  #paused = false
  /** Settles when the running background write and its bookkeeping are done; never rejects. */
  #active: Promise<void> | undefined
  /** The running flush, shared by concurrent callers. */
  #barrier: Promise<void> | undefined
  #closed = false

  constructor(options: SessionWriteBehindOptions) {
    const maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS
    if (!(maxDelayMs >= 0) || !Number.isFinite(maxDelayMs)) {
      throw new RangeError(`SessionWriteBehind: maxDelayMs must be a finite non-negative number, got ${maxDelayMs}`)
    }
    this.#maxDelayMs = maxDelayMs
    this.#write = options.write
    this.#report = options.reportBackgroundFailure
  }

  /** Number of events queued and not yet handed to a write. */
  get pending(): number {
    return this.#queue.length
  }

  enqueue(event: SessionEvent): void {
    if (this.#closed) {
      throw new Error(`SessionWriteBehind is closed: cannot enqueue event ${event.type} (seq ${event.seq})`)
    }
    const wasEmpty = this.#queue.length === 0
    // A Session's events are deep-frozen as they are appended: nothing can change them, so no copy.
    this.#queue.push(Object.isFrozen(event) ? event : structuredClone(event))
    // A running flush writes everything enqueued before it finishes.
    if (this.#barrier) return
    if (this.#paused) {
      this.#paused = false
      this.#deadlineExpired = false
      this.#startTimer()
      return
    }
    if (wasEmpty && this.#timer === undefined && !this.#deadlineExpired) this.#startTimer()
  }

  /**
   * Writes every queued event now. Waits for a running background write first (ignoring its outcome),
   * then writes batches until the queue is empty. Rejects if one of its own writes fails; that batch
   * stays queued.
   */
  flush(): Promise<void> {
    if (this.#barrier) return this.#barrier
    this.#clearTimer()
    this.#deadlineExpired = false
    const barrier = this.#drain()
    this.#barrier = barrier
    return barrier
  }

  /** Refuses further events from now on, then flushes what is queued. */
  close(): Promise<void> {
    this.#closed = true
    return this.flush()
  }

  /** Refuses further events and drops what is queued, never writing it (the session is abandoned). */
  discard(): void {
    this.#closed = true
    this.#clearTimer()
    this.#queue = []
  }

  async #drain(): Promise<void> {
    try {
      // Always suspends at least once, so `#barrier` is assigned before the `finally` below can run.
      await this.#active
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0)
        try {
          await this.#write(batch)
        } catch (error) {
          this.#queue.unshift(...batch)
          this.#paused = true
          throw error
        }
      }
      this.#paused = false
    } finally {
      // Runs synchronously after the emptiness check: an enqueue from here on starts a fresh timer.
      this.#barrier = undefined
    }
  }

  #startTimer(): void {
    this.#clearTimer()
    this.#timer = setTimeout(() => this.#onDeadline(), this.#maxDelayMs)
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
  }

  #onDeadline(): void {
    this.#timer = undefined
    if (this.#barrier || this.#paused) return
    if (this.#active) {
      this.#deadlineExpired = true
      return
    }
    this.#startBackgroundWrite()
  }

  #startBackgroundWrite(): void {
    this.#deadlineExpired = false
    if (this.#queue.length === 0) return
    const batch = this.#queue.splice(0)
    let write: Promise<void>
    try {
      write = this.#write(batch)
    } catch (error) {
      write = Promise.reject(error)
    }
    const settled = write.then(
      () => {
        this.#active = undefined
        // A flush waiting on this write takes over; otherwise chain if the tail's deadline has passed.
        if (!this.#barrier && this.#deadlineExpired) this.#startBackgroundWrite()
      },
      (error: unknown) => {
        this.#active = undefined
        this.#queue.unshift(...batch)
        this.#paused = true
        this.#deadlineExpired = false
        this.#clearTimer()
        this.#report(error)
      },
    )
    // A flush only waits for this write to settle; a throwing reporter still surfaces as an unhandled rejection.
    this.#active = settled.catch(ignore)
  }
}
