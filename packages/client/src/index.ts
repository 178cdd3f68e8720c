// `@loom/client`: a typed client of the Loom HTTP API, version 1 (`loom serve`;
// its OpenAPI document is served at /v1/openapi.json). Every write carries an
// Idempotency-Key, so a call that failed, or whose answer was lost, is sent
// again as is: a 503 or a 409 with Retry-After, or a dropped connection, is
// retried a bounded number of times with the same key, and the server answers
// a retry of a write it carried out with its first answer. `events()` follows a
// session and, when the connection drops or the server ends the stream (a
// drain), reconnects with Last-Event-ID by itself, yielding each seq once and
// in order. No dependencies: the platform's fetch, streams and crypto.

export type MessageMode = 'followup' | 'steer' | 'inject'
export type Decision = 'allow' | 'allow-session' | 'deny'
export type SessionStatus = 'running' | 'idle'

/** A session event as the store holds it; `data` depends on `type` (`is()` narrows the ones a client acts on). */
export interface SessionEvent {
  type: string
  seq: number
  /** ms since the epoch */
  time: number
  data: unknown
}

/** The payloads of the events a client of the API usually acts on. */
export interface KnownEvents {
  'approval/requested': ApprovalRequested
  'approval/answered': { callId: string; decision: Decision; source: 'client' | 'deadline'; note?: string; by?: string; host?: string }
  'turn/start': { turn: number }
  'turn/end': { turn: number; reason: { kind: string; [key: string]: unknown } }
}

/** A tool call waiting for a client's answer (`loom serve --approve api`): answer it with `answerApproval`. */
export interface ApprovalRequested {
  callId: string
  tool: string
  /** The command, the path, else the arguments as JSON (cut at 2000 characters). */
  preview: string
  reason?: string
  rule?: string
  /** What the deadline answers. */
  unattended: 'allow' | 'deny'
  deadlineMs: number
  effects?: string[]
  /** A subagent asking in the stream of the session it works for. */
  session?: string
  agent?: { id: string; name?: string }
}

/** `event` is of `type`, with that type's payload. */
export function is<T extends keyof KnownEvents>(event: SessionEvent, type: T): event is SessionEvent & { type: T; data: KnownEvents[T] } {
  return event.type === type
}

export interface LeaseHolder {
  pid: number
  host: string
  since: number
  /** `loom serve <url>` for a server. */
  command?: string
}

export interface CreatedSession {
  id: string
  provider: string | null
  model: string | null
  status: 'running'
  /** The path of its event stream. */
  events: string
}

export interface DeliveredMessage {
  id: string
  /** The seq of the event that put the message in the session's inbox. */
  seq: number
  status: SessionStatus
  mode: MessageMode
}

export interface SessionListItem {
  id: string
  createdAt: number
  cwd: string | null
  /** Its agent runs on the host that answered. */
  here: boolean
  status: SessionStatus | null
}

export interface SessionRead {
  session: {
    id: string
    header: { id: string; createdAt: number; cwd?: string; [key: string]: unknown }
    nextSeq: number
    turns: number
    status: SessionStatus
    lastTurn: { turn: number; reason: { kind: string; [key: string]: unknown } } | null
    holder: LeaseHolder | null
    here: boolean
  }
  events: SessionEvent[]
}

export interface ApprovalAnswered {
  id: string
  callId: string
  decision: Decision
  note?: string
}

export interface LoomClientOptions {
  /** The server (or the load balancer in front of several), e.g. `http://127.0.0.1:8080`. */
  url: string
  /** The server's bearer token. */
  token: string
  /** The fetch to use (default: the platform's). */
  fetch?: typeof fetch
  /** How many times one call is sent again after a 503 or 409 with Retry-After, or a lost connection (default 3). */
  retries?: number
  /** The wait before sending again after a lost connection, in ms (default 1000); a Retry-After replaces it. */
  retryDelayMs?: number
  /**
   * How long an event stream may bring no byte at all, not even the server's
   * heartbeat comment, before its connection is taken for dead (half-open: the
   * server or a proxy went away without closing it) and a new one resumes with
   * Last-Event-ID (default 45000: three of `loom serve`'s 15 s heartbeats; 0:
   * never). Set it to about three times the server's `heartbeatMs`.
   */
  heartbeatTimeoutMs?: number
}

/** Options of a write: its Idempotency-Key (default: a new UUID per call, kept across its retries) and an abort signal. */
export interface WriteOptions {
  idempotencyKey?: string
  signal?: AbortSignal
}

/** The server refused a request: `code` is stable, what a client branches on. */
export class LoomApiError extends Error {
  readonly status: number
  readonly code: string
  /** Seconds the server asks to wait before retrying; absent when a retry as is cannot succeed. */
  readonly retryAfter: number | undefined
  /** The error's other fields: `field` (the culprit of a 400 or 422), `holder` (409), `allowed` (`MODEL_NOT_ALLOWED`). */
  readonly details: Record<string, unknown>

  constructor(status: number, code: string, message: string, retryAfter?: number, details: Record<string, unknown> = {}) {
    super(message)
    this.name = 'LoomApiError'
    this.status = status
    this.code = code
    this.retryAfter = retryAfter
    this.details = details
  }

  /** The request field or header at fault, for `INVALID_REQUEST` and `IDEMPOTENCY_MISMATCH`. */
  get field(): string | undefined {
    return typeof this.details.field === 'string' ? this.details.field : undefined
  }

  /** The host that holds the session, for `SESSION_LEASE_HELD`. */
  get holder(): LeaseHolder | undefined {
    return this.details.holder as LeaseHolder | undefined
  }
}

/** The server could not be reached, or the connection dropped before its answer, on every attempt. */
export class LoomConnectionError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause })
    this.name = 'LoomConnectionError'
  }
}

/** The longest Retry-After honoured: past it, a proxy's answer is not worth waiting for within one call. */
const MAX_RETRY_AFTER_MS = 60_000
/** Three of `loom serve`'s default heartbeats (15 s): one missed heartbeat is not yet a dead connection. */
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 45_000

export class LoomClient {
  private readonly url: string
  private readonly token: string
  private readonly fetch: typeof fetch
  private readonly retries: number
  private readonly retryDelayMs: number
  private readonly heartbeatTimeoutMs: number

  constructor(options: LoomClientOptions) {
    if (!/^https?:\/\//.test(options.url)) throw new TypeError(`LoomClient: url must be an http(s) URL, got "${options.url}"`)
    if (!options.token) throw new TypeError("LoomClient: token is required (the server's LOOM_SERVE_TOKEN)")
    this.url = options.url.replace(/\/+$/, '')
    this.token = options.token
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis)
    this.retries = options.retries ?? 3
    this.retryDelayMs = options.retryDelayMs ?? 1000
    this.heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS
    if (!(this.heartbeatTimeoutMs >= 0)) throw new TypeError(`LoomClient: heartbeatTimeoutMs must be 0 or more, got ${options.heartbeatTimeoutMs}`)
  }

  /** A new session with `task`; its first turn runs. */
  createSession(input: { task: string; provider?: string; model?: string }, options: WriteOptions = {}): Promise<CreatedSession> {
    return this.call('POST', '/v1/sessions', { body: input, ...write(options) })
  }

  /** A message for session `id`: `followup` (default) runs after the current turn, `steer` joins it, `inject` waits for the next. */
  sendMessage(id: string, text: string, options: WriteOptions & { mode?: MessageMode } = {}): Promise<DeliveredMessage> {
    const { mode, ...rest } = options
    return this.call('POST', `${session(id)}/messages`, { body: { text, ...(mode && { mode }) }, ...write(rest) })
  }

  /** Cancels the running turn of `id`; `cancelled: false` when nothing ran. */
  cancel(id: string, options: WriteOptions = {}): Promise<{ id: string; cancelled: boolean }> {
    return this.call('POST', `${session(id)}/cancel`, write(options))
  }

  /** The sessions of the server's project, oldest first. */
  async listSessions(options: { signal?: AbortSignal } = {}): Promise<SessionListItem[]> {
    return (await this.call<{ sessions: SessionListItem[] }>('GET', '/v1/sessions', options)).sessions
  }

  /** Session `id`'s summary and its durable events from seq `from` (default 0). */
  getSession(id: string, options: { from?: number; signal?: AbortSignal } = {}): Promise<SessionRead> {
    const query = options.from === undefined ? '' : `?from=${options.from}`
    return this.call('GET', session(id) + query, options)
  }

  /** Answers the question of tool call `callId` (an `approval/requested` event); `note` reaches the model with a deny, `by` names who answered. */
  answerApproval(id: string, callId: string, decision: Decision, options: WriteOptions & { note?: string; by?: string } = {}): Promise<ApprovalAnswered> {
    const { note, by, ...rest } = options
    const body = { decision, ...(note !== undefined && { note }), ...(by !== undefined && { by }) }
    return this.call('POST', `${session(id)}/approvals/${encodeURIComponent(callId)}`, { body, ...write(rest) })
  }

  /**
   * The events of session `id` from seq `from` (default 0), live, for as long
   * as the caller iterates: each seq once, in order. A dropped connection, a
   * stream the server ends (a drain), or one that brought nothing, not even a
   * heartbeat, for `heartbeatTimeoutMs` (half-open) is resumed with
   * `Last-Event-ID`, at once when the connection had brought events, else
   * after the stream's `retry:` (or a 503's Retry-After), at most `retries`
   * times in a row. Ends when `signal` aborts or the loop breaks; a refusal
   * (404, 401) is thrown.
   */
  async *events(id: string, options: { from?: number; signal?: AbortSignal } = {}): AsyncGenerator<SessionEvent, void, undefined> {
    const { signal } = options
    const path = `${session(id)}/events`
    let last = (options.from ?? 0) - 1
    let delayMs = this.retryDelayMs
    let failures = 0
    let failure: unknown
    const halfOpen = (cause?: unknown) =>
      new LoomConnectionError(
        `the event stream of session "${id}" brought nothing for ${this.heartbeatTimeoutMs} ms, not even a heartbeat (a half-open connection), after seq ${last}`,
        cause,
      )
    while (!signal?.aborted) {
      const connection = new AbortController()
      const stop = () => connection.abort()
      signal?.addEventListener('abort', stop, { once: true })
      let progressed = false
      // Silence for heartbeatTimeoutMs (no answer, no byte) means a half-open connection: it is dropped and resumed.
      let silent = false
      let watchdog: ReturnType<typeof setTimeout> | undefined
      const heard = () => {
        clearTimeout(watchdog)
        if (this.heartbeatTimeoutMs === 0) return
        watchdog = setTimeout(() => {
          silent = true
          connection.abort()
        }, this.heartbeatTimeoutMs)
      }
      heard()
      try {
        const response = await this.fetch(this.url + path, {
          headers: { ...this.auth(), accept: 'text/event-stream', 'last-event-id': String(last) },
          signal: connection.signal,
        })
        heard()
        if (!response.ok || !response.body) {
          const error = await refusal(response, 'GET', path)
          if (error.retryAfter === undefined) throw error
          failure = error
          delayMs = retryAfterMs(error.retryAfter)
        } else {
          for await (const frame of frames(response.body, heard)) {
            if (frame.retry !== undefined) delayMs = frame.retry
            if (frame.data === undefined) continue
            const event = JSON.parse(frame.data) as SessionEvent
            // Seen already (a reconnect overlaps): skip. A gap (never sent by a server): resume from the last one yielded.
            if (event.seq <= last) continue
            if (event.seq !== last + 1) break
            last = event.seq
            progressed = true
            // The caller's time with the event is not the server's silence.
            clearTimeout(watchdog)
            yield event
            heard()
          }
          failure = silent ? halfOpen() : new LoomConnectionError(`the event stream of session "${id}" ended after seq ${last}`, undefined)
        }
      } catch (error) {
        if (signal?.aborted) return
        if (error instanceof LoomApiError) throw error
        failure = silent ? halfOpen(error) : error
      } finally {
        clearTimeout(watchdog)
        signal?.removeEventListener('abort', stop)
        connection.abort()
      }
      if (progressed) {
        failures = 0
        continue
      }
      if (++failures > this.retries) {
        throw new LoomConnectionError(`the event stream of session "${id}" could not be resumed after seq ${last} (${failures} attempts)`, failure)
      }
      await sleep(delayMs, signal)
    }
  }

  private auth(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` }
  }

  /** One call, sent again (with the same Idempotency-Key) after a 503 or 409 with Retry-After, or a lost connection, up to `retries` times. */
  private async call<T>(method: string, path: string, options: { body?: unknown; key?: string; signal?: AbortSignal }): Promise<T> {
    const headers = {
      ...this.auth(),
      ...(options.body !== undefined && { 'content-type': 'application/json' }),
      ...(options.key !== undefined && { 'idempotency-key': options.key }),
    }
    const body = options.body === undefined ? undefined : JSON.stringify(options.body)
    for (let attempt = 0; ; attempt++) {
      let response: Response
      try {
        response = await this.fetch(this.url + path, { method, headers, body, signal: options.signal })
      } catch (error) {
        // The answer is lost: reads are safe to repeat, and every write carries its key.
        if (options.signal?.aborted) throw error
        if (attempt >= this.retries) {
          throw new LoomConnectionError(`${method} ${this.url}${path}: no answer after ${attempt + 1} attempts: ${(error as Error).message}`, error)
        }
        await sleep(this.retryDelayMs, options.signal)
        continue
      }
      if (response.ok) return (await response.json()) as T
      const error = await refusal(response, method, path)
      const retriable = (error.status === 503 || error.status === 409) && error.retryAfter !== undefined
      if (!retriable || attempt >= this.retries) throw error
      await sleep(retryAfterMs(error.retryAfter!), options.signal)
    }
  }
}

const session = (id: string) => `/v1/sessions/${encodeURIComponent(id)}`

/** A write's key: the caller's, else a new one for this call (and its retries). */
const write = ({ idempotencyKey, signal }: WriteOptions) => ({ key: idempotencyKey ?? crypto.randomUUID(), signal })

const retryAfterMs = (seconds: number) => Math.min(seconds * 1000, MAX_RETRY_AFTER_MS)

/** The error a non-2xx answer carries; a body that is not the API's (a proxy's page) is named by its status and first characters. */
async function refusal(response: Response, method: string, path: string): Promise<LoomApiError> {
  const text = await response.text().catch(() => '')
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'))
  let parsed: { error?: { code?: unknown; message?: unknown; [key: string]: unknown } } | undefined
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  const error = parsed?.error
  if (typeof error?.code !== 'string' || typeof error.message !== 'string') {
    const excerpt = text.trim().slice(0, 200)
    return new LoomApiError(response.status, `HTTP_${response.status}`, `${method} ${path}: HTTP ${response.status}${excerpt && `: ${excerpt}`}`, retryAfter)
  }
  const { code, message, ...details } = error
  return new LoomApiError(response.status, code, message, retryAfter, details)
}

/** `Retry-After` in seconds: a number of seconds, or an HTTP date. */
function parseRetryAfter(header: string | null): number | undefined {
  if (header === null || header.trim() === '') return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000)
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise(resolve => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })
}

interface Frame {
  data?: string
  retry?: number
}

/**
 * The messages of a Server-Sent Events body (the WHATWG framing: any line
 * break, `data:` lines joined, comments skipped); `heard` is told of every
 * chunk that arrives, a heartbeat comment's too.
 */
async function* frames(body: ReadableStream<Uint8Array>, heard: () => void): AsyncGenerator<Frame> {
  const decoder = new TextDecoder()
  let buffer = ''
  let data: string[] = []
  let retry: number | undefined
  for await (const chunk of body) {
    heard()
    buffer += decoder.decode(chunk, { stream: true })
    for (let match = /\r\n|\r|\n/.exec(buffer); match; match = /\r\n|\r|\n/.exec(buffer)) {
      // A `\r` that ends the buffer may be the first half of `\r\n`: wait for the next chunk.
      if (match[0] === '\r' && match.index === buffer.length - 1) break
      const line = buffer.slice(0, match.index)
      buffer = buffer.slice(match.index + match[0].length)
      if (line === '') {
        if (data.length || retry !== undefined) yield { ...(data.length && { data: data.join('\n') }), ...(retry !== undefined && { retry }) }
        data = []
        retry = undefined
        continue
      }
      if (line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
      if (field === 'data') data.push(value)
      else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value)
    }
  }
}
