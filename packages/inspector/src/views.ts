// The JSON views of the page, computed from stored logs with what
// `@loom/session` rebuilds from them (requests, their economics) and what
// `@loom/agent-loop` makes of a rebuilt request (its manifest, a diff of two).
// Nothing here is kept but a small cache of rebuilt sessions, keyed by their
// length: a session that grew is rebuilt.
import { basename } from 'node:path'
import type { Manifest, ManifestDiff } from '@loom/agent-loop'
import type { Message, ToolSchema } from '@loom/llm'
import {
  headerChangeCauses,
  headerChangeOwners,
  lastRoute,
  outlineSession,
  type ReconstructedRequest,
  reconstructRequests,
  type RequestEconomics,
  requestEconomics,
  type SessionEconomics,
  type SessionEvent,
  type SessionHeader,
  type StoredSession,
  usageCost,
} from '@loom/session'
import type { InspectorSource } from './source.ts'
import { blockText, type TranscriptItem, transcriptItems } from './transcript.ts'

/** A view that cannot be given: the status and a stable code for the page. */
export class ViewError extends Error {
  readonly status: number
  readonly code: string
  constructor(status: number, code: string, message: string) {
    super(message)
    this.name = 'ViewError'
    this.status = status
    this.code = code
  }
}

/** A row of the sessions view. Figures are the provider's where it reported usage (`figures: reported`), else Loom's estimates. */
export interface SessionRow {
  id: string
  createdAt: number
  cwd: string | null
  /** The project folder's name. */
  project: string | null
  parentSession: string | null
  /** `running`, `interrupted` (a turn is open and nobody writes it), how the last turn ended, `new`, or `unreadable`. */
  status: string
  /** Why the log cannot be read (status `unreadable`). */
  error?: string
  turns: number
  events: number
  requests: number
  route: string | null
  figures: 'reported' | 'estimated'
  inputTokens: number
  outputTokens: number
  /** Cache reads over input tokens. */
  hitShare: number | null
  /** Input and output at the route's prices; null when its price is unknown. */
  cost: number | null
  /** Subagent sessions this one delegated to, folded under it. */
  children: SessionRow[]
}

/** One request on the session's axis: its cache-hit share reported beside estimated, its input tokens, and the header change it opened with. */
export interface SeriesPoint {
  /** 1-based, as `loom sessions stats` numbers requests. */
  request: number
  turn: number | null
  step: number | null
  seq: number
  time: number
  estimatedHitShare: number | null
  reportedHitShare: number | null
  estimatedInputTokens: number
  reportedInputTokens: number | null
  outputTokens: number
  cost: number | null
  /** The header logged since the previous request, with its attributed causes and the plugins they name. */
  header: { reason: string; causes: string[]; owners: string[] } | null
}

/** A rebuilt session, kept while its log has this length. */
interface Rebuilt {
  length: number
  header: SessionHeader
  events: readonly SessionEvent[]
  requests: ReconstructedRequest[]
  economics?: SessionEconomics<number | null>
}

const CACHED_SESSIONS = 4

export class InspectorViews {
  private readonly source: InspectorSource
  private readonly rebuilt = new Map<string, Rebuilt>()
  /** The economics of each listed session, by id, while its log has that length. */
  private readonly listed = new Map<
    string,
    { length: number; row: Omit<SessionRow, 'children' | 'status'> & { openTurn: boolean; lastStatus: string | null } }
  >()

  constructor(source: InspectorSource) {
    this.source = source
  }

  /** Every session, subagents folded under the session that delegated to them. */
  async sessions(): Promise<SessionRow[]> {
    const headers = await this.source.list()
    const rows = await Promise.all(headers.map(header => this.row(header)))
    const byId = new Map(rows.map(row => [row.id, row]))
    const top: SessionRow[] = []
    for (const row of rows) {
      const parent = row.parentSession === null ? undefined : byId.get(row.parentSession)
      if (parent && parent !== row) parent.children.push(row)
      else top.push(row)
    }
    return top
  }

  /** A session's row; `stored` when it was read already. */
  private async row(header: SessionHeader, stored?: StoredSession): Promise<SessionRow> {
    const base = {
      id: header.id,
      createdAt: header.createdAt,
      cwd: header.cwd ?? null,
      project: header.cwd ? basename(header.cwd) : null,
      parentSession: header.parentSession ?? null,
      children: [],
    }
    try {
      stored ??= await this.read(header.id)
    } catch (error) {
      return { ...base, ...EMPTY_FIGURES, status: 'unreadable', error: (error as Error).message }
    }
    if (!stored) return { ...base, ...EMPTY_FIGURES, status: 'unreadable', error: 'not found' }
    const { events } = stored
    let listed = this.listed.get(header.id)
    if (listed?.length !== events.length) {
      const rebuilt = this.rebuild(header.id, stored.meta, events)
      const outline = outlineSession(events)
      const route = lastRoute(events)
      listed = {
        length: events.length,
        row: {
          ...base,
          ...this.figures(rebuilt),
          turns: outline.turns,
          events: outline.events,
          requests: rebuilt.requests.length,
          route: route ? `${route.provider}/${route.model}` : null,
          openTurn: outline.openTurn,
          lastStatus: outline.lastStatus,
        },
      }
      this.listed.set(header.id, listed)
    }
    const { openTurn, lastStatus, ...row } = listed.row
    return { ...row, children: [], status: await this.status(header.id, openTurn, lastStatus) }
  }

  private async status(id: string, openTurn: boolean, lastStatus: string | null): Promise<string> {
    if (!openTurn) return lastStatus ?? 'new'
    const running = await this.source.running?.(id)
    return running === false ? 'interrupted' : 'running'
  }

  /** A session: its header, outline and figures, its requests, and its transcript. */
  async session(id: string): Promise<{
    meta: SessionHeader
    row: SessionRow
    requests: { request: number; turn: number | null; step: number | null; seq: number; time: number }[]
    items: TranscriptItem[]
    nextSeq: number
  }> {
    const stored = await this.read(id)
    const rebuilt = this.rebuild(id, stored.meta, stored.events)
    const row = await this.row(rebuilt.header, stored)
    const children = (await this.source.list()).filter(header => header.parentSession === id)
    row.children = await Promise.all(children.map(header => this.row(header)))
    return {
      meta: rebuilt.header,
      row,
      requests: rebuilt.requests.map((request, index) => ({
        request: index + 1,
        turn: request.turn,
        step: request.step,
        seq: request.seq,
        time: request.time,
      })),
      items: transcriptItems(rebuilt.events, rebuilt.requests),
      nextSeq: rebuilt.events.length,
    }
  }

  /** One event, whole (a text the transcript cut). */
  async event(id: string, seq: number): Promise<SessionEvent> {
    const { events } = await this.load(id)
    const event = events[seq]
    if (!event) throw new ViewError(404, 'EVENT_NOT_FOUND', `session ${id} has no event ${seq} (it has ${events.length})`)
    return event
  }

  /** Request `number` (1-based): its manifest, exact system text and tools, runtime-context snapshot, header change and economics. */
  async request(id: string, number: number) {
    const rebuilt = await this.load(id)
    const request = this.pick(rebuilt, number)
    const { economics } = this.economics(rebuilt)
    const { requestManifest, RUNTIME_CONTEXT_OWNER } = await import('@loom/agent-loop')
    const owners = new Map((request.sources?.tools ?? []).map(tool => [tool.name, tool.owner]))
    const snapshot = request.messages.findLast(message => isSnapshot(message, RUNTIME_CONTEXT_OWNER))
    return {
      id,
      request: number,
      requests: rebuilt.requests.length,
      turn: request.turn,
      step: request.step,
      seq: request.seq,
      time: request.time,
      route: request.header ? `${request.header.config.provider}/${request.header.config.model}` : null,
      header: headerAt(rebuilt, number - 1),
      manifest: requestManifest({ header: request.header, sources: request.sources, messages: request.messages, at: request.time }),
      system: request.header?.system ?? '',
      tools: (request.header?.tools ?? []).map((tool: ToolSchema) => ({ ...tool, owner: owners.get(tool.name) ?? 'unknown' })),
      runtimeContext: snapshot ? blockText(snapshot.content) : null,
      leftOut: request.sources?.leftOut ?? [],
      messages: request.messages.length,
      economics: economics.requests[number - 1],
      prices: economics.prices,
    }
  }

  /** Every request on one axis: cache-hit share reported and estimated, input tokens, header changes with their causes. */
  async series(id: string): Promise<{ id: string; points: SeriesPoint[]; totals: SessionEconomics<number | null>['totals']; prices: unknown }> {
    const rebuilt = await this.load(id)
    const { economics } = this.economics(rebuilt)
    const points = economics.requests.map((row, index) => point(row, rebuilt.requests[index].time, headerAt(rebuilt, index)))
    return { id, points, totals: economics.totals, prices: economics.prices }
  }

  /** The manifests of requests `a` and `b` (1-based) and how they differ, as `loom prompt --diff` says. */
  async diff(id: string, a: number, b: number): Promise<{ id: string; a: number; b: number; before: Manifest; after: Manifest; diff: ManifestDiff }> {
    const rebuilt = await this.load(id)
    const [first, second] = [this.pick(rebuilt, a), this.pick(rebuilt, b)]
    const { requestManifest, diffManifests } = await import('@loom/agent-loop')
    const manifestOf = (request: ReconstructedRequest) =>
      requestManifest({ header: request.header, sources: request.sources, messages: request.messages, at: request.time })
    const [before, after] = [manifestOf(first), manifestOf(second)]
    return { id, a, b, before, after, diff: diffManifests(before, after) }
  }

  /**
   * A plugin's footprint across the session: the tokens of its sections, runtime
   * contexts and tools in each request, and the header changes that name it.
   * Without `plugin`, the one with the most tokens in the last request.
   */
  async footprint(id: string, plugin?: string) {
    const rebuilt = await this.load(id)
    const { requestManifest, RUNTIME_CONTEXT_OWNER } = await import('@loom/agent-loop')
    // The history only for its latest snapshot: the contexts it carries are attributed to their plugins.
    const manifests = rebuilt.requests.map(request => {
      const snapshot = request.messages.findLast(message => isSnapshot(message, RUNTIME_CONTEXT_OWNER))
      return requestManifest({ header: request.header, sources: request.sources, messages: snapshot ? [snapshot] : [], at: request.time }).rows.filter(
        row => row.kind !== 'message',
      )
    })
    const totals = new Map<string, number>()
    for (const row of manifests.at(-1) ?? []) totals.set(row.owner, (totals.get(row.owner) ?? 0) + row.tokens)
    const named = new Set(manifests.flatMap(rows => rows.map(row => row.owner)))
    rebuilt.requests.forEach((_, index) => {
      for (const owner of headerAt(rebuilt, index)?.owners ?? []) named.add(owner)
    })
    const plugins = [...named].sort((x, y) => (totals.get(y) ?? 0) - (totals.get(x) ?? 0) || (x < y ? -1 : x > y ? 1 : 0))
    const chosen = plugin ?? plugins[0] ?? null
    if (plugin !== undefined && !named.has(plugin)) {
      throw new ViewError(404, 'PLUGIN_NOT_FOUND', `no section, context, tool or header change of session ${id} belongs to plugin "${plugin}"`)
    }
    const steps = manifests.map((rows, index) => {
      const own = rows.filter(row => row.owner === chosen)
      const sum = (kind: string) => own.filter(row => row.kind === kind).reduce((total, row) => total + row.tokens, 0)
      const request = rebuilt.requests[index]
      return {
        request: index + 1,
        turn: request.turn,
        step: request.step,
        sections: sum('section'),
        contexts: sum('context'),
        tools: sum('tool'),
        tokens: own.reduce((total, row) => total + row.tokens, 0),
        rows: own.map(row => ({ kind: row.kind, name: row.name, tokens: row.tokens })),
      }
    })
    const changes = rebuilt.requests.flatMap((_, index) => {
      const header = headerAt(rebuilt, index)
      return header && chosen !== null && header.owners.includes(chosen)
        ? [{ request: index + 1, reason: header.reason, causes: header.causes.filter(cause => cause.includes(`"${chosen}"`) || cause.includes(` ${chosen} `)) }]
        : []
    })
    return { id, plugin: chosen, plugins: plugins.map(name => ({ name, tokens: totals.get(name) ?? 0 })), steps, changes }
  }

  /** The stored session, rebuilt once per length. */
  async load(id: string): Promise<Rebuilt> {
    const stored = await this.read(id)
    return this.rebuild(id, stored.meta, stored.events)
  }

  /** The stored session; one kept here is read on from its end (logs only grow), unless what follows does not continue it. */
  private async read(id: string): Promise<StoredSession> {
    const cached = this.rebuilt.get(id)
    const tail = await this.source.read(id, cached?.length ?? 0)
    if (!tail) throw new ViewError(404, 'SESSION_NOT_FOUND', `no session ${id} is stored here`)
    if (!cached) return tail
    if (!tail.events.length) return { meta: tail.meta, events: cached.events }
    if (tail.events[0].seq === cached.length) return { meta: tail.meta, events: [...cached.events, ...tail.events] }
    return this.source.read(id).then(stored => stored ?? Promise.reject(new ViewError(404, 'SESSION_NOT_FOUND', `no session ${id} is stored here`)))
  }

  private rebuild(id: string, header: SessionHeader, events: readonly SessionEvent[]): Rebuilt {
    const cached = this.rebuilt.get(id)
    if (cached?.length === events.length) {
      // Most recently used last: the oldest goes first.
      this.rebuilt.delete(id)
      this.rebuilt.set(id, cached)
      return cached
    }
    const rebuilt: Rebuilt = { length: events.length, header, events, requests: reconstructRequests(events) }
    this.rebuilt.delete(id)
    this.rebuilt.set(id, rebuilt)
    for (const key of this.rebuilt.keys()) {
      if (this.rebuilt.size <= CACHED_SESSIONS) break
      this.rebuilt.delete(key)
    }
    return rebuilt
  }

  /**
   * The row's figures: the provider's where it reported usage (summed from the
   * usage alone: cheap), else Loom's estimates (every request serialized).
   */
  private figures(rebuilt: Rebuilt): Pick<SessionRow, 'figures' | 'inputTokens' | 'outputTokens' | 'hitShare' | 'cost'> {
    const route = lastRoute(rebuilt.events)
    const prices = (route && this.source.prices(route.provider, route.model)) ?? null
    const reported = rebuilt.requests.flatMap(request => (request.usage ? [request.usage] : []))
    if (reported.length) {
      let input = 0
      let hits = 0
      let output = 0
      let cost: number | null = prices && 0
      for (const usage of reported) {
        hits += usage.cacheReadTokens ?? 0
        input += usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)
        output += usage.outputTokens
        if (prices && cost !== null) {
          const { input: inputCost, output: outputCost } = usageCost(usage, prices)
          cost += inputCost + outputCost
        }
      }
      return { figures: 'reported', inputTokens: input, outputTokens: output, hitShare: input ? hits / input : null, cost }
    }
    const { totals } = this.economics(rebuilt).economics
    const input = totals.hitTokens + totals.missTokens
    const cost = totals.inputCost === null || totals.outputCost === null ? null : totals.inputCost + totals.outputCost
    return { figures: 'estimated', inputTokens: input, outputTokens: totals.outputTokens, hitShare: input ? totals.hitTokens / input : null, cost }
  }

  private economics(rebuilt: Rebuilt): Rebuilt & { economics: SessionEconomics<number | null> } {
    if (!rebuilt.economics) {
      const route = lastRoute(rebuilt.events)
      rebuilt.economics = requestEconomics(rebuilt.requests, (route && this.source.prices(route.provider, route.model)) ?? null)
    }
    return rebuilt as Rebuilt & { economics: SessionEconomics<number | null> }
  }

  private pick(rebuilt: Rebuilt, number: number): ReconstructedRequest {
    const count = rebuilt.requests.length
    if (!count) throw new ViewError(404, 'NO_REQUEST', `session ${rebuilt.header.id} has sent no request yet`)
    if (!Number.isSafeInteger(number) || number < 1 || number > count) {
      throw new ViewError(404, 'REQUEST_NOT_FOUND', `session ${rebuilt.header.id} has ${count} request${count === 1 ? '' : 's'}: 1 to ${count}, not ${number}`)
    }
    return rebuilt.requests[number - 1]
  }
}

const EMPTY_FIGURES = {
  turns: 0,
  events: 0,
  requests: 0,
  route: null,
  figures: 'estimated' as const,
  inputTokens: 0,
  outputTokens: 0,
  hitShare: null,
  cost: null,
}

function point(row: RequestEconomics<number | null>, time: number, header: SeriesPoint['header']): SeriesPoint {
  const input = row.hitTokens + row.missTokens
  const reportedCost =
    row.reported && row.reported.inputCost !== null && row.reported.outputCost !== null ? row.reported.inputCost + row.reported.outputCost : null
  const estimatedCost = row.inputCost !== null && row.outputCost !== null ? row.inputCost + row.outputCost : null
  return {
    request: row.index + 1,
    turn: row.turn,
    step: row.step,
    seq: row.seq,
    time,
    estimatedHitShare: input ? row.hitTokens / input : null,
    reportedHitShare: row.reported?.hitShare ?? null,
    estimatedInputTokens: input,
    reportedInputTokens: row.reported?.inputTokens ?? null,
    outputTokens: row.reported?.outputTokens ?? row.outputTokens,
    cost: row.reported ? reportedCost : estimatedCost,
    header,
  }
}

/** The header logged between request `index - 1` and request `index` (the first request: every header before it). */
function headerAt(rebuilt: Rebuilt, index: number): SeriesPoint['header'] {
  const from = index === 0 ? 0 : rebuilt.requests[index - 1].endSeq + 1
  const to = rebuilt.requests[index].seq
  for (let seq = to - 1; seq >= from; seq--) {
    const event = rebuilt.events[seq]
    if (event?.type !== 'request/header') continue
    const { reason, changes, drift } = event.data
    const causes = changes ? headerChangeCauses(changes, drift) : []
    return {
      reason,
      causes: reason === 'initial' && !causes.length ? ['the first request of the session'] : causes,
      owners: headerChangeOwners(changes, drift),
    }
  }
  return null
}

function isSnapshot(message: Message, owner: string): boolean {
  return message.role === 'user' && message.source.kind === 'plugin' && message.source.plugin === owner
}
