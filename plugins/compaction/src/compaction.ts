// Summary compaction (agent-session-spec 4.4): when the projected prompt passes
// a share of the context window, prune large tool results; if that is not
// enough, summarize the older part of the history through one model call and
// replace it on the surface with the summary. The log itself only grows.
import { type Context, type Logger, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Agent } from '@loom/agent-loop'
import {
  BlockAssembler,
  createUserMessage,
  errorChain,
  estimateHeader,
  estimateMessage,
  type ContentBlock,
  type GenerateOptions,
  type LlmCallConfig,
  type Message,
  type TokenUsage,
  type UserMessage,
} from '@loom/llm'
import { serviceLookup } from '@loom/scope'
import { isReplacementSurfaceEvent, type RequestHeader, type Session } from '@loom/session'
import { PRUNER_DEFAULTS, prunerConfig, pruneSession, pruneToBudget, ToolResultPruner, type PruneReport, type PrunerConfig } from './pruner.ts'
import { chooseCut, surfaceNodes, type SurfaceNode } from './surface.ts'

export const COMPACTION_PLUGIN = '@loom/compaction'

/** The fixed sections every summary has, in order. */
export const SUMMARY_SECTIONS = [
  'Primary Request',
  'Key Concepts',
  'Files and Code',
  'Errors and Fixes',
  'Pending Jobs',
  'Current Work',
  'Next Step',
  'Critical Context',
] as const

export const SUMMARY_INSTRUCTION = [
  'The conversation above is about to be replaced by a summary, because the context window is filling up.',
  'Write that summary now. It is all that will remain of the conversation above, so keep every fact, decision, file path, identifier, error and open task that the work still needs; drop chit-chat and anything superseded.',
  'Do not call tools. Answer with Markdown and exactly these sections, in this order:',
  '',
  ...SUMMARY_SECTIONS.map(section => `## ${section}`),
].join('\n')

export const SUMMARY_PREAMBLE =
  'This session was compacted: the earlier part of the conversation was replaced by the summary below. ' +
  'Continue the work from it; the messages after it are the most recent part of the conversation, unchanged.'

export interface CompactionConfig {
  auto: boolean
  thresholdRatio: number
  retainRatio: number
  retainTokens?: number
  contextWindow?: number
  maxTokens: number
  summarizationProvider: string
  summarizationModel: string
  /** Recoveries from a context-overflow failure (`agent/request-error`) allowed per step. */
  maxOverflowRetries: number
  /** Share of the prompt row's tool-results cap that a crossing of the cap prunes down to. */
  toolResultsLowWater: number
  pruner: PrunerConfig
}

const ratio = (fallback: number) => Schema.number().min(0).max(1).default(fallback)

const CompactionSchema: Schema<CompactionConfig> = Schema.object({
  auto: Schema.boolean().default(true).description('Compact automatically before a step whose projected prompt passes `thresholdRatio` of the context window.'),
  thresholdRatio: ratio(0.8).description('Share of the context window the projected prompt may fill before compaction starts.'),
  retainRatio: ratio(0.16).description('Share of the history (in estimated tokens) kept verbatim after a summary: the most recent part.'),
  retainTokens: Schema.natural().description('Absolute number of recent history tokens to keep; overrides `retainRatio`.'),
  contextWindow: Schema.natural().min(1).description('Context window (tokens) when the model route reports none.'),
  maxTokens: Schema.natural().min(1).default(8192).description('Output cap of the summary call.'),
  summarizationProvider: Schema.string().default('').description("Provider of the summary call; empty: the route the session used last, else the agent's."),
  summarizationModel: Schema.string().default('').description('Model of the summary call; empty: as for the provider.'),
  maxOverflowRetries: Schema.natural()
    .default(1)
    .description('Compactions (then a retry of the request) after a context-overflow failure, per step; 0 turns the reaction off.'),
  toolResultsLowWater: ratio(0.5).description(
    "When the history's tool results pass the prompt row's tool-results cap, the oldest are stubbed until they fill at most this share of it; 1 stubs just enough (then nearly every step rewrites the history).",
  ),
  pruner: Schema.object({
    thresholdChars: Schema.natural()
      .min(1)
      .default(PRUNER_DEFAULTS.thresholdChars)
      .description('A tool result longer than this (code points of its text) is pruned.'),
    headChars: Schema.natural().default(PRUNER_DEFAULTS.headChars).description('Code points kept from the start of a pruned result.'),
    tailChars: Schema.natural().default(PRUNER_DEFAULTS.tailChars).description('Code points kept from the end of a pruned result.'),
  })
    .default({ ...PRUNER_DEFAULTS })
    .description('The tool-result pruner.'),
}) as Schema<CompactionConfig>

/** The failure codes that mean the request did not fit the model's context window. */
export const OVERFLOW_CODES: readonly string[] = Object.freeze(['CONTEXT_OVERFLOW', 'CONTEXT_WINDOW_EXCEEDED'])

/** The `agent/request-error` payload, as far as compaction reads it. */
export interface RequestErrorPayload {
  agent: Agent
  turn: number
  step: number
  failure: { code: string; message: string }
  signal: AbortSignal
}

/** The estimated size of the next request: header, history and the input about to enter. */
export interface Pressure {
  tokens: number
  headerTokens: number
  surfaceTokens: number
  pendingTokens: number
  contextWindow: number | undefined
  threshold: number | undefined
}

export type CompactionStatus = 'compacted' | 'pruned' | 'skipped' | 'refused' | 'failed'

export interface CompactionResult {
  status: CompactionStatus
  /** Estimated request tokens before and after (header + history). */
  tokensBefore: number
  tokensAfter: number
  prune: PruneReport
  compactionId?: string
  /** Why nothing was summarized, or what went wrong. */
  reason?: string
  shadowedSeqs?: number[]
  shadowedTokenCount?: number
  summaryTokenCount?: number
  replacementSeq?: number
}

/**
 * The compaction plugin (ctx key `compaction`; its pruner is `ctx.toolResultPruner`):
 * with `auto`, checks the projected prompt of every agent before each step; after
 * a context-overflow failure (`agent/request-error`), compacts and asks for a retry.
 */
export class Compaction extends Service {
  static override readonly name = COMPACTION_PLUGIN
  static readonly inject = ['llm']
  static readonly Config = CompactionSchema

  readonly config: Readonly<CompactionConfig>
  private readonly home: Context
  private readonly logger: Logger
  /** The turn in which a session's last automatic summary was refused or failed: not retried in that turn. */
  private readonly gaveUp = new WeakMap<Session, number>()
  /** Overflow recoveries attempted in a session's current step. */
  private readonly overflows = new WeakMap<Session, { turn: number; step: number; count: number }>()
  /**
   * The estimated tokens of a session's surface, counted at its first measure and
   * then kept up with each append: a step costs the same at any length of history.
   * A replacement drops it (counted again at the next measure).
   */
  private readonly surfaceTokens = new WeakMap<Session, number>()
  /** The prompt row, whose budgets the tool results keep to (not injected: compaction runs without one). */
  private readonly promptRow: () => Context['systemPrompt'] | undefined

  constructor(ctx: Context, config: CompactionConfig) {
    super(ctx, 'compaction')
    if (!(config.thresholdRatio > 0)) throw new Error(`@loom/compaction: thresholdRatio must be > 0, got ${config.thresholdRatio}`)
    this.home = ctx
    this.promptRow = serviceLookup(ctx, 'systemPrompt')
    this.config = { ...config, pruner: prunerConfig({ ...config.pruner }) }
    this.logger = ctx.logger('compaction')
    ctx.plugin(ToolResultPruner, this.config.pruner)
    ctx.on('session/event', (session, event) => {
      const tokens = this.surfaceTokens.get(session)
      if (tokens === undefined) return
      if (isReplacementSurfaceEvent(event)) this.surfaceTokens.delete(session)
      else if (event.surfaceOp === 'append') {
        const message = session.deriveEventMessage(event)
        this.surfaceTokens.set(session, tokens + (message ? estimateMessage(message) : 0))
      }
    })
    // The tool-results category budget of the prompt row (`budgets.categories.tool-results.cap`), before every step.
    ctx.on('agent/pre-step', async (payload, next) => {
      this.keepToolResultsInBudget(payload.agent)
      return next()
    })
    if (config.auto) {
      ctx.on('agent/pre-step', async (payload, next) => {
        await this.preStep(payload)
        return next()
      })
    }
    ctx.on('agent/request-error', async (payload, next) => {
      if (await this.requestError(payload)) return { kind: 'retry' }
      return next()
    })
  }

  /** The context window for this agent: the route's, else the configured one. */
  contextWindow(agent: Agent): number | undefined {
    return agent.session.requestContext()?.contextWindow ?? this.config.contextWindow
  }

  /** The projected prompt of the agent's next request, with `pending` input about to enter. */
  measure(agent: Agent, pending: readonly Message[] = []): Pressure {
    const headerTokens = estimateHeader(agent.session.requestHeader())
    let surfaceTokens = this.surfaceTokens.get(agent.session)
    if (surfaceTokens === undefined) {
      surfaceTokens = 0
      for (const node of surfaceNodes(agent.session)) surfaceTokens += node.tokens
      this.surfaceTokens.set(agent.session, surfaceTokens)
    }
    let pendingTokens = 0
    for (const message of pending) pendingTokens += estimateMessage(message)
    const contextWindow = this.contextWindow(agent)
    return {
      tokens: headerTokens + surfaceTokens + pendingTokens,
      headerTokens,
      surfaceTokens,
      pendingTokens,
      contextWindow,
      threshold: contextWindow === undefined ? undefined : Math.floor(contextWindow * this.config.thresholdRatio),
    }
  }

  /**
   * When the history's tool results pass the prompt row's tool-results cap (if it
   * sets one), replaces the oldest down to `toolResultsLowWater` of it.
   */
  keepToolResultsInBudget(agent: Agent): PruneReport | undefined {
    const cap = this.promptRow()?.config.budgets?.categories?.['tool-results']?.cap
    if (cap === undefined) return undefined
    const report = pruneToBudget(agent.session, cap, Math.floor(cap * this.config.toolResultsLowWater))
    if (report.pruned.length)
      this.logger.debug('agent %s: %d tool results left out by the tool-results budget (%d chars)', agent.id, report.pruned.length, report.charsRemoved)
    return report
  }

  /** The `agent/pre-step` check: prune, then summarize, while the projected prompt is over the threshold. */
  async preStep(payload: { agent: Agent; messages: readonly UserMessage[]; turn: number; signal: AbortSignal }): Promise<void> {
    const { agent, messages, turn, signal } = payload
    const over = () => {
      const pressure = this.measure(agent, messages)
      return pressure.threshold !== undefined && pressure.tokens > pressure.threshold
    }
    if (!over()) return
    try {
      const prune = pruneSession(agent.session, this.config.pruner)
      if (prune.pruned.length) this.logger.debug('agent %s: pruned %d tool results (%d chars)', agent.id, prune.pruned.length, prune.charsRemoved)
      if (!over() || this.gaveUp.get(agent.session) === turn) return
      const result = await this.summarize(agent, turn, signal, prune)
      if (result.status === 'refused' || result.status === 'failed') {
        this.gaveUp.set(agent.session, turn)
        this.logger.warn('agent %s: compaction %s: %s', agent.id, result.status, result.reason)
      }
    } catch (error) {
      if (signal.aborted) throw error
      this.logger.warn('agent %s: compaction failed: %s', agent.id, errorChain(error))
    }
  }

  /**
   * The `agent/request-error` reaction to a context overflow: prunes, then
   * summarizes, and answers `true` (retry the request) only if the surface
   * changed (`replaceGeneration` advanced). At most `maxOverflowRetries`
   * attempts per step; other failure codes are not touched (`false`).
   */
  async requestError(payload: RequestErrorPayload): Promise<boolean> {
    const { agent, turn, step, failure, signal } = payload
    if (!OVERFLOW_CODES.includes(failure.code)) return false
    const session = agent.session
    const last = this.overflows.get(session)
    const count = last && last.turn === turn && last.step === step ? last.count : 0
    if (count >= this.config.maxOverflowRetries) {
      this.logger.warn(
        'agent %s: context overflow in turn %d step %d: no recovery left (maxOverflowRetries %d)',
        agent.id,
        turn,
        step,
        this.config.maxOverflowRetries,
      )
      return false
    }
    this.overflows.set(session, { turn, step, count: count + 1 })
    const before = session.surface.replaceGeneration
    try {
      const prune = pruneSession(session, this.config.pruner)
      const result = await this.summarize(agent, turn, signal, prune)
      if (result.status === 'refused' || result.status === 'failed')
        this.logger.warn('agent %s: compaction after a context overflow %s: %s', agent.id, result.status, result.reason)
    } catch (error) {
      if (signal.aborted) throw error
      this.logger.warn('agent %s: compaction after a context overflow failed: %s', agent.id, errorChain(error))
    }
    return session.surface.replaceGeneration > before
  }

  /**
   * Compacts now, between turns (`turn: null`): prunes, then summarizes whatever
   * the retain share leaves. Refused while the agent runs a turn.
   */
  async compactNow(agent: Agent): Promise<CompactionResult> {
    return agent.runMaintenance(async signal => {
      const tokensBefore = this.measure(agent).tokens
      const prune = pruneSession(agent.session, this.config.pruner)
      const result = await this.summarize(agent, null, signal, prune)
      return { ...result, tokensBefore }
    })
  }

  /** One summary compaction of the agent's surface. */
  async summarize(agent: Agent, turn: number | null, signal: AbortSignal, prune: PruneReport = { pruned: [], charsRemoved: 0 }): Promise<CompactionResult> {
    const session = agent.session
    const headerTokens = estimateHeader(session.requestHeader())
    const nodes = surfaceNodes(session)
    const surfaceTokens = nodes.reduce((sum, node) => sum + node.tokens, 0)
    const tokensBefore = headerTokens + surfaceTokens
    const base = { tokensBefore, tokensAfter: tokensBefore, prune }
    const status = prune.pruned.length ? ('pruned' as const) : ('skipped' as const)

    const retain = this.config.retainTokens ?? Math.ceil(surfaceTokens * this.config.retainRatio)
    const cut = chooseCut(nodes, retain)
    if (cut === undefined) return { ...base, status, reason: 'no balanced cut leaves the retained share' }
    const shadowed = nodes.slice(0, cut)
    if (shadowed.length === 1 && isSummary(shadowed[0].message)) return { ...base, status, reason: 'only the previous summary would be shadowed' }
    const shadowedSeqs = shadowed.map(node => node.seq)
    const shadowedTokenCount = shadowed.reduce((sum, node) => sum + node.tokens, 0)
    const range = { start: shadowedSeqs[0], end: shadowedSeqs.at(-1)! }

    const compactionId = crypto.randomUUID()
    session.append('compaction/start', { compactionId, turn })
    const end = (error?: string) => session.append('compaction/end', { compactionId, turn, ...(error !== undefined && { error }) })
    let outcome: { summary: string; usage?: TokenUsage; provider: string; model: string }
    try {
      outcome = await this.callModel(agent, shadowed, signal)
    } catch (error) {
      end(`summary failed: ${errorChain(error)}`)
      if (signal.aborted) throw error
      return { ...base, status: 'failed', compactionId, reason: `summary failed: ${errorChain(error)}` }
    }

    const replacement = createUserMessage({
      content: [{ type: 'text', text: `${SUMMARY_PREAMBLE}\n\n<compacted-summary>\n${outcome.summary}\n</compacted-summary>` }],
      source: {
        kind: 'plugin',
        plugin: COMPACTION_PLUGIN,
        form: 'notice',
        summary: `summary of ${shadowed.length} earlier messages (about ${shadowedTokenCount} tokens)`,
      },
    })
    const summaryTokenCount = estimateMessage(replacement)
    if (summaryTokenCount >= shadowedTokenCount) {
      const reason = `the summary (${summaryTokenCount} estimated tokens) is not shorter than what it replaces (${shadowedTokenCount})`
      end(reason)
      return { ...base, status: 'refused', compactionId, reason, shadowedSeqs, shadowedTokenCount, summaryTokenCount }
    }

    try {
      session.append('compaction/summary', {
        compactionId,
        summary: [{ type: 'text', text: outcome.summary }] satisfies ContentBlock[],
        shadowedRange: range,
        shadowedSeqs,
        shadowedTokenCount,
        provider: outcome.provider,
        model: outcome.model,
        ...(outcome.usage && { usage: outcome.usage }),
      })
      const event = session.append('user/message', replacement, { surfaceOp: { op: 'replace', ...range }, sourceEventSeqs: shadowedSeqs })
      end()
      const tokensAfter = headerTokens + surfaceTokens - shadowedTokenCount + summaryTokenCount
      return {
        ...base,
        tokensAfter,
        status: 'compacted',
        compactionId,
        shadowedSeqs,
        shadowedTokenCount,
        summaryTokenCount,
        replacementSeq: event.seq,
      }
    } catch (error) {
      end(`commit failed: ${errorChain(error)}`)
      throw error
    }
  }

  /** One direct model call: the same system and tools, the shadowed history, the instruction. */
  private async callModel(agent: Agent, shadowed: readonly SurfaceNode[], signal: AbortSignal) {
    const header = agent.session.requestHeader()
    const config = this.route(agent, header)
    const instruction = createUserMessage({
      content: [{ type: 'text', text: SUMMARY_INSTRUCTION }],
      source: { kind: 'plugin', plugin: COMPACTION_PLUGIN },
    })
    const request: GenerateOptions = {
      ...config,
      maxTokens: this.config.maxTokens,
      messages: [...shadowed.flatMap(node => (node.message ? [node.message] : [])), instruction],
      ...(header?.system !== undefined && { system: header.system }),
      ...(header?.tools !== undefined && { tools: header.tools }),
      sessionId: agent.session.id,
      purpose: 'compaction',
      signal,
    }
    const assembler = new BlockAssembler()
    for await (const chunk of this.home.llm.stream(request)) {
      signal.throwIfAborted()
      assembler.push(chunk)
    }
    const finish = assembler.finish
    if (finish.kind === 'error' || finish.kind === 'aborted') throw new Error(`${finish.failure.code}: ${finish.failure.message}`)
    if (finish.kind === 'max-tokens') throw new Error(`the summary hit the output limit (${this.config.maxTokens} tokens)`)
    const summary = assembler
      .blocks()
      .flatMap(block => (block.type === 'text' ? [block.text] : []))
      .join('\n')
      .trim()
    if (!summary) throw new Error('the model returned no summary text')
    return { summary, usage: assembler.usage, provider: config.provider, model: config.model }
  }

  /** The summary route: configured, else the last logged route, else the agent's. */
  private route(agent: Agent, header: RequestHeader | undefined): LlmCallConfig {
    const logged = header?.config
    const provider = this.config.summarizationProvider || logged?.provider || agent.options.provider || ''
    const model = this.config.summarizationModel || (provider === logged?.provider ? logged.model : undefined) || agent.options.model || ''
    if (!provider || !model)
      throw new Error(`no route for the summary: agent "${agent.id}" has no provider/model and none is configured (summarizationProvider, summarizationModel)`)
    if (logged && logged.provider === provider && logged.model === model) {
      const { maxTokens: _, ...rest } = logged
      if (header?.adapterDefaults?.reasoningEffort) delete rest.reasoningEffort
      return rest
    }
    return { provider, model }
  }
}

export function isSummary(message: Message | null): boolean {
  return message?.source.kind === 'plugin' && message.source.plugin === COMPACTION_PLUGIN
}
