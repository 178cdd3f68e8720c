import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import {
  checkStored,
  deepFreezeJson,
  defaultLeaseCommand,
  Session,
  SessionPersistenceCorruptionError,
  SessionTracker,
  type SessionEvent,
  type SessionHeader,
  type SessionLeaseHolder,
  type SessionPersistence,
  type StoredSession,
  type StoredSessionCheck,
  type TrackedLog,
} from '@loom/session'
import { PostgresArtifacts } from './artifacts.ts'
import { Db, type Queryable, type StoredRows } from './db.ts'
import { Lease, readHolder } from './lease.ts'

export { PostgresArtifacts } from './artifacts.ts'
export { describeUrl, parseStoreUrl } from './hosts.ts'
export { isConnectionError, NotPrimaryError, StoreUnavailableError } from './unavailable.ts'
export { SessionFormatUnsupportedError, SessionLeaseError, SessionPersistenceCorruptionError, type SessionLeaseHolder, type StoredSession } from '@loom/session'

export const name = '@loom/session-postgres'
export const inject = ['sessions']

export interface Config {
  /**
   * Connection string, e.g. `postgres://loom:secret@db.example:5432/loom`; several hosts
   * (`postgres://loom@db-1:5432,db-2:5432/loom?target_session_attrs=read-write`) for a cluster
   * whose writable primary may move: the store writes to the one that takes writes.
   */
  url: string
  /** The schema holding the tables (created if missing). */
  schema?: string
  /** Write-behind window: events are batched for at most this long before a transaction. */
  maxDelayMs?: number
  /** How often a writer refreshes the heartbeat of its session lease (default 5000). */
  leaseHeartbeatMs?: number
  /** A lease whose heartbeat is older than this may be taken over (default 30000). */
  leaseStaleMs?: number
  /** What this process runs, shown to writers it refuses (default: its command line). */
  leaseCommand?: string
  /** The host name written into this process's leases (default: the machine's); a holder of this name whose pid is gone is taken over at once. */
  leaseHost?: string
  /** Most connections this backend opens at once. */
  poolMax?: number
}

export const Config: Schema<Config> = Schema.object({
  url: Schema.string()
    .pattern(/^postgres(ql)?:\/\/[^/?#]/)
    .required()
    .description(
      'PostgreSQL connection string (postgres://user:password@host:port/database); several hosts (host1:port1,host2:port2) for a high-availability cluster: the store writes to the writable primary.',
    ),
  schema: Schema.string()
    .pattern(/^[A-Za-z_][A-Za-z0-9_$]*$/)
    .default('loom')
    .description('Schema holding the session tables; created if missing.'),
  maxDelayMs: Schema.natural().default(200).description('Longest time an event waits before a durable write.'),
  leaseHeartbeatMs: Schema.natural().min(1).default(5000).description('How often a writer refreshes the heartbeat of its session lease.'),
  leaseStaleMs: Schema.natural().min(1).default(30_000).description('A lease whose heartbeat is older than this may be taken over.'),
  leaseCommand: Schema.string().description('What this process runs, shown to the writers it refuses (default: its command line).'),
  leaseHost: Schema.string().description(
    "The host name written into this process's leases (default: the machine's hostname). Hosts that share a hostname but not a process table (containers) need distinct names: a holder of this name whose pid is gone here is taken over at once.",
  ),
  poolMax: Schema.natural().min(1).default(10).description('Most connections this backend opens at once.'),
})

// No `Context.sessionPersistence` declaration here: @loom/session-jsonl declares the key with its own
// class, and TypeScript refuses a second type for it. Reach this backend as `SessionPersistence`.

/** The bookkeeping of one session id in this backend (a session adopted at start is `reserved` until it attaches). */
type Tracked = TrackedLog

/**
 * Durable sessions in PostgreSQL (ctx key `sessionPersistence`). Every live
 * session's events are batched (write-behind) and stored one transaction per
 * batch; `sessions.flush(session)` is the barrier that makes everything so far
 * durable. A session a crash left mid-turn is closed when it is loaded.
 *
 * One writer per session: every path that writes takes the session's lease
 * first (a row of `session_leases`, see lease.ts) and every transaction is
 * fenced by its token, so a second host is refused before it writes anything.
 */
export class PostgresPersistence extends Service implements SessionPersistence {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = inject
  static readonly Config = Config

  readonly db: Db
  /** Long tool output kept whole with each session (`@loom/tools/artifacts`), in `session_artifacts`. */
  readonly artifacts: PostgresArtifacts
  private readonly home: Context
  private readonly log: SessionTracker<Tracked>
  private readonly tracked: Map<string, Tracked>
  /** The write leases this backend holds, by session id. */
  private readonly leases = new Map<string, Lease>()
  /** Releases under way (a disposed session's runs as the backend unloads): the pool ends after them. */
  private readonly releasing = new Set<Promise<void>>()
  /** Ids known to be stored: `session/created` must veto a collision synchronously, without a query. */
  private readonly stored = new Set<string>()
  private readonly heartbeatMs: number
  private readonly staleMs: number
  private readonly leaseHost: string | undefined
  /** What this process runs, written into its leases (the CLI sets e.g. `loom run`). */
  leaseCommand: string

  constructor(ctx: Context, config: Config) {
    super(ctx, 'sessionPersistence')
    this.home = ctx
    this.log = new SessionTracker(ctx, 'session-postgres', config.maxDelayMs ?? 200)
    this.tracked = this.log.tracked
    this.heartbeatMs = config.leaseHeartbeatMs ?? 5000
    this.staleMs = config.leaseStaleMs ?? 30_000
    // A live holder must never look stale between two heartbeats.
    if (this.staleMs <= this.heartbeatMs) throw new RangeError(`leaseStaleMs (${this.staleMs}) must be greater than leaseHeartbeatMs (${this.heartbeatMs})`)
    this.leaseCommand = config.leaseCommand ?? defaultLeaseCommand()
    this.leaseHost = config.leaseHost
    const logger = ctx.logger('session-postgres')
    try {
      this.db = new Db(
        {
          url: config.url,
          schema: config.schema ?? 'loom',
          poolMax: config.poolMax ?? 10,
          onPrimary: host => logger.info(`writing to ${host}, the writable primary of ${this.db.where}`),
        },
        error => logger.warn(`idle connection to ${this.db.where} failed: ${error.message}`),
      )
    } catch (error) {
      throw new Error(`${name}: config key "url" of the ${name} row ${(error as Error).message}`)
    }
    this.artifacts = new PostgresArtifacts(this.db, id => this.artifactWriter(id))
    ctx.effect(() => () => this.drain(), 'session-postgres drain')
  }

  /** Connects, creates the tables, and only then listens: a bad URL fails the plugin's start. */
  async [Service.init]() {
    try {
      await this.db.migrate()
      for (const id of await this.db.ids()) this.stored.add(id)
    } catch (error) {
      throw new Error(
        `${name}: cannot use PostgreSQL at ${this.db.where} (config key "url" of the ${name} row, schema "${this.db.schema}"): ${(error as Error).message}`,
        { cause: error },
      )
    }
    // Sessions already live when this backend starts (a hot reload of it) are adopted.
    for (const session of this.home.sessions.list()) {
      try {
        await this.readopt(session)
      } catch (error) {
        this.home.logger('session-postgres').error(error)
      }
    }
    this.home.on('session/created', session => this.attach(session))
    this.home.on('session/event', (session, event) => this.log.enqueue(session, event))
    this.home.on('session/flush', session => this.log.flush(session))
    this.home.on('session/disposed', session => this.log.detach(session, (id, tracked) => this.forget(id, tracked)))
    for (const session of this.home.sessions.list()) {
      try {
        this.attach(session)
      } catch (error) {
        this.home.logger('session-postgres').error(error)
      }
    }
  }

  /** Where a session is stored (no I/O). */
  locate(meta: Pick<SessionHeader, 'id'>): { kind: 'postgres'; where: string } {
    return { kind: 'postgres', where: this.db.locate(meta.id) }
  }

  /** Records the intent to store a session; its rows appear with the first append. */
  create(meta: SessionHeader): void {
    if (!Number.isSafeInteger(meta.createdAt) || meta.createdAt < 0) throw new TypeError(`session "${meta.id}" has an invalid createdAt`)
    if (this.tracked.has(meta.id)) throw new Error(`session "${meta.id}" already exists in this backend`)
    if (this.stored.has(meta.id)) throw new Error(`session "${meta.id}" already has a stored log in ${this.db.where}; load/resume it instead of creating`)
    this.tracked.set(meta.id, { header: meta, cursor: 0, materialized: false, waiters: [] })
  }

  /** Stores events durably, one transaction; they must continue the stored log exactly. */
  append(id: string, events: readonly SessionEvent[]): Promise<void> {
    return this.log.append(id, events, (tracked, batch) => this.store(tracked, batch, false))
  }

  /**
   * The stored session, balanced: an open turn is closed in the table first. A
   * live session is flushed and returned if no turn is open. Takes the lease.
   */
  load(id: string): Promise<StoredSession> {
    return this.log.load(id, async () => {
      const { rows } = await this.repaired(id)
      return { meta: rows.header, events: deepFreezeJson(rows.events) }
    })
  }

  /** Who holds the write lease of `id` now, if anyone (this backend included); takes nothing. */
  holder(id: string): Promise<SessionLeaseHolder | undefined> {
    return readHolder(this.db, id)
  }

  /** Resolves once event `seq` of session `id` is durably stored (at once if it already is). */
  whenDurable(id: string, seq: number): Promise<void> {
    return this.log.whenDurable(id, seq)
  }

  /** Stops writing a session that is not live: waits for its writes, then releases its lease. */
  close(id: string): Promise<void> {
    return this.log.close(id, () => this.forget(id))
  }

  /**
   * Stops writing the live session `id` unless its event `seq` is stored
   * (`false`: it is, and writing goes on): what is not stored is dropped, never
   * written, and the lease is let go (in the background: the database may be
   * unreachable, see `Lease.release`). Its owner should be disposed next.
   */
  abandon(id: string, seq: number): Promise<boolean> {
    return this.log.abandon(id, seq, (_, tracked) => void this.forget(id, tracked))
  }

  /** Resolves once the database answers a query; rejects with StoreUnavailableError when it cannot be reached. */
  async ping(): Promise<void> {
    await this.db.pool.query('SELECT 1')
  }

  /** The time of the newest stored event (the header's creation when there is none). */
  async lastActivity(id: string): Promise<number | undefined> {
    const live = this.log.live(id)
    if (live) return live.events.at(-1)?.time ?? live.header.createdAt
    return this.db.lastActivity(id)
  }

  /** What `load` would return, computed in memory: writes nothing, takes no lease. */
  async inspect(id: string): Promise<StoredSession> {
    const live = this.log.live(id)
    if (live) return { meta: live.header, events: live.events }
    const rows = await this.read(id)
    this.restore(rows)
    return { meta: rows.header, events: deepFreezeJson([...rows.events, ...rows.closers]) }
  }

  /** What `load` would close in the stored rows, or why it cannot read them: writes nothing. A transaction leaves no torn tail. */
  check(id: string): Promise<StoredSessionCheck> {
    return checkStored(this.db.locate(id), async () => {
      const rows = await this.read(id)
      this.restore(rows)
      return { events: rows.events.length, tornBytes: 0, closers: rows.closers }
    })
  }

  /**
   * An unpublished Session for resuming `id`: the repaired log plus a
   * `session/end-seed` marker. Publishing it (`sessions.enter` + `announce`)
   * attaches it here; only the marker and later events are written.
   */
  prepare(id: string): Promise<Session> {
    return this.log.prepare(id, async () => (await this.repaired(id)).session)
  }

  /** Stored events with `seq >= fromSeq`, without repair or lease. */
  async readFrom(id: string, fromSeq: number): Promise<StoredSession> {
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 0) throw new TypeError(`fromSeq must be a non-negative safe integer, got ${fromSeq}`)
    const rows = await this.read(id, fromSeq)
    return { meta: rows.header, events: deepFreezeJson(rows.events) }
  }

  /** Headers of every stored session, oldest first. */
  async list(): Promise<SessionHeader[]> {
    const headers = await this.db.headers()
    for (const header of headers) this.stored.add(header.id)
    return headers
  }

  private async read(id: string, fromSeq = 0): Promise<StoredRows> {
    const rows = await this.db.read(id, fromSeq)
    if (!rows) throw this.notFound(id)
    this.stored.add(id)
    return rows
  }

  private notFound(id: string): Error {
    return new Error(`session "${id}" not found in ${this.db.where} (schema "${this.db.schema}")`)
  }

  /** Validates the stored events and their closers as one session would hold them. */
  private restore(rows: StoredRows): Session {
    try {
      return Session.fromRestore(rows.header.id, [...rows.events, ...rows.closers], rows.header)
    } catch (error) {
      throw new SessionPersistenceCorruptionError(
        `stored session "${rows.header.id}" failed validation: ${(error as Error).message} (raw log: ${this.db.locate(rows.header.id)})`,
        { cause: error },
      )
    }
  }

  /** Takes the lease, then reads and validates, stores the closers of an open turn, and tracks the log. */
  private async repaired(id: string): Promise<{ rows: StoredRows; session: Session }> {
    // Not found is reported before any lease is taken for an id that has no log.
    if (!(await this.db.exists(id))) throw this.notFound(id)
    const taken = !this.leases.has(id)
    await this.hold(id)
    try {
      let rows = await this.read(id)
      let session = this.restore(rows)
      const waiters = this.tracked.get(id)?.waiters ?? []
      const tracked: Tracked = { header: rows.header, cursor: rows.events.length, materialized: true, waiters }
      this.tracked.set(id, tracked)
      if (rows.closers.length) {
        await this.store(tracked, rows.closers, false)
        rows = { ...rows, events: [...rows.events, ...rows.closers], closers: [] }
        session = this.restore(rows)
      }
      return { rows, session }
    } catch (error) {
      // A lease taken for a load that failed (the database went away half way) is not kept: nobody would release it.
      if (taken) void this.forget(id)
      throw error
    }
  }

  /** Takes the lease of `id` unless this backend holds it; a lost lease is never taken again by the same tracking. */
  private async hold(id: string): Promise<Lease> {
    const held = this.leases.get(id)
    if (held) return held
    const lease = await Lease.acquire(this.db, id, {
      heartbeatMs: this.heartbeatMs,
      staleMs: this.staleMs,
      command: this.leaseCommand,
      ...(this.leaseHost !== undefined && { host: this.leaseHost }),
    })
    this.leases.set(id, lease)
    return lease
  }

  /**
   * Before an artifact of `id` is written: a session this backend writes gets its row now if
   * none of its events is stored yet (the artifact references it), and its lease fences the
   * write. A session written elsewhere gets no lease from here: the write is not fenced.
   */
  private async artifactWriter(id: string): Promise<Lease | undefined> {
    const tracked = this.tracked.get(id)
    if (!tracked) return undefined
    if (!tracked.materialized) {
      // In the id's chain: a batch being written may store the header first.
      await this.log.serial(id, async () => {
        if (tracked.materialized || this.tracked.get(id) !== tracked) return
        const lease = await this.hold(id)
        await this.db.transaction(async client => {
          await lease.fence(client)
          await this.insertHeader(tracked, client)
        })
        tracked.materialized = true
        this.stored.add(id)
      })
    }
    // Closed meanwhile: no lease is taken again for it.
    return this.tracked.get(id) === tracked ? this.hold(id) : undefined
  }

  /** Stores the header of a log not stored yet; an existing row for its id is a collision and writes nothing. */
  private async insertHeader(tracked: Tracked, client: Queryable) {
    const id = tracked.header.id
    if (!(await this.db.insertHeader(tracked.header, client))) {
      throw new Error(`session "${id}" already has a stored log in ${this.db.where} (id collision); nothing was written`)
    }
  }

  /** Drops the tracking of `id` and releases its lease. */
  private async forget(id: string, tracked = this.tracked.get(id)) {
    this.log.untrack(id, tracked)
    const lease = this.leases.get(id)
    this.leases.delete(id)
    if (!lease) return
    const released = lease.release()
    this.releasing.add(released)
    await released
    this.releasing.delete(released)
  }

  /** Binds a published session to its log and queues what the log does not hold yet. */
  private attach(session: Session) {
    const existing = this.tracked.get(session.id)
    if (existing?.owner === session) return
    if (existing?.owner) throw new Error(`session "${session.id}" is already bound to a different live session in ${this.db.where}`)
    let tracked = existing
    // A prepared session, or a created intent, continues exactly where the log stands.
    if (!tracked || (tracked.reserved !== session && tracked.materialized)) {
      // Synchronous, so a collision vetoes the publication; a log stored by another host since this one
      // started is caught by the first write instead (the header insert refuses an existing id).
      if (this.stored.has(session.id)) {
        throw new Error(`session "${session.id}" already has a stored log in ${this.db.where} (id collision); resume it instead of creating it`)
      }
      tracked = { header: session.header, cursor: 0, materialized: false, waiters: [] }
    }
    const bound = tracked
    this.log.bind(session, bound, batch => this.store(bound, batch, true))
  }

  /**
   * At start, a session that was live before this backend (re)loaded: a stored
   * log must be its prefix, which it then continues under a fresh lease.
   */
  private async readopt(session: Session) {
    const rows = await this.db.read(session.id)
    if (!rows) return
    const live = session.events
    if (
      rows.header.id !== session.id ||
      rows.events.length > live.length ||
      rows.events.some((event, i) => JSON.stringify(event) !== JSON.stringify(live[i]))
    ) {
      throw new Error(`the stored log of session "${session.id}" does not match this live session (id collision; raw log: ${this.db.locate(session.id)})`)
    }
    await this.hold(session.id)
    this.tracked.set(session.id, { header: rows.header, cursor: rows.events.length, materialized: true, reserved: session, waiters: [] })
  }

  /** Writes the events the log does not hold yet, in one fenced transaction; seqs must continue it exactly. */
  private async store(tracked: Tracked, batch: readonly SessionEvent[], live: boolean) {
    const id = tracked.header.id
    // A live batch may repeat seed events that are already stored.
    const events = live ? batch.filter(event => event.seq >= tracked.cursor) : batch
    if (!events.length) return
    events.forEach((event, i) => {
      if (event.seq !== tracked.cursor + i) {
        throw new Error(`append seq mismatch for "${id}": expected ${tracked.cursor + i} at index ${i}, got ${event.seq}`)
      }
    })
    const lease = await this.hold(id)
    await this.db.transaction(async client => {
      // Fencing: the lease row stays locked until commit, so no takeover can slip in between.
      await lease.fence(client)
      if (!tracked.materialized) {
        await this.insertHeader(tracked, client)
      } else {
        const stored = await this.db.length(id, client)
        if (stored !== tracked.cursor) {
          throw new Error(`the stored log of session "${id}" holds ${stored} events, this writer expected ${tracked.cursor}; nothing was written`)
        }
      }
      await this.db.insertEvents(id, events, client)
    })
    tracked.materialized = true
    this.stored.add(id)
    tracked.cursor += events.length
    this.log.durable(tracked)
  }

  /** On unload: everything queued is written, the leases released and the pool closed. */
  private async drain() {
    const errors = await this.log.drain()
    await Promise.allSettled([...new Set([...this.tracked.keys(), ...this.leases.keys()])].map(id => this.forget(id)))
    // A release that started before (a disposed session's) would fail on an ended pool and leave its lease held.
    await Promise.all(this.releasing)
    await this.db.pool.end().catch(() => {})
    if (errors.length) throw new AggregateError(errors, `${name} dispose failed`)
  }
}

export default PostgresPersistence
