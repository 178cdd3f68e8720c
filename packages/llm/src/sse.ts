/** One dispatched server-sent event. */
export interface SseEvent {
  /** `event:` field; `'message'` when the server sent none. */
  event: string
  /** The `data:` lines joined with `\n`. */
  data: string
  id?: string
}

/**
 * An incremental parser for `text/event-stream` (WHATWG HTML, "event stream
 * interpretation"). Feed decoded text in arbitrary pieces with `push()`; it
 * returns the events completed so far. Lines may end in CRLF, LF or CR (a CR
 * at the end of a piece waits for the next one to see if an LF follows);
 * lines starting with `:` are comments; a field without a colon has an empty
 * value; one space after the colon is dropped; `data:` lines accumulate and a
 * blank line dispatches. `retry:` is ignored (we do not reconnect).
 *
 * Linear time: each push scans only its own text, and the pieces of an
 * unfinished line are kept in a list and joined once, when the line ends (a
 * 50 MB line costs one pass, not one rescan per network read).
 *
 * `end()` flushes: unlike the browser algorithm it dispatches a final event
 * that had data but no terminating blank line, since some servers close right
 * after their last `data:` line.
 */
export class SseParser {
  private readonly maxEventChars: number
  private pending: string[] = []
  private pendingLength = 0
  private data: string[] = []
  private dataLength = 0
  private eventType = ''
  private lastId: string | undefined
  private started = false
  private pendingCR = false

  /** @param maxEventChars An event (or one line) longer than this throws `SseLimitError`. */
  constructor(maxEventChars = Infinity) {
    this.maxEventChars = maxEventChars
  }

  push(text: string): SseEvent[] {
    const events: SseEvent[] = []
    if (!this.started && text.length) {
      this.started = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    if (this.pendingCR && text.charCodeAt(0) === 0x0a) text = text.slice(1)
    this.pendingCR = false
    // The next CR and LF are found once each and moved forward, so a push is one pass.
    let start = 0
    let lf = text.indexOf('\n')
    let cr = text.indexOf('\r')
    for (;;) {
      if (lf >= 0 && lf < start) lf = text.indexOf('\n', start)
      if (cr >= 0 && cr < start) cr = text.indexOf('\r', start)
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(lf, cr)
      if (end < 0) break
      this.line(this.take(text.slice(start, end)), events)
      start = end + 1
      if (end === cr) {
        if (start === text.length) this.pendingCR = true
        else if (text.charCodeAt(start) === 0x0a) start++
      }
    }
    if (start < text.length) this.keep(text.slice(start))
    return events
  }

  end(): SseEvent[] {
    const events: SseEvent[] = []
    if (this.pendingLength) this.line(this.take(''), events)
    this.dispatch(events)
    return events
  }

  /** The unfinished line's pieces plus `tail`, as one string. */
  private take(tail: string): string {
    if (!this.pending.length) return tail
    this.pending.push(tail)
    const line = this.pending.join('')
    this.pending = []
    this.pendingLength = 0
    return line
  }

  private keep(piece: string): void {
    this.pending.push(piece)
    this.pendingLength += piece.length
    this.checkSize(this.pendingLength + this.dataLength)
  }

  private checkSize(chars: number): void {
    if (chars > this.maxEventChars) throw new SseLimitError(this.maxEventChars)
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === '') return this.dispatch(events)
    if (line.charCodeAt(0) === 0x3a /* : */) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.charCodeAt(0) === 0x20) value = value.slice(1)
    switch (field) {
      case 'data':
        this.data.push(value)
        this.dataLength += value.length + 1
        this.checkSize(this.dataLength)
        break
      case 'event':
        this.eventType = value
        break
      case 'id':
        if (!value.includes('\0')) this.lastId = value
        break
      default:
        break
    }
  }

  private dispatch(events: SseEvent[]): void {
    if (this.data.length) {
      events.push({ event: this.eventType || 'message', data: this.data.join('\n'), ...(this.lastId !== undefined && { id: this.lastId }) })
    }
    this.data = []
    this.dataLength = 0
    this.eventType = ''
  }
}

/** Thrown by `SseParser` when one event outgrows its limit. */
export class SseLimitError extends Error {
  readonly limit: number

  constructor(limit: number) {
    super(`an event of the stream is larger than ${limit} characters`)
    this.limit = limit
    this.name = 'SseLimitError'
  }
}
