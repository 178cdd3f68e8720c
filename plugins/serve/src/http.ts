// HTTP plumbing on node:http: JSON bodies read within a size limit, JSON
// responses, errors as `{ error: { code, message } }`, and a small router of
// `METHOD /path/:param` patterns. Nothing here knows about sessions.
import type { IncomingMessage, ServerResponse } from 'node:http'

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
  sendJson(res, error.status, { error: { code: error.code, message: error.message, ...error.details } }, error.headers)
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
    req.on('data', onData)
    req.once('end', () => resolve(chunks))
    req.once('error', reject)
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
