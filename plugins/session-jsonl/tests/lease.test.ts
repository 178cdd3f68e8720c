// One writer per session, as JSONL keeps it: the lock file next to the log, its
// refusal naming the holder, takeover of dead and stale holders, fencing by the
// lock's token, and `session/durable` only once the file holds the batch. Other
// processes are simulated by lock files written by hand; lease-race.test.ts runs
// real ones. What every backend's lease must do is in the shared contract
// (contract.test.ts).
import { Context, type Fiber } from '@deepseek-ai/cordis'
import SessionStore, { Session, SessionLeaseError, type SessionHeader } from '@loom/session'
import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import JsonlPersistence, { LOCK_FILENAME, type Config } from '../src/index.ts'
import { closedTurn, openTurn } from './fixtures/turns.ts'

const CWD = '/workspace'
const HOST = hostname()

let dir: string
let fibers: Fiber[]

beforeEach(() => {
  dir = fs.mkdtempSync(join(tmpdir(), 'loom-lease-'))
  fibers = []
})
afterEach(async () => {
  for (const fiber of fibers.reverse()) await Promise.resolve(fiber.dispose()).catch(() => {})
  fs.rmSync(dir, { recursive: true, force: true })
})

/** A backend over the shared root, as one process would have it. */
async function host(config: Partial<Config> = {}) {
  const root = new Context()
  const errors: unknown[] = []
  root.logger.exporter({
    levels: { default: 3 },
    export(message) {
      if (message.type === 'error') errors.push(message.args[0])
    },
  })
  await root.plugin(SessionStore)
  const backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 10_000, leaseCommand: 'loom test', ...config })
  fibers.push(backend)
  const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence'], apply() {} })
  return { root, backend, owner, sessions: owner.ctx.sessions, persistence: owner.ctx.sessionPersistence, errors }
}

const meta = (id: string): SessionHeader => ({ version: 0, id, createdAt: 1_700_000_000_000, cwd: CWD })

/** A log of `turns` closed turns, stored by a backend that is gone again; returns its path. */
async function stored(id: string, turns = 1): Promise<string> {
  const { backend, persistence } = await host()
  const session = Session.create(id, undefined, meta(id))
  for (let turn = 1; turn <= turns; turn++) closedTurn(session, turn)
  persistence.create(meta(id))
  await persistence.append(id, session.events)
  await backend.dispose()
  return persistence.locate(meta(id)).path
}

const lockOf = (file: string) => join(dirname(file), LOCK_FILENAME)

/** Writes a lock as another writer would, with a heartbeat `ageMs` old. */
function plant(file: string, holder: { pid: number; host: string; since?: number; command?: string }, ageMs = 0): string {
  const lock = lockOf(file)
  fs.writeFileSync(lock, JSON.stringify({ since: Date.now() - ageMs, token: 'planted', ...holder }) + '\n')
  const beat = new Date(Date.now() - ageMs)
  fs.utimesSync(lock, beat, beat)
  return lock
}

const lockContent = (file: string) => JSON.parse(fs.readFileSync(lockOf(file), 'utf8'))

/** A pid that no longer exists: a child that already exited. */
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid!

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

function thrown(fn: () => unknown): Error {
  try {
    fn()
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a throw')
}

const seqs = (events: readonly { seq: number }[]) => events.map(event => event.seq)

describe('the write lease', () => {
  it('refuses a second writer before it writes anything, naming the holder', async () => {
    const file = await stored('busy')
    // A torn tail: a load that got the lease would cut it.
    fs.appendFileSync(file, '{"type":"turn/start","seq":6')
    const since = new Date()
    since.setHours(12, 1, 3, 0)
    plant(file, { pid: process.pid, host: HOST, since: since.getTime(), command: 'loom run' })
    const bytes = fs.readFileSync(file)
    const lock = fs.readFileSync(lockOf(file))

    const { sessions, persistence } = await host()
    const error = await rejection(persistence.load('busy'))
    expect(error).toBeInstanceOf(SessionLeaseError)
    expect(error).toMatchObject({ name: 'SessionLeaseError', code: 'SESSION_LEASE_HELD', sessionId: 'busy' })
    expect((error as SessionLeaseError).holder).toEqual({ pid: process.pid, host: HOST, since: since.getTime(), command: 'loom run' })
    expect(error.message).toBe(
      `session busy is being written by pid ${process.pid} on host ${HOST} since 12:01:03 (loom run); wait for it to finish or stop it`,
    )

    await expect(persistence.prepare('busy')).rejects.toThrow(error.message)
    // A live session continuing the stored log is vetoed at publication.
    const { events } = await persistence.readFrom('busy', 0)
    expect(() => sessions.create('busy', { seed: events, meta: { cwd: CWD, createdAt: 1_700_000_000_000 } })).toThrow(error.message)
    expect(sessions.get('busy')).toBeUndefined()

    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    expect(fs.readFileSync(lockOf(file)).equals(lock)).toBe(true)
  })

  it('takes over the lease of a process on this host that died', async () => {
    const file = await stored('orphan')
    fs.appendFileSync(file, '{"type":"turn/start","seq":6')
    const pid = deadPid()
    plant(file, { pid, host: HOST, command: 'loom run' })

    const { persistence } = await host()
    const { events } = await persistence.load('orphan')
    expect(seqs(events)).toEqual([0, 1, 2, 3, 4, 5])
    expect(fs.readFileSync(file, 'utf8').endsWith('\n')).toBe(true)
    expect(lockContent(file)).toMatchObject({ pid: process.pid, host: HOST, command: 'loom test' })
    // Nothing of the takeover is left behind but the new lock.
    expect(fs.readdirSync(dirname(file)).sort()).toEqual(['session.jsonl', LOCK_FILENAME])
  })

  it('takes over a lease from another host only once its heartbeat is stale', async () => {
    const file = await stored('remote')
    plant(file, { pid: 4242, host: 'elsewhere.example', command: 'loom run' }, 1000)
    const { persistence } = await host()
    // The pid cannot be checked on another host; a fresh heartbeat means alive.
    const error = await rejection(persistence.load('remote'))
    expect(error.message).toMatch(/is being written by pid 4242 on host elsewhere\.example since \d\d:\d\d:\d\d \(loom run\)/)

    plant(file, { pid: 4242, host: 'elsewhere.example', command: 'loom run' }, 31_000)
    await persistence.load('remote')
    expect(lockContent(file)).toMatchObject({ pid: process.pid, host: HOST })
  })

  it('staleness is configurable', async () => {
    const file = await stored('quick')
    plant(file, { pid: 4242, host: 'elsewhere.example' }, 500)
    const { persistence } = await host({ leaseHeartbeatMs: 50, leaseStaleMs: 200 })
    await persistence.load('quick')
    expect(lockContent(file).pid).toBe(process.pid)
    await expect(host({ leaseHeartbeatMs: 500, leaseStaleMs: 500 })).rejects.toThrow(/leaseStaleMs \(500\) must be greater than leaseHeartbeatMs \(500\)/)
  })

  it('the holder refreshes its heartbeat, so it never looks stale while it lives', async () => {
    const file = await stored('beating')
    // Stale after ten minutes; the lock is made to look a day old, so only a heartbeat makes it fresh again.
    const { persistence } = await host({ leaseHeartbeatMs: 20, leaseStaleMs: 600_000 })
    await persistence.load('beating')
    const old = new Date(Date.now() - 86_400_000)
    fs.utimesSync(lockOf(file), old, old)
    await vi.waitFor(() => expect(fs.statSync(lockOf(file)).mtimeMs, 'the heartbeat touched the lock').toBeGreaterThan(old.getTime() + 60_000), {
      timeout: 20_000,
      interval: 10,
    })

    const other = await host({ leaseHeartbeatMs: 20, leaseStaleMs: 600_000 })
    await expect(other.persistence.load('beating')).rejects.toBeInstanceOf(SessionLeaseError)
  }, 60_000)

  it('fencing: once the lease is taken over, the next append fails and the file is unchanged', async () => {
    const { persistence } = await host()
    const session = Session.create('fenced', undefined, meta('fenced'))
    closedTurn(session, 1)
    persistence.create(meta('fenced'))
    await persistence.append('fenced', session.events)
    const file = persistence.locate(meta('fenced')).path
    const bytes = fs.readFileSync(file)

    // Another process judged the lease stale and took it.
    plant(file, { pid: 4242, host: 'elsewhere.example', command: 'loom sessions repair' })
    closedTurn(session, 2)
    const error = await rejection(persistence.append('fenced', session.events.slice(6)))
    expect(error).toBeInstanceOf(SessionLeaseError)
    expect(error).toMatchObject({ code: 'SESSION_LEASE_LOST', holder: { pid: 4242, host: 'elsewhere.example' } })
    expect(error.message).toMatch(
      /^session fenced: this writer \(pid \d+\) lost its write lease, now held by pid 4242 on host elsewhere\.example since .* \(loom sessions repair\); nothing more is written by this process$/,
    )
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)

    // Even once the other writer is gone, a lost lease is not taken again: the log may have moved on.
    fs.rmSync(lockOf(file))
    await expect(persistence.append('fenced', session.events.slice(6))).rejects.toMatchObject({ code: 'SESSION_LEASE_LOST' })
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it('a created session takes the lease with its first write, not before', async () => {
    const { sessions, persistence } = await host()
    const session = sessions.create('fresh', { meta: { cwd: CWD } })
    const file = persistence.locate(session.header).path
    await sessions.flush(session)
    expect(fs.existsSync(dirname(file))).toBe(false)
    closedTurn(session, 1)
    await sessions.flush(session)
    expect(lockContent(file)).toMatchObject({ pid: process.pid, command: 'loom test' })
  })

  it("a new log's first write meets a lock already there: refused while its holder lives, taken over once it is stale", async () => {
    const { sessions, persistence } = await host()
    const session = sessions.create('contested', { meta: { cwd: CWD } })
    const file = persistence.locate(session.header).path
    fs.mkdirSync(dirname(file), { recursive: true })
    plant(file, { pid: process.pid, host: HOST, command: 'loom run' })
    closedTurn(session, 1)
    await expect(sessions.flush(session)).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD', holder: { command: 'loom run' } })
    expect(fs.readdirSync(dirname(file))).toEqual([LOCK_FILENAME])

    plant(file, { pid: deadPid(), host: HOST })
    await sessions.flush(session)
    expect(lockContent(file)).toMatchObject({ pid: process.pid, command: 'loom test' })
    expect(seqs((await persistence.readFrom('contested', 0)).events)).toEqual(seqs(session.events))
    expect(fs.readdirSync(dirname(file)).sort()).toEqual([basename(file), LOCK_FILENAME].sort())
  })

  it('reads take no lease and work while another process writes', async () => {
    const file = await stored('reading', 2)
    fs.appendFileSync(file, '{"type":"turn/start","seq":12')
    const lock = plant(file, { pid: process.pid, host: HOST, command: 'loom run' })
    const before = fs.readFileSync(lock)

    const { persistence } = await host()
    expect(seqs((await persistence.inspect('reading')).events)).toEqual(seqs(Array.from({ length: 12 }, (_, seq) => ({ seq }))))
    expect((await persistence.readFrom('reading', 10)).events).toHaveLength(2)
    expect((await persistence.list()).map(header => header.id)).toEqual(['reading'])
    expect(fs.readFileSync(lock).equals(before)).toBe(true)
    expect(fs.readFileSync(file, 'utf8').endsWith('"seq":12')).toBe(true)
  })

  it('a reloaded backend takes the lease of the live sessions it adopts again', async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    let backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 10_000 })
    // A writer that does not depend on the backend, so its session outlives a reload.
    const writer = await root.plugin({ name: 'writer', inject: ['sessions'], apply() {} })
    fibers.push(writer)
    const session = writer.ctx.sessions.create('reloaded', { meta: { cwd: CWD } })
    closedTurn(session, 1)
    await root.sessions.flush(session)
    const file = root.sessionPersistence.locate(session.header).path

    await backend.dispose()
    expect(fs.existsSync(lockOf(file))).toBe(false)
    backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 10_000 })
    fibers.push(backend)
    expect(lockContent(file).pid).toBe(process.pid)
    closedTurn(session, 2)
    await root.sessions.flush(session)
    expect(seqs((await root.sessionPersistence.inspect('reloaded')).events)).toEqual(seqs(session.events))
  })

  it('a vetoed publication keeps no lease', async () => {
    await stored('dup')
    const { sessions, persistence } = await host()
    const other = Session.create('dup', undefined, meta('dup'))
    closedTurn(other, 7)
    expect(() => sessions.create('dup', { seed: other.events, meta: { cwd: CWD } })).toThrow(/id collision/)
    expect(fs.existsSync(lockOf(persistence.locate(meta('dup')).path))).toBe(false)
  })
})

describe('session/durable', () => {
  it('is emitted only once the file holds the batch, and whenDurable resolves once that seq is on disk', async () => {
    const { root, sessions, persistence } = await host()
    const session = sessions.create('durable', { meta: { cwd: CWD } })
    const file = persistence.locate(session.header).path
    const seen: [string, number, boolean][] = []
    root.on('session/durable', (id, seq) => {
      seen.push([id, seq, fs.readFileSync(file, 'utf8').includes(`"seq":${seq},`)])
    })

    closedTurn(session, 1)
    let durable = false
    const waiting = persistence.whenDurable('durable', 5).then(() => {
      durable = true
    })
    await new Promise(resolve => setTimeout(resolve, 20))
    expect(durable).toBe(false)
    expect(seen).toEqual([])

    await sessions.flush(session)
    await waiting
    expect(seen).toEqual([['durable', 5, true]])
    openTurn(session, 2)
    await sessions.flush(session)
    expect(seen).toEqual([
      ['durable', 5, true],
      ['durable', 8, true],
    ])
    // Already durable: at once.
    await persistence.whenDurable('durable', 3)
  })
})
