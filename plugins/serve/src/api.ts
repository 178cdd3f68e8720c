// The endpoints, version 1: each request is authenticated first (except the
// probes /healthz and /readyz), then routed; a handler checks its input field
// by field and answers JSON, or an event stream. Errors are `{ error: { code,
// message } }`; a store that cannot be reached is 503 STORE_UNAVAILABLE, which
// (like every error) means the request was not carried out; errors.ts has the
// other store errors' codes.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { hostname } from 'node:os'
import { type ApiApprovals, DECISIONS, type Decision } from './approvals.ts'
import { bearerCheck } from './auth.ts'
import { answerFor } from './errors.ts'
import { idempotencyKey } from './idempotency.ts'
import { OPENAPI } from './openapi.ts'
import { ApiError, discardBody, objectBody, onlyFields, readJson, Router, sendError, sendJson, stringField, type Request } from './http.ts'
import type { ModelAllowlist } from './models.ts'
import type { HostedSessions, MessageMode } from './sessions.ts'
import { EventStream, resumeAfter } from './sse.ts'
import { isUiPath } from './ui.ts'

export interface ApiOptions {
  token: string
  maxBodyBytes: number
  heartbeatMs: number
  retryMs: number
  /** What /healthz and /readyz say this server stores sessions in. */
  store: string
  /** The questions of tool calls to clients, when this server answers approvals over the API. */
  approvals?: ApiApprovals
  /** Reports an unexpected failure (the client gets a 500 without its details). */
  report: (error: unknown) => void
  /** The routes a request may choose for a new session; absent: any the deployment serves. */
  models?: ModelAllowlist
  /** The inspector's page and API under /ui (ui.ts): it checks the token of its API itself. */
  ui?: (req: IncomingMessage, res: ServerResponse) => Promise<void>
}

const MODES: readonly MessageMode[] = ['followup', 'steer', 'inject']
/** The probes: no token, so load balancers and orchestrators can ask. */
const PROBES = new Set(['/healthz', '/readyz'])

/** A probe request: answered even past the connection cap, so a full host is not taken for a dead one. */
export const isProbe = (req: IncomingMessage) => PROBES.has((req.url ?? '').split('?')[0])

/** The request listener of the server, with the routes it serves (`METHOD /path/:param`). */
export type Api = ((req: IncomingMessage, res: ServerResponse) => void) & { readonly routes: readonly { method: string; path: string }[] }

/** The request listener of the server. */
export function createApi(sessions: HostedSessions, options: ApiOptions): Api {
  const authorized = bearerCheck(options.token)
  const started = Date.now()
  const router = new Router()
    // Liveness: the process answers. Draining is said, not failed: a restart mid-drain would cut its turns short.
    .add('GET', '/healthz', async ({ res }) => {
      sendJson(res, 200, {
        status: sessions.draining ? 'draining' : 'ok',
        host: hostname(),
        pid: process.pid,
        uptimeMs: Date.now() - started,
        store: options.store,
        agents: sessions.counts(),
      })
    })
    // Readiness: this host can take work now (not draining, the store answers); else 503 with the reason.
    .add('GET', '/readyz', async ({ res }) => {
      const unready = await sessions.unready()
      sendJson(
        res,
        unready ? 503 : 200,
        { status: unready?.status ?? 'ready', ...(unready && { reason: unready.reason }), host: hostname(), store: options.store },
        unready ? RETRY : {},
      )
    })
    // The contract, behind the token like the rest: it is the same for every server of this version (the package has it too).
    .add('GET', '/v1/openapi.json', async ({ res }) => sendJson(res, 200, OPENAPI))
    .add('POST', '/v1/sessions', async ({ req, res }) => {
      const body = objectBody(await readJson(req, options.maxBodyBytes))
      onlyFields(body, ['task', 'provider', 'model'])
      const input = { task: stringField(body, 'task', true), provider: stringField(body, 'provider'), model: stringField(body, 'model') }
      await options.models?.check(input)
      const created = await sessions.create(input, idempotencyKey(req))
      sendJson(res, 201, { ...created, status: 'running', events: `/v1/sessions/${created.id}/events` }, { location: `/v1/sessions/${created.id}` })
    })
    .add('GET', '/v1/sessions', async ({ res }) => {
      sendJson(res, 200, { sessions: await sessions.list() })
    })
    .add('GET', '/v1/sessions/:id', async ({ res, url, params }) => {
      const from = seqParam(url, 'from', 0)
      sendJson(res, 200, await sessions.get(params.id, from))
    })
    .add('POST', '/v1/sessions/:id/messages', async ({ req, res, params }) => {
      const body = objectBody(await readJson(req, options.maxBodyBytes))
      onlyFields(body, ['text', 'mode'])
      const text = stringField(body, 'text', true)
      const mode = (stringField(body, 'mode') ?? 'followup') as MessageMode
      if (!MODES.includes(mode)) {
        throw new ApiError(400, 'INVALID_REQUEST', `field "mode" must be one of ${MODES.join(', ')}, got "${mode}"`, { details: { field: 'mode' } })
      }
      sendJson(res, 202, { ...(await sessions.message(params.id, text, mode, idempotencyKey(req))), mode })
    })
    .add('POST', '/v1/sessions/:id/cancel', async ({ req, res, params }) => {
      // A body is optional; a large one is still refused.
      if (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') objectBody(await readJson(req, options.maxBodyBytes))
      sendJson(res, 200, await sessions.cancel(params.id, idempotencyKey(req)))
    })
    .add('GET', '/v1/sessions/:id/events', async request => streamEvents(sessions, request, options))
    .add('POST', '/v1/sessions/:id/approvals/:callId', async ({ req, res, params }) => {
      const body = objectBody(await readJson(req, options.maxBodyBytes))
      onlyFields(body, ['decision', 'note', 'by'])
      const decision = stringField(body, 'decision', true) as Decision
      if (!DECISIONS.includes(decision)) {
        throw new ApiError(400, 'INVALID_REQUEST', `field "decision" must be one of ${DECISIONS.join(', ')}, got "${decision}"`, {
          details: { field: 'decision' },
        })
      }
      const input = { decision, note: stringField(body, 'note'), by: stringField(body, 'by') }
      if (!options.approvals) {
        await sessions.locate(params.id)
        throw new ApiError(
          404,
          'APPROVAL_NOT_FOUND',
          'this server does not take approvals over the API: it answers them itself (loom serve --approve api asks the clients)',
        )
      }
      sendJson(res, 200, await options.approvals.answer(params.id, params.callId, input, idempotencyKey(req)))
    })

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      let url: URL | undefined
      try {
        url = requestUrl(req)
        if (options.ui && isUiPath(url.pathname)) return await options.ui(req, res)
        // Nothing but the refusal before the token is checked: no routing, no body read.
        if (!PROBES.has(url.pathname) && !authorized(req.headers.authorization)) {
          throw new ApiError(401, 'UNAUTHORIZED', 'a valid bearer token is required (Authorization: Bearer <token>)', {
            headers: { 'www-authenticate': 'Bearer realm="loom"', ...(hasBody(req) && { connection: 'close' }) },
          })
        }
        const { handler, params } = router.match(req.method ?? 'GET', url.pathname)
        await handler({ req, res, url, params })
      } catch (error) {
        if (error instanceof ApiError) {
          sendError(res, error)
          discardBody(req)
          return
        }
        options.report(error)
        sendError(res, answerFor(error, url && sessionOf(url.pathname)))
      }
    })()
  }
  return Object.assign(listener, { routes: router.list() })
}

/** An event stream: the stored events after the client's last seq, then each new batch once it is durable. */
async function streamEvents(sessions: HostedSessions, { req, res, url, params }: Request, options: ApiOptions) {
  if (sessions.draining) {
    throw new ApiError(503, 'DRAINING', 'this server is shutting down; reconnect to another host with Last-Event-ID', { headers: { 'retry-after': '1' } })
  }
  const after = resumeAfter(req, url)
  // Read once before the headers go out, so an unknown session is a 404, not an empty stream.
  const first = await sessions.durableAfter(params.id, after)
  const stream = new EventStream(res, options)
  const abort = new AbortController()
  res.on('close', () => abort.abort())
  let cursor = after
  const send = (batch: readonly { seq: number }[]) => {
    stream.sendEvents(batch)
    if (batch.length) cursor = batch.at(-1)!.seq
  }
  try {
    send(first)
    for await (const batch of sessions.follow(params.id, cursor, abort.signal)) send(batch)
  } catch (error) {
    // Headers are out: the stream just ends, and the client resumes from its last id.
    if (!(error instanceof ApiError)) options.report(error)
  } finally {
    stream.end()
  }
}

const RETRY = { 'retry-after': '1' }

/** The request target as a URL; one that is not a path (`//`, `/\\`) is 400. */
function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'http://loom.invalid')
  } catch {
    throw new ApiError(400, 'INVALID_REQUEST', 'the request target is not a valid path')
  }
}

/** The session a `/v1/sessions/:id…` path names, for error messages. */
function sessionOf(pathname: string): string | undefined {
  const segment = /^\/v1\/sessions\/([^/]+)/.exec(pathname)?.[1]
  try {
    return segment === undefined ? undefined : decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

const hasBody = (req: IncomingMessage) => (req.headers['content-length'] ?? '0') !== '0' || req.headers['transfer-encoding'] !== undefined

function seqParam(url: URL, name: string, fallback: number): number {
  const raw = url.searchParams.get(name)
  if (raw === null) return fallback
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new ApiError(400, 'INVALID_REQUEST', `query parameter "${name}" must be an event seq (a whole number >= 0), got "${raw}"`, {
      details: { field: name },
    })
  }
  return Number(raw)
}
