// Durable before shown: the terminal presents a tool result, a finished answer or
// the end of a turn only once its event is on disk. Live output (streamed text,
// a tool call starting) is shown at once, unless something before it still
// waits: the order of the screen is the order of the log.

export class DurableOutput {
  #durableSeq: number
  readonly #queue: { seq: number; show: () => void }[] = []

  /** @param persisted whether the session is stored at all; without a backend nothing waits. */
  constructor(persisted: boolean) {
    this.#durableSeq = persisted ? -1 : Infinity
  }

  /** Shows `show` once the event `seq` is durable (and everything queued before it was shown). */
  done(seq: number, show: () => void): void {
    if (!this.#queue.length && seq <= this.#durableSeq) show()
    else this.#queue.push({ seq, show })
  }

  /** Shows `show` now, or after what is waiting. */
  live(show: () => void): void {
    this.done(-1, show)
  }

  /** The backend stored every event up to `seq`. */
  durable(seq: number): void {
    this.#durableSeq = Math.max(this.#durableSeq, seq)
    while (this.#queue.length && this.#queue[0].seq <= this.#durableSeq) this.#queue.shift()!.show()
  }
}
