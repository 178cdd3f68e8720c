// Stored sessions without the deployment: `loom sessions list|show|verify|stats`
// and `repair` mount only the rows that store sessions (@loom/session and
// @loom/session-jsonl, with the config the composed deployment gives them), so
// a broken row that has nothing to do with storage cannot stop them. Resuming
// and compacting need an agent and a model: they go through the runner.
import { interpolate, type EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import type { SessionEvent, SessionHeader } from '@loom/session'
import { reconstructRequests, requestEconomics, type CachePrices, type SessionEconomics, type StoredSession } from '@loom/session'
import type { JsonlPersistence } from '@loom/session-jsonl'
import type { Manifest } from '@loom/agent-loop'
import { boot, startMessage, type BootOptions } from './boot.ts'
import { resolveSessionRef } from './session-ref.ts'
import { ConfigError, UsageError } from './errors.ts'
import { Config as RunnerConfig, lastRoute, modelPrices, NO_STORE, name as RUNNER } from './runner-config.ts'

/** The modules a store needs: the session service and its JSONL backend. */
const STORE_MODULES = new Set(['@loom/session', '@loom/session-jsonl'])

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
 * Without a JSONL store row it throws the usage error `loom sessions` gives.
 */
export async function openStore(options: BootOptions): Promise<StoredSessions> {
  const deployment = await boot({ ...options, select: storeRows })
  const persistence = deployment.root.get('sessionPersistence')
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

/** The stored sessions of one JSONL store: read, checked and repaired. */
/** What `loom sessions manifest --json` prints. */
export interface SessionManifestReport {
  id: string
  /** The request (1-based) and how many the session sent. */
  step: number
  steps: number
  turn: number | null
  manifest: Manifest
}

export class StoredSessions {
  readonly persistence: JsonlPersistence
  private readonly prices: Record<string, CachePrices>
  /** Unmounts the store rows. */
  readonly dispose: () => Promise<void>

  constructor(persistence: JsonlPersistence, prices: Record<string, CachePrices>, dispose: () => Promise<void>) {
    this.persistence = persistence
    this.prices = prices
    this.dispose = dispose
  }

  /**
   * The id `ref` names: an id, a unique prefix of one, or `last` (see
   * session-ref.ts). A name that matches nothing is passed on as it is, so the
   * command's own "not found" names the folder it looked in.
   */
  async resolve(ref: string, cwd: string): Promise<string> {
    const headers = await this.persistence.list()
    if (ref !== 'last' && !headers.some(header => header.id.startsWith(ref))) return ref
    return resolveSessionRef(headers, ref, cwd)
  }

  /** Every stored session, oldest first, with its turn count. */
  async list(): Promise<SessionSummary[]> {
    const headers = await this.persistence.list()
    return Promise.all(
      headers.map(async (header: SessionHeader) => {
        const known = {
          id: header.id,
          createdAt: header.createdAt,
          cwd: header.cwd ?? null,
          ...(header.origin === 'subagent' && header.parentSession !== undefined && { parentSession: header.parentSession }),
        }
        try {
          const { events } = await this.persistence.inspect(header.id)
          let lastStatus: string | null = null
          for (const event of events) if (event.type === 'turn/end') lastStatus = event.data.reason.kind
          return { ...known, turns: events.filter(event => event.type === 'turn/start').length, events: events.length, lastStatus }
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
    const { files } = this.persistence
    const path = await files.find(id)
    if (!path) throw new UsageError(`session "${id}" not found in ${files.root}`)
    try {
      const log = await files.read(path, id)
      // `inspect` also validates the log as one Session would hold it.
      await this.persistence.inspect(id)
      const tornBytes = log.fileBytes - log.committedBytes
      // The closers end unfinished compactions first, then close the open turn.
      const compactionEnds = log.closers.filter((event): event is SessionEvent<'compaction/end'> => event.type === 'compaction/end')
      const turnClosers = log.closers.filter(event => event.type !== 'compaction/end')
      const openTurn = turnClosers.length ? { turn: openTurnOf(log.events), closers: turnClosers.map(describeCloser) } : null
      const unfinishedCompactions = compactionEnds.map(({ data }) => ({ compactionId: data.compactionId, turn: data.turn }))
      const clean = tornBytes === 0 && !openTurn && !unfinishedCompactions.length
      return { id, path, clean, events: log.events.length, tornBytes, openTurn, unfinishedCompactions, corruption: null }
    } catch (error) {
      return { id, path, clean: false, events: 0, tornBytes: 0, openTurn: null, unfinishedCompactions: [], corruption: (error as Error).message }
    }
  }

  /** Repairs a stored log on disk (`load` under the session's lease): cuts a torn tail, closes what is open. */
  async repair(id: string): Promise<{ before: VerifyReport; after: VerifyReport }> {
    const before = await this.verify(id)
    if (before.corruption) return { before, after: before }
    await this.persistence.load(id)
    return { before, after: await this.verify(id) }
  }
}

function openTurnOf(events: readonly SessionEvent[]): number {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]
    if (event.type === 'turn/start') return event.data.turn
  }
  return 0
}

function describeCloser(event: SessionEvent): string {
  if (event.type === 'tool/result') {
    const { message, error } = event.data
    return `error result for tool call ${message.content[0].toolCallId}${error ? ` (${error.code})` : ''}`
  }
  if (event.type === 'turn/end') return `turn/end (${event.data.reason.kind})`
  return event.type
}
