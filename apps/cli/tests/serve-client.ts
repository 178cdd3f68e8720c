// A raw client of `loom serve` for the tests of what the typed one
// (`@loom/client`) cannot send or does not show: JSON requests with any
// headers and body, and an event-stream reader that keeps the SSE framing
// (`retry:`, comments, the end of the stream) and stops when a condition holds
// (or after a timeout). Also `readUntil` for the typed client's event
// iterator, and `startHost`, one `loom serve` process of a multi-host test.
import { spawn, type ChildProcess } from 'node:child_process'
import type { SessionEvent } from '@loom/client'
import { startTestPostgres, type TestPostgres } from '@loom/session-postgres/testing'
import { afterAll, beforeAll, expect } from 'vitest'
import { cleanEnv, MAIN, postgresStore } from './helpers.ts'

export interface Reply {
  status: number
  headers: Headers
  body: any
  text: string
}

export function client(base: string, token: string) {
  const auth = { authorization: `Bearer ${token}` }
  return {
    base,
    async request(method: string, path: string, body?: unknown, headers: Record<string, string> = auth): Promise<Reply> {
      const response = await fetch(base + path, {
        method,
        headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      })
      const text = await response.text()
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
      return { status: response.status, headers: response.headers, body: parsed, text }
    },
    /** Reads the event stream of `id` until `until(events)` holds, the stream ends, or `timeoutMs` passes. */
    events(id: string, options: { lastEventId?: number; after?: number; until?: (events: Frame[]) => boolean; timeoutMs?: number } = {}) {
      const query = options.after === undefined ? '' : `?after=${options.after}`
      return readStream(
        `${base}/v1/sessions/${id}/events${query}`,
        {
          ...auth,
          ...(options.lastEventId !== undefined && { 'last-event-id': String(options.lastEventId) }),
        },
        options.until ?? (() => false),
        options.timeoutMs ?? 20_000,
      )
    },
  }
}

export interface Frame {
  id: number
  event: { seq: number; type: string; data: any }
}

export interface StreamRead {
  status: number
  frames: Frame[]
  comments: string[]
  retry: number | undefined
  /** The server ended the stream (rather than the reader stopping it). */
  ended: boolean
  body: string
}

async function readStream(url: string, headers: Record<string, string>, until: (frames: Frame[]) => boolean, timeoutMs: number): Promise<StreamRead> {
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(), timeoutMs)
  const read: StreamRead = { status: 0, frames: [], comments: [], retry: undefined, ended: false, body: '' }
  try {
    const response = await fetch(url, { headers, signal: abort.signal })
    read.status = response.status
    if (response.status !== 200 || !response.body) {
      read.body = await response.text()
      return read
    }
    const decoder = new TextDecoder()
    let buffer = ''
    const reader = response.body.getReader()
    for (;;) {
      const { value, done } = await reader.read()
      if (done) {
        read.ended = true
        break
      }
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        let id: number | undefined
        let data: string | undefined
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) read.comments.push(line.slice(1).trim())
          else if (line.startsWith('id: ')) id = Number(line.slice(4))
          else if (line.startsWith('data: ')) data = line.slice(6)
          else if (line.startsWith('retry: ')) read.retry = Number(line.slice(7))
        }
        if (id !== undefined && data !== undefined) read.frames.push({ id, event: JSON.parse(data) })
      }
      if (until(read.frames)) {
        abort.abort()
        break
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error
  } finally {
    clearTimeout(timer)
  }
  return read
}

/** The frames hold the end of turn `turn`. */
export const turnEnded = (turn: number) => (frames: Frame[]) => frames.some(frame => frame.event.type === 'turn/end' && frame.event.data.turn === turn)

/** Reads `events` (`LoomClient.events()`) until `stop(event)` holds, leaving the iterator open to go on; the events read, that one included. */
export async function readUntil(events: AsyncIterator<SessionEvent>, stop: (event: SessionEvent) => boolean): Promise<SessionEvent[]> {
  const seen: SessionEvent[] = []
  for (let next = await events.next(); !next.done; next = await events.next()) {
    seen.push(next.value)
    if (stop(next.value)) break
  }
  return seen
}

/** The event ends turn `turn`. */
export const endsTurn = (turn: number) => (event: SessionEvent) => event.type === 'turn/end' && (event.data as { turn: number }).turn === turn

/** Polls `check` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const start = Date.now()
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

export interface Host {
  name: string
  child: ChildProcess
  url: string
  stderr: () => string
  exited: Promise<number | null>
}

/** A `loom serve` process on a free port in `at`, with `env` on top of a clean environment; resolves once it listens. */
export function startHost(name: string, at: { cwd: string; home: string }, env: Record<string, string>, args: string[] = []): Promise<Host> {
  const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--drain-ms', '2000', ...args], {
    cwd: at.cwd,
    env: cleanEnv(at.home, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.setEncoding('utf8').on('data', (data: string) => {
    stdout += data
  })
  child.stderr!.setEncoding('utf8').on('data', (data: string) => {
    stderr += data
  })
  const exited = new Promise<number | null>(resolve => child.on('exit', code => resolve(code)))
  return eventually<Host>(
    () => {
      if (child.exitCode !== null) throw new Error(`host ${name} exited ${child.exitCode}: ${stderr}`)
      const url = /listening on (http:\S+)/.exec(stdout)?.[1]
      return url === undefined ? undefined : { name, child, url, stderr: () => stderr, exited }
    },
    30_000,
    `host ${name} to listen`,
  )
}

/** Stops the hosts still running (`signal`, SIGKILL by default: a test that failed halfway); resolves to their exit codes once every one has exited. */
export function stopHosts(hosts: readonly (Host | undefined)[], signal: NodeJS.Signals = 'SIGKILL'): Promise<(number | null)[]> {
  const started = hosts.filter(host => host !== undefined)
  for (const host of started) if (host.child.exitCode === null && host.child.signalCode === null) host.child.kill(signal)
  return Promise.all(started.map(host => host.exited))
}

/**
 * A message for session `id` posted to `host` until it is accepted (202) within `timeoutMs`: while the host's
 * pool reconnects to a store that is back, or another host is still letting the lease go, only 409 and 503.
 */
export function messageOnceTaken(host: Host, api: ReturnType<typeof client>, id: string, text: string, timeoutMs: number, headers?: Record<string, string>) {
  return eventually(
    async () => {
      const reply = await api.request('POST', `/v1/sessions/${id}/messages`, { text }, headers)
      if (reply.status === 202) return reply
      expect([409, 503], `${reply.text}\n${host.stderr()}`).toContain(reply.status)
      await new Promise(resolve => setTimeout(resolve, 200))
      return undefined
    },
    timeoutMs,
    `host ${host.name} to take session ${id}`,
  )
}

/**
 * The hosts of a multi-host test on one PostgreSQL, started before the file's tests; after them every host
 * still running is killed and the server stopped. Each host runs `hostsLayer` with its own `script`.
 */
export function postgresHosts(token: string) {
  const hosts: Host[] = []
  let pg: TestPostgres | undefined
  beforeAll(async () => {
    pg = await startTestPostgres()
  }, 180_000)
  afterAll(async () => {
    await stopHosts(hosts)
    await pg?.stop()
  })
  return {
    get pg(): TestPostgres {
      if (!pg) throw new Error('PostgreSQL is not started yet: use it inside a test')
      return pg
    },
    async start(name: string, at: { cwd: string; home: string }, script: unknown): Promise<Host> {
      const host = await startHost(name, at, {
        LOOM_SERVE_TOKEN: token,
        LOOM_PG_URL: this.pg.url,
        LOOM_TEST_HOST: name,
        LOOM_TEST_SCRIPT: JSON.stringify(script),
      })
      hosts.push(host)
      return host
    },
  }
}

/**
 * The layer of a multi-host test: sessions in PostgreSQL under `schema`, leases of
 * `leaseStaleMs` named by `LOOM_TEST_HOST`, and a scripted model looping over the
 * script in `LOOM_TEST_SCRIPT` (each host gets its own).
 */
export function hostsLayer(schema: string, leaseStaleMs: number): string {
  const store = postgresStore(schema, { maxDelayMs: 50, leaseHeartbeatMs: 300, leaseStaleMs, leaseHost: '!!js "process.env.LOOM_TEST_HOST"' })
  return `${store}- id: scripted
  disabled: true
- insert:
    - id: script
      name: '@loom/llm-scripted'
      config:
        provider: scripted
        model: scripted-1
        loop: true
        script: !!js "JSON.parse(process.env.LOOM_TEST_SCRIPT)"
`
}
