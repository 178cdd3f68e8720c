import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import {
  checkStored,
  deepFreezeJson,
  Session,
  SessionTracker,
  type SessionEvent,
  type SessionHeader,
  type SessionLeaseHolder,
  type SessionPersistence,
  type StoredSession,
  type StoredSessionCheck,
  type TrackedLog,
} from '@loom/session'
import { existsSync, openSync, closeSync, fsyncSync, ftruncateSync, readFileSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { dirname, resolve } from 'node:path'
import { JsonlArtifacts } from './artifacts.ts'
import { installCheckpoints } from './checkpoint.ts'
import { defaultCommand, Lease, lockPathOf, readHolder } from './lease.ts'
import { scanLog } from './scanner.ts'
import { JsonlFiles, type StoredLog } from './store.ts'
import type { FileOps, LogAppender } from './file.ts'

export { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from './errors.ts'
export { encodeSegment, logPath, projectKey } from './paths.ts'
export { LOCK_FILENAME } from './lease.ts'
export { ARTIFACTS_DIRNAME, JsonlArtifacts } from './artifacts.ts'
export { SessionLeaseError, type SessionLeaseHolder, type StoredSession } from '@loom/session'

export const name = '@loom/session-jsonl'
export const inject = ['sessions']

export interface Config {
  /** Directory of the logs: `<root>/<project of cwd>/<session id>/session.jsonl`. */
  root: string
  /** Write-behind window: events are batched for at most this long before a durable write. */
  maxDelayMs?: number
  /** Pack runs of streamed text deltas into one line (smaller logs, same events). */
  packChunks?: boolean
  /** Flush before every model call, tool execution and later step of a turn (default true). */
  checkpoints?: boolean
  /** How often a writer refreshes the heartbeat of its session lease (default 5000). */
  leaseHeartbeatMs?: number
  /** A lease whose heartbeat is older than this may be taken over (default 30000). */
  leaseStaleMs?: number
  /** What this process runs, shown to writers it refuses (default: its command line). */
  leaseCommand?: string
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().required().description('Directory holding the session logs.'),
  maxDelayMs: Schema.natural().default(200).description('Longest time an event waits before a durable write.'),
  packChunks: Schema.boolean().default(true).description('Pack runs of streamed deltas into one line.'),
  checkpoints: Schema.boolean().default(true).description('Flush before every model call, tool execution and later step of a turn.'),
  leaseHeartbeatMs: Schema.natural().min(1).default(5000).description('How often a writer refreshes the heartbeat of its session lease.'),
  leaseStaleMs: Schema.natural().min(1).default(30_000).description('A lease whose heartbeat is older than this may be taken over.'),
  leaseCommand: Schema.string().description('What this process runs, shown to the writers it refuses (default: its command line).'),
})

declare module '@deepseek-ai/cordis' {
  interface Context {
    sessionPersistence: JsonlPersistence
  }
}

/** The bookkeeping of one session id in this backend: where its log is, besides the shared tracking. */
interface Tracked extends TrackedLog {
  path: string
}

/**
 * Durable sessions as append-only JSONL files (ctx key `sessionPersistence`).
 * Every live session's events are batched (write-behind) and appended with fsync;
 * `sessions.flush(session)` is the barrier that makes everything so far durable.
 * A log a crash left torn or mid-turn is repaired when it is loaded: the torn tail
 * is cut and the open turn is closed with explicit results, so nothing a model or
 * a tool acted on is lost and no tool call is left without a result.
 *
 * One writer per session: every path that writes a log takes the session's
 * lease first (`session.lock` next to the log, see lease.ts) and every batch is
 * fenced by it, so a second process is refused before it writes anything.
 */
export class JsonlPersistence extends Service implements SessionPersistence {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = inject
  static readonly Config = Config

  readonly files: JsonlFiles
  /** Long tool output kept whole with each session (`@loom/tools/artifacts`), in `artifacts/` beside its log. */
  readonly artifacts: JsonlArtifacts
  private readonly home: Context
  private readonly log: SessionTracker<Tracked>
  private readonly tracked: Map<string, Tracked>
  /** The write leases this backend holds, by session id. */
  private readonly leases = new Map<string, Lease>()
  /** The logs held open for appends, by session id: one per leased log, closed with its lease. */
  private readonly appenders = new Map<string, LogAppender>()
  private readonly heartbeatMs: number
  private readonly staleMs: number
  /** What this process runs, written into its leases (the CLI sets e.g. `loom run`). */
  leaseCommand: string

  constructor(ctx: Context, config: Config, ops?: FileOps) {
    super(ctx, 'sessionPersistence')
    this.home = ctx
    this.log = new SessionTracker(ctx, 'session-jsonl', config.maxDelayMs ?? 200)
    this.tracked = this.log.tracked
    this.heartbeatMs = config.leaseHeartbeatMs ?? 5000
    this.staleMs = config.leaseStaleMs ?? 30_000
    // A live holder must never look stale between two heartbeats.
    if (this.staleMs <= this.heartbeatMs) throw new RangeError(`leaseStaleMs (${this.staleMs}) must be greater than leaseHeartbeatMs (${this.heartbeatMs})`)
    this.leaseCommand = config.leaseCommand ?? defaultCommand()
    const root = config.root.replace(/^~(?=$|\/)/, homedir())
    this.files = new JsonlFiles({ root: resolve(root), packChunks: config.packChunks ?? true, ops })
    // A live session's folder is known (its log may not exist yet); another one is looked up.
    this.artifacts = new JsonlArtifacts(async id => dirname(this.tracked.get(id)?.path ?? (await this.path(id))))

    ctx.on('session/created', session => this.attach(session))
    ctx.on('session/event', (session, event) => this.log.enqueue(session, event))
    ctx.on('session/flush', session => this.log.flush(session))
    ctx.on('session/disposed', session => this.log.detach(session, (id, tracked) => this.forget(id, tracked)))
    // Sessions already live when this backend starts (a hot reload of it) are adopted.
    for (const session of ctx.sessions.list()) {
      try {
        this.attach(session)
      } catch (error) {
        ctx.logger('session-jsonl').error(error)
      }
    }
    if (config.checkpoints ?? true) installCheckpoints(ctx)
    ctx.effect(() => () => this.drain(), 'session-jsonl drain')
  }

  /** Where a session's log lives (no I/O). */
  locate(meta: Pick<SessionHeader, 'cwd' | 'id'>): { kind: 'jsonl'; path: string } {
    return { kind: 'jsonl', path: this.files.pathOf(meta) }
  }

  /** Records the intent to store a session; the file appears with the first append. */
  create(meta: SessionHeader): void {
    if (!Number.isSafeInteger(meta.createdAt) || meta.createdAt < 0) throw new TypeError(`session "${meta.id}" has an invalid createdAt`)
    if (this.tracked.has(meta.id)) throw new Error(`session "${meta.id}" already exists in this backend`)
    const path = this.files.pathOf(meta)
    if (existsSync(path)) throw new Error(`session "${meta.id}" already has a persisted log on disk; load/resume it instead of creating`)
    this.tracked.set(meta.id, { header: meta, path, cursor: 0, materialized: false, waiters: [] })
  }

  /** Stores events durably; they must continue the stored log exactly. */
  append(id: string, events: readonly SessionEvent[]): Promise<void> {
    return this.log.append(id, events, (tracked, batch) => this.store(tracked, batch, false))
  }

  /**
   * The stored session, balanced: a torn tail is cut and an open turn closed on
   * disk first. A live session is flushed and returned if no turn is open.
   */
  load(id: string): Promise<StoredSession> {
    return this.log.load(id, async () => {
      const { log } = await this.repaired(id)
      return { meta: log.header, events: deepFreezeJson(log.events) }
    })
  }

  /** Who holds the write lease of `id` now, if anyone (this backend included); takes nothing. */
  async holder(id: string): Promise<SessionLeaseHolder | undefined> {
    return readHolder(lockPathOf(await this.path(id)))
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
   * (`false`: it is, and writing goes on). Otherwise what is not stored is
   * dropped, never written (a batch that failed on a full disk does not land
   * once there is room), the log is closed and the lease let go: the log ends
   * where it was durable. Its owner should be disposed next.
   */
  abandon(id: string, seq: number): Promise<boolean> {
    return this.log.abandon(id, seq, (_, tracked) => this.forget(id, tracked))
  }

  /** The log's modification time: every batch is appended to it (a live session's, its last event's). */
  async lastActivity(id: string): Promise<number | undefined> {
    const live = this.log.live(id)
    if (live) return live.events.at(-1)?.time ?? live.header.createdAt
    const path = await this.files.find(id)
    return path === undefined ? undefined : (await stat(path).catch(() => undefined))?.mtimeMs
  }

  /** What `load` would return, computed in memory: writes nothing, even for a torn log. */
  async inspect(id: string): Promise<StoredSession> {
    const live = this.log.live(id)
    if (live) return { meta: live.header, events: live.events }
    const log = await this.files.read(await this.path(id), id)
    this.files.restore(log)
    return { meta: log.header, events: deepFreezeJson([...log.events, ...log.closers]) }
  }

  /** What `load` would repair in the file (a torn tail, closers), or why it cannot read it: writes nothing. */
  async check(id: string): Promise<StoredSessionCheck> {
    const path = await this.path(id)
    return checkStored(path, async () => {
      const log = await this.files.read(path, id)
      this.files.restore(log)
      return { events: log.count, tornBytes: log.fileBytes - log.committedBytes, closers: log.closers }
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

  /** Stored events with `seq >= fromSeq`, from the committed prefix, without repair. */
  async readFrom(id: string, fromSeq: number): Promise<StoredSession> {
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 0) throw new TypeError(`fromSeq must be a non-negative safe integer, got ${fromSeq}`)
    const log = await this.files.read(await this.path(id), id)
    return { meta: log.header, events: deepFreezeJson(log.events.slice(fromSeq)) }
  }

  /** Headers of every stored session, oldest first. */
  async list(): Promise<SessionHeader[]> {
    const headers = await Promise.all((await this.files.all()).map(path => this.files.readHeader(path)))
    return headers.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
  }

  /**
   * Takes the lease, then reads and validates, repairs if needed (re-reading
   * after), and tracks a cold log; with the Session it makes.
   */
  private async repaired(id: string): Promise<{ log: StoredLog; session: Session }> {
    const path = await this.path(id)
    this.hold(id, path)
    // A repair changes the file's size: a log held open from an earlier tracking is opened again.
    this.closeAppender(id)
    let log = await this.files.read(path, id)
    let session = this.files.restore(log)
    if (log.committedBytes < log.fileBytes || log.closers.length) {
      // Fenced like every write: the lease may have been taken over while reading.
      this.hold(id, path)
      await this.files.repair(log)
      log = await this.files.read(log.path, id)
      session = this.files.restore(log)
    }
    const waiters = this.tracked.get(id)?.waiters ?? []
    this.tracked.set(id, { header: log.header, path: log.path, cursor: log.count, materialized: true, waiters })
    return { log, session }
  }

  /**
   * Before any write of `id`: takes its lease on the first write, and from then
   * on checks that this backend still holds it (fencing). A lease that was lost
   * is never taken again by the same tracking: the log may have moved on.
   */
  private hold(id: string, logPath: string): void {
    const lease = this.leases.get(id)
    if (lease) return lease.check()
    this.leases.set(id, Lease.acquire(id, lockPathOf(logPath), this.leaseOptions()))
  }

  private leaseOptions() {
    return { heartbeatMs: this.heartbeatMs, staleMs: this.staleMs, command: this.leaseCommand }
  }

  /** Drops the tracking of `id` and releases its lease. */
  private forget(id: string, tracked = this.tracked.get(id)) {
    this.log.untrack(id, tracked)
    this.releaseLease(id)
  }

  private releaseLease(id: string) {
    this.closeAppender(id)
    this.leases.get(id)?.release()
    this.leases.delete(id)
  }

  /** Appends a batch through the log's open appender, opening it with the first batch. */
  private async appendOpen(tracked: Tracked, events: readonly SessionEvent[]) {
    const id = tracked.header.id
    let appender = this.appenders.get(id)
    if (appender?.file !== tracked.path) {
      this.closeAppender(id)
      appender = await this.files.open(tracked.path)
      this.appenders.set(id, appender)
    }
    try {
      await this.files.append(appender, events)
    } catch (error) {
      // Rolled back, or not even that: the next batch opens the log again and reads its real size.
      this.closeAppender(id)
      throw error
    }
  }

  private closeAppender(id: string) {
    const appender = this.appenders.get(id)
    if (!appender) return
    this.appenders.delete(id)
    void appender.close()
  }

  private async path(id: string): Promise<string> {
    const path = await this.files.find(id)
    if (!path) throw new Error(`session "${id}" not found in ${this.files.root}`)
    return path
  }

  /** Binds a published session to its log and queues what the log does not hold yet. */
  private attach(session: Session) {
    const existing = this.tracked.get(session.id)
    if (existing?.owner === session) return
    if (existing?.owner) {
      throw new Error(`session "${session.id}" is already bound to a different live session in ${this.files.root}`)
    }
    let tracked = existing
    // A prepared session, or a created intent, continues exactly where the log stands.
    if (!tracked || (tracked.reserved !== session && tracked.materialized)) tracked = this.adopt(session)
    const bound = tracked
    this.log.bind(session, bound, batch => this.store(bound, batch, true))
  }

  /**
   * A live session this backend did not prepare. Without a log it starts one;
   * with a log (this backend reloaded while the session lived) the log must be a
   * prefix of the session, which then continues it. Synchronous, because a
   * mismatch must veto the publication.
   */
  private adopt(session: Session): Tracked {
    const path = this.files.pathOf(session.header)
    if (!existsSync(path)) return { header: session.header, path, cursor: 0, materialized: false, waiters: [] }
    // The log is about to be cut and continued: refuse if another writer holds it.
    const leased = this.leases.has(session.id)
    this.hold(session.id, path)
    try {
      return this.continued(session, path)
    } catch (error) {
      // A vetoed publication keeps no lease it took.
      if (!leased) this.releaseLease(session.id)
      throw error
    }
  }

  /** The tracking of a stored log that a live session continues (checked to be its prefix). */
  private continued(session: Session, path: string): Tracked {
    const { header, events, committedBytes } = scanLog(readFileSync(path, 'utf8'), path)
    if (header.cwd !== session.header.cwd) {
      throw new Error(`session "${session.id}" is already persisted at a different cwd (${header.cwd}) (id collision)`)
    }
    const live = session.events
    if (events.length > live.length || events.some((event, i) => JSON.stringify(event) !== JSON.stringify(live[i]))) {
      throw new Error(`the stored log of session "${session.id}" does not match this live session (id collision; raw log: ${path})`)
    }
    // The torn tail goes; the open turn stays open, since the live session continues it.
    this.closeAppender(session.id)
    const fd = openSync(path, 'r+')
    try {
      ftruncateSync(fd, committedBytes)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    return { header, path, cursor: events.length, materialized: true, waiters: [] }
  }

  /** Writes the events the log does not hold yet; seqs must continue it exactly. */
  private async store(tracked: Tracked, batch: readonly SessionEvent[], live: boolean) {
    // A live batch may repeat seed events that are already stored.
    const events = live ? batch.filter(event => event.seq >= tracked.cursor) : batch
    if (!events.length) return
    events.forEach((event, i) => {
      if (event.seq !== tracked.cursor + i) {
        throw new Error(`append seq mismatch for "${tracked.header.id}": expected ${tracked.cursor + i} at index ${i}, got ${event.seq}`)
      }
    })
    const id = tracked.header.id
    if (!tracked.materialized && !this.leases.has(id)) {
      // A new log: its directory, then the lease next to it, made through the thread pool.
      await this.files.ensureDirOf(tracked.header)
      if (!this.leases.has(id)) this.leases.set(id, await Lease.acquireNew(id, lockPathOf(tracked.path), this.leaseOptions()))
    }
    // Fencing: nothing is written without the lease.
    this.hold(id, tracked.path)
    if (tracked.materialized) {
      await this.appendOpen(tracked, events)
    } else {
      await this.files.materialize(tracked.header, events)
      tracked.materialized = true
    }
    tracked.cursor += events.length
    this.log.durable(tracked)
  }

  /** On unload: everything queued is written before the backend goes. */
  private async drain() {
    const errors = await this.log.drain()
    for (const id of new Set([...this.tracked.keys(), ...this.leases.keys()])) this.forget(id)
    if (errors.length) throw new AggregateError(errors, `${name} dispose failed`)
  }
}

export default JsonlPersistence
