// HTTP plumbing on node:http: JSON bodies read within a size limit, JSON
// responses, errors as `{ error: { code, message } }` with no server path in
// them, a small router of `METHOD /path/:param` patterns, and the server with
// its edges bounded (header and request deadlines, a connection cap). Nothing
// here knows about sessions.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'

/** A request refused with a status, a stable code and a message; `details` are extra fields of the error object. */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly details: Record<string, unknown> | undefined
  /** Extra response headers (`Retry-After`, `WWW-Authenticate`). */
  readonly headers: Record<string, string>

  constructor(status: number, code: string, message: string, options: { details?: Record<string, unknown>; headers?: Record<string, string> } = {}) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.details = options.details
    this.headers = options.headers ?? {}
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  })
  res.end(text)
}

export function sendError(res: ServerResponse, error: ApiError): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  sendJson(res, error.status, { error: { code: error.code, message: withoutPaths(error.message), ...error.details } }, error.headers)
}

/**
 * Absolute file paths (POSIX or Windows) of two segments or more. The API's
 * own routes (`/v1/…`) are not files: 404 and 405 messages quote them.
 */
const FILE_PATH = /(?<![\w./:-])(?:[A-Za-z]:\\|\/(?!v1\/))[^\s"'(),;:]*[\\/][^\s"'(),;:]*/g

/**
 * A message as a client may read it: a store's or the runner's error can name
 * a log file, the sessions folder or the project folder, which tell a client
 * how the server's disk is laid out. The server's log keeps the full message.
 */
export function withoutPaths(message: string): string {
  return message.replace(FILE_PATH, '<path>')
}

/** How much of a refused body is read and dropped, so the client sees the answer; past this the socket is closed. */
const DISCARD_BYTES = 1 << 20

/**
 * After refusing a request whose body was not read (401, 413): the rest of the
 * body is dropped up to DISCARD_BYTES, so a client still sending it reads the
 * answer instead of a reset; a longer one gets the socket closed.
 */
export function discardBody(req: IncomingMessage): void {
  if (req.readableEnded) return
  let dropped = 0
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length
    if (dropped > DISCARD_BYTES) req.socket.destroy()
  })
  req.resume()
}

/**
 * The request body parsed as JSON. A declared or actual size over `limit` is
 * 413 (the rest is not read; the connection closes after the answer), a body
 * that is not JSON is 400. The content type is not checked: `curl -d` sends a
 * form type, and the bearer token already stops cross-site form posts.
 */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const tooLarge = () => new ApiError(413, 'PAYLOAD_TOO_LARGE', `the body is larger than ${limit} bytes`, { headers: { connection: 'close' } })
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) throw tooLarge()
  // Events, not `for await`: leaving that loop early would destroy the socket before the 413 is sent.
  const chunks = await new Promise<Buffer[]>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      req.off('data', onData)
      req.pause()
      reject(tooLarge())
    }
    let ended = false
    req.on('data', onData)
    req.once('end', () => {
      ended = true
      resolve(chunks)
    })
    // Cut off (the request deadline, a client gone): nobody reads the answer, so it is nothing to report.
    // A request that ended closes too: no error is made for it.
    const cut = () => ended || reject(new ApiError(408, 'REQUEST_TIMEOUT', 'the connection closed before the body arrived'))
    req.once('error', cut)
    req.once('close', cut)
  })
  const text = Buffer.concat(chunks).toString('utf8')
  if (!text.trim()) throw new ApiError(400, 'INVALID_JSON', 'the body is empty; expected a JSON object')
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ApiError(400, 'INVALID_JSON', `the body is not valid JSON: ${(error as Error).message}`)
  }
}

/** The JSON body as an object whose fields the handler checks one by one. */
export function objectBody(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ApiError(400, 'INVALID_REQUEST', `the body must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}`)
  }
  return value as Record<string, unknown>
}

/** A string field: `required` refuses a missing or empty one; a present value of another type is refused either way. */
export function stringField(body: Record<string, unknown>, field: string, required: true): string
export function stringField(body: Record<string, unknown>, field: string, required?: false): string | undefined
export function stringField(body: Record<string, unknown>, field: string, required = false): string | undefined {
  const value = body[field]
  if (value === undefined || value === null) {
    if (required) throw new ApiError(400, 'INVALID_REQUEST', `field "${field}" is required`, { details: { field } })
    return undefined
  }
  if (typeof value !== 'string') throw new ApiError(400, 'INVALID_REQUEST', `field "${field}" must be a string, got ${typeof value}`, { details: { field } })
  if (required && !value.trim()) throw new ApiError(400, 'INVALID_REQUEST', `field "${field}" must not be empty`, { details: { field } })
  return value
}

/** Fields the handler does not know are refused, so a typo (`txet`) is not silently ignored. */
export function onlyFields(body: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(body).find(key => !known.includes(key))
  if (unknown !== undefined) {
    throw new ApiError(400, 'INVALID_REQUEST', `unknown field "${unknown}" (expected: ${known.join(', ')})`, { details: { field: unknown } })
  }
}

export interface Request {
  req: IncomingMessage
  res: ServerResponse
  url: URL
  params: Record<string, string>
}

export type Handler = (request: Request) => Promise<void>

interface Route {
  method: string
  parts: string[]
  handler: Handler
}

/** `METHOD /path/:param` routes, matched segment by segment; a path with no route is 404, a known path with another method 405. */
export class Router {
  private readonly routes: Route[] = []

  add(method: string, path: string, handler: Handler): this {
    this.routes.push({ method, parts: path.split('/').filter(Boolean), handler })
    return this
  }

  /** The routes, as added: what the OpenAPI document is checked against. */
  list(): { method: string; path: string }[] {
    return this.routes.map(route => ({ method: route.method, path: `/${route.parts.join('/')}` }))
  }

  match(method: string, pathname: string): { handler: Handler; params: Record<string, string> } {
    const segments = pathname.split('/').filter(Boolean)
    const allowed: string[] = []
    for (const route of this.routes) {
      const params = matchParts(route.parts, segments)
      if (!params) continue
      if (route.method === method) return { handler: route.handler, params }
      allowed.push(route.method)
    }
    if (allowed.length) {
      throw new ApiError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${pathname} (allowed: ${allowed.join(', ')})`, {
        headers: { allow: allowed.join(', ') },
      })
    }
    throw new ApiError(404, 'NOT_FOUND', `no such endpoint: ${method} ${pathname}`)
  }
}

function matchParts(parts: readonly string[], segments: readonly string[]): Record<string, string> | undefined {
  if (parts.length !== segments.length) return undefined
  const params: Record<string, string> = {}
  for (const [i, part] of parts.entries()) {
    if (part.startsWith(':')) {
      let value: string
      try {
        value = decodeURIComponent(segments[i])
      } catch {
        return undefined
      }
      params[part.slice(1)] = value
    } else if (part !== segments[i]) {
      return undefined
    }
  }
  return params
}

/** The bounds of the server's edges: how long a request may take to arrive, and how many connections it keeps. */
export interface EdgeLimits {
  /** A request's headers must arrive within this (ms), counted from the connection or the previous response. */
  headersTimeoutMs: number
  /** A request's headers and body must arrive within this (ms). The response is not bounded: an event stream is one. */
  requestTimeoutMs: number
  /** Connections served at once; another one gets a single 503 answer and is closed; past twice as many, refused. */
  maxConnections: number
}

/**
 * A node:http server whose edges are bounded: a request whose headers or body
 * arrive too slowly is answered 408 and its connection closed (so slow clients
 * cannot hold sockets), and connections past `maxConnections` are answered 503
 * `TOO_MANY_CONNECTIONS` (except requests `spared` names: the probes, so a full
 * host is not restarted as dead) and closed. Malformed HTTP is answered 400 or
 * 431 the same way, as JSON errors.
 */
export function createHttpServer(listener: RequestListener, limits: EdgeLimits, spared: (req: IncomingMessage) => boolean = () => false): Server {
  const { headersTimeoutMs, requestTimeoutMs, maxConnections } = limits
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new Error(
      `@loom/serve: headersTimeoutMs (${headersTimeoutMs}) must not exceed requestTimeoutMs (${requestTimeoutMs}): the headers are part of the request`,
    )
  }
  const overCap = new WeakSet<Socket>()
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      // Node looks for late requests at this interval (30 s by default, which would stretch a short deadline).
      connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(headersTimeoutMs / 4))),
    },
    (req, res) => {
      if (!overCap.has(req.socket) || spared(req)) return listener(req, res)
      const busy = `this server already serves ${maxConnections} connections; retry, or use another host`
      sendError(res, new ApiError(503, 'TOO_MANY_CONNECTIONS', busy, { headers: { 'retry-after': '1', connection: 'close' } }))
      discardBody(req)
    },
  )
  let open = 0
  server.on('connection', (socket: Socket) => {
    if (open >= maxConnections) return void overCap.add(socket)
    open++
    socket.once('close', () => open--)
  })
  // A connection past the cap still holds a socket until its answer: past twice the cap, none is accepted.
  server.maxConnections = 2 * maxConnections
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const pending = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage
    if (socket.writable && !pending?.headersSent) socket.write(rawError(clientErrorAnswer(error, limits)))
    socket.destroy()
  })
  return server
}

/** What a request that never reached a handler is answered: a timeout, headers too large, or not HTTP. */
function clientErrorAnswer(error: NodeJS.ErrnoException, limits: EdgeLimits): ApiError {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError(
      408,
      'REQUEST_TIMEOUT',
      `the request did not arrive in time (headers within ${limits.headersTimeoutMs} ms, the whole request within ${limits.requestTimeoutMs} ms)`,
    )
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') return new ApiError(431, 'HEADERS_TOO_LARGE', 'the request headers are too large')
  return new ApiError(400, 'BAD_HTTP', 'the request is not well-formed HTTP/1.1')
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }

/** An error answer written on the socket itself: the request never became one the server could answer. */
function rawError(error: ApiError): string {
  const body = JSON.stringify({ error: { code: error.code, message: error.message } })
  return [
    `HTTP/1.1 ${error.status} ${REASONS[error.status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'cache-control: no-store',
    'connection: close',
    '',
    body,
  ].join('\r\n')
}
