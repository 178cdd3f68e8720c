// A session persistence in memory, for tests of what survives a restart: two
// hosts given the same `MemoryLogs` see one store, as two processes see one
// folder. Nothing is written anywhere; every append is "durable" at once.
import { type Context, Service } from '@deepseek-ai/cordis'
import type { StoredSessionCheck } from '../check.ts'
import { interruptedTurnClosers } from '../closers.ts'
import type { SessionEvent, SessionHeader } from '../events.ts'
import { deepFreezeJson, Session } from '../session.ts'
import type { SessionPersistence, StoredSession } from '../store.ts'

/** The stored logs, by session id: share one between hosts to restart "the process". */
export type MemoryLogs = Map<string, { header: SessionHeader; events: SessionEvent[] }>

export interface MemoryPersistenceConfig {
  logs: MemoryLogs
}

/** `ctx.sessionPersistence` over a `MemoryLogs`: the log of every live session, event by event. */
export class MemoryPersistence extends Service implements SessionPersistence {
  static override readonly name = '@loom/session/testing'
  static readonly inject = ['sessions']

  readonly logs: MemoryLogs
  /** Sessions `create()` recorded that have no log until their first `append`. */
  private readonly created = new Map<string, SessionHeader>()

  constructor(ctx: Context, config: MemoryPersistenceConfig) {
    super(ctx, 'sessionPersistence')
    this.logs = config.logs
    ctx.on('session/created', session => {
      const log = this.logs.get(session.id)
      // A resumed session continues its log (it starts with it); a new one starts one.
      if (!log) this.logs.set(session.id, { header: session.header, events: session.eventsFrom(0) })
      else log.events.push(...session.eventsFrom(log.events.length))
    })
    ctx.on('session/event', (session, event) => {
      this.logs.get(session.id)?.events.push(event)
    })
  }

  create(meta: SessionHeader): void {
    if (this.logs.has(meta.id) || this.created.has(meta.id)) throw new Error(`session "${meta.id}" already exists in memory`)
    this.created.set(meta.id, meta)
  }

  /** Stores events that continue the log exactly; the first append of a created session starts its log. */
  async append(id: string, events: readonly SessionEvent[]): Promise<void> {
    const log = this.logs.get(id) ?? { header: this.created.get(id) ?? this.log(id).header, events: [] }
    events.forEach((event, i) => {
      const expected = log.events.length + i
      if (event.seq !== expected) throw new Error(`append seq mismatch for "${id}": expected ${expected} at index ${i}, got ${event.seq}`)
    })
    if (!events.length) return
    this.created.delete(id)
    this.logs.set(id, log)
    log.events.push(...structuredClone(events))
  }

  /** The stored log with what a crash left open closed, as a repair would leave it. */
  async load(id: string): Promise<StoredSession> {
    const log = this.log(id)
    log.events.push(...interruptedTurnClosers(log.events))
    return { meta: log.header, events: deepFreezeJson(structuredClone(log.events)) }
  }

  async inspect(id: string): Promise<StoredSession> {
    const log = this.log(id)
    return { meta: log.header, events: deepFreezeJson(structuredClone([...log.events, ...interruptedTurnClosers(log.events)])) }
  }

  /** What a load would close; a log in memory is never torn or damaged. */
  async check(id: string): Promise<StoredSessionCheck> {
    const { events } = this.log(id)
    return { location: `memory, session "${id}"`, events: events.length, tornBytes: 0, closers: interruptedTurnClosers(events), corruption: null }
  }

  async prepare(id: string): Promise<Session> {
    const { meta, events } = await this.load(id)
    return Session.fromRestore(id, structuredClone(events), meta)
  }

  async readFrom(id: string, fromSeq: number): Promise<StoredSession> {
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 0) throw new TypeError(`fromSeq must be a non-negative safe integer, got ${fromSeq}`)
    const log = this.log(id)
    return { meta: log.header, events: deepFreezeJson(structuredClone(log.events.slice(fromSeq))) }
  }

  async list(): Promise<SessionHeader[]> {
    return [...this.logs.values()].map(log => log.header).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
  }

  async whenDurable(): Promise<void> {}

  async close(): Promise<void> {}

  private log(id: string) {
    const log = this.logs.get(id)
    if (!log) throw new Error(`session "${id}" not found: no stored session "${id}" in memory`)
    return log
  }
}
