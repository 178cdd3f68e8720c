// The raw scanner: reads a plaintext log and finds its committed prefix.
//
// A crash can leave the end of a log damaged: a final line cut off mid-write, or
// (after a failed rollback) a line that does not parse or skips seqs. That tail
// is safe to cut away. Damage *before* a committed `turn/end` is different: the
// log went on to record a completed turn past it, so the damage is not a torn
// write but corruption, and must not be silently dropped.

import type { SessionEvent, SessionHeader } from '@loom/session'
import { SessionPersistenceCorruptionError } from './errors.ts'
import { decodeStored, parseHeaderRecord } from './format.ts'

export interface ScanResult {
  header: SessionHeader
  /** The contiguous committed prefix, seqs 0..n-1. */
  events: SessionEvent[]
  /** The first committed event whose type `knownTypes` lacks and that is not ignorable. */
  unknown?: SessionEvent
  /** UTF-8 byte length of the committed prefix; the tail is torn iff this is less than the file size. */
  committedBytes: number
}

/**
 * Scans a plaintext (compression 'none') log. `location` names it in errors.
 * `knownTypes`: report the first committed event of another type (checked here,
 * while each event is at hand, rather than in a second pass over a long log).
 * `bytes`: the file's size, when known (spares measuring an ASCII text again).
 */
export function scanLog(text: string, location: string, knownTypes?: ReadonlySet<string>, bytes?: number): ScanResult {
  const where = ` (raw log: ${location})`
  const corrupt = (message: string) => new SessionPersistenceCorruptionError(`${message}${where}`)

  // 1. The header must be one complete line; a log torn inside its header has
  //    no committed content at all (materialization publishes the header and
  //    first batch atomically, so this is never a crash tail).
  const headerEnd = text.indexOf('\n')
  if (headerEnd <= 0) throw corrupt('empty or header-less session log')
  const headerLine = text.slice(0, headerEnd)
  let headerValue: unknown
  try {
    headerValue = JSON.parse(headerLine)
  } catch {
    throw corrupt('corrupt session log: header line is not valid JSON')
  }
  // Refuses a non-header, an unsupported version, or an invalid header shape.
  const header = parseHeaderRecord(headerValue, location)

  // 2. Event lines. After the first damaged line (the "issue") nothing more is
  //    accepted; later lines are only inspected for a turn/end, which would
  //    prove the damage sits inside the committed region.
  // Accepted events, in blocks joined once at the end: one push at a time into a
  // single array of a long log costs more than the blocks and the join.
  let block: SessionEvent[] = []
  const blocks: SessionEvent[][] = [block]
  let count = 0
  let unknown: SessionEvent | undefined
  let issue: SessionPersistenceCorruptionError | undefined
  let lineNumber = 1
  let start = headerEnd + 1
  // Where the committed prefix ends, in characters: counted in bytes once, at the end.
  let committedEnd = start
  for (;;) {
    const end = text.indexOf('\n', start)
    // 3. A final fragment without a newline was never committed: ignore it.
    if (end === -1) break
    lineNumber++
    const line = text.slice(start, end)
    start = end + 1

    let stored: SessionEvent | SessionEvent[]
    try {
      stored = decodeStored(JSON.parse(line))
    } catch {
      issue ??= corrupt(`corrupt session log: unparsable committed event at line ${lineNumber}`)
      continue
    }
    if (issue !== undefined) {
      if (closesTurn(stored)) throw issue
      continue
    }

    // Every event of the row must continue the dense seq sequence; otherwise
    // none of the row is accepted.
    const mismatch = seqMismatch(stored, count)
    if (mismatch !== -1) {
      const got = Array.isArray(stored) ? stored[mismatch].seq : stored.seq
      issue = corrupt(`corrupt session log: seq gap in committed region at line ${lineNumber} (expected ${count + mismatch}, got ${got})`)
      if (closesTurn(stored)) throw issue
      continue
    }
    if (Array.isArray(stored)) {
      for (const event of stored) block = accept(event, block)
      count += stored.length
    } else {
      block = accept(stored, block)
      count++
    }
    committedEnd = start
  }
  /** Keeps an accepted event; returns the block the next one goes to. */
  function accept(event: SessionEvent, block: SessionEvent[]): SessionEvent[] {
    if (knownTypes && !unknown && !knownTypes.has(event.type) && event.ignorable !== true) unknown = event
    if (block.length === BLOCK) blocks.push((block = []))
    block.push(event)
    return block
  }
  const events = blocks.length === 1 ? blocks[0] : ([] as SessionEvent[]).concat(...blocks)

  // As many bytes as characters when the file is ASCII (its byte size says so).
  const committedBytes = bytes === text.length ? committedEnd : Buffer.byteLength(text.slice(0, committedEnd), 'utf8')
  return { header, events, committedBytes, ...(unknown && { unknown }) }
}

const BLOCK = 4096

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
