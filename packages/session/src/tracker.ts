// What every persistence backend keeps per session id, whatever it stores to: the
// tracking (where the stored log stands, the live session writing it), one chain
// of operations per id, the write-behind of a live session, the `whenDurable`
// waiters and the `session/durable` announcement. A backend brings the storage
// (how a batch is written, how a lease is held); this is the rest.
import type { Context } from '@deepseek-ai/cordis'
import { jsonSnapshot } from '@loom/llm'
import { untraced } from '@loom/scope'
import { interruptedTurnClosers } from './closers.ts'
import type { SessionEvent, SessionHeader } from './events.ts'
import type { Session } from './session.ts'
import type { StoredSession } from './store.ts'
import './store.ts'
import { SessionWriteBehind } from './write-behind.ts'

interface DurableWaiter {
  seq: number
  resolve: () => void
  reject: (error: Error) => void
}

/** The bookkeeping of one session id in a backend. */
export interface TrackedLog {
  header: SessionHeader
  /** The seq of the next event to store. */
  cursor: number
  materialized: boolean
  /** The live session whose appends are written here. */
  owner?: Session
  /** A session built by `prepare()`, which may attach when it is published. */
  reserved?: Session
  writer?: SessionWriteBehind
  /** `whenDurable` calls waiting for a seq beyond the cursor. */
  waiters: DurableWaiter[]
}

export class SessionTracker<T extends TrackedLog> {
  readonly tracked = new Map<string, T>()
  private readonly chains = new Map<string, Promise<unknown>>()
  private readonly home: Context
  private readonly events: Context['events']
  private readonly logger: string
  private readonly maxDelayMs: number

  /** `logger`: the name a backend's errors are logged under. */
  constructor(home: Context, logger: string, maxDelayMs: number) {
    this.home = home
    this.events = untraced(home.events)
    this.logger = logger
    this.maxDelayMs = maxDelayMs
  }

  /** Every id's operations run one after another; a failure does not block the next. */
  serial<R>(id: string, operation: () => Promise<R>): Promise<R> {
    const next = (this.chains.get(id) ?? Promise.resolve()).catch(() => {}).then(operation)
    this.chains.set(id, next)
    return next
  }

  /** The live session writing `id` here, while it is published. */
  live(id: string): Session | undefined {
    const owner = this.tracked.get(id)?.owner
    return owner && this.home.sessions.get(id) === owner ? owner : undefined
  }

  /** `SessionPersistence.append`: a JSON snapshot of `events`, stored by `store` in the id's chain. */
  append(id: string, events: readonly SessionEvent[], store: (tracked: T, batch: SessionEvent[]) => Promise<void>): Promise<void> {
    let batch: SessionEvent[]
    try {
      batch = jsonSnapshot(events as SessionEvent[])
    } catch (error) {
      return Promise.reject(new TypeError(`session event batch is not losslessly JSON-serializable: ${(error as Error).message}`))
    }
    const tracked = this.tracked.get(id)
    if (!tracked) return Promise.reject(new Error(`session "${id}" is not tracked by this backend; create or load it first`))
    return this.serial(id, () => store(tracked, batch))
  }

  /** `SessionPersistence.load`: a live session flushed (refused while its turn is open), else the backend's `repaired` log in the id's chain. */
  async load(id: string, repaired: () => Promise<StoredSession>): Promise<StoredSession> {
    const live = this.live(id)
    if (!live) return this.serial(id, repaired)
    await this.flush(live)
    if (interruptedTurnClosers(live.events).length) {
      throw new Error(`cannot load session "${id}" while its live turn is open; use the live Session or wait for the turn to close`)
    }
    return { meta: live.header, events: live.events }
  }

  /** `SessionPersistence.prepare`: the backend's `repaired` session in the id's chain, reserved for its publication. */
  prepare(id: string, repaired: () => Promise<Session>): Promise<Session> {
    if (this.live(id)) return Promise.reject(new Error(`cannot prepare session "${id}" while it is live`))
    return this.serial(id, async () => {
      const session = await repaired()
      this.tracked.get(id)!.reserved = session
      return session
    })
  }

  /** `SessionPersistence.close`: a session that is not live, once its operations settled, is forgotten. */
  async close(id: string, forget: () => unknown): Promise<void> {
    if (this.live(id)) throw new Error(`session "${id}" is live; dispose its owner to close it`)
    await this.serial(id, async () => {})
    await forget()
  }

  /** Resolves once event `seq` of session `id` is durably stored (at once if it already is). */
  whenDurable(id: string, seq: number): Promise<void> {
    const tracked = this.tracked.get(id)
    if (!tracked) return Promise.reject(new Error(`session "${id}" is not tracked by this backend`))
    if (seq < tracked.cursor) return Promise.resolve()
    return new Promise((resolve, reject) => tracked.waiters.push({ seq, resolve, reject }))
  }

  /** After a batch is stored: settles the waiters the cursor passed and announces the new durable seq. */
  durable(tracked: T): void {
    const seq = tracked.cursor - 1
    tracked.waiters = tracked.waiters.filter(waiter => {
      if (waiter.seq > seq) return true
      waiter.resolve()
      return false
    })
    this.announce('session/durable', tracked.header.id, seq)
  }

  /** Emits `name` to every listener; a failing observer is logged and changes nothing (it cannot undo a write, nor a failure). */
  private announce(name: 'session/durable' | 'session/write-failed', id: string, detail: unknown): void {
    const report = (error: unknown) => this.home.logger(this.logger).error(error)
    for (const listener of this.events.dispatch('emit', [name, id, detail])) {
      try {
        const result = (listener as (id: string, detail: unknown) => unknown)(id, detail)
        if (result instanceof Promise) result.catch(report)
      } catch (error) {
        report(error)
      }
    }
  }

  /** Makes `session` the writer of `tracked`: its appends are batched into `store`, starting with what the log does not hold yet. */
  bind(session: Session, tracked: T, store: (batch: readonly SessionEvent[]) => Promise<void>): void {
    tracked.owner = session
    tracked.reserved = undefined
    tracked.writer = new SessionWriteBehind({
      maxDelayMs: this.maxDelayMs,
      write: batch =>
        this.serial(session.id, async () => {
          // A batch taken before the log was abandoned is dropped, not written.
          if (this.tracked.get(session.id) !== tracked) throw abandoned(session.id)
          try {
            await store(batch)
          } catch (error) {
            // Whoever runs the session decides whether it goes on (the batch stays queued).
            this.announce('session/write-failed', session.id, error)
            throw error
          }
        }),
      reportBackgroundFailure: error =>
        this.home
          .logger(this.logger)
          .error(`session "${session.id}": a background write failed; it is retried with the next event or flush: ${(error as Error).message}`),
    })
    this.tracked.set(session.id, tracked)
    for (const event of session.eventsFrom(tracked.cursor)) tracked.writer.enqueue(event)
  }

  /** Queues an event of a live session, if this backend writes it. */
  enqueue(session: Session, event: SessionEvent): void {
    const tracked = this.tracked.get(session.id)
    if (tracked?.owner === session) tracked.writer!.enqueue(event)
  }

  /** `sessions.flush(session)`: what it appended so far is stored. */
  async flush(session: Session): Promise<void> {
    const tracked = this.tracked.get(session.id)
    if (tracked?.owner === session) await tracked.writer!.flush()
  }

  /** A live session was disposed: its last events are written, then `forget` drops it. */
  async detach(session: Session, forget: (id: string, tracked: T) => unknown): Promise<void> {
    const tracked = this.tracked.get(session.id)
    if (tracked?.owner !== session) return
    try {
      await tracked.writer!.close()
    } catch (error) {
      this.home.logger(this.logger).error(error)
    } finally {
      if (this.tracked.get(session.id) === tracked) await forget(session.id, tracked)
    }
  }

  /**
   * Stops writing the live session `id` unless its event `seq` is stored already
   * (`false`: it is, and the session is written on). Otherwise what is not stored
   * is dropped, never written, and `forget` lets the log go: the session's log
   * ends where it was durable. Runs in the id's chain, so no write is in flight
   * when it decides.
   */
  abandon(id: string, seq: number, forget: (id: string, tracked: T) => unknown): Promise<boolean> {
    return this.serial(id, async () => {
      const tracked = this.tracked.get(id)
      if (!tracked?.writer) return true
      if (tracked.cursor > seq) return false
      tracked.writer.discard()
      await forget(id, tracked)
      return true
    })
  }

  /** Stops tracking `id`: whoever still waits for its events is told they will not be stored. */
  untrack(id: string, tracked: TrackedLog | undefined = this.tracked.get(id)): void {
    if (!tracked) return
    const error = new Error(`session "${id}" was closed before these events were stored`)
    for (const waiter of tracked.waiters.splice(0)) waiter.reject(error)
    if (this.tracked.get(id) === tracked) this.tracked.delete(id)
  }

  /** On unload: every writer closes and every operation settles; the writers' failures are returned. */
  async drain(): Promise<unknown[]> {
    const results = await Promise.allSettled([...this.tracked.values()].map(tracked => tracked.writer?.close()))
    await Promise.allSettled(this.chains.values())
    return results.filter(result => result.status === 'rejected').map(result => (result as PromiseRejectedResult).reason)
  }
}

const abandoned = (id: string) => new Error(`session "${id}" was abandoned: this batch is dropped, not written`)
