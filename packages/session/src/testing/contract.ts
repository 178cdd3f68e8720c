// The contract every `SessionPersistence` backend follows, as a vitest suite:
// `persistenceContract(name, makeStorage)` registers it for one backend. Each
// test gets fresh storage and starts "processes" over it (a Cordis root with the
// session store and the backend), ending the previous ones first as an exiting
// process would, unless it needs two at once (the lease tests).
import { Context, type Fiber } from '@deepseek-ai/cordis'
import { userText } from '@loom/llm'
import { hostname } from 'node:os'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { TOOL_NOT_STARTED_TEXT } from '../closers.ts'
import { SessionFormatUnsupportedError } from '../errors.ts'
import type { SessionEvent, SessionHeader } from '../events.ts'
import { SessionLeaseError, SessionStore, type SessionPersistence } from '../store.ts'
import { CWD, live, meta, openStart, openToolTurn, raw, shortTurn, toolTurn } from './logs.ts'

/** The settings a test gives the backend of one "process". */
export interface ContractHostOptions {
  /** Write-behind window. */
  maxDelayMs: number
  leaseHeartbeatMs?: number
  leaseStaleMs?: number
  /** The label written into this process's leases. */
  leaseCommand?: string
}

/** One test's storage, shared by every process the test starts. */
export interface ContractStorage {
  /** Applies the backend plugin to `root` (which has the session store) and resolves with its fiber. */
  apply(root: Context, options: ContractHostOptions): PromiseLike<Fiber>
  /** Stores a log as a writer that crashed left it: this header and these events verbatim, no lease, no repair. */
  writeRaw(header: SessionHeader, events: readonly SessionEvent[]): Promise<void>
  /** Stores session `id` under a header of format `version`, which this build does not read (part `format`). */
  writeVersion?(id: string, version: number): Promise<void>
  /** Everything stored for session `id`, as one comparable string; undefined while nothing is. */
  snapshot(id: string): Promise<string | undefined>
  /** Removes the storage after the test. */
  dispose?(): Promise<void>
}

/** The parts of the contract; a backend runs all of them unless it selects some explicitly. */
export const CONTRACT_PARTS = [
  'materialization',
  'round-trip',
  'repair',
  'contiguity',
  'damage',
  'format',
  'live',
  'reads',
  'collision',
  'durable',
  'leases',
] as const
export type ContractPart = (typeof CONTRACT_PARTS)[number]

export interface ContractOptions {
  /** The parts this backend supports; the others are registered as skipped, so a report shows them. */
  parts?: readonly ContractPart[]
}

/** A running "process": its root, the backend's fiber, and an owner plugin whose context creates sessions. */
export interface ContractHost {
  root: Context
  backend: Fiber
  owner: Fiber
  sessions: SessionStore
  persistence: SessionPersistence
  /** What the process logged as errors. */
  errors: unknown[]
}

// ---------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------

const seqs = (events: readonly SessionEvent[]) => events.map(event => event.seq)
const types = (events: readonly SessionEvent[]) => events.map(event => event.type)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const json = (value: unknown) => JSON.stringify(value)

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------

/** Registers the persistence contract for one backend; `makeStorage` gives each test fresh storage. */
export function persistenceContract(name: string, makeStorage: () => ContractStorage | Promise<ContractStorage>, options: ContractOptions = {}): void {
  const selected = new Set<ContractPart>(options.parts ?? CONTRACT_PARTS)
  for (const part of options.parts ?? []) {
    if (!CONTRACT_PARTS.includes(part)) throw new Error(`persistenceContract(${name}): unknown part "${part}"`)
  }

  let storage: ContractStorage
  let hosts: Fiber[]

  /** Ends every running process, last started first, as each would exit: writes drained, leases released. */
  async function endHosts() {
    for (const fiber of hosts.splice(0).reverse()) await Promise.resolve(fiber.dispose()).catch(() => {})
  }

  /** A new process over the test's storage, alongside those running. */
  async function start(settings: Partial<ContractHostOptions> = {}): Promise<ContractHost> {
    const root = new Context()
    const errors: unknown[] = []
    root.logger.exporter({
      levels: { default: 3 },
      export(message) {
        if (message.type === 'error') errors.push(message.args[0])
      },
    })
    await root.plugin(SessionStore)
    const backend = await storage.apply(root, { maxDelayMs: 20, leaseCommand: 'loom test', ...settings })
    hosts.push(backend)
    const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence'], apply() {} })
    const persistence = owner.ctx.get('sessionPersistence') as SessionPersistence
    return { root, backend, owner, sessions: owner.ctx.sessions, persistence, errors }
  }

  /** The next process lifetime: the previous ones end first. */
  async function lifecycle(maxDelayMs = 20): Promise<ContractHost> {
    await endHosts()
    return start({ maxDelayMs })
  }

  /** A log stored through the seam in its own lifecycle. */
  async function stored(id: string, events: SessionEvent[], header = meta(id)) {
    const { persistence } = await lifecycle()
    persistence.create(header)
    await persistence.append(id, events)
    await endHosts()
  }

  /** A log a crash left inside turn 2: turn 1 complete, turn 2 started. */
  const crashedInTurn2 = () =>
    raw(0, s => {
      shortTurn(s, 1)
      openStart(s, 2)
    })

  /** A `describe` for a part: skipped (and so reported) when the backend does not select it. */
  const part = (label: ContractPart, body: () => void) =>
    selected.has(label) ? describe(label, body) : describe.skip(`${label} (not supported by ${name}, skipped explicitly)`, body)

  describe(`SessionPersistence contract: ${name}`, () => {
    beforeEach(async () => {
      storage = await makeStorage()
      hosts = []
    })
    afterEach(async () => {
      await endHosts()
      await storage.dispose?.()
    })

    part('materialization', () => {
      it('create() stores nothing and list() excludes the session until its first append', async () => {
        const { persistence } = await lifecycle()
        persistence.create(meta('empty'))
        expect(await storage.snapshot('empty')).toBeUndefined()
        expect(await persistence.list()).toEqual([])

        await persistence.append(
          'empty',
          raw(0, s => shortTurn(s, 1)),
        )
        expect(await storage.snapshot('empty')).toBeDefined()
        expect((await persistence.list()).map(header => header.id)).toEqual(['empty'])
      })

      it('a second create of the same id throws', async () => {
        const { persistence } = await lifecycle()
        persistence.create(meta('twice'))
        expect(() => persistence.create(meta('twice'))).toThrow(/session "twice" already exists/)
      })

      it('create for an id already stored throws', async () => {
        await stored(
          'stored',
          raw(0, s => shortTurn(s, 1)),
        )
        const { persistence } = await lifecycle()
        expect(() => persistence.create(meta('stored'))).toThrow(/session "stored" already has a .*log/)
      })

      it('a live session that appended nothing stores nothing, even after a flush', async () => {
        const { sessions, persistence } = await lifecycle()
        const session = sessions.create('quiet', { meta: { cwd: CWD } })
        await sessions.flush(session)
        expect(await storage.snapshot('quiet')).toBeUndefined()
        expect(await persistence.list()).toEqual([])
      })
    })

    part('round-trip', () => {
      it('create + append, then load in a fresh lifecycle, gives the same header and byte-identical events', async () => {
        const events = raw(0, s => toolTurn(s, 1))
        await stored('round', events)
        const loaded = await (await lifecycle()).persistence.load('round')
        expect(json(loaded.events)).toBe(json(events))
        expect(loaded.meta).toEqual(meta('round'))
      })
    })

    part('repair', () => {
      it('load closes the open turn a crash left, stores the closure, and later appends continue the log', async () => {
        await storage.writeRaw(meta('crashed'), crashedInTurn2())
        const { persistence } = await lifecycle()
        const { events } = await persistence.load('crashed')
        expect(seqs(events)).toEqual(range(0, 9))
        expect(events[8]).toMatchObject({ type: 'step/end', data: { turn: 2, step: 1 } })
        expect(events[9]).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: { kind: 'interrupted' } } })

        await persistence.append(
          'crashed',
          raw(10, s => {
            s('turn/start', { turn: 3 })
            s('turn/end', { turn: 3, reason: { kind: 'completed' } })
          }),
        )
        const reloaded = await (await lifecycle()).persistence.load('crashed')
        expect(seqs(reloaded.events)).toEqual(range(0, 11))
        expect(json(reloaded.events.slice(0, 10))).toBe(json(events))
      })

      it('inspect shows the repaired view without writing; load then stores it', async () => {
        await storage.writeRaw(meta('peek'), crashedInTurn2())
        const before = await storage.snapshot('peek')
        const { persistence } = await lifecycle()
        const inspected = await persistence.inspect('peek')
        expect(seqs(inspected.events)).toEqual(range(0, 9))
        expect(types(inspected.events).slice(-4)).toEqual(['turn/start', 'step/start', 'step/end', 'turn/end'])
        expect(await storage.snapshot('peek')).toBe(before)

        const loaded = await persistence.load('peek')
        expect(json(loaded.events)).toBe(json(inspected.events))
        expect(await storage.snapshot('peek')).not.toBe(before)
      })

      it('check reports what load would close, without writing; after the load the log checks clean', async () => {
        await storage.writeRaw(meta('checked'), crashedInTurn2())
        const before = await storage.snapshot('checked')
        const { persistence } = await lifecycle()
        const check = await persistence.check('checked')
        expect(check).toMatchObject({ events: 8, tornBytes: 0, corruption: null })
        expect(check.location).toMatch(/\S/)
        expect(json(check.closers)).toBe(json((await persistence.inspect('checked')).events.slice(8)))
        expect(types(check.closers)).toEqual(['step/end', 'turn/end'])
        expect(await storage.snapshot('checked')).toBe(before)

        await persistence.load('checked')
        expect(await persistence.check('checked')).toMatchObject({ events: 10, tornBytes: 0, closers: [], corruption: null })
      })

      it('a tool call without a tool/call record is closed with TOOL_NOT_STARTED, and the closure is stored', async () => {
        await storage.writeRaw(
          meta('not-started'),
          raw(0, s => openToolTurn(s, 1, 'call-x', false)),
        )
        const { events } = await (await lifecycle()).persistence.load('not-started')
        expect(types(events)).toEqual(['turn/start', 'step/start', 'user/message', 'assistant/message', 'tool/result', 'step/end', 'turn/end'])
        const result = events[4] as SessionEvent<'tool/result'>
        expect(result.data.message.source).toEqual({ kind: 'tool', callId: 'call-x' })
        expect(result.data.message.content[0]).toMatchObject({ type: 'tool-result', toolCallId: 'call-x', isError: true })
        expect(result.data.error).toEqual({ name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' })
        expect(json(result.data.message.content)).toContain(json(TOOL_NOT_STARTED_TEXT).slice(1, -1))
        expect(result.surfaceOp).toBe('append')
        expect(result.sourceEventSeqs).toBeUndefined()
        expect(events[6]).toMatchObject({ data: { turn: 1, reason: { kind: 'interrupted' } } })

        // The repair is stored: the next lifecycle reads the same balanced log without repairing again.
        const after = await storage.snapshot('not-started')
        expect(json((await (await lifecycle()).persistence.load('not-started')).events)).toBe(json(events))
        expect(await storage.snapshot('not-started')).toBe(after)
      })

      it('a recorded tool/call without a result is closed with TOOL_OUTCOME_UNKNOWN', async () => {
        await storage.writeRaw(
          meta('unknown'),
          raw(0, s => openToolTurn(s, 1, 'call-x', true)),
        )
        const { events } = await (await lifecycle()).persistence.load('unknown')
        expect(types(events).slice(-4)).toEqual(['tool/call', 'tool/result', 'step/end', 'turn/end'])
        const result = events[5] as SessionEvent<'tool/result'>
        expect(result.data.error).toEqual({ name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' })
        expect(result.data.message.source).toEqual({ kind: 'tool', callId: 'call-x' })
        expect(json(result.data.message.content)).toMatch(/retry only if the operation is read-only or idempotent/)
        expect(result.sourceEventSeqs).toEqual([4])
      })
    })

    part('contiguity', () => {
      it('a batch that does not start at the stored length is refused and nothing is written', async () => {
        const { persistence } = await lifecycle()
        persistence.create(meta('gap'))
        await persistence.append(
          'gap',
          raw(0, s => shortTurn(s, 1)),
        )
        const before = await storage.snapshot('gap')
        const error = await rejection(
          persistence.append(
            'gap',
            raw(3, s => s('turn/start', { turn: 2 })),
          ),
        )
        expect(error.message).toMatch(/append seq mismatch for "gap": expected 6 at index 0, got 3/)
        expect(await storage.snapshot('gap')).toBe(before)
      })

      it('a gap inside a batch is refused, nothing of the batch is written, and the right continuation is still accepted', async () => {
        const { persistence } = await lifecycle()
        persistence.create(meta('gap'))
        await persistence.append(
          'gap',
          raw(0, s => shortTurn(s, 1)),
        )
        const before = await storage.snapshot('gap')
        const [first, , third] = raw(6, s => shortTurn(s, 2))
        const error = await rejection(persistence.append('gap', [first, third]))
        expect(error.message).toMatch(/expected 7 at index 1, got 8/)
        expect(await storage.snapshot('gap')).toBe(before)

        await persistence.append(
          'gap',
          raw(6, s => shortTurn(s, 2)),
        )
        expect(seqs((await persistence.load('gap')).events)).toEqual(range(0, 11))
      })
    })

    part('damage', () => {
      it('a log missing an event before a completed turn: check reports the corruption and writes nothing; load refuses it', async () => {
        const events = raw(0, s => {
          shortTurn(s, 1)
          shortTurn(s, 2)
        })
        await storage.writeRaw(
          meta('gap'),
          events.filter(event => event.seq !== 2),
        )
        const before = await storage.snapshot('gap')
        const { persistence } = await lifecycle()
        const check = await persistence.check('gap')
        expect(check).toMatchObject({ events: 0, tornBytes: 0, closers: [], corruption: expect.stringContaining('seq') })
        expect(check.corruption).toContain(check.location)
        const error = await rejection(persistence.load('gap'))
        expect(error.name).toBe('SessionPersistenceCorruptionError')
        expect(error.message).toBe(check.corruption)
        expect(await storage.snapshot('gap')).toBe(before)
      })
    })

    part('format', () => {
      it('a newer format version is refused as unsupported, naming the version, and nothing is written', async () => {
        if (!storage.writeVersion) throw new Error(`${name}: part "format" needs storage.writeVersion`)
        await storage.writeVersion('future', 1)
        const before = await storage.snapshot('future')
        const { persistence } = await lifecycle()
        const error = await rejection(persistence.load('future'))
        expect(error).toBeInstanceOf(SessionFormatUnsupportedError)
        expect(error.name).toBe('SessionFormatUnsupportedError')
        expect(error.message).toMatch(/session "future" uses log format v1/)
        expect(error.message).toMatch(/upgrade the harness/)
        expect((error as SessionFormatUnsupportedError).location).toBeTypeOf('string')
        await expect(persistence.inspect('future')).rejects.toBeInstanceOf(SessionFormatUnsupportedError)
        await expect(persistence.prepare('future')).rejects.toBeInstanceOf(SessionFormatUnsupportedError)
        // Nothing repairs it: check reports it as the log's damage, with the same words.
        expect(await persistence.check('future')).toMatchObject({ closers: [], corruption: error.message })
        expect(await storage.snapshot('future')).toBe(before)
      })
    })

    part('live', () => {
      it('a live turn is stored once sessions.flush resolves true, and a fresh lifecycle loads it byte-identically', async () => {
        const { sessions } = await lifecycle(10_000)
        const session = sessions.create('live', { meta: { cwd: CWD } })
        toolTurn(live(session), 1)
        expect(await storage.snapshot('live')).toBeUndefined()

        await expect(sessions.flush(session)).resolves.toBe(true)
        expect(await storage.snapshot('live')).toBeDefined()

        const loaded = await (await lifecycle()).persistence.load('live')
        expect(json(loaded.events)).toBe(json(session.events))
        expect(loaded.meta).toEqual(session.header)
      })

      it('load of a live session with an open turn rejects and writes nothing', async () => {
        const { sessions, persistence } = await lifecycle(10_000)
        const session = sessions.create('open', { meta: { cwd: CWD } })
        openToolTurn(live(session), 1, 'call-x', true)
        await sessions.flush(session)
        const before = await storage.snapshot('open')

        const error = await rejection(persistence.load('open'))
        expect(error.message).toMatch(/cannot load session "open" while its live turn is open/)
        expect(await storage.snapshot('open')).toBe(before)
        expect(session.events).toHaveLength(5)
      })

      it('prepare of a live session rejects', async () => {
        const { sessions, persistence } = await lifecycle()
        const session = sessions.create('busy', { meta: { cwd: CWD } })
        shortTurn(live(session), 1)
        await expect(persistence.prepare('busy')).rejects.toThrow(/cannot prepare session "busy" while it is live/)
      })

      it('load of a live balanced session flushes it and returns its events', async () => {
        const { sessions, persistence } = await lifecycle(10_000)
        const session = sessions.create('balanced', { meta: { cwd: CWD } })
        toolTurn(live(session), 1)
        expect(await storage.snapshot('balanced')).toBeUndefined()

        const loaded = await persistence.load('balanced')
        expect(json(loaded.events)).toBe(json(session.events))
        expect(loaded.meta).toEqual(session.header)
        expect(json((await persistence.readFrom('balanced', 0)).events)).toBe(json(session.events))
      })

      it('prepare + enter/announce continues the stored log with one end-seed marker', async () => {
        const first = await lifecycle()
        const original = first.sessions.create('resume', { meta: { cwd: CWD } })
        toolTurn(live(original), 1)
        await expect(first.sessions.flush(original)).resolves.toBe(true)
        const before = original.events

        const second = await lifecycle()
        const session = await second.persistence.prepare('resume')
        expect(session.events).toHaveLength(before.length + 1)
        expect(session.events.at(-1)!.type).toBe('session/end-seed')
        expect(session.firstLiveSeq).toBe(before.length)
        expect(json(session.events.slice(0, -1))).toBe(json(before))
        expect(session.deriveMessages()).toEqual(original.deriveMessages())

        second.sessions.enter(session)
        second.sessions.announce(session)
        toolTurn(live(session), 2)
        await expect(second.sessions.flush(session)).resolves.toBe(true)

        const { events } = await (await lifecycle()).persistence.load('resume')
        expect(seqs(events)).toEqual(range(0, before.length + 1 + 10))
        expect(events.filter(event => event.type === 'session/end-seed')).toHaveLength(1)
        expect(events[before.length].type).toBe('session/end-seed')
        expect(json(events)).toBe(json(session.events))
      })

      it('a forked child is stored with its seed and one end-seed marker, and its header names the parent', async () => {
        const { sessions } = await lifecycle()
        const parent = sessions.create('parent', { meta: { cwd: CWD } })
        shortTurn(live(parent), 1)
        shortTurn(live(parent), 2)
        const child = sessions.fork(parent, 5, 'child')
        shortTurn(live(child), 2)
        await expect(sessions.flush(child)).resolves.toBe(true)
        await sessions.flush(parent)

        const loaded = await (await lifecycle()).persistence.load('child')
        expect(loaded.meta).toMatchObject({ id: 'child', parentSession: 'parent', seedLength: 6, cwd: CWD })
        expect(seqs(loaded.events)).toEqual(range(0, 12))
        expect(loaded.events[6].type).toBe('session/end-seed')
        expect(loaded.events.filter(event => event.type === 'session/end-seed')).toHaveLength(1)
        expect(json(loaded.events.slice(0, 6))).toBe(json(parent.events.slice(0, 6)))
        expect(json(loaded.events)).toBe(json(child.events))
      })

      it("disposing the owner plugin flushes its sessions' pending events", async () => {
        const { sessions, owner } = await lifecycle(10_000)
        const session = sessions.create('owned', { meta: { cwd: CWD } })
        toolTurn(live(session), 1)
        expect(await storage.snapshot('owned')).toBeUndefined()

        await owner.dispose()
        await vi.waitFor(async () => expect(await storage.snapshot('owned')).toBeDefined(), { timeout: 5000, interval: 20 })
        const loaded = await (await lifecycle()).persistence.load('owned')
        expect(json(loaded.events)).toBe(json(session.events))
      })

      it('disposing the backend plugin drains everything queued', async () => {
        const host = await lifecycle(10_000)
        // A writer that does not depend on the backend, so it outlives it.
        const writer = await host.root.plugin({ name: 'writer', inject: ['sessions'], apply() {} })
        const one = writer.ctx.sessions.create('drain-1', { meta: { cwd: CWD } })
        const two = writer.ctx.sessions.create('drain-2', { meta: { cwd: CWD } })
        toolTurn(live(one), 1)
        shortTurn(live(two), 1)
        shortTurn(live(two), 2)
        expect(await storage.snapshot('drain-1')).toBeUndefined()

        await host.backend.dispose()
        const { persistence } = await lifecycle()
        expect(json((await persistence.load('drain-1')).events)).toBe(json(one.events))
        expect(json((await persistence.load('drain-2')).events)).toBe(json(two.events))
      })
    })

    part('reads', () => {
      it('readFrom returns the stored suffix without repair', async () => {
        await storage.writeRaw(meta('suffix'), crashedInTurn2())
        const before = await storage.snapshot('suffix')
        const { persistence } = await lifecycle()
        const { meta: header, events } = await persistence.readFrom('suffix', 4)
        expect(header).toEqual(meta('suffix'))
        expect(seqs(events)).toEqual([4, 5, 6, 7])
        expect(types(events)).toEqual(['step/end', 'turn/end', 'turn/start', 'step/start'])
        expect((await persistence.readFrom('suffix', 8)).events).toEqual([])
        expect(await storage.snapshot('suffix')).toBe(before)
      })

      it('readFrom rejects a negative or fractional fromSeq with a TypeError', async () => {
        await stored(
          'suffix',
          raw(0, s => shortTurn(s, 1)),
        )
        const { persistence } = await lifecycle()
        await expect(persistence.readFrom('suffix', -1)).rejects.toBeInstanceOf(TypeError)
        await expect(persistence.readFrom('suffix', 1.5)).rejects.toBeInstanceOf(TypeError)
      })

      it('list returns the headers of stored sessions, oldest first', async () => {
        const { persistence } = await lifecycle()
        const b = meta('b', { createdAt: 2000 })
        const a = meta('a', { createdAt: 1000, cwd: '/other' })
        persistence.create(b)
        persistence.create(a)
        persistence.create(meta('c', { createdAt: 500 }))
        await persistence.append(
          'b',
          raw(0, s => shortTurn(s, 1)),
        )
        await persistence.append(
          'a',
          raw(0, s => shortTurn(s, 1)),
        )
        expect(await persistence.list()).toEqual([a, b])
        expect(await (await lifecycle()).persistence.list()).toEqual([a, b])
      })

      it('lastActivity, where a backend has it, says when a session was last written: one written later is later', async () => {
        const { persistence } = await lifecycle()
        if (!persistence.lastActivity) return // optional: callers read the last event instead
        const now = (events: SessionEvent[]) => events.map(event => ({ ...event, time: Date.now() }))
        persistence.create(meta('written-first', { createdAt: 2000 }))
        persistence.create(meta('written-last', { createdAt: 1000 }))
        await persistence.append('written-first', now(raw(0, s => shortTurn(s, 1))))
        // Apart on any clock a store keeps (a file's mtime, an event's time).
        await new Promise(resolve => setTimeout(resolve, 30))
        await persistence.append('written-last', now(raw(0, s => shortTurn(s, 1))))
        const fresh = (await lifecycle()).persistence
        const first = await fresh.lastActivity!('written-first')
        const last = await fresh.lastActivity!('written-last')
        expect(first).toBeGreaterThan(2000)
        expect(last).toBeGreaterThan(first!)
        expect(await fresh.lastActivity!('missing')).toBeUndefined()
      })

      it('a missing id rejects with "not found"', async () => {
        await stored(
          'present',
          raw(0, s => shortTurn(s, 1)),
        )
        const { persistence } = await lifecycle()
        await expect(persistence.load('missing')).rejects.toThrow(/session "missing" not found/)
        await expect(persistence.inspect('missing')).rejects.toThrow(/not found/)
        await expect(persistence.prepare('missing')).rejects.toThrow(/not found/)
        await expect(persistence.readFrom('missing', 0)).rejects.toThrow(/not found/)
        await expect(persistence.check('missing')).rejects.toThrow(/session "missing" not found/)
      })
    })

    part('collision', () => {
      it('a live session whose id is already stored with other events is vetoed at creation', async () => {
        await stored(
          'dup',
          raw(0, s => shortTurn(s, 1)),
        )
        const before = await storage.snapshot('dup')
        const { sessions } = await lifecycle()
        const seed = raw(0, s => shortTurn(s, 7))

        expect(() => sessions.create('dup', { seed, meta: { cwd: CWD } })).toThrow(/id collision/)
        expect(sessions.get('dup')).toBeUndefined()
        expect(() => sessions.create('dup', { meta: { cwd: CWD } })).toThrow(/id collision/)
        expect(sessions.get('dup')).toBeUndefined()
        expect(await storage.snapshot('dup')).toBe(before)
      })
    })

    part('durable', () => {
      it('session/durable follows each durable batch with (id, seq), and whenDurable resolves once that seq is stored', async () => {
        const { root, sessions, persistence } = await lifecycle(10_000)
        const session = sessions.create('durable', { meta: { cwd: CWD } })
        const seen: [string, number][] = []
        root.on('session/durable', (id, seq) => {
          seen.push([id, seq])
        })
        shortTurn(live(session), 1)
        let durable = false
        const waiting = persistence.whenDurable('durable', 5).then(() => {
          durable = true
        })
        await sleep(20)
        expect(durable).toBe(false)
        expect(seen).toEqual([])

        await sessions.flush(session)
        await waiting
        expect(seen).toEqual([['durable', 5]])
        expect(seqs((await persistence.readFrom('durable', 0)).events)).toEqual(range(0, 5))
        live(session)('turn/start', { turn: 2 })
        await sessions.flush(session)
        expect(seen).toEqual([
          ['durable', 5],
          ['durable', 6],
        ])
        // Already durable: at once.
        await persistence.whenDurable('durable', 3)
      })

      it('is emitted for seam appends too; a failing listener does not undo the write', async () => {
        const { root, persistence, errors } = await lifecycle()
        const seen: number[] = []
        root.on('session/durable', (_id, seq) => {
          seen.push(seq)
          throw new Error('observer failed')
        })
        persistence.create(meta('seam'))
        await persistence.append(
          'seam',
          raw(0, s => shortTurn(s, 1)),
        )
        expect(seen).toEqual([5])
        expect(errors).toHaveLength(1)
        expect((await persistence.readFrom('seam', 0)).events).toHaveLength(6)
      })

      it('whenDurable rejects for an untracked session, and when the session closes before the seq was stored', async () => {
        const { persistence } = await lifecycle()
        await expect(persistence.whenDurable('nobody', 0)).rejects.toThrow(/session "nobody" is not tracked/)
        persistence.create(meta('never'))
        const waiting = persistence.whenDurable('never', 0)
        await persistence.close('never')
        await expect(waiting).rejects.toThrow(/session "never" was closed before these events were stored/)
      })
    })

    part('leases', () => {
      const HOST = hostname()

      it('a second writer is refused before it writes anything, naming the holder', async () => {
        await storage.writeRaw(meta('busy'), crashedInTurn2())
        const first = await start({ leaseCommand: 'loom run' })
        await first.persistence.load('busy')
        const before = await storage.snapshot('busy')

        const second = await start()
        const error = await rejection(second.persistence.load('busy'))
        expect(error).toBeInstanceOf(SessionLeaseError)
        expect(error).toMatchObject({ name: 'SessionLeaseError', code: 'SESSION_LEASE_HELD', sessionId: 'busy' })
        const holder = (error as SessionLeaseError).holder!
        expect(holder).toMatchObject({ pid: process.pid, host: HOST, command: 'loom run' })
        expect(Math.abs(holder.since - Date.now())).toBeLessThan(60_000)
        expect(error.message).toMatch(/^session busy is being written by pid \d+ on host .+ since [\d:\- ]+ \(loom run\); wait for it to finish or stop it$/)
        await expect(second.persistence.prepare('busy')).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD' })
        expect(await storage.snapshot('busy')).toBe(before)
      })

      it('is released by close(id), by the backend unloading, and by the owner disposing its live session', async () => {
        for (const id of ['a', 'b'])
          await storage.writeRaw(
            meta(id),
            raw(0, s => shortTurn(s, 1)),
          )
        const first = await start()
        const second = await start()
        await first.persistence.load('a')
        await expect(second.persistence.load('a')).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD' })
        await first.persistence.close('a')
        await second.persistence.load('a')

        await first.persistence.load('b')
        await expect(second.persistence.load('b')).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD' })
        await first.backend.dispose()
        await second.persistence.load('b')
      })

      it('a live session keeps its lease until its owner disposes it', async () => {
        const first = await start()
        const session = first.sessions.create('held', { meta: { cwd: CWD } })
        shortTurn(live(session), 1)
        await first.sessions.flush(session)
        const second = await start()
        await expect(second.persistence.prepare('held')).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD' })

        await first.owner.dispose()
        await vi.waitFor(() => second.persistence.prepare('held'), { timeout: 5000, interval: 20 })
      })

      it('a lease whose heartbeat went stale is taken over', async () => {
        await stored(
          'stale',
          raw(0, s => shortTurn(s, 1)),
        )
        // The first writer's next heartbeat is far away: to the second, it looks hung once a second passes
        // (long enough that a busy machine does not get there between the two loads).
        const first = await start({ leaseHeartbeatMs: 60_000, leaseStaleMs: 120_000, leaseCommand: 'loom hung' })
        await first.persistence.load('stale')
        const second = await start({ leaseHeartbeatMs: 50, leaseStaleMs: 1000 })
        await expect(second.persistence.load('stale')).rejects.toMatchObject({ code: 'SESSION_LEASE_HELD', holder: { command: 'loom hung' } })
        await sleep(1200)
        expect(seqs((await second.persistence.load('stale')).events)).toEqual(range(0, 5))
      })

      it('a writer whose lease was taken over gets SESSION_LEASE_LOST and writes nothing (fencing)', async () => {
        const first = await start({ leaseHeartbeatMs: 60_000, leaseStaleMs: 120_000 })
        first.persistence.create(meta('fenced'))
        await first.persistence.append(
          'fenced',
          raw(0, s => shortTurn(s, 1)),
        )
        await sleep(400)
        const second = await start({ leaseHeartbeatMs: 50, leaseStaleMs: 200, leaseCommand: 'loom sessions repair' })
        await second.persistence.load('fenced')
        const before = await storage.snapshot('fenced')

        const error = await rejection(
          first.persistence.append(
            'fenced',
            raw(6, s => shortTurn(s, 2)),
          ),
        )
        expect(error).toBeInstanceOf(SessionLeaseError)
        expect(error).toMatchObject({
          code: 'SESSION_LEASE_LOST',
          sessionId: 'fenced',
          holder: { pid: process.pid, host: HOST, command: 'loom sessions repair' },
        })
        expect(error.message).toMatch(
          /^session fenced: this writer \(pid \d+\) lost its write lease, now held by pid \d+ on host .+ \(loom sessions repair\); nothing more is written by this process$/,
        )
        expect(await storage.snapshot('fenced')).toBe(before)

        // The new holder continues; the old one stays fenced even once the new one is gone.
        const theirs = raw(6, s => toolTurn(s, 2))
        await second.persistence.append('fenced', theirs)
        await second.persistence.close('fenced')
        await expect(first.persistence.append('fenced', theirs)).rejects.toMatchObject({ code: 'SESSION_LEASE_LOST' })
        const { events } = await second.persistence.inspect('fenced')
        expect(json(events.slice(6))).toBe(json(theirs))
      })

      it('a live session whose lease was taken over: its flush rejects with SESSION_LEASE_LOST and nothing is stored', async () => {
        const first = await start({ maxDelayMs: 10_000, leaseHeartbeatMs: 60_000, leaseStaleMs: 120_000 })
        const session = first.sessions.create('live-fenced', { meta: { cwd: CWD } })
        shortTurn(live(session), 1)
        await first.sessions.flush(session)
        await sleep(400)
        const second = await start({ leaseHeartbeatMs: 50, leaseStaleMs: 200 })
        await second.persistence.load('live-fenced')
        const before = await storage.snapshot('live-fenced')

        openStart(live(session), 2)
        await expect(first.sessions.flush(session)).rejects.toMatchObject({ code: 'SESSION_LEASE_LOST' })
        expect(await storage.snapshot('live-fenced')).toBe(before)
      })

      it('reads take no lease and work while another writer holds it', async () => {
        const first = await start({ maxDelayMs: 10_000 })
        const session = first.sessions.create('reading', { meta: { cwd: CWD } })
        shortTurn(live(session), 1)
        shortTurn(live(session), 2)
        openStart(live(session), 3)
        await first.sessions.flush(session)
        const before = await storage.snapshot('reading')

        const second = await start()
        const inspected = await second.persistence.inspect('reading')
        expect(seqs(inspected.events)).toEqual(range(0, 15))
        expect(types(inspected.events).slice(-2)).toEqual(['step/end', 'turn/end'])
        expect(seqs((await second.persistence.readFrom('reading', 10)).events)).toEqual([10, 11, 12, 13])
        expect(await second.persistence.check('reading')).toMatchObject({ events: 14, tornBytes: 0, corruption: null })
        expect((await second.persistence.list()).map(header => header.id)).toEqual(['reading'])
        expect(await storage.snapshot('reading')).toBe(before)

        // The holder was not disturbed.
        live(session)('user/message', userText('more'), { surfaceOp: 'append' })
        await first.sessions.flush(session)
        expect(seqs((await second.persistence.readFrom('reading', 0)).events)).toEqual(range(0, 14))
      })
    })
  })
}
