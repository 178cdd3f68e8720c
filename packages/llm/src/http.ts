// One HTTP request whose answer is a server-sent event stream, as every
// streaming model API speaks it: timeouts for a stalled or endless answer, a
// bound on the bytes read, and transport failures mapped onto LlmError codes.
import { createRedactor } from '@loom/secrets'
import { errorChain, LlmError } from './errors.ts'
import { SseLimitError, SseParser, type SseEvent } from './sse.ts'

export interface EventStreamLimits {
  /** Longest wait for the next bytes (response headers or stream data): `TIMEOUT`. */
  idleTimeoutMs: number
  /** Wall-clock limit for the whole exchange, headers to last byte: `TIMEOUT`. */
  requestTimeoutMs?: number
  /** Most bytes of one response body (memory stays bounded by it): `RESPONSE_TOO_LARGE`. */
  maxResponseBytes?: number
}

export interface EventStreamRequest extends EventStreamLimits {
  /** The route, for error messages. */
  provider: string
  url: string
  headers: Record<string, string>
  body: string
  signal?: AbortSignal
  /** A non-2xx answer as an LlmError (its body text already redacted). */
  httpError(status: number, bodyText: string, headers: Headers): LlmError
  /** Removes credentials from text that goes into an error (a server may echo the request). */
  redact?(text: string): string
}

/** System error codes of a connection that waiting seldom heals, and what they mean. */
const UNHEALING: Record<string, string> = {
  ECONNREFUSED: 'connection refused (ECONNREFUSED): is the server running on that port?',
  ENOTFOUND: 'no such host (ENOTFOUND)',
  ERR_INVALID_URL: 'not a valid URL',
}

/**
 * Why `error` (a failed fetch) cannot connect in a way another attempt seldom
 * heals, from its cause chain: a refused connection, an unknown host, a TLS
 * certificate that is not trusted, a port fetch never connects to, a URL that
 * does not parse. Undefined for anything else (a reset, a timeout): NETWORK.
 */
function unreachable(error: unknown, depth = 0): string | undefined {
  if (!(error instanceof Error) || depth > 8) return undefined
  // Every address tried (IPv6 and IPv4 of localhost, say) must have failed so.
  if (error instanceof AggregateError && error.errors.length) {
    const reasons = error.errors.map(member => unreachable(member, depth + 1))
    return reasons.every(Boolean) ? reasons[0] : undefined
  }
  const code = (error as NodeJS.ErrnoException).code
  if (code !== undefined && Object.hasOwn(UNHEALING, code)) return UNHEALING[code]
  if (code !== undefined && /CERT|UNABLE_TO_(VERIFY|GET_ISSUER)/.test(code)) return `the server's TLS certificate is not trusted (${code})`
  // The Fetch standard's blocked ports (1, 9, 25, …): fetch refuses them before connecting.
  if (error.message === 'bad port') return 'fetch does not connect to that port (a blocked port: use another one)'
  return unreachable(error.cause, depth + 1)
}

/** `http://127.0.0.1:1` of a URL: no path, query or credentials; the text as given when it does not parse. */
function originOf(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return JSON.stringify(url)
  }
}

/** Error answers are read up to this many bytes: enough for any provider's JSON error. */
const MAX_ERROR_BYTES = 64 * 1024

/**
 * POSTs the request and yields its events. Throws `LlmError`: `ABORTED` when the
 * signal fired, `TIMEOUT`, `UNREACHABLE` (refused, no such host, untrusted
 * certificate, a blocked port, not a URL), `NETWORK`, `PROTOCOL` (not an event stream),
 * `RESPONSE_TOO_LARGE`, or what `httpError` makes of an error status. Ending
 * the iteration early (a `[DONE]` event, say) releases the connection.
 */
export async function* fetchEventStream(request: EventStreamRequest): AsyncGenerator<SseEvent, void, undefined> {
  const { provider, signal, idleTimeoutMs, requestTimeoutMs, maxResponseBytes } = request
  const redact = request.redact ?? ((text: string) => text)
  if (signal?.aborted) throw abortedError(signal)
  const controller = new AbortController()
  const onAbort = () => controller.abort(signal?.reason)
  signal?.addEventListener('abort', onAbort, { once: true })
  let timedOut: 'idle' | 'request' | undefined
  let idleTimer: ReturnType<typeof setTimeout> | undefined
  const requestTimer = requestTimeoutMs
    ? setTimeout(() => {
        timedOut ??= 'request'
        controller.abort()
      }, requestTimeoutMs)
    : undefined
  /** Runs one network wait under the idle timer (not the time the consumer holds an event). */
  const waitNetwork = async <T>(promise: () => Promise<T>): Promise<T> => {
    idleTimer = setTimeout(() => {
      timedOut ??= 'idle'
      controller.abort()
    }, idleTimeoutMs)
    try {
      return await promise()
    } catch (error) {
      if (signal?.aborted) throw abortedError(signal)
      if (timedOut === 'idle') throw new LlmError(`${provider}: no data from the provider for ${idleTimeoutMs} ms`, 'TIMEOUT', { cause: error })
      if (timedOut === 'request') throw new LlmError(`${provider}: the request took longer than ${requestTimeoutMs} ms`, 'TIMEOUT', { cause: error })
      if (error instanceof LlmError) throw error
      const why = unreachable(error)
      if (why)
        throw new LlmError(`${provider}: cannot reach ${redact(originOf(request.url))}: ${why}; check the route's baseUrl`, 'UNREACHABLE', { cause: error })
      throw new LlmError(`${provider}: connection failed: ${redact(errorChain(error))}`, 'NETWORK', { cause: error })
    } finally {
      clearTimeout(idleTimer)
    }
  }
  try {
    const response = await waitNetwork(() => fetch(request.url, { method: 'POST', headers: request.headers, body: request.body, signal: controller.signal }))
    if (!response.ok) {
      const text = await waitNetwork(() => readText(response, MAX_ERROR_BYTES))
      throw request.httpError(response.status, redact(text), response.headers)
    }
    const contentType = response.headers.get('content-type') ?? ''
    if (!/^\s*text\/event-stream\b/i.test(contentType)) {
      throw new LlmError(`${provider}: expected an event stream, got content type "${contentType || 'none'}"`, 'PROTOCOL', {
        status: response.status,
        ...requestIdOf(response.headers),
      })
    }
    if (!response.body) throw new LlmError(`${provider}: the response has no body`, 'EMPTY_RESPONSE', { status: response.status })
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    // A character is at least one byte, so the byte limit bounds every event too.
    const parser = new SseParser(maxResponseBytes)
    let bytes = 0
    for (;;) {
      const result = await waitNetwork(() => reader.read())
      let events: SseEvent[]
      try {
        if (result.done) {
          events = [...parser.push(decoder.decode()), ...parser.end()]
        } else {
          bytes += result.value.byteLength
          if (maxResponseBytes !== undefined && bytes > maxResponseBytes) throw new SseLimitError(maxResponseBytes)
          events = parser.push(decoder.decode(result.value, { stream: true }))
        }
      } catch (error) {
        if (!(error instanceof SseLimitError)) throw error
        throw new LlmError(
          `${provider}: the response is larger than ${maxResponseBytes} bytes (the route's maxResponseBytes); stopped reading`,
          'RESPONSE_TOO_LARGE',
        )
      }
      yield* events
      if (result.done) return
    }
  } finally {
    clearTimeout(idleTimer)
    clearTimeout(requestTimer)
    signal?.removeEventListener('abort', onAbort)
    // Releases the connection if the body was not read to the end (early return, errors).
    controller.abort()
  }
}

/** At most `maxBytes` of a body as text; the rest is not read. */
async function readText(response: Response, maxBytes: number): Promise<string> {
  if (!response.body) return ''
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let text = ''
  let bytes = 0
  while (bytes < maxBytes) {
    const { done, value } = await reader.read()
    if (done) return text + decoder.decode()
    bytes += value.byteLength
    text += decoder.decode(value, { stream: true })
  }
  void reader.cancel().catch(() => {})
  return text
}

export function requestIdOf(headers: Headers): { requestId?: string } {
  const id = headers.get('x-request-id') || headers.get('request-id') || undefined
  return id ? { requestId: id } : {}
}

/** `retry-after-ms`, else `Retry-After` (seconds or an HTTP date), as positive milliseconds. */
export function parseRetryAfter(headers: Headers, now = Date.now()): number | undefined {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '')
  if (Number.isFinite(ms) && ms > 0) return Math.ceil(ms)
  const raw = headers.get('retry-after')?.trim()
  if (!raw) return undefined
  if (/^\d+(\.\d+)?$/.test(raw)) {
    const seconds = Number(raw)
    return seconds > 0 ? Math.ceil(seconds * 1000) : undefined
  }
  const date = Date.parse(raw)
  return Number.isFinite(date) && date > now ? date - now : undefined
}

export function abortedError(signal: AbortSignal): LlmError {
  const reason: unknown = signal.reason
  return new LlmError('the call was aborted', 'ABORTED', reason === undefined ? {} : { cause: reason })
}

/** Where a route's base URL and API key come from: options win over environment variables. */
export interface EndpointOptions {
  baseUrl?: string
  baseUrlEnv?: string
  defaultBaseUrl: string
  apiKey?: string
  apiKeyEnv?: string
  /** Where `*Env` variables are read from, at call time. Default `process.env`. */
  env?: () => Readonly<Record<string, string | undefined>>
}

/** A route's base URL and key for one call, and what to tell the user to check about the key. */
export interface Endpoint {
  baseUrl: string
  apiKey: string
  /** `DEEPSEEK_API_KEY`, or `the apiKey option`. */
  keySource: string
  /** Removes this key, and any credential a server echoes, from text bound for an error. */
  redact(text: string): string
}

/**
 * Resolves the endpoint on every call (a key exported after boot is used without
 * a restart); no key is `MISSING_CREDENTIAL`, naming the variable to set.
 */
export function resolveEndpoint(provider: string, options: EndpointOptions): Endpoint {
  const env = (options.env ?? (() => process.env))()
  const fromEnv = (name: string | undefined) => (name ? env[name]?.trim() : undefined) || undefined
  const literalKey = options.apiKey?.trim() || undefined
  const apiKey = literalKey ?? fromEnv(options.apiKeyEnv)
  if (!apiKey) {
    const where = options.apiKeyEnv ? `set the ${options.apiKeyEnv} environment variable or the apiKey option` : 'set the apiKey option'
    throw new LlmError(`no API key for provider "${provider}": ${where}`, 'MISSING_CREDENTIAL')
  }
  const redactor = createRedactor([apiKey])
  return {
    baseUrl: options.baseUrl?.trim() || fromEnv(options.baseUrlEnv) || options.defaultBaseUrl,
    apiKey,
    keySource: literalKey || !options.apiKeyEnv ? 'the apiKey option' : options.apiKeyEnv,
    redact: text => redactor(text),
  }
}
