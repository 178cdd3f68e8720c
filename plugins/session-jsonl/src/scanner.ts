// The raw scanner: reads a plaintext log and finds its committed prefix.
//
// A crash can leave the end of a log damaged: a final line cut off mid-write, or
// (after a failed rollback) a line that does not parse or skips seqs. That tail
// is safe to cut away. Damage *before* a committed `turn/end` is different: the
// log went on to record a completed turn past it, so the damage is not a torn
// write but corruption, and must not be silently dropped.

import type { SessionEvent, SessionHeader } from '@loom/session'
import { SessionPersistenceCorruptionError } from './errors.ts'
import { decodeRecord, parseHeaderRecord } from './format.ts'

export interface ScanResult {
  header: SessionHeader
  /** The contiguous committed prefix, seqs 0..n-1. */
  events: SessionEvent[]
  /** UTF-8 byte length of the committed prefix; the tail is torn iff this is less than the file size. */
  committedBytes: number
}

/** Scans a plaintext (compression 'none') log. `location` names it in errors. */
export function scanLog(text: string, location: string): ScanResult {
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
  const events: SessionEvent[] = []
  let committedBytes = Buffer.byteLength(headerLine, 'utf8') + 1
  let issue: SessionPersistenceCorruptionError | undefined
  let lineNumber = 1
  let start = headerEnd + 1
  for (;;) {
    const end = text.indexOf('\n', start)
    // 3. A final fragment without a newline was never committed: ignore it.
    if (end === -1) break
    lineNumber++
    const line = text.slice(start, end)
    start = end + 1

    let decoded: SessionEvent[]
    try {
      decoded = decodeRecord(JSON.parse(line))
    } catch {
      issue ??= corrupt(`corrupt session log: unparsable committed event at line ${lineNumber}`)
      continue
    }
    const closesTurn = decoded.some((event) => event.type === 'turn/end')
    if (issue !== undefined) {
      if (closesTurn) throw issue
      continue
    }

    // Every event of the row must continue the dense seq sequence; otherwise
    // none of the row is accepted.
    const mismatch = decoded.findIndex((event, k) => event.seq !== events.length + k)
    if (mismatch !== -1) {
      issue = corrupt(
        `corrupt session log: seq gap in committed region at line ${lineNumber} `
        + `(expected ${events.length + mismatch}, got ${decoded[mismatch].seq})`,
      )
      if (closesTurn) throw issue
      continue
    }
    events.push(...decoded)
    committedBytes += Buffer.byteLength(line, 'utf8') + 1
  }

  return { header, events, committedBytes }
}
