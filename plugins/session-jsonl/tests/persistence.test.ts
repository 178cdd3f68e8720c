// What is particular to JSONL files, over a real temp directory: packed rows, torn
// tails, fsync failure, damaged and unknown lines (spec §3.1–3.8, contracts 127–139).
// What every backend must do is the shared contract, run in contract.test.ts.
import { Context, type Fiber } from '@deepseek-ai/cordis'
import SessionStore, { type SessionEvent } from '@loom/session'
import { CWD, live, meta, raw, shortTurn, toolTurn } from '@loom/session/testing'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { nodeFileOps, type FileOps } from '../src/file.ts'
import JsonlPersistence, { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '../src/index.ts'

// ---------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------

const seqs = (events: readonly SessionEvent[]) => events.map(event => event.seq)
const types = (events: readonly SessionEvent[]) => events.map(event => event.type)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const lines = (events: readonly SessionEvent[]) => events.map(event => JSON.stringify(event) + '\n').join('')
const json = (value: unknown) => JSON.stringify(value)

// ---------------------------------------------------------------------------
// Hosts
// ---------------------------------------------------------------------------

let dir: string
let backends: Fiber[]

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-jsonl-'))
  backends = []
})
afterEach(async () => {
  await endLifetimes()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function endLifetimes() {
  for (const backend of backends.splice(0).reverse()) await Promise.resolve(backend.dispose()).catch(() => {})
}

/**
 * One process lifetime over the shared root: a store, the backend and an owner
 * plugin. The previous lifetimes end first, as a process would exit: their
 * writes are drained and their session leases released.
 */
async function lifecycle(maxDelayMs = 20) {
  await endLifetimes()
  const root = new Context()
  const errors: unknown[] = []
  root.logger.exporter({
    levels: { default: 3 },
    export(message) {
      if (message.type === 'error') errors.push(message.args[0])
    },
  })
  await root.plugin(SessionStore)
  const backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs })
  backends.push(backend)
  const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence'], apply() {} })
  const ctx = owner.ctx
  return { root, backend, owner, ctx, sessions: ctx.sessions, persistence: ctx.sessionPersistence, errors }
}

/** A log stored through the seam in its own lifecycle; returns its path. */
async function stored(id: string, events: SessionEvent[], header = meta(id)): Promise<string> {
  const { persistence } = await lifecycle()
  persistence.create(header)
  await persistence.append(id, events)
  return persistence.locate(header).path
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

const statOf = (file: string) => fs.statSync(file, { bigint: true })

// ---------------------------------------------------------------------------

describe('packed rows', () => {
  it("a live turn's streamed deltas are stored as one packed row and load back byte-identically", async () => {
    const { sessions, persistence } = await lifecycle(10_000)
    const session = sessions.create('live', { meta: { cwd: CWD } })
    toolTurn(live(session), 1)
    const file = persistence.locate(session.header).path
    expect(fs.existsSync(file)).toBe(false)

    await expect(sessions.flush(session)).resolves.toBe(true)
    expect(fs.existsSync(file)).toBe(true)
    // The three text deltas were packed into one row.
    const text = fs.readFileSync(file, 'utf8')
    expect(text).toMatch(/"type":"text-chunks"/)
    expect(text).not.toMatch(/"type":"assistant\/chunk"/)

    const other = await lifecycle()
    const loaded = await other.persistence.load('live')
    expect(json(loaded.events)).toBe(json(session.events))
    expect(loaded.meta).toEqual(session.header)
  })
})

describe('seam append and load (128)', () => {
  it('create + append, then load in a fresh lifecycle, gives the same header and byte-identical events', async () => {
    const events = raw(0, s => toolTurn(s, 1))
    const file = await stored('round', events)
    expect(fs.readFileSync(file, 'utf8')).toMatch(/"type":"text-chunks"/)

    const { persistence } = await lifecycle()
    const loaded = await persistence.load('round')
    expect(json(loaded.events)).toBe(json(events))
    expect(loaded.meta).toEqual(meta('round'))
    expect(path.basename(file)).toBe('session.jsonl')
  })
})

describe('torn tail', () => {
  it('load cuts the torn fragment and closes the open turn; later appends continue the log (129)', async () => {
    const file = await stored(
      'torn',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(
      file,
      lines(
        raw(6, s => {
          s('turn/start', { turn: 2 })
          s('step/start', { turn: 2, step: 1 })
        }),
      ) + '{"type":"assistant/chunk","seq":8,"ti',
    )

    const { persistence } = await lifecycle()
    const { events } = await persistence.load('torn')
    expect(seqs(events)).toEqual(range(0, 9))
    expect(events[8]).toMatchObject({ type: 'step/end', data: { turn: 2, step: 1 } })
    expect(events[9]).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: { kind: 'interrupted' } } })
    expect(events.some(event => event.type === 'assistant/chunk')).toBe(false)

    await persistence.append(
      'torn',
      raw(10, s => {
        s('turn/start', { turn: 3 })
        s('turn/end', { turn: 3, reason: { kind: 'completed' } })
      }),
    )
    const reloaded = await (await lifecycle()).persistence.load('torn')
    expect(seqs(reloaded.events)).toEqual(range(0, 11))
    expect(json(reloaded.events.slice(0, 10))).toBe(json(events))
  })

  it('repair leaves the committed prefix byte for byte (130)', async () => {
    const file = await stored(
      'prefix',
      raw(0, s => shortTurn(s, 1)),
    )
    const original = fs.readFileSync(file)
    fs.appendFileSync(file, '\n{"partial')

    const { persistence } = await lifecycle()
    expect(seqs((await persistence.load('prefix')).events)).toEqual(range(0, 5))
    await persistence.append(
      'prefix',
      raw(6, s => shortTurn(s, 2)),
    )

    const after = fs.readFileSync(file)
    expect(after.subarray(0, original.length).equals(original)).toBe(true)
    expect(after.toString('utf8')).not.toMatch(/partial/)
    expect(seqs((await (await lifecycle()).persistence.load('prefix')).events)).toEqual(range(0, 11))
  })
})

describe('append failure rollback (134)', () => {
  it('a failed fsync rejects with ENOSPC, leaves the file as it was, and the retry succeeds', async () => {
    let failNextSync = false
    const ops: FileOps = {
      ...nodeFileOps,
      async sync(handle) {
        if (failNextSync) {
          failNextSync = false
          throw Object.assign(new Error('ENOSPC: no space left on device, fsync'), { code: 'ENOSPC', syscall: 'fsync' })
        }
        return nodeFileOps.sync(handle)
      },
    }
    const root = new Context()
    await root.plugin(SessionStore)
    let persistence!: JsonlPersistence
    const backend = await root.plugin({
      name: 'faulty-backend',
      inject: ['sessions'],
      apply(ctx: Context) {
        persistence = new JsonlPersistence(ctx, { root: dir, maxDelayMs: 20 }, ops)
      },
    })
    backends.push(backend)

    persistence.create(meta('enospc'))
    await persistence.append(
      'enospc',
      raw(0, s => shortTurn(s, 1)),
    )
    const file = persistence.locate(meta('enospc')).path
    const size = fs.statSync(file).size
    const bytes = fs.readFileSync(file)

    const turn2 = raw(6, s => {
      s('turn/start', { turn: 2 })
      s('turn/end', { turn: 2, reason: { kind: 'completed' } })
    })
    failNextSync = true
    await expect(persistence.append('enospc', turn2)).rejects.toThrow(/ENOSPC/)
    expect(failNextSync).toBe(false)
    expect(fs.statSync(file).size).toBe(size)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)

    await persistence.append('enospc', turn2)
    expect(seqs((await (await lifecycle()).persistence.load('enospc')).events)).toEqual(range(0, 7))
  })
})

/** A backend whose next fsync fails when `full()` says the disk is full (the rollback's then works), counting the opens of each file. */
async function faultyLifecycle(full: () => boolean) {
  const opens = new Map<string, number>()
  const ops: FileOps = {
    ...nodeFileOps,
    async open(file, flags, mode) {
      opens.set(file, (opens.get(file) ?? 0) + 1)
      return nodeFileOps.open(file, flags, mode)
    },
    async sync(handle) {
      if (full()) throw Object.assign(new Error('ENOSPC: no space left on device, fsync'), { code: 'ENOSPC', syscall: 'fsync' })
      return nodeFileOps.sync(handle)
    },
  }
  const root = new Context()
  await root.plugin(SessionStore)
  let persistence!: JsonlPersistence
  backends.push(
    await root.plugin({
      name: 'faulty-backend',
      inject: ['sessions'],
      apply(ctx: Context) {
        persistence = new JsonlPersistence(ctx, { root: dir, maxDelayMs: 10_000 }, ops)
      },
    }),
  )
  const owner = await root.plugin({ name: 'owner', inject: ['sessions'], apply() {} })
  const failed: string[] = []
  root.on('session/write-failed', (id: string, error: unknown) => void failed.push(`${id}: ${(error as Error).message}`))
  return { owner, sessions: owner.ctx.sessions, persistence, opens, failed }
}

/** The descriptors this process holds open on files under `folder`. */
function openUnder(folder: string): string[] {
  return fs
    .readdirSync('/proc/self/fd')
    .map(fd => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`)
      } catch {
        return ''
      }
    })
    .filter(target => target.startsWith(folder))
}

describe('a leased log held open', () => {
  it.skipIf(process.platform !== 'linux')('is opened once for all its appends, and closed with its lock when the lease goes', async () => {
    const { owner, sessions, persistence, opens } = await faultyLifecycle(() => false)
    const session = sessions.create('held', { meta: { cwd: CWD } })
    const file = persistence.locate(session.header).path
    for (let turn = 1; turn <= 3; turn++) {
      shortTurn(live(session), turn)
      await sessions.flush(session)
    }
    // The first batch published the log with its header; the two after it were appended through one descriptor.
    expect(opens.get(file)).toBe(1)
    // The log, and the lock (opened as the temp file it was published from).
    const held = openUnder(path.dirname(file)).map(target => path.basename(target).replace(/^(session\.lock)\..*/, '$1'))
    expect(held.sort()).toEqual(['session.jsonl', 'session.lock'])
    await owner.dispose()
    expect(openUnder(path.dirname(file))).toEqual([])
    expect(fs.existsSync(path.join(path.dirname(file), 'session.lock'))).toBe(false)
    expect(seqs((await (await lifecycle()).persistence.load('held')).events)).toEqual(range(0, 17))
  })
})

describe('abandon', () => {
  it('a batch refused by a full disk is dropped, never written once there is room, and the lease goes', async () => {
    let full = false
    const { owner, sessions, persistence, failed } = await faultyLifecycle(() => {
      const failing = full
      full = false
      return failing
    })
    const session = sessions.create('given-up', { meta: { cwd: CWD } })
    shortTurn(live(session), 1)
    await sessions.flush(session)
    const file = persistence.locate(session.header).path
    const stored = fs.readFileSync(file)

    full = true
    shortTurn(live(session), 2)
    const refused = await rejection(sessions.flush(session))
    expect(refused.message).toMatch(/ENOSPC/)
    expect(failed).toEqual([`given-up: ${refused.message}`])
    // Stored already: nothing to give up.
    expect(await persistence.abandon('given-up', 5)).toBe(false)
    expect(await persistence.abandon('given-up', session.seq - 1)).toBe(true)
    expect(fs.existsSync(path.join(path.dirname(file), 'session.lock'))).toBe(false)

    // Room again: neither another event, a flush nor the owner's disposal writes what was given up.
    shortTurn(live(session), 3)
    await sessions.flush(session)
    await owner.dispose()
    expect(fs.readFileSync(file).equals(stored)).toBe(true)
    expect(failed).toHaveLength(1)
    expect(seqs((await (await lifecycle()).persistence.load('given-up')).events)).toEqual(range(0, 5))
  })
})

describe('stored-log refusals', () => {
  it('a newer header of a foreign shape is still unsupported, not corrupt (139)', async () => {
    const { persistence } = await lifecycle()
    const file = persistence.locate(meta('alien')).path
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, '{"type":"session","version":7,"id":"alien","created":"yesterday"}\n')

    const error = await rejection(persistence.load('alien'))
    expect(error).toBeInstanceOf(SessionFormatUnsupportedError)
    expect(error).not.toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/v7/)
  })

  it('damage before a committed turn/end is corruption: load rejects naming the line and leaves the file alone', async () => {
    const file = await stored(
      'damaged',
      raw(0, s => shortTurn(s, 1)),
    )
    // Line 1 is the header; line 4 holds seq 2 (the user message), followed by the turn's end.
    const text = fs.readFileSync(file, 'utf8').split('\n')
    text[3] = '{"type":"user/message","seq":2,"ti'
    fs.writeFileSync(file, text.join('\n'))
    const bytes = fs.readFileSync(file)
    const before = statOf(file)

    const error = await rejection((await lifecycle()).persistence.load('damaged'))
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/unparsable committed event at line 4/)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    expect(statOf(file).mtimeNs).toBe(before.mtimeNs)
  })

  it('an unknown event type in a stored log is refused', async () => {
    const file = await stored(
      'unknown-type',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(file, lines(raw(6, s => s('future/thing', { x: 1 }))))
    const bytes = fs.readFileSync(file)

    const error = await rejection((await lifecycle()).persistence.load('unknown-type'))
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/"future\/thing"/)
    expect(error.message).toMatch(/seq 6/)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it('an unknown event type marked ignorable is kept', async () => {
    const file = await stored(
      'ignorable',
      raw(0, s => shortTurn(s, 1)),
    )
    const extra = { type: 'future/thing', seq: 6, time: 1_700_000_000_006, data: { x: 1 }, ignorable: true }
    fs.appendFileSync(file, JSON.stringify(extra) + '\n')

    const { events } = await (await lifecycle()).persistence.load('ignorable')
    expect(seqs(events)).toEqual(range(0, 6))
    expect(json(events[6])).toBe(json(extra))
  })
})

describe('reads', () => {
  it('readFrom returns the stored suffix from the committed prefix, ignoring a torn tail', async () => {
    const file = await stored(
      'suffix',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(
      file,
      lines(
        raw(6, s => {
          s('turn/start', { turn: 2 })
          s('step/start', { turn: 2, step: 1 })
        }),
      ) + '{"type":"assistant/ch',
    )
    const bytes = fs.readFileSync(file)

    const { persistence } = await lifecycle()
    const { meta: header, events } = await persistence.readFrom('suffix', 4)
    expect(header).toEqual(meta('suffix'))
    expect(seqs(events)).toEqual([4, 5, 6, 7])
    expect(types(events)).toEqual(['step/end', 'turn/end', 'turn/start', 'step/start'])
    expect((await persistence.readFrom('suffix', 8)).events).toEqual([])
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })
})
