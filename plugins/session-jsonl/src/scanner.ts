// The raw scanner: reads a plaintext log and finds its committed prefix.
//
// A crash can leave the end of a log damaged: a final line cut off mid-write, or
// (after a failed rollback) a line that does not parse or skips seqs. That tail
// is safe to cut away. Damage *before* a committed `turn/end` is different: the
// log went on to record a completed turn past it, so the damage is not a torn
// write but corruption, and must not be silently dropped.

import { EVENT_BLOCK, type EventBlocks, joinBlocks, type SessionEvent, type SessionHeader } from '@loom/session'
import { SessionPersistenceCorruptionError } from './errors.ts'
import { decodeStored, parseHeaderRecord } from './format.ts'

export interface ScanResult {
  header: SessionHeader
  /** The contiguous committed prefix, seqs 0..n-1, in blocks (what a load hands on). */
  blocks: EventBlocks
  /** The same events as one array, joined at first use. */
  readonly events: SessionEvent[]
  /** How many events the prefix holds. */
  count: number
  /** The first committed event of a type `isKnown` refuses that is not ignorable. */
  unknown?: SessionEvent
  /** UTF-8 byte length of the committed prefix; the tail is torn iff this is less than the file size. */
  committedBytes: number
}

/**
 * Scans a plaintext (compression 'none') log. `location` names it in errors.
 * `isKnown`: report the first committed event of a type it refuses (checked here,
 * while each event is at hand, rather than in a second pass over a long log).
 * `bytes`: the file's size, when known (spares measuring an ASCII text again).
 */
export function scanLog(text: string, location: string, isKnown?: (type: string) => boolean, bytes?: number): ScanResult {
  const scanner = new LogScanner(location, isKnown)
  // 3. A final fragment without a newline was never committed: it is left out.
  const end = text.lastIndexOf('\n') + 1
  const lines = end === text.length ? text : text.slice(0, end)
  // As many bytes as characters when the file is ASCII (its byte size says so).
  if (end > 0) scanner.scan(lines, bytes === text.length ? end : Buffer.byteLength(lines, 'utf8'))
  return scanner.result()
}

/**
 * `scanLog` a piece at a time, so that a long log is never held as one string:
 * `scan` takes the next whole lines of the log, `result` gives what they hold.
 */
export class LogScanner {
  readonly #location: string
  readonly #isKnown: ((type: string) => boolean) | undefined
  #header: SessionHeader | undefined
  // Accepted events, in blocks: one push at a time into a single array of a long
  // log costs more, and so does joining them (see `EventBlocks`).
  #block: SessionEvent[] = []
  readonly #blocks: SessionEvent[][] = [this.#block]
  #count = 0
  #unknown: SessionEvent | undefined
  #issue: SessionPersistenceCorruptionError | undefined
  #lineNumber = 0
  /** Bytes of the lines scanned so far, and of the committed prefix among them. */
  #scannedBytes = 0
  #committedBytes = 0

  constructor(location: string, isKnown?: (type: string) => boolean) {
    this.#location = location
    this.#isKnown = isKnown
  }

  #corrupt(message: string) {
    return new SessionPersistenceCorruptionError(`${message} (raw log: ${this.#location})`)
  }

  /** Scans `text`: the log's next lines, each ending in a newline; `bytes` is its UTF-8 length. */
  scan(text: string, bytes: number): void {
    let start = 0
    // 1. The header must be one complete line; a log torn inside its header has
    //    no committed content at all (materialization publishes the header and
    //    first batch atomically, so this is never a crash tail).
    if (this.#header === undefined) {
      const headerEnd = text.indexOf('\n')
      if (headerEnd <= 0) throw this.#corrupt('empty or header-less session log')
      let headerValue: unknown
      try {
        headerValue = JSON.parse(text.slice(0, headerEnd))
      } catch {
        throw this.#corrupt('corrupt session log: header line is not valid JSON')
      }
      // Refuses a non-header, an unsupported version, or an invalid header shape.
      this.#header = parseHeaderRecord(headerValue, this.#location)
      this.#lineNumber = 1
      start = headerEnd + 1
    }

    // 2. Event lines. After the first damaged line (the "issue") nothing more is
    //    accepted; later lines are only inspected for a turn/end, which would
    //    prove the damage sits inside the committed region.
    // Where the committed prefix ends in `text`, in characters (-1: before it): counted in bytes once, at the end.
    let committedEnd = this.#issue === undefined ? start : -1
    for (;;) {
      const end = text.indexOf('\n', start)
      if (end === -1) break
      this.#lineNumber++
      const line = text.slice(start, end)
      start = end + 1

      let stored: SessionEvent | SessionEvent[]
      try {
        stored = decodeStored(JSON.parse(line))
      } catch {
        this.#issue ??= this.#corrupt(`corrupt session log: unparsable committed event at line ${this.#lineNumber}`)
        continue
      }
      if (this.#issue !== undefined) {
        if (closesTurn(stored)) throw this.#issue
        continue
      }

      // Every event of the row must continue the dense seq sequence; otherwise
      // none of the row is accepted.
      const count = this.#count
      const mismatch = seqMismatch(stored, count)
      if (mismatch !== -1) {
        const got = Array.isArray(stored) ? stored[mismatch].seq : stored.seq
        this.#issue = this.#corrupt(`corrupt session log: seq gap in committed region at line ${this.#lineNumber} (expected ${count + mismatch}, got ${got})`)
        if (closesTurn(stored)) throw this.#issue
        continue
      }
      if (Array.isArray(stored)) {
        for (const event of stored) this.#accept(event)
        this.#count += stored.length
      } else {
        this.#accept(stored)
        this.#count++
      }
      committedEnd = start
    }
    if (committedEnd !== -1) {
      this.#committedBytes = this.#scannedBytes + (bytes === text.length ? committedEnd : Buffer.byteLength(text.slice(0, committedEnd), 'utf8'))
    }
    this.#scannedBytes += bytes
  }

  /** Keeps an accepted event. */
  #accept(event: SessionEvent) {
    const isKnown = this.#isKnown
    if (isKnown && !this.#unknown && !isKnown(event.type) && event.ignorable !== true) this.#unknown = event
    if (this.#block.length === EVENT_BLOCK) this.#blocks.push((this.#block = []))
    this.#block.push(event)
  }

  /** What the lines scanned so far hold. */
  result(): ScanResult {
    const header = this.#header
    if (header === undefined) throw this.#corrupt('empty or header-less session log')
    const blocks = this.#blocks
    let events: SessionEvent[] | undefined
    const unknown = this.#unknown
    return {
      header,
      blocks,
      get events() {
        events ??= joinBlocks(blocks)
        return events
      },
      count: this.#count,
      committedBytes: this.#committedBytes,
      ...(unknown && { unknown }),
    }
  }
}

/** One stored event, or the run of a packed row. */
type Stored = SessionEvent | readonly SessionEvent[]

function closesTurn(stored: Stored): boolean {
  if (!Array.isArray(stored)) return (stored as SessionEvent).type === 'turn/end'
  for (const event of stored) if (event.type === 'turn/end') return true
  return false
}

/** The index of the first event that does not continue the seqs from `next`, or -1. */
function seqMismatch(stored: Stored, next: number): number {
  if (!Array.isArray(stored)) return (stored as SessionEvent).seq === next ? -1 : 0
  for (let k = 0; k < stored.length; k++) if (stored[k].seq !== next + k) return k
  return -1
}
