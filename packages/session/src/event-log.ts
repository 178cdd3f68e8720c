import type { SessionEvent } from './events.ts'

/**
 * Events in blocks of `EVENT_BLOCK`, the last one possibly shorter: how a store
 * reads a long log. Joining them into one array costs a load several percent:
 * a large array is old from birth, and every young event it points to is
 * recorded for the next collection. A single block of any length is a plain
 * array of events.
 */
export type EventBlocks = readonly (readonly SessionEvent[])[]
export const EVENT_BLOCK = 4096
const BLOCK_BITS = 12
const BLOCK_MASK = EVENT_BLOCK - 1

/** The events of `blocks` as one new array. */
export function joinBlocks(blocks: EventBlocks): SessionEvent[] {
  return blocks.length === 1 ? blocks[0].slice() : ([] as SessionEvent[]).concat(...blocks)
}

/** `blocks` followed by `events`: new blocks that share every full block of `blocks`. */
export function appendToBlocks(blocks: EventBlocks, events: readonly SessionEvent[]): EventBlocks {
  if (!events.length) return blocks
  // A last block with room is copied and filled; the full ones are shared.
  const last = blocks.at(-1)
  const open = last !== undefined && last.length < EVENT_BLOCK
  const appended = open ? blocks.slice(0, -1) : blocks.slice()
  const rest = open ? [...last, ...events] : events
  for (let start = 0; start < rest.length; start += EVENT_BLOCK) appended.push(rest.slice(start, start + EVENT_BLOCK))
  return appended
}

/**
 * A session's events by seq: the prefix a restore adopted, in the blocks the
 * store read, then the events appended since. The prefix is never copied or
 * joined: a copy of a long log (or the first append growing it) costs as much
 * as a tenth of its load.
 */
export class EventLog {
  readonly #blocks: EventBlocks
  readonly #prefixLength: number
  readonly #appended: SessionEvent[] = []

  /** `prefix` becomes the log's start; no one may change it afterwards. */
  constructor(prefix: EventBlocks = []) {
    let length = 0
    for (let i = 0; i < prefix.length; i++) {
      if (i < prefix.length - 1 && prefix[i].length !== EVENT_BLOCK) {
        throw new RangeError(`event block ${i} holds ${prefix[i].length} events; every block but the last holds ${EVENT_BLOCK}`)
      }
      length += prefix[i].length
    }
    this.#blocks = prefix
    this.#prefixLength = length
  }

  get length(): number {
    return this.#prefixLength + this.#appended.length
  }

  /** Event `seq`; undefined past the end. */
  get(seq: number): SessionEvent | undefined {
    if (seq >= this.#prefixLength) return this.#appended[seq - this.#prefixLength]
    if (!(seq >= 0)) return undefined
    const blocks = this.#blocks
    return blocks.length === 1 ? blocks[0][seq] : blocks[seq >>> BLOCK_BITS][seq & BLOCK_MASK]
  }

  push(event: SessionEvent): void {
    this.#appended.push(event)
  }

  /** The events from `seq` on, in a new array. */
  slice(seq = 0): SessionEvent[] {
    if (seq >= this.#prefixLength) return this.#appended.slice(seq - this.#prefixLength)
    const from = Math.max(0, seq)
    const blocks = this.#blocks
    if (blocks.length === 1) return blocks[0].slice(from).concat(this.#appended)
    const first = from >>> BLOCK_BITS
    return ([] as SessionEvent[]).concat(blocks[first].slice(from & BLOCK_MASK), ...blocks.slice(first + 1), this.#appended)
  }
}
