// The inspector over HTTP: the page and its assets (no token: they hold no data),
// and the JSON API under `api/` behind the bearer token, mounted at a base path
// (`''` for `loom inspect`'s own server, `/ui` under `loom serve`). The API:
//
//   GET api/sessions                               the sessions, subagents folded under their parents
//   GET api/sessions/:id                           a session: outline, requests, transcript
//   GET api/sessions/:id/events?after=SEQ          its new events as Server-Sent Events (the page's live updates)
//   GET api/sessions/:id/events/:seq               one event, whole
//   GET api/sessions/:id/requests/:n               request n (1-based): manifest, system text, tools, runtime context
//   GET api/sessions/:id/series                    every request: cache-hit share, input tokens, header changes
//   GET api/sessions/:id/diff?a=N&b=M              two requests' manifests and their difference
//   GET api/sessions/:id/footprint?plugin=NAME     a plugin's tokens per request and the header changes it caused
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type Asset, AssetStore, pageDocument } from './assets.ts'
import type { InspectorSource } from './source.ts'
import { InspectorViews, ViewError } from './views.ts'

export interface InspectorOptions {
  source: InspectorSource
  /** Whether a request's Authorization header carries the token. */
  authorize: (authorization: string | undefined) => boolean
  /** The path the inspector is mounted at: `''` (a server of its own) or `/ui`. */
  base?: string
  /** An unexpected failure (the client gets a 500 without its details). */
  report?: (error: unknown) => void
  /** Interval of the heartbeat comments of an event stream. */
  heartbeatMs?: number
}

/** The request listener; it answers every path under its base (`handles` says which those are). */
export type InspectorHandler = ((req: IncomingMessage, res: ServerResponse) => Promise<void>) & {
  handles(pathname: string): boolean
  readonly views: InspectorViews
}

export function createInspector(options: InspectorOptions): InspectorHandler {
  const base = options.base ?? ''
  const views = new InspectorViews(options.source)
  const assets = new AssetStore()
  const page = pageDocument()
  const report = options.report ?? (() => {})

  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    let url: URL
    try {
      url = new URL(req.url ?? '/', 'http://inspector.invalid')
    } catch {
      return sendError(res, new ViewError(400, 'INVALID_REQUEST', 'the request target is not a valid path'))
    }
    const path = url.pathname.slice(base.length)
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new ViewError(405, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed: the inspector only reads`)
      // `/ui` → `/ui/`: the page's relative links resolve against its folder.
      if (path === '') return redirect(res, `${base}/${url.search}`)
      if (path === '/') return sendAsset(req, res, page.asset, { 'content-security-policy': page.csp })
      if (path.startsWith('/assets/')) {
        const asset = assets.get(path.slice('/assets/'.length))
        if (!asset) throw new ViewError(404, 'NOT_FOUND', `no such asset: ${path}`)
        return sendAsset(req, res, asset)
      }
      if (!path.startsWith('/api/')) throw new ViewError(404, 'NOT_FOUND', `no such page: ${url.pathname}`)
      if (!options.authorize(req.headers.authorization)) {
        throw new ViewError(401, 'UNAUTHORIZED', 'a valid token is required (Authorization: Bearer <token>)')
      }
      await api(req, res, path.slice('/api'.length), url)
    } catch (error) {
      if (!(error instanceof ViewError)) report(error)
      sendError(res, error instanceof ViewError ? error : new ViewError(500, 'INTERNAL', 'the inspector failed to answer; the server log has the details'))
    }
  }

  async function api(req: IncomingMessage, res: ServerResponse, path: string, url: URL) {
    const parts = path.split('/').filter(Boolean).map(decode)
    if (parts[0] !== 'sessions') throw new ViewError(404, 'NOT_FOUND', `no such endpoint: ${url.pathname}`)
    if (parts.length === 1) return sendJson(res, { sessions: await views.sessions() })
    const id = parts[1]
    const [view, arg] = parts.slice(2)
    if (parts.length === 2) return sendJson(res, await views.session(id))
    if (view === 'events' && parts.length === 3) return streamEvents(req, res, id, seqParam(url, 'after', -1))
    if (view === 'events' && parts.length === 4) return sendJson(res, await views.event(id, whole(arg, 'seq')))
    if (view === 'requests' && parts.length === 4) return sendJson(res, await views.request(id, whole(arg, 'request')))
    if (view === 'series' && parts.length === 3) return sendJson(res, await views.series(id))
    if (view === 'diff' && parts.length === 3) return sendJson(res, await views.diff(id, seqParam(url, 'a'), seqParam(url, 'b')))
    if (view === 'footprint' && parts.length === 3) return sendJson(res, await views.footprint(id, url.searchParams.get('plugin') ?? undefined))
    throw new ViewError(404, 'NOT_FOUND', `no such endpoint: ${url.pathname}`)
  }

  /** The session's events after `after`, as they are stored: `id:` the seq, `data:` its seq and type (the page reads the views again). */
  async function streamEvents(req: IncomingMessage, res: ServerResponse, id: string, after: number) {
    // Read once first, so an unknown session is a 404 rather than an empty stream.
    await views.load(id)
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' })
    res.write('retry: 1000\n\n')
    const abort = new AbortController()
    const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), options.heartbeatMs ?? 15_000)
    res.on('close', () => {
      abort.abort()
      clearInterval(heartbeat)
    })
    try {
      for await (const batch of options.source.follow(id, after, abort.signal)) {
        for (const event of batch) res.write(`id: ${event.seq}\ndata: ${JSON.stringify({ seq: event.seq, type: event.type })}\n\n`)
      }
    } catch (error) {
      // The headers are out: the stream ends, and the page reconnects from its last seq.
      if (!abort.signal.aborted) report(error)
    } finally {
      clearInterval(heartbeat)
      if (!res.writableEnded) res.end()
    }
  }

  return Object.assign(handler, {
    handles: (pathname: string) => pathname === base || pathname.startsWith(`${base}/`),
    views,
  })
}

/** A checker of `Authorization: Bearer <token>` that takes the same time wherever, and whether, the token differs. */
export function bearerToken(token: string): (authorization: string | undefined) => boolean {
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest()
  const expected = digest(token)
  return authorization => {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '')
    return timingSafeEqual(digest(match?.[1] ?? ''), expected) && match !== null
  }
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    throw new ViewError(400, 'INVALID_REQUEST', `the path segment "${segment}" is not valid percent-encoding`)
  }
}

function whole(raw: string | undefined, name: string): number {
  if (raw === undefined || !/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new ViewError(400, 'INVALID_REQUEST', `${name} must be a whole number, got "${raw ?? ''}"`)
  }
  return Number(raw)
}

function seqParam(url: URL, name: string, fallback?: number): number {
  const raw = url.searchParams.get(name)
  if (raw === null && fallback !== undefined) return fallback
  if (raw === null || !/^-?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new ViewError(400, 'INVALID_REQUEST', `query parameter "${name}" must be a whole number, got "${raw ?? ''}"`)
  }
  return Number(raw)
}

function redirect(res: ServerResponse, location: string) {
  res.writeHead(308, { location, 'cache-control': 'no-store' })
  res.end()
}

const SECURITY_HEADERS = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' }

function sendJson(res: ServerResponse, body: unknown, status = 200) {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...SECURITY_HEADERS,
  })
  res.end(text)
}

function sendError(res: ServerResponse, error: ViewError) {
  if (res.headersSent) return void res.destroy()
  sendJson(res, { error: { code: error.code, message: error.message } }, error.status)
}

/** An asset, compressed when the client takes gzip; a client that has it already gets 304. */
function sendAsset(req: IncomingMessage, res: ServerResponse, asset: Asset, headers: Record<string, string> = {}) {
  const common = { etag: asset.etag, 'cache-control': 'no-cache', vary: 'accept-encoding', ...SECURITY_HEADERS, ...headers }
  if (req.headers['if-none-match'] === asset.etag) {
    res.writeHead(304, common)
    return void res.end()
  }
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))
  const body = gzip ? asset.gzip : asset.body
  res.writeHead(200, { 'content-type': asset.type, 'content-length': body.length, ...(gzip && { 'content-encoding': 'gzip' }), ...common })
  res.end(req.method === 'HEAD' ? undefined : body)
}
