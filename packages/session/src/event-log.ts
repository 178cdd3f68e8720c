import type { SessionEvent } from './events.ts'

/**
 * A session's events by seq: the prefix a restore adopted, as the store read it,
 * then the events appended since. The prefix is never copied: a long log is one
 * large array, and a copy of it (or the first append growing it) costs as much
 * as a tenth of its load.
 */
export class EventLog {
  readonly #prefix: readonly SessionEvent[]
  readonly #appended: SessionEvent[] = []

  /** `prefix` becomes the log's start; no one may change it afterwards. */
  constructor(prefix: readonly SessionEvent[] = []) {
    this.#prefix = prefix
  }

  get length(): number {
    return this.#prefix.length + this.#appended.length
  }

  /** Event `seq`; undefined past the end. */
  get(seq: number): SessionEvent | undefined {
    const prefix = this.#prefix
    return seq < prefix.length ? prefix[seq] : this.#appended[seq - prefix.length]
  }

  push(event: SessionEvent): void {
    this.#appended.push(event)
  }

  /** The events from `seq` on, in a new array. */
  slice(seq = 0): SessionEvent[] {
    const prefix = this.#prefix
    if (seq >= prefix.length) return this.#appended.slice(seq - prefix.length)
    return (seq === 0 ? prefix : prefix.slice(seq)).concat(this.#appended)
  }
}
