// Server-Sent Events: the response headers, one message per session event
// (`id:` is its seq, `data:` its JSON on one line), heartbeat comments, and where
// a client resumes: the `Last-Event-ID` header its EventSource sends after a
// reconnect, or `?after=` for a client that keeps the seq itself.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { ApiError } from './http.ts'

/** The seq after which a stream starts: `Last-Event-ID` wins over `?after=`; none means from the first event (-1). */
export function resumeAfter(req: IncomingMessage, url: URL): number {
  const header = req.headers['last-event-id']
  const [raw, source] = typeof header === 'string' && header.trim() !== '' ? [header.trim(), 'Last-Event-ID'] : [url.searchParams.get('after'), 'after']
  if (raw === null) return -1
  if (!/^-?\d+$/.test(raw) || Number(raw) < -1 || !Number.isSafeInteger(Number(raw))) {
    throw new ApiError(400, 'INVALID_REQUEST', `${source} must be an event seq (a whole number >= -1), got "${raw}"`, { details: { field: source } })
  }
  return Number(raw)
}

/** One open event stream. Writes after the client left are dropped. */
export class EventStream {
  private readonly res: ServerResponse
  private readonly heartbeat: ReturnType<typeof setInterval>
  private ended = false

  constructor(res: ServerResponse, options: { heartbeatMs: number; retryMs: number }) {
    this.res = res
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Proxies such as nginx would otherwise buffer the stream.
      'x-accel-buffering': 'no',
    })
    // The reconnection delay an EventSource uses; the first bytes also flush the headers.
    res.write(`retry: ${options.retryMs}\n\n`)
    // Comments keep idle connections (and the proxies between) open.
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), options.heartbeatMs)
    this.heartbeat.unref()
    res.on('close', () => this.end())
  }

  get open(): boolean {
    return !this.ended
  }

  /** One message; JSON holds no raw line break, so `data:` is one line. */
  send(id: number, data: unknown): void {
    this.write(message(id, data))
  }

  /** A batch of session events, one message each, in one write: one chunk on the wire, not one per event. */
  sendEvents(events: readonly { seq: number }[]): void {
    if (!events.length) return
    let text = ''
    for (const event of events) text += message(event.seq, event)
    this.write(text)
  }

  end(): void {
    if (this.ended) return
    this.ended = true
    clearInterval(this.heartbeat)
    if (!this.res.writableEnded) this.res.end()
  }

  private write(text: string): void {
    if (!this.ended && !this.res.writableEnded) this.res.write(text)
  }
}

function message(id: number, data: unknown): string {
  return `id: ${id}\ndata: ${JSON.stringify(data)}\n\n`
}
