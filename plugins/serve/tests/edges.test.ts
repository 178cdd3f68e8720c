// The edges of the server, on real sockets: a request whose headers or body
// trickle is answered 408 and cut once its deadline passes, while an event
// stream (a response) stays open past both; connections past the cap get 503
// (the probes are answered); store errors get codes of their own and no
// server path; a client-chosen model outside the allowlist is 400. The
// deadlines are short here (300 and 600 ms): the tests wait for the outcome
// (an answer, a closed socket), never for a time. `loom serve` end to end:
// apps/cli/tests/serve-edges.test.ts.
import { Context } from '@deepseek-ai/cordis'
import { SessionPersistenceCorruptionError, SessionStore } from '@loom/session'
import { type MemoryLogs, MemoryPersistence, meta, raw, shortTurn } from '@loom/session/testing'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import type { Server } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createApi, isProbe } from '../src/api.ts'
import { createHttpServer, type EdgeLimits, withoutPaths } from '../src/http.ts'
import { ModelAllowlist } from '../src/models.ts'
import { HostedSessions, type Persistence, type SessionOpener } from '../src/sessions.ts'

const TOKEN = 'edges-test-token-0123456789'
const AUTH = `Authorization: Bearer ${TOKEN}\r\n`

/** What a raw connection read before the server closed it. */
interface Cut {
  status: number | undefined
  head: string
  body: any
}

/**
 * A connection that sends `start` at once, then `drip` again and again (each
 * after the server's previous write could be read) until the server closes it;
 * resolves with the answer it read.
 */
function trickle(port: number, start: string, drip: string | undefined, gapMs = 100): Promise<Cut> {
  return new Promise(resolve => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    let timer: ReturnType<typeof setTimeout> | undefined
    const next = () => {
      if (socket.destroyed || socket.writableEnded || drip === undefined) return
      socket.write(drip)
      timer = setTimeout(next, gapMs)
    }
    socket.setEncoding('utf8')
    socket.on('data', (data: string) => {
      text += data
    })
    socket.on('error', () => {})
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(parse(text))
    })
    socket.write(start, () => next())
  })
}

/** One request on a new connection; resolves with the answer once the server closes it or the whole body is read. */
function once(port: number, request: string): Promise<Cut & { socket: Socket }> {
  return new Promise(resolve => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    socket.on('error', () => {})
    const done = () => resolve({ ...parse(text), socket })
    socket.on('data', (data: string) => {
      text += data
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1])
      const end = text.indexOf('\r\n\r\n')
      if (end !== -1 && Buffer.byteLength(text.slice(end + 4)) === length) done()
    })
    socket.on('close', done)
    socket.write(request)
  })
}

/** An event stream of `id`, once its answer started. */
async function openStream(port: number, id: string): Promise<{ socket: Socket; text: () => string }> {
  const socket = connect(port, '127.0.0.1')
  let text = ''
  socket.setEncoding('utf8').on('data', (data: string) => {
    text += data
  })
  socket.write(get(`/v1/sessions/${id}/events`))
  await vi.waitFor(() => expect(text).toMatch(/^HTTP\/1\.1 200/), { timeout: 10_000 })
  return { socket, text: () => text }
}

function parse(text: string): Cut {
  const end = text.indexOf('\r\n\r\n')
  const head = end === -1 ? text : text.slice(0, end)
  let body: unknown
  try {
    body = JSON.parse(text.slice(end + 4))
  } catch {
    body = undefined
  }
  return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1]) || undefined, head, body }
}

const get = (path: string, headers = AUTH) => `GET ${path} HTTP/1.1\r\nHost: loom\r\n${headers}\r\n`

describe('the edges of a server', () => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'loom-serve-edges-')))
  const logs: MemoryLogs = new Map([['stored', { header: meta('stored', { cwd: base, createdAt: 1 }), events: raw(0, sink => shortTurn(sink, 1)) }]])
  const opened: { provider?: string; model?: string }[] = []
  // New sessions fail after the route was chosen: what is checked is the route that got this far.
  const opener: SessionOpener = {
    async open(flags) {
      opened.push({ provider: flags.provider, model: flags.model })
      throw new Error('no agents in this test')
    },
    async route(flags) {
      return { provider: flags.provider ?? 'scripted', model: flags.model ?? 'scripted-1' }
    },
  }
  const errors: unknown[] = []
  const servers: Server[] = []
  let store: Persistence
  let sessions: HostedSessions

  const listen = async (limits: EdgeLimits, options: { heartbeatMs?: number; models?: ModelAllowlist } = {}) => {
    const api = createApi(sessions, {
      token: TOKEN,
      maxBodyBytes: 1 << 20,
      heartbeatMs: options.heartbeatMs ?? 15_000,
      retryMs: 1000,
      store: 'memory',
      report: error => errors.push(error),
      models: options.models,
    })
    const server = createHttpServer(api, limits, isProbe)
    servers.push(server)
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    return (server.address() as AddressInfo).port
  }

  beforeAll(async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    await root.plugin(MemoryPersistence, { logs })
    const fiber = await root.plugin({ name: 'host', inject: ['sessions', 'sessionPersistence'], apply() {} })
    store = fiber.ctx.sessionPersistence
    sessions = new HostedSessions(fiber.ctx, opener, store, { cwd: base, route: {}, idleReleaseMs: 5000, tailIntervalMs: 50 })
  })

  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections()
      await new Promise<void>(resolve => server.close(() => resolve()))
    }
    rmSync(base, { recursive: true, force: true })
  })

  describe('deadlines (headers 300 ms, whole request 600 ms)', () => {
    const limits = { headersTimeoutMs: 300, requestTimeoutMs: 600, maxConnections: 100 }
    let port: number
    beforeAll(async () => {
      port = await listen(limits, { heartbeatMs: 50 })
    })

    it('headers that trickle in, a header line at a time: 408 REQUEST_TIMEOUT, and the connection is closed', async () => {
      const cut = await trickle(port, 'GET /v1/sessions HTTP/1.1\r\nHost: loom\r\n', 'X-Slow: 1\r\n')
      expect(cut.status).toBe(408)
      expect(cut.head).toMatch(/connection: close/i)
      expect(cut.body.error.code).toBe('REQUEST_TIMEOUT')
      expect(cut.body.error.message).toContain('headers within 300 ms, the whole request within 600 ms')
    })

    it('a connection that sends nothing is closed at the headers deadline', async () => {
      const cut = await trickle(port, '', undefined)
      expect(cut.status).toBe(408)
    })

    it('a body that trickles in: 408, the connection closed, nothing created, nothing reported', async () => {
      const head = `POST /v1/sessions HTTP/1.1\r\nHost: loom\r\n${AUTH}Content-Length: 100000\r\n\r\n{"task": "`
      const cut = await trickle(port, head, 'x')
      expect(cut.status).toBe(408)
      expect(cut.body.error.code).toBe('REQUEST_TIMEOUT')
      expect(opened).toEqual([])
      expect(errors).toEqual([])
    })

    it('an event stream stays open past both deadlines: it is a response, not a slow request', async () => {
      const { socket, text } = await openStream(port, 'stored')
      const heartbeats = () => text().split(': heartbeat').length - 1
      await vi.waitFor(() => expect(text()).toContain('"type":"turn/end"'), { timeout: 10_000 })
      // A request that trickles in from now on is cut after the longer deadline: the stream has outlived it.
      const cut = await trickle(port, `POST /v1/sessions HTTP/1.1\r\nHost: loom\r\n${AUTH}Content-Length: 10\r\n\r\n`, 'x')
      expect(cut.status).toBe(408)
      const seen = heartbeats()
      await vi.waitFor(() => expect(heartbeats()).toBeGreaterThan(seen), { timeout: 10_000 })
      expect(socket.destroyed).toBe(false)
      socket.destroy()
    })

    it('headersTimeoutMs above requestTimeoutMs is refused, naming both', () => {
      expect(() => createHttpServer(() => {}, { headersTimeoutMs: 700, requestTimeoutMs: 600, maxConnections: 1 })).toThrow(
        'headersTimeoutMs (700) must not exceed requestTimeoutMs (600)',
      )
    })
  })

  it('past maxConnections: 503 TOO_MANY_CONNECTIONS with Retry-After and the connection closed; the probes are answered; served again once one closes', async () => {
    const port = await listen({ headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 2 })
    // Two event streams: the server has both connections.
    const held = [await openStream(port, 'stored'), await openStream(port, 'stored')]
    const busy = await once(port, get('/v1/sessions'))
    expect(busy.status).toBe(503)
    expect(busy.head).toMatch(/retry-after: 1/i)
    expect(busy.head).toMatch(/connection: close/i)
    expect(busy.body.error).toEqual({ code: 'TOO_MANY_CONNECTIONS', message: 'this server already serves 2 connections; retry, or use another host' })
    expect((await once(port, get('/readyz', ''))).status).toBe(200)
    expect((await once(port, get('/healthz?probe=1', ''))).status).toBe(200)
    held[0].socket.destroy()
    // The server sees the close when it sees it: retry until it does.
    await vi.waitFor(async () => expect((await once(port, get('/v1/sessions'))).status).toBe(200), { timeout: 10_000, interval: 50 })
    held[1].socket.destroy()
  })

  it('malformed HTTP is a JSON 400 BAD_HTTP', async () => {
    const port = await listen({ headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 10 })
    const bad = await once(port, 'NOT HTTP AT ALL\r\n\r\n')
    expect(bad.status).toBe(400)
    expect(bad.body.error.code).toBe('BAD_HTTP')
  })

  describe('errors', () => {
    let port: number
    beforeAll(async () => {
      port = await listen({ headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 100 })
    })

    it('a damaged log is 500 SESSION_CORRUPT on every route that reads it, naming the command to run, never the log file', async () => {
      const path = join(base, 'home', 'sessions', 'stored', 'log.jsonl')
      const readFrom = vi
        .spyOn(store, 'readFrom')
        .mockRejectedValue(new SessionPersistenceCorruptionError(`stored session "stored" failed validation: seq 3 is missing (raw log: ${path})`))
      for (const request of [get('/v1/sessions/stored'), get('/v1/sessions/stored/events')]) {
        const reply = await once(port, request)
        expect(reply.status).toBe(500)
        expect(reply.body.error).toEqual({
          code: 'SESSION_CORRUPT',
          message: 'session "stored" cannot be read: its stored log is damaged; nothing was done. An operator can run `loom sessions verify stored`',
        })
        expect(reply.head + JSON.stringify(reply.body)).not.toContain(base)
      }
      // The server's log has the whole error, path included.
      expect(String(errors.at(-1))).toContain(path)
      readFrom.mockRestore()
    })

    it('a message that names a server path reaches the client without it; the routes the API quotes stay', () => {
      expect(withoutPaths('session "x" not found in /srv/loom/home/sessions (raw log: /srv/loom/a b.jsonl)')).toBe(
        'session "x" not found in <path> (raw log: <path> b.jsonl)',
      )
      expect(withoutPaths('cannot read C:\\Users\\loom\\sessions\\x')).toBe('cannot read <path>')
      expect(withoutPaths('no such endpoint: GET /v1/sessions/x/y')).toBe('no such endpoint: GET /v1/sessions/x/y')
      expect(withoutPaths('PostgreSQL at db.internal:5432/loom, see http://example.com/a/b')).toBe(
        'PostgreSQL at db.internal:5432/loom, see http://example.com/a/b',
      )
    })

    it('a store error that names a path, passed on to the client (a usage error), is passed on without it', async () => {
      const readFrom = vi
        .spyOn(store, 'readFrom')
        .mockRejectedValue(Object.assign(new Error('cannot open /srv/loom/home/sessions/x/log.jsonl'), { name: 'UsageError' }))
      const reply = await once(port, get('/v1/sessions/stored'))
      expect(reply.status).toBe(400)
      expect(reply.body.error.message).toBe('cannot open <path>')
      readFrom.mockRestore()
    })

    it('a request target that is not a path is 400, not a crash', async () => {
      const reply = await once(port, get('//'))
      expect(reply.status).toBe(400)
      expect(reply.body.error).toEqual({ code: 'INVALID_REQUEST', message: 'the request target is not a valid path' })
    })
  })

  describe('the model allowlist', () => {
    const post = (body: unknown) => {
      const text = JSON.stringify(body)
      return `POST /v1/sessions HTTP/1.1\r\nHost: loom\r\n${AUTH}Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`
    }
    const catalog = {
      listProviders: () => [{ id: 'deepseek' }, { id: 'scripted' }],
      listModels: async (provider: string) => (provider === 'deepseek' ? [{ id: 'deepseek-flash' }, { id: 'deepseek-v4-pro' }] : [{ id: 'scripted-1' }]),
    }

    it("by default the providers' declared models: another model or provider is 400 MODEL_NOT_ALLOWED naming the allowed ones, and opens nothing", async () => {
      const port = await listen(
        { headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 100 },
        { models: new ModelAllowlist({ catalog: () => catalog, route: {}, defaultRoute: async () => ({ provider: 'scripted', model: 'scripted-1' }) }) },
      )
      opened.length = 0
      const allowed = ['deepseek/deepseek-flash', 'deepseek/deepseek-v4-pro', 'scripted/scripted-1']
      const model = await once(port, post({ task: 'x', model: 'gpt-9-ultra' }))
      expect(model.status).toBe(400)
      expect(model.body.error).toEqual({
        code: 'MODEL_NOT_ALLOWED',
        message: `model "scripted/gpt-9-ultra" is not allowed on this server (allowed: ${allowed.join(', ')})`,
        field: 'model',
        allowed,
      })
      // A model of another provider than the one the request runs on.
      expect((await once(port, post({ task: 'x', model: 'deepseek-flash' }))).body.error.code).toBe('MODEL_NOT_ALLOWED')
      const provider = await once(port, post({ task: 'x', provider: 'openai' }))
      expect(provider.body.error).toMatchObject({ code: 'MODEL_NOT_ALLOWED', field: 'provider' })
      expect(opened).toEqual([])
      // Allowed routes get as far as opening the agent.
      for (const body of [{ model: 'scripted-1' }, { provider: 'deepseek', model: 'deepseek-v4-pro' }, { provider: 'deepseek' }, {}]) {
        expect((await once(port, post({ task: 'x', ...body }))).status).toBe(500)
      }
      expect(opened).toEqual([
        { provider: undefined, model: 'scripted-1' },
        { provider: 'deepseek', model: 'deepseek-v4-pro' },
        { provider: 'deepseek', model: undefined },
        { provider: undefined, model: undefined },
      ])
    })

    it('configured routes replace the declared ones; provider/* allows any model of it; the default route is always allowed', async () => {
      const models = new ModelAllowlist({
        models: ['deepseek/*', 'or/meta/llama-4'],
        catalog: () => catalog,
        route: { provider: 'scripted', model: 'scripted-1' },
      })
      const port = await listen({ headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, maxConnections: 100 }, { models })
      opened.length = 0
      expect((await once(port, post({ task: 'x', provider: 'deepseek', model: 'anything' }))).status).toBe(500)
      expect((await once(port, post({ task: 'x', provider: 'or', model: 'meta/llama-4' }))).status).toBe(500)
      expect((await once(port, post({ task: 'x', model: 'scripted-1' }))).status).toBe(500)
      const refused = await once(port, post({ task: 'x', provider: 'or', model: 'meta/llama-5' }))
      expect(refused.body.error.allowed).toEqual(['deepseek/*', 'or/meta/llama-4', 'scripted/scripted-1'])
      expect(opened).toHaveLength(3)
      expect(() => new ModelAllowlist({ models: ['gpt-4'], catalog: () => undefined, route: {} })).toThrow(
        'models entry "gpt-4" must be provider/model (or provider/* for any model of that provider)',
      )
    })
  })
})
