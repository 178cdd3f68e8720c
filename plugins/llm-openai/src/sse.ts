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
 * `end()` flushes: unlike the browser algorithm it dispatches a final event
 * that had data but no terminating blank line, since some servers close right
 * after their last `data:` line.
 */
export class SseParser {
  private buffer = ''
  private data: string[] = []
  private eventType = ''
  private lastId: string | undefined
  private started = false
  private pendingCR = false

  push(text: string): SseEvent[] {
    const events: SseEvent[] = []
    if (!this.started && text.length) {
      this.started = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    if (this.pendingCR && text.startsWith('\n')) text = text.slice(1)
    this.pendingCR = false
    this.buffer += text
    let start = 0
    for (let i = 0; i < this.buffer.length; i++) {
      const char = this.buffer.charCodeAt(i)
      if (char !== 0x0a && char !== 0x0d) continue
      this.line(this.buffer.slice(start, i), events)
      if (char === 0x0d) {
        if (i + 1 === this.buffer.length) this.pendingCR = true
        else if (this.buffer.charCodeAt(i + 1) === 0x0a) i++
      }
      start = i + 1
    }
    this.buffer = this.buffer.slice(start)
    return events
  }

  end(): SseEvent[] {
    const events: SseEvent[] = []
    if (this.buffer) this.line(this.buffer, events)
    this.buffer = ''
    this.dispatch(events)
    return events
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === '') return this.dispatch(events)
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    switch (field) {
      case 'data': this.data.push(value); break
      case 'event': this.eventType = value; break
      case 'id': if (!value.includes('\0')) this.lastId = value; break
      default: break
    }
  }

  private dispatch(events: SseEvent[]): void {
    if (this.data.length) {
      events.push({ event: this.eventType || 'message', data: this.data.join('\n'), ...(this.lastId !== undefined && { id: this.lastId }) })
    }
    this.data = []
    this.eventType = ''
  }
}
