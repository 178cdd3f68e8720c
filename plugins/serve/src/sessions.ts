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
//
// An error means not accepted: a message is answered once it is durably in the
// log, and if the store cannot take it the session is abandoned here (its agent
// stopped, what it had not stored dropped, its lease let go), so nothing of the
// refused request runs later or turns up in the log. Keyed requests
// (idempotency.ts) are answered once.
import type { Context } from '@deepseek-ai/cordis'
import { realpathSync } from 'node:fs'
import { realpath } from 'node:fs/promises'
import type { Agent } from '@loom/agent-loop'
import { untraced } from '@loom/scope'
import { type UserMessage, userText } from '@loom/llm'
import {
  interruptedTurnClosers,
  type SessionEvent,
  type SessionHeader,
  type SessionLeaseHolder,
  type SessionPersistence,
  type SessionStore,
  type StoredSession,
  type TurnEndReason,
} from '@loom/session'
import { ApiError } from './http.ts'
import { Answers, findKeyed, KEY_TTL_MS, type Keyed, keyed, keyedMessageId, keyedSessionId, mismatch } from './idempotency.ts'

/** Creates or resumes the agent of a session: the deployment's runner (`@loom/cli/runner`) is one. */
export interface SessionOpener {
  /** A new session's agent (with id `sessionId` if given) when `id` is absent; the stored session `id` resumed (taking its lease) otherwise. */
  open(flags: { provider?: string; model?: string; cwd?: string; sessionId?: string }, id?: string): Promise<Agent>
  /** The route a new session with these flags would run on (the runner's `route`): how a request that names no provider is checked. */
  route?(flags: { provider?: string; model?: string }): Promise<{ provider: string; model: string }>
}

/** The store, with what the first-party backends add: the lease holder, and (PostgreSQL) a reachability probe. */
export type Persistence = SessionPersistence & {
  holder?(id: string): Promise<SessionLeaseHolder | undefined>
  leaseCommand?: string
  /** Resolves once the store can be reached. */
  ping?(): Promise<void>
}

export type MessageMode = 'followup' | 'steer' | 'inject'

export interface HostOptions {
  /** Working directory of new sessions' agents: the project this host serves. */
  cwd: string
  /** The route of new sessions unless the request names one. */
  route: { provider?: string; model?: string }
  idleReleaseMs: number
  tailIntervalMs: number
  /** How long an Idempotency-Key is honoured (default a day). */
  idempotencyTtlMs?: number
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

/** What creating a session answers. */
export interface Created {
  id: string
  provider: string | null
  model: string | null
}

/** What delivering a message answers. */
export interface Delivered {
  id: string
  /** The seq of the event that put the message in the session's inbox. */
  seq: number
  status: 'running' | 'idle'
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
  /** The live sessions (`ctx.sessions`), looked up once: every delivery flushes through it. */
  private readonly live: SessionStore
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
  /** First answers of keyed requests on this host. */
  private readonly answers: Answers
  draining = false

  constructor(home: Context, opener: SessionOpener, store: Persistence, options: HostOptions) {
    this.home = home
    // Called for every request and event: the services themselves, not tracing proxies (see `untraced`).
    this.live = untraced(home.sessions)
    this.opener = opener
    this.store = untraced(store)
    this.options = options
    this.project = projectFolder(options.cwd)
    this.answers = new Answers(options.idempotencyTtlMs ?? KEY_TTL_MS)
  }

  /** Why this host cannot take work now (draining, the store unreachable), or undefined when it can. */
  async unready(): Promise<{ status: 'draining' | 'store-unavailable'; reason: string } | undefined> {
    if (this.draining) return { status: 'draining', reason: 'this server is shutting down' }
    try {
      await this.store.ping?.()
    } catch (error) {
      return { status: 'store-unavailable', reason: (error as Error).message }
    }
    return undefined
  }

  /** Called on `session/durable`: streams of that session read again at once. */
  durable(id: string): void {
    for (const wake of this.waiting.get(id) ?? []) wake()
  }

  /**
   * Called on `session/write-failed`: the store could not take a batch of a
   * session whose agent may run here. That write is the fencing point: the
   * session is given up at once (see `abandon`), not at its next message, so a
   * running turn calls no model and runs no tool more with nothing stored, and
   * its lease is let go (or expires on schedule while the store stays away).
   */
  writeFailed(id: string, error: unknown): void {
    const entry = this.hosted.get(id)
    if (!entry) return
    // After any delivery to it: a delivery that met the same failure gives the session up itself.
    void this.serial(id, async () => {
      if (this.hosted.get(id) !== entry || !(await this.abandon(entry, entry.agent.session.seq - 1))) return
      this.home.logger('serve').warn(`session ${id}: the store could not take its events (${(error as Error)?.message ?? error}); it was given up on this host`)
      await entry.agent.dispose().catch(() => {})
    })
  }

  /** Agents open here, and how many of them run a turn. */
  counts(): { open: number; running: number } {
    let running = 0
    for (const { agent } of this.hosted.values()) if (agent.status === 'running') running++
    return { open: this.hosted.size, running }
  }

  /**
   * A new session running `task`; resolves once the task is durably in its log.
   * With an idempotency key the session's id comes from the key, so a retry, on
   * any host, finds the session instead of starting a second one.
   */
  async create(input: { task: string; provider?: string; model?: string }, key?: string): Promise<Created> {
    this.refuseWhileDraining()
    if (key === undefined) return this.start(input)
    const request = keyed(`create\n${this.project}`, key, input)
    return this.answers.once(request, () => this.startKeyed(input, request))
  }

  /**
   * A message for session `id`: resumed here if no agent runs it and nobody else
   * holds it. Resolves once the message is durably in its log. A keyed message
   * the log already holds is answered from there, and not added again.
   */
  async message(id: string, text: string, mode: MessageMode, key?: string): Promise<Delivered> {
    this.refuseWhileDraining()
    checkId(id)
    const request = key === undefined ? undefined : keyed(`message\n${id}`, key, { text, mode })
    const deliver = () =>
      this.serial(id, async () => {
        const entry = this.hosted.get(id) ?? (await this.resumeUnlessKept(id, request))
        if ('seq' in entry) return entry
        const kept = request && this.kept(entry.agent.session.events, request)
        if (kept !== undefined) return { id, seq: kept, status: entry.agent.status }
        const seq = await this.deliver(entry, message(text, request), mode)
        return { id, seq, status: entry.agent.status }
      })
    return request ? this.answers.once(request, deliver) : deliver()
  }

  /** Cancels the running turn of `id`; resolves once the turn is closed (`aborted`) in the log. A keyed retry gets the first answer. */
  async cancel(id: string, key?: string): Promise<{ id: string; cancelled: boolean }> {
    checkId(id)
    // Cancelling twice changes nothing more, so the key is kept on this host only: it keeps the first answer.
    if (key !== undefined) return this.answers.once(keyed(`cancel\n${id}`, key, {}), () => this.cancel(id))
    const agent = await this.locate(id)
    if (!agent) return { id, cancelled: false }
    const running = agent.status === 'running'
    agent.cancel({ kind: 'user' })
    await agent.idle()
    await this.live.flush(agent.session)
    return { id, cancelled: running }
  }

  /** The agent of `id` if it runs on this host. */
  agentOf(id: string): Agent | undefined {
    return this.hosted.get(id)?.agent
  }

  /**
   * For a request only the host running `id` can carry out: its agent here, or
   * undefined when it runs nowhere; 404 for a session this host does not serve,
   * 409 naming the holder when another host runs it (the client asks there).
   */
  async locate(id: string): Promise<Agent | undefined> {
    checkId(id)
    const entry = this.hosted.get(id)
    if (entry) return entry.agent
    await this.read(id, Number.MAX_SAFE_INTEGER)
    const holder = await this.holder(id)
    if (holder && holder.pid !== process.pid) throw leaseHeld(id, holder)
    return undefined
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

  /** Opens a new session's agent (with the id and task message id of a keyed request) and delivers its task. */
  private async start(input: { task: string; provider?: string; model?: string }, request?: Keyed): Promise<Created> {
    const { route } = this.options
    // A request's provider drops the configured model, which belongs to the configured provider.
    const provider = input.provider ?? route.provider
    const model = input.model ?? (input.provider === undefined ? route.model : undefined)
    const flags = { provider, model, cwd: this.options.cwd, ...(request && { sessionId: keyedSessionId(request) }) }
    const agent = await this.opener.open(flags).catch(rethrow)
    const entry: Hosted = { agent, round: 0 }
    this.hosted.set(agent.sessionId, entry)
    await this.serial(agent.sessionId, () => this.deliver(entry, message(input.task, request), 'followup'))
    return { id: agent.sessionId, provider: agent.options.provider ?? null, model: agent.options.model ?? null }
  }

  /**
   * A keyed new session: the one this key created before (here or on another
   * host, within the key's lifetime), else a new one with the key's id. A
   * session of that id whose key has expired leaves the id taken: the new
   * session gets a fresh id.
   */
  private async startKeyed(input: { task: string; provider?: string; model?: string }, request: Keyed): Promise<Created> {
    const id = keyedSessionId(request)
    const live = this.hosted.get(id)?.agent
    let events: readonly SessionEvent[]
    try {
      events = live ? live.session.events : (await this.read(id, 0)).events
    } catch (error) {
      if (error instanceof ApiError && error.code === 'SESSION_NOT_FOUND') return this.start(input, request)
      throw error
    }
    if (this.kept(events, request) === undefined) return this.start(input)
    const context = [...events].reverse().find(event => event.type === 'request/context')?.data as { provider: string; model: string } | undefined
    return {
      id,
      provider: context?.provider ?? live?.options.provider ?? input.provider ?? this.options.route.provider ?? null,
      model: context?.model ?? live?.options.model ?? input.model ?? this.options.route.model ?? null,
    }
  }

  /** Where the log holds the keyed request's message: its seq, or undefined; 422 when it was sent with another body. */
  private kept(events: readonly SessionEvent[], request: Keyed): number | undefined {
    const found = findKeyed(events, request, this.answers.notBefore())
    if (found && found.body !== request.body) throw mismatch()
    return found?.seq
  }

  /** Resumes `id` here; a keyed message that the host holding the session stored already is answered from the store rather than with 409. */
  private async resumeUnlessKept(id: string, request: Keyed | undefined): Promise<Hosted | Delivered> {
    try {
      return await this.resume(id)
    } catch (error) {
      if (!request || !(error instanceof ApiError) || error.code !== 'SESSION_LEASE_HELD') throw error
      const { events } = await this.read(id, 0)
      const seq = this.kept(events, request)
      if (seq === undefined) throw error
      return { id, seq, status: interruptedTurnClosers(events).length ? 'running' : 'idle' }
    }
  }

  /**
   * Puts the message in the agent's inbox and resolves once it is durable. An
   * idle agent starts its turn at once, and that turn's first events are made
   * durable with the message, by one write: nothing of the turn reaches a model
   * or a tool before its step's checkpoint has stored them. If the store cannot
   * take the message, the session is abandoned here (see `abandon`: what was not
   * stored is dropped, the turn cancelled) and the error is thrown: nothing of
   * this message runs later. Whatever happens, an agent still hosted is released
   * once idle for `idleReleaseMs`, so no failure leaves its lease pinned to this host.
   */
  private async deliver(entry: Hosted, message: UserMessage, mode: MessageMode): Promise<number> {
    const { agent } = entry
    clearTimeout(entry.timer)
    const round = ++entry.round
    // The message's own event is the first one the inbox appends.
    const seq = agent.session.seq
    try {
      if (mode === 'followup') agent.followup(message)
      else if (mode === 'steer') agent.steer(message)
      else agent.inject(message)
      try {
        await this.live.flush(agent.session)
      } catch (error) {
        // Stored after all (a write raced the failed flush): accepted.
        if (!(await this.abandon(entry, seq))) return seq
        throw error
      }
      return seq
    } catch (error) {
      if (this.hosted.get(agent.sessionId) !== entry) await agent.dispose().catch(() => {})
      // Another host took the session (this one was cut off longer than the lease lives): the client goes there.
      const lost = error as { code?: string; holder?: SessionLeaseHolder }
      if (lost.code === 'SESSION_LEASE_LOST' && lost.holder) throw leaseHeld(agent.sessionId, lost.holder)
      throw error
    } finally {
      if (this.hosted.get(agent.sessionId) === entry) this.releaseWhenIdle(entry, round)
    }
  }

  /**
   * The store could not take the session's event `seq`: unless it has it after
   * all (`false`), the session is given up here. The backend drops what it had
   * not stored and lets the lease go; the agent is cancelled (a turn the message
   * started ends before its model call; its inbox is cleared) and taken off this host. The stored log
   * ends where it was durable; whichever host loads it next closes a turn left
   * open. A backend that cannot abandon writes what it still can when the agent
   * is disposed.
   */
  private async abandon(entry: Hosted, seq: number): Promise<boolean> {
    const { agent } = entry
    if (this.store.abandon && !(await this.store.abandon(agent.sessionId, seq).catch(() => true))) return false
    clearTimeout(entry.timer)
    if (this.hosted.get(agent.sessionId) === entry) this.hosted.delete(agent.sessionId)
    agent.cancel({ kind: 'hook', reason: "the session store could not take this session's events; it was given up on this host" })
    return true
  }

  /**
   * Once the agent is idle: its last turn's end is written at once (the
   * session's streams and the client waiting for that turn would otherwise
   * wait for the store's write-behind window), and the agent is released after
   * `idleReleaseMs`, unless another delivery came since.
   */
  private releaseWhenIdle(entry: Hosted, round: number) {
    const { agent } = entry
    void agent.idle().then(() => {
      if (entry.round !== round || this.hosted.get(agent.sessionId) !== entry || this.draining) return
      // A write that fails stays queued for the next one (the release flushes again).
      this.live.flush(agent.session).catch(error => {
        this.home.logger('serve').warn(`session ${agent.sessionId}: writing the end of its turn failed; it is retried: ${(error as Error).message}`)
      })
      entry.timer = setTimeout(() => void this.serial(agent.sessionId, () => this.releaseIdle(entry)), this.options.idleReleaseMs)
      entry.timer.unref()
    })
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
      await this.live.flush(entry.agent.session)
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

/** The user's message; a keyed request's has the id that finds it again. */
function message(text: string, request: Keyed | undefined): UserMessage {
  const message = userText(text)
  return request ? { ...message, id: keyedMessageId(request) } : message
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
