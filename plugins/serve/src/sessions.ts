// The sessions a server hosts. One agent per session, on the host that holds
// the session's write lease: a message for a session with no agent here resumes
// it (taking the lease) when nobody else holds it, and is refused with 409
// naming the holder when another live host does. An agent that has been idle
// for `idleReleaseMs` is disposed, so its lease is free for any host. What a
// client reads (a session, its event stream) is what the store holds durably:
// an event is never shown before it is on disk, so no host's crash can take
// back an event a client saw. A host serves one project, the folder its agents
// work in: a session recorded in another folder is answered as an unknown one,
// since resuming it here would run tools in that folder under this host's policy.
import type { Context } from '@deepseek-ai/cordis'
import { realpathSync } from 'node:fs'
import { realpath } from 'node:fs/promises'
import type { Agent } from '@loom/agent-loop'
import { userText } from '@loom/llm'
import type { SessionEvent, SessionHeader, SessionLeaseHolder, SessionPersistence, StoredSession, TurnEndReason } from '@loom/session'
import { ApiError } from './http.ts'

/** Creates or resumes the agent of a session: the deployment's runner (`@loom/cli/runner`) is one. */
export interface SessionOpener {
  /** A new session's agent when `id` is absent; the stored session `id` resumed (taking its lease) otherwise. */
  open(flags: { provider?: string; model?: string; cwd?: string }, id?: string): Promise<Agent>
}

/** The store, with the lease holder both first-party backends report. */
export type Persistence = SessionPersistence & {
  holder?(id: string): Promise<SessionLeaseHolder | undefined>
  leaseCommand?: string
}

export type MessageMode = 'followup' | 'steer' | 'inject'

export interface HostOptions {
  /** Working directory of new sessions' agents: the project this host serves. */
  cwd: string
  /** The route of new sessions unless the request names one. */
  route: { provider?: string; model?: string }
  idleReleaseMs: number
  tailIntervalMs: number
}

/** What a read of one session returns besides its events. */
export interface SessionSummary {
  id: string
  header: SessionHeader
  /** The next seq the log will get (its length). */
  nextSeq: number
  turns: number
  /** `running` while the log holds an open turn (on this host or another, or left by a host that died). */
  status: 'running' | 'idle'
  lastTurn: { turn: number; reason: TurnEndReason } | null
  /** Who holds the write lease now, if anyone. */
  holder: SessionLeaseHolder | null
  /** This host runs the session's agent. */
  here: boolean
}

interface Hosted {
  agent: Agent
  /** Bumped by every delivery, so an older idle wait does not release the agent. */
  round: number
  timer?: ReturnType<typeof setTimeout>
}

/** Session ids as the runner makes them, and any other plain name; nothing that could be a path. */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

export class HostedSessions {
  private readonly home: Context
  private readonly opener: SessionOpener
  private readonly store: Persistence
  private readonly options: HostOptions
  private readonly hosted = new Map<string, Hosted>()
  /** Opening, delivering to and releasing one session's agent happen one at a time. */
  private readonly chains = new Map<string, Promise<unknown>>()
  /** Streams waiting for news of a session: woken by `session/durable` here, or by their poll timer. */
  private readonly waiting = new Map<string, Set<() => void>>()
  private readonly closing = new AbortController()
  /** The project's folder, symlinks resolved: a session is this host's when its recorded cwd resolves to it. */
  private readonly project: string
  /** The cwd each session's header records (null: none), kept once read: a header never changes. */
  private readonly cwds = new Map<string, string | null>()
  draining = false

  constructor(home: Context, opener: SessionOpener, store: Persistence, options: HostOptions) {
    this.home = home
    this.opener = opener
    this.store = store
    this.options = options
    this.project = projectFolder(options.cwd)
  }

  /** Called on `session/durable`: streams of that session read again at once. */
  durable(id: string): void {
    for (const wake of this.waiting.get(id) ?? []) wake()
  }

  /** Agents open here, and how many of them run a turn. */
  counts(): { open: number; running: number } {
    let running = 0
    for (const { agent } of this.hosted.values()) if (agent.status === 'running') running++
    return { open: this.hosted.size, running }
  }

  /** A new session running `task`; resolves once the task is durably in its log. */
  async create(input: { task: string; provider?: string; model?: string }): Promise<{ id: string; provider: string | null; model: string | null }> {
    this.refuseWhileDraining()
    const { route } = this.options
    // A request's provider drops the configured model, which belongs to the configured provider.
    const provider = input.provider ?? route.provider
    const model = input.model ?? (input.provider === undefined ? route.model : undefined)
    const agent = await this.opener.open({ provider, model, cwd: this.options.cwd }).catch(rethrow)
    const entry: Hosted = { agent, round: 0 }
    this.hosted.set(agent.sessionId, entry)
    await this.serial(agent.sessionId, () => this.deliver(entry, input.task, 'followup'))
    return { id: agent.sessionId, provider: agent.options.provider ?? null, model: agent.options.model ?? null }
  }

  /** A message for session `id`: resumed here if no agent runs it and nobody else holds it. Resolves once the message is durably in its log. */
  async message(id: string, text: string, mode: MessageMode): Promise<{ id: string; seq: number; status: 'running' | 'idle' }> {
    this.refuseWhileDraining()
    checkId(id)
    return this.serial(id, async () => {
      const entry = this.hosted.get(id) ?? (await this.resume(id))
      const seq = await this.deliver(entry, text, mode)
      return { id, seq, status: entry.agent.status }
    })
  }

  /** Cancels the running turn of `id`; resolves once the turn is closed (`aborted`) in the log. */
  async cancel(id: string): Promise<{ id: string; cancelled: boolean }> {
    checkId(id)
    const entry = this.hosted.get(id)
    if (!entry) {
      // Nothing runs here: refuse if it runs elsewhere, so the client asks the holder.
      await this.read(id, Number.MAX_SAFE_INTEGER)
      const holder = await this.holder(id)
      if (holder && holder.pid !== process.pid) throw leaseHeld(id, holder)
      return { id, cancelled: false }
    }
    const running = entry.agent.status === 'running'
    entry.agent.cancel({ kind: 'user' })
    await entry.agent.idle()
    await this.home.sessions.flush(entry.agent.session)
    return { id, cancelled: running }
  }

  /** This project's stored sessions, oldest first, each marked when its agent runs here. */
  async list(): Promise<{ id: string; createdAt: number; cwd: string | null; here: boolean; status: 'running' | 'idle' | null }[]> {
    const headers = await this.store.list()
    // The headers the store lists carry the cwd: no log is read, and each folder is resolved once.
    const verdicts = new Map<string, Promise<boolean>>()
    const owned = await Promise.all(
      headers.map(header => {
        const cwd = header.cwd ?? ''
        this.cwds.set(header.id, header.cwd ?? null)
        const verdict = verdicts.get(cwd) ?? this.owns(cwd)
        verdicts.set(cwd, verdict)
        return verdict
      }),
    )
    return headers
      .filter((_, i) => owned[i])
      .map(header => {
        const entry = this.hosted.get(header.id)
        return { id: header.id, createdAt: header.createdAt, cwd: header.cwd ?? null, here: Boolean(entry), status: entry ? entry.agent.status : null }
      })
  }

  /** The session's summary and its durable events from `from` on. */
  async get(id: string, from: number): Promise<{ session: SessionSummary; events: readonly SessionEvent[] }> {
    checkId(id)
    const stored = await this.read(id, 0)
    const events = stored.events
    let turns = 0
    let open = false
    let lastTurn: SessionSummary['lastTurn'] = null
    for (const event of events) {
      if (event.type === 'turn/start') {
        turns++
        open = true
      } else if (event.type === 'turn/end') {
        open = false
        lastTurn = { turn: event.data.turn, reason: event.data.reason }
      }
    }
    const holder = (await this.holder(id)) ?? null
    return {
      session: { id, header: stored.meta, nextSeq: events.length, turns, status: open ? 'running' : 'idle', lastTurn, holder, here: this.hosted.has(id) },
      events: events.slice(Math.max(0, from)),
    }
  }

  /**
   * The durable events of `id` after seq `after`, contiguous from `after + 1`.
   * A session whose agent runs here is read from memory, once the backend says
   * its events are on disk; any other from the store, which another host may be
   * writing.
   */
  async durableAfter(id: string, after: number): Promise<SessionEvent[]> {
    checkId(id)
    const live = this.hosted.get(id)?.agent.session
    if (live) {
      const last = live.seq - 1
      if (last <= after) return []
      try {
        await this.store.whenDurable(id, last)
        // The tail only: a stream of a long session copies no whole log per event.
        return contiguous(live.eventsFrom(after + 1).slice(0, last - after), after)
      } catch {
        // Its agent went away before that write (released, lease lost): the store knows.
      }
    }
    return contiguous((await this.read(id, after + 1)).events, after)
  }

  /**
   * The durable events of `id` after `after`, batch by batch, as they are
   * stored, until `signal` aborts or the server closes (then the last events
   * are read once more, so a drained turn's end reaches the client).
   */
  async *follow(id: string, after: number, signal: AbortSignal): AsyncGenerator<SessionEvent[]> {
    let cursor = after
    // Reads that found nothing in a row: the poll slows down to 8 intervals for a quiet session.
    let quiet = 0
    while (!signal.aborted) {
      const closing = this.closing.signal.aborted
      const batch = await this.durableAfter(id, cursor)
      if (batch.length) {
        cursor = batch.at(-1)!.seq
        quiet = 0
        yield batch
        continue
      }
      if (closing) return
      await this.news(id, signal, this.options.tailIntervalMs * 2 ** Math.min(quiet++, 3))
    }
  }

  /**
   * Stops taking work: new sessions and messages are refused (503), turns that
   * finish within `deadlineMs` end normally, the rest are cancelled and closed
   * in their logs; every agent is flushed and disposed (its lease released) and
   * the event streams end after their last events.
   */
  async drain(deadlineMs: number): Promise<{ finished: number; cancelled: number }> {
    this.draining = true
    const entries = [...this.hosted.values()].filter(entry => entry.agent.status === 'running')
    let timer: ReturnType<typeof setTimeout> | undefined
    const deadline = new Promise<void>(resolve => {
      timer = setTimeout(resolve, deadlineMs)
    })
    await Promise.race([Promise.all(entries.map(entry => entry.agent.idle())), deadline])
    clearTimeout(timer)
    let cancelled = 0
    for (const { agent } of entries) {
      if (agent.status !== 'running') continue
      cancelled++
      agent.cancel({ kind: 'hook', reason: `loom serve is shutting down: the drain deadline (${deadlineMs} ms) passed` })
    }
    await Promise.all([...this.hosted.keys()].map(id => this.serial(id, () => this.release(id))))
    this.closing.abort()
    for (const wakers of this.waiting.values()) for (const wake of wakers) wake()
    return { finished: entries.length - cancelled, cancelled }
  }

  /** Disposes every agent at once (the plugin unloads without a drain). */
  async dispose(): Promise<void> {
    this.draining = true
    this.closing.abort()
    for (const wakers of this.waiting.values()) for (const wake of wakers) wake()
    await Promise.allSettled([...this.hosted.keys()].map(id => this.release(id)))
  }

  private refuseWhileDraining() {
    if (this.draining)
      throw new ApiError(503, 'DRAINING', 'this server is shutting down and takes no new work; send it to another host', { headers: { 'retry-after': '1' } })
  }

  /** Resumes a stored session of this project here: its lease is taken (a dead holder's turn is closed as interrupted on the way). */
  private async resume(id: string): Promise<Hosted> {
    // Before the lease: another project's session is not even refused as held.
    await this.own(id)
    let agent: Agent
    try {
      agent = await this.opener.open({}, id)
    } catch (error) {
      const holder =
        (error as { code?: string; holder?: SessionLeaseHolder }).code === 'SESSION_LEASE_HELD' ? (error as { holder?: SessionLeaseHolder }).holder : undefined
      if (holder) throw leaseHeld(id, holder)
      return rethrow(error)
    }
    const entry: Hosted = { agent, round: 0 }
    this.hosted.set(id, entry)
    return entry
  }

  /** Puts the message in the agent's inbox and waits until it is durable; the agent is released once idle long enough. */
  private async deliver(entry: Hosted, text: string, mode: MessageMode): Promise<number> {
    const { agent } = entry
    clearTimeout(entry.timer)
    const round = ++entry.round
    const message = userText(text)
    if (mode === 'followup') agent.followup(message)
    else if (mode === 'steer') agent.steer(message)
    else agent.inject(message)
    const seq = agent.session.seq - 1
    await this.home.sessions.flush(agent.session)
    void agent.idle().then(() => {
      if (entry.round !== round || this.hosted.get(agent.sessionId) !== entry || this.draining) return
      entry.timer = setTimeout(() => void this.serial(agent.sessionId, () => this.releaseIdle(entry)), this.options.idleReleaseMs)
      entry.timer.unref()
    })
    return seq
  }

  private async releaseIdle(entry: Hosted) {
    const id = entry.agent.sessionId
    if (this.hosted.get(id) !== entry || entry.agent.status === 'running') return
    await this.release(id)
  }

  /** Waits for the agent of `id`, makes everything durable, and disposes it, which releases the lease. */
  private async release(id: string) {
    const entry = this.hosted.get(id)
    if (!entry) return
    clearTimeout(entry.timer)
    try {
      await entry.agent.idle()
      await this.home.sessions.flush(entry.agent.session)
    } finally {
      this.hosted.delete(id)
      await entry.agent.dispose()
    }
  }

  /** Stored events from `fromSeq`; 404 for a session the store does not have, and for another project's. */
  private async read(id: string, fromSeq: number) {
    let stored: StoredSession
    try {
      stored = await this.store.readFrom(id, fromSeq)
    } catch (error) {
      return rethrow(error)
    }
    this.cwds.set(id, stored.meta.cwd ?? null)
    if (!(await this.owns(stored.meta.cwd))) throw notFound(id)
    return stored
  }

  /** 404 unless `id` is a stored session of this project; its log is read only the first time. */
  private async own(id: string): Promise<void> {
    if (this.hosted.has(id)) return
    const cwd = this.cwds.get(id)
    if (cwd === undefined) await this.read(id, Number.MAX_SAFE_INTEGER)
    else if (!(await this.owns(cwd))) throw notFound(id)
  }

  /**
   * Whether a session recorded in `cwd` belongs to this project: the same
   * folder, through any symlink. A session in a subfolder is not (its folder
   * may hold a loom.yml layer of its own); one without a cwd is nobody's. A
   * folder written as the host's own needs no look-up; any other is resolved
   * at each check, so a link changed since is not trusted.
   */
  private async owns(cwd: string | null | undefined): Promise<boolean> {
    if (!cwd) return false
    if (cwd === this.options.cwd || cwd === this.project) return true
    return (await realpath(cwd).catch(() => undefined)) === this.project
  }

  private async holder(id: string): Promise<SessionLeaseHolder | undefined> {
    return this.store.holder ? this.store.holder(id).catch(() => undefined) : undefined
  }

  /** Resolves on news of `id` (a durable write here), after `delayMs` (another host may have written), or on abort. */
  private news(id: string, signal: AbortSignal, delayMs: number): Promise<void> {
    return new Promise(resolve => {
      const wakers = this.waiting.get(id) ?? new Set()
      this.waiting.set(id, wakers)
      const done = () => {
        clearTimeout(timer)
        signal.removeEventListener('abort', done)
        wakers.delete(done)
        if (!wakers.size && this.waiting.get(id) === wakers) this.waiting.delete(id)
        resolve()
      }
      const timer = setTimeout(done, delayMs)
      wakers.add(done)
      signal.addEventListener('abort', done)
    })
  }

  private serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const next = (this.chains.get(id) ?? Promise.resolve()).catch(() => {}).then(operation)
    this.chains.set(id, next)
    void next
      .catch(() => {})
      .then(() => {
        if (this.chains.get(id) === next) this.chains.delete(id)
      })
    return next
  }
}

/** The project folder of a host: its agents' cwd, resolved; a folder that is not there cannot be served. */
function projectFolder(cwd: string): string {
  try {
    return realpathSync(cwd)
  } catch (error) {
    throw new Error(`@loom/serve: cannot resolve the working folder ${cwd} (the project this server hosts): ${(error as NodeJS.ErrnoException).code ?? error}`)
  }
}

function checkId(id: string) {
  if (!SESSION_ID.test(id)) throw new ApiError(400, 'INVALID_REQUEST', `"${id.slice(0, 140)}" is not a session id`, { details: { field: 'id' } })
}

/** The prefix of `events` that continues `after` without a gap. */
function contiguous(events: readonly SessionEvent[], after: number): SessionEvent[] {
  const out: SessionEvent[] = []
  for (const event of events) {
    if (event.seq !== after + 1 + out.length) break
    out.push(event)
  }
  return out
}

export function leaseHeld(id: string, holder: SessionLeaseHolder): ApiError {
  const where = `pid ${holder.pid} on host ${holder.host}${holder.command ? ` (${holder.command})` : ''}`
  return new ApiError(409, 'SESSION_LEASE_HELD', `session ${id} is being written by ${where}; send this request to that host, or retry once it lets go`, {
    details: { holder },
    headers: { 'retry-after': '1' },
  })
}

/**
 * The answer for a session this host does not serve, whether the store lacks it
 * or it is another project's: the same body, so a client cannot tell them apart
 * (nor learn where the store is).
 */
function notFound(id: string): ApiError {
  return new ApiError(404, 'SESSION_NOT_FOUND', `session "${id}" not found in this server's project`)
}

/** Errors of the store and the runner as API errors: a missing session is 404, a bad route 400; anything else stays a 500. */
function rethrow(error: unknown): never {
  if (error instanceof ApiError) throw error
  const message = (error as Error)?.message ?? String(error)
  const missing = /^session "(.*)" not found\b/.exec(message)
  if (missing) throw notFound(missing[1])
  if ((error as Error)?.name === 'UsageError') throw new ApiError(400, 'INVALID_REQUEST', message)
  throw error
}
