import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { SessionId } from '@loom/llm'
import { untraced } from '@loom/scope'
import { isAbsolute } from 'node:path'
import type { StoredSessionCheck } from './check.ts'
import { SESSION_FORMAT_VERSION, type SessionEvent, type SessionHeader } from './events.ts'
import { bindPublisher, Session } from './session.ts'

declare module '@deepseek-ai/cordis' {
  interface Context {
    sessions: SessionStore
  }
  interface Events {
    /** A session was published. A synchronous throw vetoes the publication. */
    'session/created'(session: Session): void
    /** A published session was detached (its owner was disposed). */
    'session/disposed'(session: Session): void
    /** After each committed append on a live session; listener failures are logged, never undo the append. */
    'session/event'(session: Session, event: SessionEvent): void
    /** `sessions.flush(session)`: persistence backends make everything appended so far durable. */
    'session/flush'(session: Session): Promise<void>
    /** A persistence backend stored a batch durably (fsync'd): every event of session `id` up to `seq` is on disk. */
    'session/durable'(id: SessionId, seq: number): void
    /**
     * A persistence backend could not store a batch of the live session `id`
     * (the store is unreachable, the disk full, the lease lost): nothing of it
     * was stored, and it stays queued for the next write unless the session is
     * abandoned. Whoever runs the session decides whether it goes on.
     */
    'session/write-failed'(id: SessionId, error: unknown): void
  }
}

/** Header fields a caller may choose; `version` and `id` are the store's. */
export type SessionMeta = Partial<Omit<SessionHeader, 'version' | 'id'>>

export interface PrepareOptions {
  /** Events to start from (a fork, a replay, a resume). */
  seed?: readonly SessionEvent[]
  meta?: SessionMeta
}

export type SessionForkErrorCode = 'SESSION_ALREADY_EXISTS' | 'SESSION_NOT_FOUND' | 'SESSION_NOT_LIVE' | 'INVALID_BOUNDARY' | 'OPEN_TURN'

export class SessionForkError extends Error {
  readonly code: SessionForkErrorCode

  constructor(code: SessionForkErrorCode, message: string) {
    super(message)
    this.code = code
    this.name = 'SessionForkError'
  }
}

/** The stored form of a session, as a persistence backend returns it. */
export interface StoredSession {
  meta: SessionHeader
  events: readonly SessionEvent[]
}

/** Who holds the write lease of a session. */
export interface SessionLeaseHolder {
  pid: number
  host: string
  /** When the lease was granted (ms since the epoch). */
  since: number
  /** What the holder runs, e.g. `loom run`. */
  command?: string
}

/** `SESSION_LEASE_HELD`: another writer holds the lease. `SESSION_LEASE_LOST`: this writer's lease was taken over. */
export type SessionLeaseErrorCode = 'SESSION_LEASE_HELD' | 'SESSION_LEASE_LOST'

/** A write refused because this writer does not hold the session's lease; nothing was written. */
export class SessionLeaseError extends Error {
  readonly code: SessionLeaseErrorCode
  readonly sessionId: SessionId
  /** The current holder, when known. */
  readonly holder: SessionLeaseHolder | undefined

  constructor(code: SessionLeaseErrorCode, sessionId: SessionId, holder: SessionLeaseHolder | undefined, message: string) {
    super(message)
    this.code = code
    this.sessionId = sessionId
    this.holder = holder
    this.name = 'SessionLeaseError'
  }

  static held(sessionId: SessionId, holder: SessionLeaseHolder): SessionLeaseError {
    return new SessionLeaseError(
      'SESSION_LEASE_HELD',
      sessionId,
      holder,
      `session ${sessionId} is being written by ${describeHolder(holder)}; wait for it to finish or stop it`,
    )
  }

  static lost(sessionId: SessionId, holder: SessionLeaseHolder | undefined): SessionLeaseError {
    return new SessionLeaseError(
      'SESSION_LEASE_LOST',
      sessionId,
      holder,
      `session ${sessionId}: this writer (pid ${process.pid}) lost its write lease` +
        (holder ? `, now held by ${describeHolder(holder)}` : '') +
        '; nothing more is written by this process',
    )
  }
}

/** `pid 4242 on host x since 12:01:03 (loom run)`; a lease from another day shows its date. */
function describeHolder({ pid, host, since, command }: SessionLeaseHolder): string {
  const at = new Date(since)
  const pad = (n: number) => String(n).padStart(2, '0')
  const time = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`
  const day = `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`
  const today = new Date().toDateString() === at.toDateString()
  return `pid ${pid} on host ${host} since ${today ? time : `${day} ${time}`}${command ? ` (${command})` : ''}`
}

/**
 * The contract of a persistence backend (ctx key `sessionPersistence`).
 *
 * **One writer per session.** Every path that writes a session's log (the first
 * append of a created session, `load`, `prepare` and the publication of what it
 * prepared, repair, compaction through the live session) first takes the
 * session's exclusive write lease. A second writer, in another process or
 * another backend instance, is refused before it writes anything with a
 * `SessionLeaseError` (`SESSION_LEASE_HELD`) naming the holder. A holder that
 * died is detected and its lease taken over. Every batch is fenced: a writer
 * whose lease was taken over fails with `SESSION_LEASE_LOST` instead of writing.
 * The lease is released by `close(id)`, when the live session is disposed, when
 * the backend unloads, and when the process exits. Reads (`inspect`, `check`,
 * `readFrom`, `list`) take no lease and work while another process writes.
 *
 * **Durable before shown.** After each batch is durably stored the backend emits
 * `session/durable` (id, seq); `whenDurable(id, seq)` resolves once event `seq`
 * is on disk.
 */
export interface SessionPersistence {
  /** Records a new session; nothing is written before its first append. */
  create(meta: SessionHeader): void
  /** Stores events that continue the stored log exactly. */
  append(id: SessionId, events: readonly SessionEvent[]): Promise<void>
  /** The stored session, repaired (torn tail cut, open turn closed); takes the lease. */
  load(id: SessionId): Promise<StoredSession>
  /** What `load` would return, without writing or taking the lease. */
  inspect(id: SessionId): Promise<StoredSession>
  /**
   * What `load` would repair in the stored log of `id` (a torn tail, closers),
   * or why it cannot read it (`corruption`), from storage: writes nothing, takes
   * no lease. Rejects when nothing is stored for `id`, as `inspect` does.
   */
  check(id: SessionId): Promise<StoredSessionCheck>
  /** An unpublished Session to resume `id`; takes the lease, which publishing it keeps. */
  prepare(id: SessionId): Promise<Session>
  /** Stored events with `seq >= fromSeq`, no repair, no lease. */
  readFrom(id: SessionId, fromSeq: number): Promise<StoredSession>
  /** Headers of every stored session, oldest first. */
  list(): Promise<SessionHeader[]>
  /**
   * When session `id` was last written (epoch ms), without reading its events: what orders sessions by
   * last use (`loom -c`) over many long logs. Undefined when nothing is stored. Optional: without it,
   * callers read the last event through `inspect`.
   */
  lastActivity?(id: SessionId): Promise<number | undefined>
  /** Resolves once event `seq` of session `id` is durably stored. */
  whenDurable(id: SessionId, seq: number): Promise<void>
  /** Stops writing session `id` (not live): waits for its writes, then releases its lease. */
  close(id: SessionId): Promise<void>
  /**
   * Gives up the live session `id` unless its event `seq` is stored (`false`:
   * it is, and writing goes on): what is not stored is dropped, never written,
   * and the lease is let go, so the stored log ends where it was durable. For a
   * host that cannot store a session (the store is down, the disk full) and
   * must not write it later; its owner is disposed next. Optional.
   */
  abandon?(id: SessionId, seq: number): Promise<boolean>
}

function buildHeader(id: SessionId, meta: SessionMeta = {}): SessionHeader {
  if (meta.cwd !== undefined && !isAbsolute(meta.cwd)) {
    throw new Error(`session header cwd must be an absolute path, got "${meta.cwd}"`)
  }
  return { version: SESSION_FORMAT_VERSION, id, createdAt: meta.createdAt ?? Date.now(), ...meta }
}

/**
 * The live sessions of a host (ctx key `sessions`). A session entered through a
 * plugin's context belongs to that plugin's fiber: disposing the plugin (or the
 * agent scope) detaches it and emits `session/disposed`.
 */
export class SessionStore extends Service {
  /** No settings (persistence comes from its own plugin): a key given to its row is refused as unknown. */
  static readonly Config = Schema.object({})
  private readonly home: Context
  private readonly events: Context['events']
  private readonly live = new Map<SessionId, Session>()
  private readonly announced = new WeakSet<Session>()
  private counter = 0

  constructor(ctx: Context) {
    super(ctx, 'sessions')
    this.home = ctx
    this.events = untraced(ctx.events)
  }

  /** Builds a session without publishing it. */
  prepare(id?: SessionId, options: PrepareOptions = {}): Session {
    id ??= this.mint()
    if (this.live.has(id)) throw new Error(`session "${id}" already exists`)
    return Session.create(id, options.seed, buildHeader(id, options.meta))
  }

  /**
   * Publishes a prepared session into the store as an effect on the caller's
   * fiber; the returned (idempotent) detach also runs when that fiber is disposed.
   */
  enter(session: Session): () => void {
    // Every event of the session is published through `self`: the store itself, not the caller's tracing proxy of it.
    const self = untraced(this)
    return this.ctx.effect(() => {
      if (this.live.has(session.id)) throw new Error(`session "${session.id}" already exists`)
      this.live.set(session.id, session)
      const unbind = bindPublisher(session, (s, event) => self.dispatch('session/event', [s, event], 'contain'))
      return () => {
        unbind()
        if (this.live.get(session.id) === session) this.live.delete(session.id)
        if (this.announced.has(session)) this.dispatch('session/disposed', [session], 'contain')
      }
    }, 'sessions.enter') as () => void
  }

  /** Emits `session/created` once; a listener's synchronous throw reaches the caller (a veto). */
  announce(session: Session): void {
    if (this.announced.has(session)) return
    this.announced.add(session)
    this.dispatch('session/created', [session], 'veto')
  }

  /** prepare + enter + announce; a veto rolls the entry back. */
  create(id?: SessionId, options: PrepareOptions = {}): Session {
    const session = this.prepare(id, options)
    const detach = this.enter(session)
    try {
      this.announce(session)
    } catch (error) {
      this.announced.delete(session)
      detach()
      throw error
    }
    return session
  }

  get(id: SessionId): Session | undefined {
    return this.live.get(id)
  }

  /** Live sessions in creation order. */
  list(): Session[] {
    return [...this.live.values()]
  }

  /**
   * Runs every `session/flush` listener (in parallel). Resolves `true` when at
   * least one listener (a persistence backend) made the session durable; rethrows
   * the first failure.
   */
  async flush(session: Session): Promise<boolean> {
    const listeners = this.events.dispatch('parallel', ['session/flush', session])
    const results = await Promise.allSettled(listeners.map(async listener => listener(session)))
    const failed = results.find(result => result.status === 'rejected')
    if (failed) throw (failed as PromiseRejectedResult).reason
    return listeners.length > 0
  }

  /**
   * A new live session whose seed is `source`'s events up to `boundary` (default:
   * the last event). The boundary must not fall inside an open turn.
   */
  fork(source: Session | SessionId, boundary?: number, childId?: SessionId): Session {
    if (childId !== undefined && this.live.has(childId)) {
      throw new SessionForkError('SESSION_ALREADY_EXISTS', `session "${childId}" already exists`)
    }
    const parent = this.resolveLive(source)
    const events = parent.events
    const end = boundary ?? events.length - 1
    if (events.length && (!Number.isSafeInteger(end) || end < 0 || end >= events.length || events[end].seq !== end)) {
      throw new SessionForkError('INVALID_BOUNDARY', `fork boundary ${boundary} is not an event of session "${parent.id}"`)
    }
    const seed = events.slice(0, events.length ? end + 1 : 0)
    for (let i = seed.length - 1; i >= 0; i--) {
      const event = seed[i]
      if (event.type === 'turn/end') break
      if (event.type === 'turn/start') {
        throw new SessionForkError('OPEN_TURN', `fork boundary ${end} in session "${parent.id}" ends inside open turn ${event.data.turn}`)
      }
    }
    return this.create(childId, {
      seed,
      meta: { ...(parent.header.cwd !== undefined && { cwd: parent.header.cwd }), parentSession: parent.id, seedLength: seed.length },
    })
  }

  private resolveLive(source: Session | SessionId): Session {
    if (typeof source === 'string') {
      const live = this.live.get(source)
      if (!live) throw new SessionForkError('SESSION_NOT_FOUND', `session "${source}" not found`)
      return live
    }
    if (this.live.get(source.id) !== source) {
      throw new SessionForkError('SESSION_NOT_LIVE', `session "${source.id}" is not a live session of this store`)
    }
    return source
  }

  private mint(): SessionId {
    let id: SessionId
    do id = `session-${++this.counter}`
    while (this.live.has(id))
    return id
  }

  /**
   * Calls each listener, logging rejected promises. With `contain`, synchronous
   * throws are logged too (an observer cannot undo what already happened); with
   * `veto` the first synchronous throw reaches the caller.
   */
  private dispatch(name: 'session/created' | 'session/disposed' | 'session/event', args: unknown[], mode: 'contain' | 'veto') {
    // The logger only when there is something to log: every event of every session comes through here.
    const report = (error: unknown) => this.home.logger('sessions').error(error)
    for (const listener of this.events.dispatch('emit', [name, ...args])) {
      try {
        const result = listener(...args)
        if (result instanceof Promise) result.catch(report)
      } catch (error) {
        if (mode === 'veto') throw error
        report(error)
      }
    }
  }
}

export default SessionStore
