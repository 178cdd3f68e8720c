// The runner: the CLI's own plugin (row `runner`). It picks the model route,
// creates or resumes the agent and runs its turn (`run`, `sessions resume`),
// builds the next request without sending it (`prompt`), and compacts a stored
// session (`sessions compact`). It prints nothing: present/ shows what it returns.
import { Context, Service } from '@deepseek-ai/cordis'
import type { Agent, AgentOptions } from '@loom/agent-loop'
import { buildManifest, type Manifest } from '@loom/agent-loop'
import { userText } from '@loom/llm'
import type { AgentCancelCause, CachePrices, Session, SessionEvent, TurnEndReason } from '@loom/session'
import { findInstabilities, type Instability, joinContextSections, type Omission, renderContextSections, renderPrompt } from '@loom/system-prompt'
import { randomBytes } from 'node:crypto'
import { UsageError } from './errors.ts'
import type {} from '@loom/session-jsonl'
import type { Compaction, CompactionStatus } from '@loom/compaction'

import { describeDrift } from './present/describe.ts'
import { lastUsed, resolveSessionRef } from './session-ref.ts'
import { Config, lastRoute, modelPrices, name, NO_STORE, unknownPrice, type RunnerConfig } from './runner-config.ts'

export { Config, name, type RunnerConfig }

export interface RouteFlags {
  provider?: string
  model?: string
}

export interface RunFlags extends RouteFlags {
  /** Working directory of the agent (default: process.cwd()). */
  cwd?: string
  /** The id of a new session (default: a fresh `newSessionId()`); `loom serve` derives it from an Idempotency-Key. */
  sessionId?: string
  /** `off` sends reasoning effort `off`; `on` the route's default effort. */
  thinking?: 'on' | 'off'
  reasoningEffort?: string
  maxSteps?: number
  maxInputTokens?: number
  maxCostUsd?: number
}

/** What `loom prompt --json` prints. */
export interface PromptReport {
  cwd: string
  provider: string | null
  model: string | null
  system: string
  tools: { name: string; description: string; owner: string; parameters?: Record<string, unknown> }[]
  runtimeContext: string
  sections: { name: string; order: number; owner: string; stability: string }[]
  contexts: { name: string; order: number; owner: string; text: string }[]
  /** One row per section, runtime context and tool (a new agent has no history), with totals by owner. */
  manifest: Manifest
  /** What the category budgets of the prompt row left out (the `budget:notice` context names it to the model). */
  omitted: Omission[]
  /**
   * Sections and variables whose text changed between two assemblies with no
   * registration change, in the stability check's words; `severe` ones fail
   * `loom dev`'s turns (and make `loom prompt` exit 1).
   */
  unstable: Instability[]
}

/** What `loom sessions compact --json` prints; tokens are the fixed heuristic's estimate of header + history. */
export interface CompactReport {
  id: string
  status: CompactionStatus
  tokensBefore: number
  tokensAfter: number
  /** Tool results pruned. */
  pruned: number
  /** History messages the summary replaced (0 when nothing was summarized). */
  summarized: number
  reason: string | null
}

/** How a turn ended, as the runner saw it; present/turn.ts shows it. */
export interface TurnResult {
  sessionId: string
  provider: string
  model: string
  /** The events this turn appended. */
  events: readonly SessionEvent[]
  /** The turn's end reason; none when it did not start. */
  reason: TurnEndReason | undefined
  /** Why the turn did not start, as the loop reported it (`agent/error`); none when it has an end reason. */
  error: string | undefined
  /** The model's prices, for the turn's cost; null when its price is unknown. */
  prices: CachePrices | null
  /** The turn was cancelled through `cancel()` (a stop signal). */
  cancelled: boolean
}

/**
 * Watches a turn while it runs (the terminal does): called with the runner's
 * context and the session before the turn starts; the function it returns is
 * called once every event of the turn is on disk.
 */
export type TurnWatcher = (ctx: Context, session: Session) => () => void

declare module '@deepseek-ai/cordis' {
  interface Context {
    runner: Runner
  }
}

/** What turns on each route of the default bundle. */
const ROUTE_VARIABLES: Record<string, string> = {
  deepseek: 'DEEPSEEK_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
  openai: 'OPENAI_BASE_URL and OPENAI_API_KEY',
}

/**
 * The agents of the `loom` CLI, as a service (ctx key `runner`). The agents it
 * creates belong to it: unloading the runner disposes them.
 */
export class Runner extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = ['agents', 'llm', 'sessions', 'systemPrompt', 'tools']
  static readonly Config = Config

  private readonly home: Context
  readonly config: RunnerConfig
  private active: Agent | undefined
  /** Why the running turn (or the next one to start) is cancelled: the first cause given. */
  private cancelled: AgentCancelCause | undefined

  constructor(ctx: Context, config: RunnerConfig) {
    super(ctx, 'runner')
    this.home = ctx
    this.config = config
  }

  /** A context of the deployment, for what a host reaches through it directly (the prompts of `@loom/mcp`). */
  get context(): Context {
    return this.home
  }

  /** The route a command uses: flags, then config, then the first preferred provider the deployment serves. */
  async route(flags: RouteFlags = {}): Promise<{ provider: string; model: string }> {
    const available = this.home.llm.listProviders().map(provider => provider.id)
    const wanted = flags.provider ?? this.config.provider
    let provider: string | undefined
    if (wanted !== undefined) {
      if (!available.includes(wanted)) {
        throw new UsageError(
          `provider "${wanted}" is not served by this deployment (available: ${available.join(', ') || 'none'})` +
            (ROUTE_VARIABLES[wanted] ? `; set ${ROUTE_VARIABLES[wanted]} to enable it` : ''),
        )
      }
      provider = wanted
    } else {
      provider = this.config.preference.find(id => available.includes(id)) ?? available[0]
    }
    if (provider === undefined) {
      throw new UsageError('no model provider is configured: the deployment registers no LLM adapter (add @loom/llm-openai or @loom/llm-scripted)')
    }
    // A configured model belongs to the configured route: a --provider flag alone drops it.
    let model = flags.model ?? (flags.provider === undefined ? this.config.model : undefined) ?? this.config.models[provider]
    if (model === undefined) model = (await this.home.llm.listModels(provider))[0]?.id
    if (model === undefined) throw new UsageError(`provider "${provider}" lists no models: pass --model`)
    return { provider, model }
  }

  /** Cancels the running turn, and one that has yet to start: for a stop signal (`user`), or an uncaught error. */
  cancel(cause: AgentCancelCause = { kind: 'user' }): void {
    this.cancelled ??= cause
    this.active?.cancel(cause)
  }

  /** `loom run`: one turn of a new agent for the working directory. */
  async run(task: string, flags: RunFlags = {}, watch?: TurnWatcher): Promise<TurnResult> {
    return this.once(await this.open(flags), task, watch)
  }

  /** `loom sessions resume REF`: a new turn on a stored session (its id, a unique prefix of it, or `last`). */
  async resume(ref: string, task: string, flags: RunFlags = {}, watch?: TurnWatcher): Promise<TurnResult> {
    return this.once(await this.open(flags, await this.resolve(ref, flags.cwd)), task, watch)
  }

  /**
   * The agent of a new session for `flags.cwd`, or of the stored session `id`
   * resumed. It holds the session's lease until the caller disposes it (a
   * conversation keeps it across its turns).
   */
  async open(flags: RunFlags = {}, id?: string): Promise<Agent> {
    if (id === undefined) {
      const route = await this.route(flags)
      return this.home.agents.create(flags.sessionId ?? freshSessionId(id => this.home.agents.get(id) !== undefined), {
        ...route,
        cwd: flags.cwd ?? process.cwd(),
        ...this.agentOptions(route, flags),
      })
    }
    const { route, last } = await this.resumeRoute(id, flags)
    const used = { provider: route.provider ?? last?.provider ?? '', model: route.model ?? last?.model ?? '' }
    const agent = await this.home.agents.resume(id, { ...route, ...this.agentOptions(used, flags) })
    // The loop records on its first request how the plugins differ from the last one's: said from the log, before the model answers.
    const stop = agent.ctx.on('session/event', (session, event) => {
      if (session !== agent.session || event.type !== 'request/header') return
      stop()
      if (event.data.drift) this.ctx.logger('runner').warn(`session ${id} last ran on other plugins: ${describeDrift(event.data.drift)}`)
    })
    return agent
  }

  /**
   * Switches the route of an open session's agent to the one `flags` name (as
   * `route` picks it), with the limits and reasoning effort of a run on it: the
   * switch is logged, and the next request's header change names `by`
   * (`/model`, `/provider`). Resolves to the new route.
   */
  async switchRoute(agent: Agent, flags: RunFlags, by: string): Promise<{ provider: string; model: string }> {
    const route = await this.route(flags)
    const { limits, reasoningEffort } = this.agentOptions(route, flags)
    agent.switchRoute(route, { by, limits, ...(reasoningEffort !== undefined && { reasoningEffort }) })
    return route
  }

  /** Writes what `agent`'s session logged so far; resolves once it is on disk (and a watching view has shown it). */
  async flush(agent: Agent): Promise<void> {
    await this.home.sessions.flush(agent.session)
  }

  /** Why the tools may not read `path` (absolute, links resolved): the deny-read rule's reason; undefined when they may. */
  readDenial(path: string): string | undefined {
    return this.home.tools.readDenial(path)?.reason
  }

  /** Whether `agent` is one of this runner's live agents (a reloaded runner's agents were disposed with it). */
  holds(agent: Agent): boolean {
    return this.home.agents.get(agent.sessionId) === agent
  }

  /** The id of the stored session `ref` names: an id, a unique prefix of one, or `last` (the one most recently used in `cwd`). */
  async resolve(ref: string, cwd = process.cwd()): Promise<string> {
    const persistence = this.persistence()
    const headers = await persistence.list()
    return resolveSessionRef(headers, ref, cwd, ref === 'last' ? await lastUsed(persistence, headers, cwd) : undefined)
  }

  /** USD per million tokens for `model` on `provider`: the config's, else the built-in list prices; null when unknown. */
  prices(provider: string, model: string): CachePrices | null {
    return modelPrices(provider, model, this.config.prices) ?? null
  }

  /**
   * The route of a resumed session: the flags', else the one it used if this
   * deployment still serves it, else the default; with the one it used last.
   */
  private async resumeRoute(id: string, flags: RouteFlags): Promise<{ route: RouteFlags; last?: { provider: string; model: string } }> {
    const last = routeOf((await this.persistence().inspect(id)).events)
    if (flags.provider !== undefined || flags.model !== undefined) return { route: await this.route(flags), last }
    const served = this.home.llm.listProviders().some(provider => provider.id === last?.provider)
    return { route: served ? {} : await this.route(), last }
  }

  /** What every agent of the runner gets from its config, whatever the command: its name and `pinPrompt`. */
  private baseOptions(): Pick<AgentOptions, 'name' | 'pinPrompt'> {
    return { name: this.config.agentName, pinPrompt: this.config.pinPrompt }
  }

  /** The base options, and the reasoning effort and the per-turn limits of a run: flags over config. */
  private agentOptions(route: { provider: string; model: string }, flags: RunFlags): AgentOptions {
    if (flags.thinking === 'off' && flags.reasoningEffort !== undefined && flags.reasoningEffort !== 'off') {
      throw new UsageError(`--thinking off contradicts --reasoning-effort ${flags.reasoningEffort}`)
    }
    const reasoningEffort = flags.thinking === 'off' ? 'off' : flags.reasoningEffort
    const configured = this.config.limits
    const maxCostUsd = flags.maxCostUsd ?? configured.maxCostUsd
    const prices = this.prices(route.provider, route.model) ?? undefined
    // A cost limit on a model with no price would never be reached.
    if (maxCostUsd !== undefined && !prices) throw new UsageError(`--max-cost: ${unknownPrice(route.provider, route.model)}`)
    const limits = {
      maxSteps: flags.maxSteps ?? configured.maxSteps,
      maxInputTokens: flags.maxInputTokens ?? configured.maxInputTokens,
      maxCostUsd,
      prices,
    }
    return { ...this.baseOptions(), ...(reasoningEffort !== undefined && { reasoningEffort }), limits }
  }

  /** One turn of a new or resumed agent, which is disposed after it. */
  private async once(agent: Agent, task: string, watch?: TurnWatcher): Promise<TurnResult> {
    try {
      return await this.turn(agent, task, watch)
    } finally {
      // Disposing the agent detaches its session; the backend writes what is left.
      await agent.dispose()
    }
  }

  /**
   * One turn of `agent` on `task`, watched by `watch`; the agent stays (a
   * conversation's next turn runs on it). A prompt that does not assemble ends
   * the turn with that error, before any model call (the loop's own assembly
   * of the step fails).
   */
  async turn(agent: Agent, task: string, watch?: TurnWatcher): Promise<TurnResult> {
    const route = { provider: agent.options.provider ?? '', model: agent.options.model ?? '' }
    const session = agent.session
    const from = session.events.length
    const stopWatching = watch?.(this.home, session) ?? (() => {})
    let failure: unknown
    const stopErrors = this.home.on('agent/error', payload => {
      if (payload.agent === agent) failure ??= payload.error
    })
    this.active = agent
    let cancelled = false
    try {
      agent.followup(userText(task))
      // A stop signal that came while the deployment booted still stops this turn.
      if (this.cancelled) agent.cancel(this.cancelled)
      await agent.idle()
    } finally {
      this.active = undefined
      try {
        // Once this resolves every event is on disk, and the watcher has shown the last of them.
        await this.home.sessions.flush(session)
      } finally {
        stopWatching()
        stopErrors()
        // A cancel stops one turn: the next task of `loom dev` runs.
        cancelled = this.cancelled !== undefined
        this.cancelled = undefined
      }
    }
    const events = session.events.slice(from)
    let reason: TurnEndReason | undefined
    for (const event of events) if (event.type === 'turn/end') reason = event.data.reason
    const error = reason || failure === undefined ? undefined : ((failure as Error)?.message ?? String(failure))
    return { sessionId: session.id, ...route, events, reason, error, prices: this.prices(route.provider, route.model), cancelled }
  }

  /**
   * `loom prompt`: the request the deployment would send next for a new agent in
   * `cwd`, without calling a model. It assembles twice for the same agent: what
   * changed in between with no registration change is reported, as the
   * stability check would at the agent's second step.
   */
  async prompt(flags: RunFlags = {}): Promise<PromptReport> {
    const cwd = flags.cwd ?? process.cwd()
    let route: { provider: string | null; model: string | null } = { provider: null, model: null }
    try {
      route = await this.route(flags)
    } catch (error) {
      if (flags.provider !== undefined || flags.model !== undefined) throw error
    }
    const agent = this.home.agents.create(`prompt-${newSessionId()}`, {
      ...(route.provider && { provider: route.provider, model: route.model! }),
      cwd,
      ...this.baseOptions(),
    })
    let registryChanged = false
    const stopWatching = this.home.on('system-prompt/change', () => {
      registryChanged = true
    })
    // The two assemblies are compared here: the check itself would throw (or log) at the second one.
    const restoreCheck = this.home.systemPrompt.enforceStability('off')
    try {
      const first = await this.home.systemPrompt.assemble({ agent, scope: agent })
      const assembly = await this.home.systemPrompt.assemble({ agent, scope: agent })
      const rendered = renderContextSections(assembly)
      const texts = new Map(rendered.map(section => [section.name, section.text]))
      return {
        cwd,
        ...route,
        system: renderPrompt(assembly),
        tools: assembly.tools.map(({ name, description, owner, parameters }) => ({ name, description, owner, parameters })),
        runtimeContext: joinContextSections(rendered),
        sections: assembly.sections.map(({ name, order, owner, stability }) => ({ name, order, owner, stability })),
        contexts: assembly.contexts.map(({ name, order, owner }) => ({ name, order, owner, text: texts.get(name) ?? '' })),
        manifest: buildManifest({ assembly }),
        omitted: assembly.omitted ?? [],
        unstable: registryChanged ? [] : findInstabilities(first, assembly),
      }
    } finally {
      stopWatching()
      restoreCheck()
      await agent.dispose()
    }
  }

  /** `loom sessions compact ID`: resumes the session's agent and compacts it now (needs @loom/compaction). */
  async compactSession(id: string, flags: RouteFlags = {}): Promise<CompactReport> {
    this.compaction()
    this.persistence()
    const agent = await this.home.agents.resume(id, { ...(await this.resumeRoute(id, flags)).route, ...this.baseOptions() })
    try {
      return await this.compact(agent)
    } finally {
      await agent.dispose()
    }
  }

  /** Compacts the session of a live agent now (`/compact` in a conversation; needs @loom/compaction). */
  async compact(agent: Agent): Promise<CompactReport> {
    const compaction = this.compaction()
    // A stop signal cancels the summary call; the compaction then ends with its error.
    this.active = agent
    try {
      const result = await compaction.compactNow(agent)
      await this.home.sessions.flush(agent.session)
      return {
        id: agent.session.id,
        status: result.status,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
        pruned: result.prune.pruned.length,
        summarized: result.status === 'compacted' ? result.shadowedSeqs!.length : 0,
        reason: result.reason ?? null,
      }
    } finally {
      this.active = undefined
      this.cancelled = undefined
    }
  }

  private compaction(): Compaction {
    const compaction = this.home.get('compaction') as Compaction | undefined
    if (!compaction) {
      throw new UsageError("this deployment has no compaction: add the row `- id: compaction\n    name: '@loom/compaction'` to use `loom sessions compact`")
    }
    return compaction
  }

  /** The session store; a usage error when the deployment has none. */
  persistence() {
    const persistence = this.home.get('sessionPersistence')
    if (!persistence) throw new UsageError(NO_STORE)
    return persistence
  }
}

export default Runner

/** The route a stored session goes on with: one switched to after its last request (see `Agent.switchRoute`), else its last request's. */
function routeOf(events: readonly SessionEvent[]): { provider: string; model: string } | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]
    if (event.type === 'agent/route') return { provider: event.data.provider, model: event.data.model }
    if (event.type === 'request/header') break
  }
  return lastRoute(events)
}

/**
 * A new id that `taken` does not know (the agents of this process): a busy `loom serve` starts hundreds of
 * sessions a second, and the ids of one second differ in three random bytes only.
 */
export function freshSessionId(taken: (id: string) => boolean, mint: () => string = newSessionId): string {
  let id = mint()
  while (taken(id)) id = mint()
  return id
}

/** Session ids sort by creation time: `20261129-134221-k3f9`. */
export function newSessionId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)
  return `${stamp}-${randomBytes(3).toString('hex')}`
}
