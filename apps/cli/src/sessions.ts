// Stored sessions without the deployment: `loom sessions list|show|verify|repair`,
// `stats` and `manifest` mount only the rows that store sessions (@loom/session
// and the deployment's persistence, JSONL files or PostgreSQL, with the config
// the composed deployment gives them), so a broken row that has nothing to do
// with storage cannot stop them. Every command reads and repairs through the
// SessionPersistence contract, whatever the backend. Resuming and compacting
// need an agent and a model: they go through the runner.
import { interpolate, type EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import type { SessionEvent, SessionPersistence } from '@loom/session'
import { outlineSession, reconstructRequests, requestEconomics, type CachePrices, type SessionEconomics, type StoredSession } from '@loom/session'
import type { Manifest } from '@loom/agent-loop'
import { boot, startMessage, type BootOptions } from './boot.ts'
import { lastUsed, resolveSessionRef } from './session-ref.ts'
import { ConfigError, UsageError } from './errors.ts'
import { Config as RunnerConfig, lastRoute, modelPrices, NO_STORE, name as RUNNER } from './runner-config.ts'

/** The modules a store needs: the session service and a persistence backend. */
const STORE_MODULES = new Set(['@loom/session', '@loom/session-jsonl', '@loom/session-postgres'])

/** The deployment's `sessionPersistence`, whichever backend provides it; the CLI names the leases it takes. */
export type Persistence = SessionPersistence & { leaseCommand?: string }

export interface SessionSummary {
  id: string
  createdAt: number
  cwd: string | null
  turns: number
  events: number
  lastStatus: string | null
  /** The session that delegated this one (a subagent's), when it has one. */
  parentSession?: string
}

export interface VerifyReport {
  id: string
  /** Where the log is stored: its file (JSONL), its row (PostgreSQL: `host:port/database schema.sessions id="…"`). */
  path: string
  clean: boolean
  events: number
  tornBytes: number
  openTurn: { turn: number; closers: string[] } | null
  /** Compactions started and never ended (a crash inside one); repair appends their compaction/end. */
  unfinishedCompactions: { compactionId: string; turn: number | null }[]
  corruption: string | null
}

/** What `loom sessions stats --json` prints: prefix reuse and estimated cost of every request of a stored session (costs null at an unknown price). */
export type StatsReport = SessionEconomics<number | null> & { id: string }

/**
 * Boots the deployment's store rows alone and returns its stored sessions.
 * Without a persistence row it throws the usage error `loom sessions` gives.
 */
export async function openStore(options: BootOptions): Promise<StoredSessions> {
  const deployment = await boot({ ...options, select: storeRows })
  const persistence: Persistence | undefined = deployment.root.get('sessionPersistence')
  if (!persistence) {
    await deployment.dispose()
    throw new UsageError(NO_STORE)
  }
  // Costs use the prices the runner row configures, as `loom run` does.
  const runner = flatten(deployment.composition.rows).find(row => row.name === RUNNER)
  let prices: Record<string, CachePrices> = {}
  if (runner) {
    try {
      prices = RunnerConfig(interpolate(deployment.root, runner.config ?? {})).prices
    } catch (error) {
      await deployment.dispose()
      throw new ConfigError(`row "${runner.id}" (${runner.name}): ${startMessage(error)}`)
    }
  }
  return new StoredSessions(persistence, prices, () => deployment.dispose())
}

/** The rows of a store: those of `STORE_MODULES`, in the groups that hold them. */
function storeRows(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => {
    if (!row.group) return STORE_MODULES.has(row.name) ? [row] : []
    const children = storeRows(Array.isArray(row.config) ? row.config : [])
    return children.length ? [{ ...row, config: children }] : []
  })
}

function flatten(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => (row.group ? flatten(Array.isArray(row.config) ? row.config : []) : [row]))
}

/** What `loom sessions manifest --json` prints. */
export interface SessionManifestReport {
  id: string
  /** The request (1-based) and how many the session sent. */
  step: number
  steps: number
  turn: number | null
  manifest: Manifest
}

/** The stored sessions of one store, through its SessionPersistence: read, checked and repaired. */
export class StoredSessions {
  readonly persistence: Persistence
  /** The prices the runner row configures (`provider/model` or model id), over the list prices. */
  readonly prices: Record<string, CachePrices>
  /** Unmounts the store rows. */
  readonly dispose: () => Promise<void>

  constructor(persistence: Persistence, prices: Record<string, CachePrices>, dispose: () => Promise<void>) {
    this.persistence = persistence
    this.prices = prices
    this.dispose = dispose
  }

  /**
   * The id `ref` names: an id, a unique prefix of one, or `last` (see
   * session-ref.ts). A name that matches nothing is passed on as it is, so the
   * command's own "not found" names the store it looked in.
   */
  async resolve(ref: string, cwd: string): Promise<string> {
    const headers = await this.persistence.list()
    if (ref !== 'last' && !headers.some(header => header.id.startsWith(ref))) return ref
    return resolveSessionRef(headers, ref, cwd, ref === 'last' ? await lastUsed(this.persistence, headers, cwd) : undefined)
  }

  /** Every stored session, oldest first, with its turn count. */
  async list(): Promise<SessionSummary[]> {
    const headers = await this.persistence.list()
    return Promise.all(
      headers.map(async header => {
        const known = {
          id: header.id,
          createdAt: header.createdAt,
          cwd: header.cwd ?? null,
          ...(header.origin === 'subagent' && header.parentSession !== undefined && { parentSession: header.parentSession }),
        }
        try {
          const { events } = await this.persistence.inspect(header.id)
          const { turns, lastStatus } = outlineSession(events)
          return { ...known, turns, events: events.length, lastStatus }
        } catch (error) {
          return { ...known, turns: -1, events: -1, lastStatus: `unreadable: ${(error as Error).message}` }
        }
      }),
    )
  }

  /** The session as `load` would see it, without writing. */
  show(id: string): Promise<StoredSession> {
    return this.persistence.inspect(id)
  }

  /**
   * Every request of a stored session, rebuilt from its log: the share of the
   * previous request's serialization each one reuses as its prefix, and its
   * estimated cost at the route's prices (per million tokens) with `overrides`
   * over them. A model with no known price has no cost, unless `overrides`
   * give all three of hit, miss and output.
   */
  async stats(id: string, overrides: Partial<CachePrices> = {}): Promise<StatsReport> {
    const { events } = await this.persistence.inspect(id)
    const route = lastRoute(events)
    const known = route && modelPrices(route.provider, route.model, this.prices)
    const { hit, miss, output } = overrides
    const prices = known
      ? { ...known, ...overrides }
      : hit !== undefined && miss !== undefined && output !== undefined
        ? { ...overrides, hit, miss, output }
        : null
    return { id, ...requestEconomics(reconstructRequests(events), prices) }
  }

  /**
   * The manifest of request `step` (1-based, as `stats` numbers them; default the
   * last) of a stored session, rebuilt from its log.
   */
  async manifest(id: string, step?: number): Promise<SessionManifestReport> {
    const { events } = await this.persistence.inspect(id)
    const requests = reconstructRequests(events)
    if (!requests.length) throw new UsageError(`session ${id} has sent no request yet`)
    const index = step === undefined ? requests.length - 1 : step - 1
    if (!Number.isSafeInteger(index) || index < 0 || index >= requests.length) {
      throw new UsageError(`session ${id} has ${requests.length} request${requests.length === 1 ? '' : 's'}: --step takes 1 to ${requests.length}, not ${step}`)
    }
    const request = requests[index]
    // Loaded here: listing and reading sessions need no agent loop.
    const { requestManifest } = await import('@loom/agent-loop')
    return {
      id,
      step: index + 1,
      steps: requests.length,
      turn: request.turn,
      manifest: requestManifest({ header: request.header, sources: request.sources, messages: request.messages, at: request.time }),
    }
  }

  /** Checks a stored log without writing: a torn tail, an open turn, an unfinished compaction, corruption. */
  async verify(id: string): Promise<VerifyReport> {
    const { location, events, tornBytes, closers, corruption } = await this.persistence.check(id).catch(missingIsUsage)
    // The closers end unfinished compactions first, then close the open turn (its turn/end comes last).
    const compactionEnds = closers.filter((event): event is SessionEvent<'compaction/end'> => event.type === 'compaction/end')
    const turnClosers = closers.filter(event => event.type !== 'compaction/end')
    const turnEnd = turnClosers.at(-1) as SessionEvent<'turn/end'> | undefined
    const openTurn = turnEnd ? { turn: turnEnd.data.turn, closers: turnClosers.map(describeCloser) } : null
    const unfinishedCompactions = compactionEnds.map(({ data }) => ({ compactionId: data.compactionId, turn: data.turn }))
    const clean = !corruption && tornBytes === 0 && !openTurn && !unfinishedCompactions.length
    return { id, path: location, clean, events, tornBytes, openTurn, unfinishedCompactions, corruption }
  }

  /** Repairs a stored log (`load` under the session's lease, given back after): cuts a torn tail, closes what is open. */
  async repair(id: string): Promise<{ before: VerifyReport; after: VerifyReport }> {
    const before = await this.verify(id)
    // Nothing to write: a clean log is left alone, even while another process holds its lease.
    if (before.corruption || before.clean) return { before, after: before }
    await this.persistence.load(id)
    await this.persistence.close(id)
    return { before, after: await this.verify(id) }
  }
}

/** A session the store does not hold is the caller's mistake (exit 2); the message names where the store looked. */
function missingIsUsage(error: unknown): never {
  const message = (error as Error)?.message ?? ''
  throw /^session ".*" not found\b/.test(message) ? new UsageError(message) : error
}

function describeCloser(event: SessionEvent): string {
  if (event.type === 'tool/result') {
    const { message, error } = event.data
    return `error result for tool call ${message.content[0].toolCallId}${error ? ` (${error.code})` : ''}`
  }
  if (event.type === 'turn/end') return `turn/end (${event.data.reason.kind})`
  return event.type
}
