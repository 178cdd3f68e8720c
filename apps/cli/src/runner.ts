// The runner: the CLI's own plugin (row `runner`). It picks the model route,
// creates the agent for the working directory and serves the commands: one
// headless turn (`run`, `sessions resume`), the next request (`prompt`), and the
// stored sessions (`sessions list|show|verify|repair`).
import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Agent } from '@loom/agent-loop'
import { buildManifest, type Manifest } from '@loom/agent-loop'
import { userText, type AssistantMessage, type TokenUsage, type ToolResultMessage } from '@loom/llm'
import type { SessionEvent, SessionEventMap, SessionHeader, TurnEndReason } from '@loom/session'
import { DEFAULT_CACHE_PRICES, MODEL_PRICES, reconstructRequests, requestEconomics, type CachePrices, type SessionEconomics } from '@loom/session'
import { joinContextSections, renderContextSections, renderPrompt } from '@loom/system-prompt'
import { randomBytes } from 'node:crypto'
import { assistantText, describeCall, describeReason, describeResult, describeRetry, parseArguments, resultOf, transcript } from './describe.ts'
import { DurableOutput } from './durable.ts'
import { PromptError, UsageError } from './errors.ts'
import { processIo, Spinner, styler, type Io } from './term.ts'
import type {} from '@loom/session-jsonl'
import type { Compaction, CompactionStatus } from '@loom/compaction'

export const name = '@loom/cli/runner'

export interface RunnerConfig {
  /** Route to use; default: the first of `preference` the deployment serves. */
  provider?: string
  /** Model to use; default: `models[provider]`, else the first model the provider lists. */
  model?: string
  preference: string[]
  models: Record<string, string>
  /** Per-turn budgets (flags win): model requests, input tokens, US dollars. */
  limits: { maxSteps?: number; maxInputTokens?: number; maxCostUsd?: number }
  /** USD per million tokens by model id, over the built-in list prices. */
  prices: Record<string, CachePrices>
}

const Prices = Schema.object({
  hit: Schema.number().min(0).required().description('Per million input tokens served from the prompt cache.'),
  miss: Schema.number().min(0).required().description('Per million input tokens not in the cache.'),
  output: Schema.number().min(0).required().description('Per million output tokens.'),
})

export const Config: Schema<RunnerConfig> = Schema.object({
  provider: Schema.string().description('The provider route to use (flag --provider wins). Default: the first of `preference` that the deployment serves.'),
  model: Schema.string().description('The model to use (flag --model wins). Default: `models[provider]`, else the first model the provider lists.'),
  preference: Schema.array(Schema.string()).default(['deepseek', 'anthropic', 'openai', 'scripted']).description('Provider routes in order of preference.'),
  models: Schema.dict(Schema.string()).default({}).description('Default model per provider route.'),
  limits: Schema.object({
    maxSteps: Schema.natural().min(1).description('Model requests per turn (flag --max-steps); default: the agent loop\'s maxSteps (50).'),
    maxInputTokens: Schema.natural().min(1).description('Input tokens per turn, as the provider reports them (flag --max-input-tokens).'),
    maxCostUsd: Schema.number().min(0).description('US dollars per turn at the model\'s prices (flag --max-cost).'),
  }).default({}).description('Per-turn budgets: the turn ends, with that reason in the log, before the request that would pass one.'),
  prices: Schema.dict(Prices).default({}).description('USD per million tokens by model id (`deepseek-flash` and `deepseek-v4-pro` are built in at peak list prices), for costs and --max-cost.'),
})

export interface RouteFlags { provider?: string; model?: string }

export interface RunFlags extends RouteFlags {
  json?: boolean
  /** Working directory of the agent (default: process.cwd()). */
  cwd?: string
  /** Print the model's reasoning as it streams, dimmed. */
  showReasoning?: boolean
  /** `off` sends reasoning effort `off`; `on` the route's default effort. */
  thinking?: 'on' | 'off'
  reasoningEffort?: string
  maxSteps?: number
  maxInputTokens?: number
  maxCostUsd?: number
}

export interface ToolCallReport {
  id: string
  name: string
  arguments: unknown
  isError: boolean | null
  result: string | null
  errorCode?: string
}

/** What `loom run --json` prints. */
export interface RunReport {
  sessionId: string
  status: TurnEndReason['kind'] | 'not-started'
  reason: unknown
  text: string
  toolCalls: ToolCallReport[]
  usage: Required<TokenUsage>
  /** Cache reads over all input tokens, as the provider reported them; null without usage. */
  cacheHitShare: number | null
  /** Estimated US dollars at the model's prices (an upper bound where off-peak hours bill less). */
  costUsd: number
  provider: string
  model: string
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
}

export interface SessionSummary {
  id: string
  createdAt: number
  cwd: string | null
  turns: number
  events: number
  lastStatus: string | null
}

/** What `loom sessions stats --json` prints: prefix reuse and estimated cost of every request of a stored session. */
export interface StatsReport extends SessionEconomics {
  id: string
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

declare module '@deepseek-ai/cordis' {
  interface Context {
    runner: Runner
  }
}

const EXIT_INTERRUPTED = 130

/** What turns on each route of the default bundle. */
const ROUTE_VARIABLES: Record<string, string> = {
  deepseek: 'DEEPSEEK_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
  openai: 'OPENAI_BASE_URL and OPENAI_API_KEY',
}

/**
 * The commands of the `loom` CLI, as a service (ctx key `runner`). The agents it
 * creates belong to it: unloading the runner disposes them.
 */
export class Runner extends Service {
  static readonly inject = ['agents', 'llm', 'sessions', 'systemPrompt', 'tools']
  static readonly Config = Config

  private readonly home: Context
  readonly config: RunnerConfig
  private active: Agent | undefined
  private cancelled = false

  constructor(ctx: Context, config: RunnerConfig) {
    super(ctx, 'runner')
    this.home = ctx
    this.config = config
  }

  /** The route a command uses: flags, then config, then the first preferred provider the deployment serves. */
  async route(flags: RouteFlags = {}): Promise<{ provider: string; model: string }> {
    const available = this.home.llm.listProviders().map(provider => provider.id)
    const wanted = flags.provider ?? this.config.provider
    let provider: string | undefined
    if (wanted !== undefined) {
      if (!available.includes(wanted)) {
        throw new UsageError(`provider "${wanted}" is not served by this deployment (available: ${available.join(', ') || 'none'})`
          + (ROUTE_VARIABLES[wanted] ? `; set ${ROUTE_VARIABLES[wanted]} to enable it` : ''))
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

  /** Cancels the running turn (SIGINT). */
  cancel(): void {
    this.cancelled = true
    this.active?.cancel({ kind: 'user' })
  }

  /** `loom run`: one headless turn on a new agent for the working directory. */
  async run(task: string, flags: RunFlags = {}, io: Io = processIo): Promise<number> {
    const route = await this.route(flags)
    const cwd = flags.cwd ?? process.cwd()
    const agent = this.home.agents.create(newSessionId(), { ...route, cwd, ...this.agentOptions(route.model, flags) })
    return this.turn(agent, task, route, flags, io)
  }

  /** `loom sessions resume ID`: a new turn on a stored session, printed like `run`. */
  async resume(id: string, task: string, flags: RunFlags = {}, io: Io = processIo): Promise<number> {
    const persistence = this.persistence()
    let options: RouteFlags = {}
    const available = this.home.llm.listProviders().map(provider => provider.id)
    if (flags.provider !== undefined || flags.model !== undefined) {
      options = await this.route(flags)
    } else {
      const stored = await persistence.inspect(id)
      const last = lastRoute(stored.events)
      // The route the session used, if this deployment still serves it; else the default route.
      if (!last || !available.includes(last.provider)) options = await this.route()
    }
    const model = options.model ?? lastRoute((await persistence.inspect(id)).events)?.model ?? ''
    const agent = await this.home.agents.resume(id, { ...options, ...this.agentOptions(model, flags) })
    const route = { provider: agent.options.provider ?? '', model: agent.options.model ?? '' }
    return this.turn(agent, task, route, flags, io)
  }

  /** USD per million tokens for `model`: the config's, else the built-in list prices, else deepseek-flash's. */
  prices(model: string): CachePrices {
    return this.config.prices[model] ?? MODEL_PRICES[model] ?? DEFAULT_CACHE_PRICES
  }

  /** The reasoning effort and the per-turn limits of a run: flags over config. */
  private agentOptions(model: string, flags: RunFlags) {
    if (flags.thinking === 'off' && flags.reasoningEffort !== undefined && flags.reasoningEffort !== 'off') {
      throw new UsageError(`--thinking off contradicts --reasoning-effort ${flags.reasoningEffort}`)
    }
    const reasoningEffort = flags.thinking === 'off' ? 'off' : flags.reasoningEffort
    const configured = this.config.limits
    const limits = {
      maxSteps: flags.maxSteps ?? configured.maxSteps,
      maxInputTokens: flags.maxInputTokens ?? configured.maxInputTokens,
      maxCostUsd: flags.maxCostUsd ?? configured.maxCostUsd,
      prices: this.prices(model),
    }
    return { ...(reasoningEffort !== undefined && { reasoningEffort }), limits }
  }

  private async turn(agent: Agent, task: string, route: { provider: string; model: string }, flags: RunFlags, io: Io): Promise<number> {
    const session = agent.session
    const from = session.events.length
    const json = flags.json === true
    const out = styler(io.stdout)
    const spinner = new Spinner(io.stderr, !json && Boolean(io.stderr.isTTY))
    let atLineStart = true
    let streamedText = false
    /** What the last streamed delta was: reasoning is set apart from the answer by a line break. */
    let streaming: 'text' | 'reasoning' | undefined
    const write = (text: string) => {
      if (!text) return
      spinner.stop()
      io.stdout.write(text)
      atLineStart = text.endsWith('\n')
    }
    const line = (text: string) => write((atLineStart ? '' : '\n') + text + '\n')
    const showReasoning = flags.showReasoning === true

    // What presents something as done waits for the disk (see durable.ts).
    const shown = new DurableOutput(this.home.get('sessionPersistence') !== undefined)
    const stopDurable = this.home.on('session/durable', (id, seq) => {
      if (id === session.id) shown.durable(seq)
    })
    const stopEvents = json ? () => {} : this.home.on('session/event', (target, event) => {
      if (target !== session) return
      switch (event.type) {
        case 'step/start':
          shown.live(() => spinner.start('thinking'))
          break
        case 'assistant/chunk': {
          const { chunk } = event.data as SessionEventMap['assistant/chunk']
          if (chunk.type === 'text-delta') {
            shown.live(() => {
              if (streaming === 'reasoning' && !atLineStart) write('\n')
              write(chunk.text)
              streamedText = true
              streaming = 'text'
            })
          } else if (chunk.type === 'reasoning-delta' && showReasoning) {
            shown.live(() => {
              if (streaming === 'text' && !atLineStart) write('\n')
              write(out.dim(chunk.text))
              streaming = 'reasoning'
            })
          }
          break
        }
        case 'assistant/message':
          shown.done(event.seq, () => {
            if (!atLineStart) write('\n')
            streaming = undefined
          })
          break
        case 'request/retry': {
          // What the failed attempt streamed is not part of the answer: the retry repeats the request.
          const retry = event.data as SessionEventMap['request/retry']
          shown.live(() => {
            line(out.yellow(`${streaming ? '(that partial answer is discarded) ' : ''}${describeRetry(retry)}`))
            streaming = undefined
            spinner.start('waiting to retry')
          })
          break
        }
        case 'tool/call': {
          const { name, arguments: raw } = event.data as SessionEventMap['tool/call']
          shown.live(() => {
            line(out.cyan(`→ ${describeCall(name, raw)}`))
            spinner.start(`running ${name}`)
          })
          break
        }
        case 'tool/result': {
          const { message } = event.data as SessionEventMap['tool/result']
          const { ok, summary } = describeResult(message)
          shown.done(event.seq, () => {
            line(out.dim(`  ${ok ? out.green('✓') : out.red('✗')} ${summary}`))
            spinner.start('thinking')
          })
          break
        }
        case 'turn/end':
          shown.done(event.seq, () => spinner.stop())
          break
      }
    })
    const stopListening = () => {
      stopEvents()
      stopDurable()
    }

    // A prompt that cannot assemble (an unknown {{variable}}, a step variable in the
    // system text) fails here, naming the section and plugin, before anything is logged.
    try {
      const assembly = await this.home.systemPrompt.assemble({ agent, scope: agent })
      renderPrompt(assembly)
      renderContextSections(assembly)
    } catch (error) {
      stopListening()
      await agent.dispose()
      throw new PromptError(`the prompt does not assemble: ${(error as Error).message}`)
    }

    this.active = agent
    let reason: TurnEndReason | undefined
    try {
      agent.followup(userText(task))
      // A stop signal that came while the deployment booted still stops this turn.
      if (this.cancelled) agent.cancel({ kind: 'user' })
      await agent.idle()
    } finally {
      this.active = undefined
      try {
        // Once this resolves every event is on disk, and the last waiting lines are shown.
        await this.home.sessions.flush(session)
      } finally {
        spinner.stop()
        stopListening()
      }
    }
    const events = session.events.slice(from)
    for (const event of events) if (event.type === 'turn/end') reason = (event.data as SessionEventMap['turn/end']).reason
    const report = runReport(session.id, route, events, reason, this.prices(route.model))
    // Disposing the agent detaches its session; the backend writes what is left.
    await agent.dispose()

    if (json) {
      io.stdout.write(JSON.stringify(report, null, 2) + '\n')
    } else {
      if (!atLineStart) write('\n')
      if (!streamedText && report.text) line(report.text)
      const err = styler(io.stderr)
      if (report.status !== 'completed') {
        io.stderr.write(err.red(`loom: the turn ended: ${reason ? describeReason(reason) : 'it did not start'}`) + '\n')
      }
      io.stderr.write(err.dim(`session ${session.id} · ${route.provider}/${route.model} · ${describeUsage(report)}`) + '\n')
    }
    if (report.status === 'completed') return 0
    return this.cancelled && report.status === 'aborted' ? EXIT_INTERRUPTED : 1
  }

  /** `loom prompt`: the request the deployment would send next for a new agent in `cwd`, without calling a model. */
  async prompt(flags: RunFlags = {}): Promise<PromptReport> {
    const cwd = flags.cwd ?? process.cwd()
    let route: { provider: string | null; model: string | null } = { provider: null, model: null }
    try {
      route = await this.route(flags)
    } catch (error) {
      if (flags.provider !== undefined || flags.model !== undefined) throw error
    }
    const agent = this.home.agents.create(`prompt-${newSessionId()}`, { ...(route.provider && { provider: route.provider, model: route.model! }), cwd })
    try {
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
      }
    } finally {
      await agent.dispose()
    }
  }

  private persistence() {
    const persistence = this.home.get('sessionPersistence')
    if (!persistence) {
      throw new UsageError('this deployment stores no sessions: add a session persistence row (@loom/session-jsonl) to use `loom sessions`')
    }
    return persistence
  }

  /** Every stored session, oldest first, with its turn count. */
  async listSessions(): Promise<SessionSummary[]> {
    const persistence = this.persistence()
    const headers = await persistence.list()
    return Promise.all(headers.map(async (header: SessionHeader) => {
      try {
        const { events } = await persistence.inspect(header.id)
        let lastStatus: string | null = null
        for (const event of events) if (event.type === 'turn/end') lastStatus = (event.data as SessionEventMap['turn/end']).reason.kind
        return { id: header.id, createdAt: header.createdAt, cwd: header.cwd ?? null, turns: events.filter(event => event.type === 'turn/start').length, events: events.length, lastStatus }
      } catch (error) {
        return { id: header.id, createdAt: header.createdAt, cwd: header.cwd ?? null, turns: -1, events: -1, lastStatus: `unreadable: ${(error as Error).message}` }
      }
    }))
  }

  /** The session as a readable transcript (as `load` would see it, without writing). */
  async showSession(id: string): Promise<{ text: string; meta: SessionHeader; events: readonly SessionEvent[] }> {
    const { meta, events } = await this.persistence().inspect(id)
    return { text: transcript(meta, events), meta, events }
  }

  /**
   * Every request of a stored session, rebuilt from its log: the share of the
   * previous request's serialization each one reuses as its prefix, and its
   * estimated cost at these prices (per million tokens).
   */
  async statsSession(id: string, overrides: Partial<CachePrices> = {}): Promise<StatsReport> {
    const { events } = await this.persistence().inspect(id)
    const model = lastRoute(events)?.model
    const prices = { ...(model === undefined ? DEFAULT_CACHE_PRICES : this.prices(model)), ...overrides }
    return { id, ...requestEconomics(reconstructRequests(events), prices) }
  }

  /** Checks a stored log without writing: a torn tail, an open turn, corruption. */
  async verifySession(id: string): Promise<VerifyReport> {
    const persistence = this.persistence()
    const path = await persistence.files.find(id)
    if (!path) throw new UsageError(`session "${id}" not found in ${persistence.files.root}`)
    try {
      const log = await persistence.files.read(path, id)
      // `inspect` also validates the log as one Session would hold it.
      await persistence.inspect(id)
      const tornBytes = log.fileBytes - log.committedBytes
      // The closers end unfinished compactions first, then close the open turn.
      const compactionEnds = log.closers.filter(event => event.type === 'compaction/end') as SessionEvent<'compaction/end'>[]
      const turnClosers = log.closers.filter(event => event.type !== 'compaction/end')
      const openTurn = turnClosers.length ? { turn: openTurnOf(log.events), closers: turnClosers.map(describeCloser) } : null
      const unfinishedCompactions = compactionEnds.map(({ data }) => ({ compactionId: data.compactionId, turn: data.turn }))
      const clean = tornBytes === 0 && !openTurn && !unfinishedCompactions.length
      return { id, path, clean, events: log.events.length, tornBytes, openTurn, unfinishedCompactions, corruption: null }
    } catch (error) {
      return { id, path, clean: false, events: 0, tornBytes: 0, openTurn: null, unfinishedCompactions: [], corruption: (error as Error).message }
    }
  }

  /** Repairs a stored log on disk (`load`): cuts a torn tail, closes an open turn. */
  async repairSession(id: string): Promise<{ before: VerifyReport; after: VerifyReport }> {
    const before = await this.verifySession(id)
    if (before.corruption) return { before, after: before }
    await this.persistence().load(id)
    return { before, after: await this.verifySession(id) }
  }

  /** `loom sessions compact ID`: resumes the session's agent and compacts it now (needs @loom/compaction). */
  async compactSession(id: string, flags: RouteFlags = {}): Promise<CompactReport> {
    const compaction = this.home.get('compaction') as Compaction | undefined
    if (!compaction) {
      throw new UsageError('this deployment has no compaction: add the row `- id: compaction\n    name: \'@loom/compaction\'` to use `loom sessions compact`')
    }
    const persistence = this.persistence()
    let options: RouteFlags = {}
    if (flags.provider !== undefined || flags.model !== undefined) {
      options = await this.route(flags)
    } else {
      const last = lastRoute((await persistence.inspect(id)).events)
      if (!last || !this.home.llm.listProviders().some(provider => provider.id === last.provider)) options = await this.route()
    }
    const agent = await this.home.agents.resume(id, options)
    // A stop signal cancels the summary call; the compaction then ends with its error.
    this.active = agent
    try {
      const result = await compaction.compactNow(agent)
      await this.home.sessions.flush(agent.session)
      return {
        id,
        status: result.status,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
        pruned: result.prune.pruned.length,
        summarized: result.status === 'compacted' ? result.shadowedSeqs!.length : 0,
        reason: result.reason ?? null,
      }
    } finally {
      this.active = undefined
      await agent.dispose()
    }
  }
}

Object.defineProperty(Runner, 'name', { value: name })

export default Runner

/** Session ids sort by creation time: `20261129-134221-k3f9`. */
export function newSessionId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)
  return `${stamp}-${randomBytes(3).toString('hex')}`
}

function lastRoute(events: readonly SessionEvent[]): { provider: string; model: string } | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]
    if (event.type === 'request/header') return (event.data as SessionEventMap['request/header']).header.config
  }
  return undefined
}

function openTurnOf(events: readonly SessionEvent[]): number {
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === 'turn/start') return (events[i].data as SessionEventMap['turn/start']).turn
  }
  return 0
}

function describeCloser(event: SessionEvent): string {
  if (event.type === 'tool/result') {
    const { message, error } = event.data as SessionEventMap['tool/result']
    return `error result for tool call ${message.content[0].toolCallId}${error ? ` (${error.code})` : ''}`
  }
  if (event.type === 'turn/end') return `turn/end (${(event.data as SessionEventMap['turn/end']).reason.kind})`
  return event.type
}

export function runReport(sessionId: string, route: { provider: string; model: string }, events: readonly SessionEvent[], reason: TurnEndReason | undefined,
  prices: CachePrices = DEFAULT_CACHE_PRICES): RunReport {
  const usage: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }
  const calls = new Map<string, ToolCallReport>()
  let text = ''
  for (const event of events) {
    if (event.type === 'assistant/message') {
      const data = event.data as SessionEventMap['assistant/message']
      const said = assistantText(data.message as AssistantMessage)
      if (said.trim()) text = said
      for (const key of Object.keys(usage) as (keyof TokenUsage)[]) usage[key] += data.usage?.[key] ?? 0
    } else if (event.type === 'tool/call') {
      const data = event.data as SessionEventMap['tool/call']
      calls.set(data.callId, { id: data.callId, name: data.name, arguments: parseArguments(data.arguments), isError: null, result: null })
    } else if (event.type === 'tool/result') {
      const data = event.data as SessionEventMap['tool/result']
      const message = data.message as ToolResultMessage
      const call = calls.get(message.content[0].toolCallId)
      if (call) {
        const { text: result, isError } = resultOf(message)
        call.result = result
        call.isError = isError
        if (data.error) call.errorCode = data.error.code
      }
    }
  }
  const detail = reason?.kind === 'error' ? reason.error : reason?.kind === 'aborted' ? reason.reason : reason?.kind === 'limit' ? reason : null
  const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
  const costUsd = (usage.cacheReadTokens * prices.hit + (input - usage.cacheReadTokens) * prices.miss + usage.outputTokens * prices.output) / 1e6
  return {
    sessionId, status: reason?.kind ?? 'not-started', reason: detail, text, toolCalls: [...calls.values()], usage,
    cacheHitShare: input ? usage.cacheReadTokens / input : null, costUsd, ...route,
  }
}

/** `8194 in (6144 cached, 75%) / 216 out tokens · ~$0.0012` */
export function describeUsage(report: RunReport): string {
  const { usage } = report
  const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
  const cached = report.cacheHitShare === null ? '' : ` (${usage.cacheReadTokens} cached, ${Math.round(report.cacheHitShare * 100)}%)`
  return `${input} in${cached} / ${usage.outputTokens} out tokens · ~$${report.costUsd.toFixed(4)}`
}

