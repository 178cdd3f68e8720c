/** What the worker counts while it searches, readable by the host even after the worker was stopped. */
export const COUNTERS = ['binary', 'ignored', 'hidden', 'denied'] as const
export type Counter = (typeof COUNTERS)[number]

/** Bytes kept of the path being searched (longer paths are cut). */
const PATH_BYTES = 4096
const LENGTH = COUNTERS.length

/**
 * Memory shared by the host and one search in the worker: the counters, and the
 * path of the file being searched (so a search stopped at its deadline can say
 * where it was stuck) without a message per file.
 */
export class Progress {
  readonly buffer: SharedArrayBuffer
  readonly #ints: Int32Array
  readonly #path: Uint8Array

  constructor(buffer = new SharedArrayBuffer(4 * (LENGTH + 1) + PATH_BYTES)) {
    this.buffer = buffer
    this.#ints = new Int32Array(buffer, 0, LENGTH + 1)
    this.#path = new Uint8Array(buffer, 4 * (LENGTH + 1))
  }

  count(counter: Counter, n = 1): void {
    this.#ints[COUNTERS.indexOf(counter)] += n
  }

  get(counter: Counter): number {
    return this.#ints[COUNTERS.indexOf(counter)]
  }

  /** Marks `display` as the file being searched; undefined: none. */
  searching(display: string | undefined): void {
    this.#ints[LENGTH] = display === undefined ? 0 : encoder.encodeInto(display, this.#path).written
  }

  /** The file being searched, if any. */
  current(): string | undefined {
    const length = this.#ints[LENGTH]
    return length === 0 ? undefined : Buffer.from(this.#path.subarray(0, length)).toString('utf8')
  }
}

const encoder = new TextEncoder()
