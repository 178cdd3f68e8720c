// Several hosts over one PostgreSQL: real writer processes that hang (SIGSTOP)
// or die (SIGKILL), the lease rows and their tokens, collisions between hosts,
// the stored text of events, and the errors of a bad configuration.
import { Context, type Fiber } from '@deepseek-ai/cordis'
import SessionStore, { type SessionEvent, type SessionPersistence } from '@loom/session'
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { hostname } from 'node:os'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import PostgresPersistence, { type Config } from '../src/index.ts'
import { startTestPostgres, type TestPostgres } from '../src/testing.ts'

const writerScript = fileURLToPath(new URL('./fixtures/writer.ts', import.meta.url))

let server: TestPostgres
let fibers: Fiber[] = []
let children: ChildProcessWithoutNullStreams[] = []

beforeAll(async () => {
  server = await startTestPostgres()
}, 180_000)
afterAll(() => server?.stop())
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  for (const fiber of fibers.splice(0).reverse()) await Promise.resolve(fiber.dispose()).catch(() => {})
})

/** A host in this process over `schema`. */
async function host(schema: string, config: Partial<Config> = {}) {
  const root = new Context()
  await root.plugin(SessionStore)
  const backend = await root.plugin(PostgresPersistence, { url: server.url, schema, maxDelayMs: 10_000, leaseCommand: 'loom test', ...config })
  fibers.push(backend)
  const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence'], apply() {} })
  return { root, backend, sessions: owner.ctx.sessions, persistence: owner.ctx.get('sessionPersistence') as SessionPersistence }
}

/** A writer process (fixtures/writer.ts) with a live session `id` in `schema`. */
async function writer(schema: string, id: string) {
  const child = spawn(process.execPath, [writerScript, server.url, schema, id], { stdio: ['pipe', 'pipe', 'pipe'] })
  children.push(child)
  let out = ''
  let err = ''
  const waiting: (() => void)[] = []
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
    for (const check of waiting.splice(0)) check()
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  child.on('exit', () => {
    for (const check of waiting.splice(0)) check()
  })
  let read = 0
  /** The next stdout line. */
  const line = () =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const end = out.indexOf('\n', read)
        if (end !== -1) {
          const text = out.slice(read, end)
          read = end + 1
          return resolve(text)
        }
        if (child.exitCode !== null || child.signalCode !== null)
          return reject(new Error(`writer exited (${child.exitCode ?? child.signalCode}): ${out}${err}`))
        waiting.push(check)
      }
      check()
    })
  const send = (command: string) => {
    child.stdin.write(`${command}\n`)
    return line()
  }
  expect(await line()).toBe('READY')
  return { child, send }
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

async function rows(schema: string, id: string): Promise<string[]> {
  const { rows } = await server.query<{ event: string }>(`SELECT event FROM "${schema}".session_events WHERE session_id = $1 ORDER BY seq`, [id])
  return rows.map(row => row.event)
}

async function lease(schema: string, id: string) {
  const { rows } = await server.query<{ token: string; pid: number | null; command: string | null }>(
    `SELECT token, pid, command FROM "${schema}".session_leases WHERE session_id = $1`,
    [id],
  )
  return rows[0]
}

const turnOf = (events: readonly SessionEvent[]) =>
  events.filter(event => event.type === 'turn/start').map(event => (event as SessionEvent<'turn/start'>).data.turn)

describe('a host that lost its lease', () => {
  it('hangs (SIGSTOP) past leaseStaleMs, another host takes over, and its next append is refused with SESSION_LEASE_LOST', { timeout: 60_000 }, async () => {
    const schema = server.schema()
    const a = await writer(schema, 'hung')
    expect(await a.send('TURN 1')).toBe('STORED 5')
    const held = await lease(schema, 'hung')
    expect(held).toMatchObject({ pid: a.child.pid, command: 'pg-writer' })

    // Its heartbeat keeps the lease fresh well past leaseStaleMs (300 ms).
    const b = await host(schema, { leaseHeartbeatMs: 50, leaseStaleMs: 300, leaseCommand: 'host b' })
    await sleep(700)
    await expect(b.persistence.load('hung')).rejects.toMatchObject({
      code: 'SESSION_LEASE_HELD',
      holder: { pid: a.child.pid, host: hostname(), command: 'pg-writer' },
    })

    // Frozen: no heartbeat; once stale, host B takes the lease over with a new token.
    a.child.kill('SIGSTOP')
    await sleep(700)
    const { events } = await b.persistence.load('hung')
    expect(turnOf(events)).toEqual([1])
    const taken = await lease(schema, 'hung')
    expect(taken).toMatchObject({ pid: process.pid, command: 'host b' })
    expect(BigInt(taken.token)).toBe(BigInt(held.token) + 1n)
    const session = await b.persistence.prepare('hung')
    b.sessions.enter(session)
    b.sessions.announce(session)
    session.append('turn/start', { turn: 2 })
    session.append('turn/end', { turn: 2, reason: { kind: 'completed' } })
    await b.sessions.flush(session)
    const before = await rows(schema, 'hung')

    // A wakes up and writes its next turn: refused, naming B; the table is unchanged.
    a.child.kill('SIGCONT')
    const refused = await a.send('TURN 3')
    expect(refused).toMatch(
      new RegExp(
        `^FAILED SESSION_LEASE_LOST session hung: this writer \\(pid ${a.child.pid}\\) lost its write lease, now held by pid ${process.pid} on host .+ \\(host b\\)`,
      ),
    )
    expect(await rows(schema, 'hung')).toEqual(before)
    // What follows A's last stored event is B's alone.
    expect(before.slice(6)).toEqual(session.events.slice(6).map(event => JSON.stringify(event)))
    expect(await a.send('TURN 4')).toMatch(/^FAILED SESSION_LEASE_LOST /)
    expect(await rows(schema, 'hung')).toEqual(before)
  })
})

describe('a writer killed mid-turn', () => {
  it('leaves an open turn that a fresh host closes at once (its pid is gone) and stores the closure', { timeout: 60_000 }, async () => {
    const schema = server.schema()
    const a = await writer(schema, 'killed')
    expect(await a.send('TURN 1')).toBe('STORED 5')
    expect(await a.send('OPEN 2')).toBe('STORED 10')
    const exited = new Promise(resolve => a.child.once('exit', resolve))
    a.child.kill('SIGKILL')
    await exited

    // Default staleness (30 s): only the dead pid on this host lets the lease go at once.
    const fresh = await host(schema)
    const { events } = await fresh.persistence.load('killed')
    expect(events.map(event => event.seq)).toEqual(events.map((_, i) => i))
    expect(events.slice(10).map(event => event.type)).toEqual(['tool/call', 'tool/result', 'step/end', 'turn/end'])
    expect(events[11]).toMatchObject({ data: { error: { code: 'TOOL_OUTCOME_UNKNOWN' } }, sourceEventSeqs: [10] })
    expect(events[13]).toMatchObject({ data: { turn: 2, reason: { kind: 'interrupted' } } })
    expect(await rows(schema, 'killed')).toEqual(events.map(event => JSON.stringify(event)))
    expect(await lease(schema, 'killed')).toMatchObject({ pid: process.pid, command: 'loom test' })
  })
})

describe('the lease row', () => {
  it('keeps its token when released and counts up with every grant', async () => {
    const schema = server.schema()
    const a = await host(schema)
    a.persistence.create({ version: 0, id: 'tokens', createdAt: 1 })
    await a.persistence.append('tokens', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }])
    expect(await lease(schema, 'tokens')).toMatchObject({ token: '1', pid: process.pid })
    await a.persistence.close('tokens')
    expect(await lease(schema, 'tokens')).toMatchObject({ token: '1', pid: null, command: null })
    await a.persistence.load('tokens')
    await a.persistence.close('tokens')
    const b = await host(schema)
    await b.persistence.load('tokens')
    expect(await lease(schema, 'tokens')).toMatchObject({ token: '3', pid: process.pid })
  })
})

describe('two hosts, one schema', () => {
  it('start together (the tables are created once) and a session stored by one since the other started is refused at its first write', async () => {
    const schema = server.schema()
    const [a, b] = await Promise.all([host(schema), host(schema)])
    // B learns of nothing stored at its start, so its publication is not vetoed.
    const theirs = b.sessions.create('raced', { meta: { cwd: '/b' } })
    const mine: SessionEvent = { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }
    a.persistence.create({ version: 0, id: 'raced', createdAt: 1, cwd: '/a' })
    await a.persistence.append('raced', [mine])
    await a.persistence.close('raced')
    theirs.append('turn/start', { turn: 7 })
    await expect(b.sessions.flush(theirs)).rejects.toThrow(/session "raced" already has a stored log .* \(id collision\); nothing was written/)
    expect(await rows(schema, 'raced')).toEqual([JSON.stringify(mine)])
    // A host that starts now knows the id: its publication is vetoed at once.
    const c = await host(schema)
    expect(() => c.sessions.create('raced', { meta: { cwd: '/c' } })).toThrow(/id collision/)
  })
})

describe('the stored text', () => {
  it('is each event exactly as JSON.stringify wrote it: key order, unicode and numbers kept', async () => {
    const schema = server.schema()
    const { persistence } = await host(schema)
    const odd = {
      type: 'turn/start',
      seq: 0,
      time: 1.5e300,
      data: { turn: 1, zeta: 'ä\u2028\u0000"', alpha: [1e-7, -0.5, 12345678901234] },
    } as unknown as SessionEvent
    persistence.create({ version: 0, id: 'text', createdAt: 1 })
    await persistence.append('text', [odd])
    expect(await rows(schema, 'text')).toEqual([JSON.stringify(odd)])
  })
})

describe('configuration', () => {
  it('an unreachable server fails the plugin start, naming host:port and the config key, never the password', async () => {
    const root = new Context()
    root.logger.exporter({ levels: { default: 0 }, export() {} })
    await root.plugin(SessionStore)
    const error = await Promise.resolve(root.plugin(PostgresPersistence, { url: 'postgres://loom:secret@127.0.0.1:1/loom' })).then(
      () => undefined,
      (error: Error) => error,
    )
    expect(error?.message).toMatch(
      /^@loom\/session-postgres: cannot use PostgreSQL at 127\.0\.0\.1:1\/loom \(config key "url" of the @loom\/session-postgres row/,
    )
    expect(error?.message).not.toMatch(/secret/)
  })

  it('refuses a missing or non-postgres:// url and a stale threshold not above the heartbeat', async () => {
    const root = new Context()
    root.logger.exporter({ levels: { default: 0 }, export() {} })
    await root.plugin(SessionStore)
    await expect(Promise.resolve(root.plugin(PostgresPersistence, {} as Config))).rejects.toThrow(/url/)
    await expect(Promise.resolve(root.plugin(PostgresPersistence, { url: 'db.internal:5432' }))).rejects.toThrow(/url/)
    await expect(Promise.resolve(root.plugin(PostgresPersistence, { url: server.url, leaseHeartbeatMs: 500, leaseStaleMs: 500 }))).rejects.toThrow(
      /leaseStaleMs \(500\) must be greater than leaseHeartbeatMs \(500\)/,
    )
  })
})
