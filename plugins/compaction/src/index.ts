import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/agent-loop'
import { Compaction, type CompactionConfig } from './compaction.ts'
import { PRUNER_DEFAULTS, prunerConfig, ToolResultPruner } from './pruner.ts'

export {
  Compaction,
  COMPACTION_PLUGIN,
  isSummary,
  OVERFLOW_CODES,
  SUMMARY_INSTRUCTION,
  SUMMARY_PREAMBLE,
  SUMMARY_SECTIONS,
  type CompactionConfig,
  type CompactionResult,
  type CompactionStatus,
  type Pressure,
  type RequestErrorPayload,
} from './compaction.ts'
export {
  measureContent,
  PRUNE_MARKER,
  PRUNE_MARKER_LENGTH,
  PRUNER_DEFAULTS,
  pruneContent,
  prunerConfig,
  pruneSession,
  ToolResultPruner,
  type PrunedResult,
  type PruneReport,
  type PrunerConfig,
} from './pruner.ts'
export { balancedCuts, chooseCut, surfaceNodes, type SurfaceNode } from './surface.ts'

export const name = '@loom/compaction'
export const inject = ['llm']

declare module '@deepseek-ai/cordis' {
  interface Context {
    compaction: Compaction
    toolResultPruner: ToolResultPruner
  }
}

export type Config = CompactionConfig

const ratio = (fallback: number) => Schema.number().min(0).max(1).default(fallback)

export const Config: Schema<Config> = Schema.object({
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
}) as Schema<Config>

/**
 * Provides `ctx.toolResultPruner` and `ctx.compaction`; (with `auto`) checks
 * the projected prompt of every agent before each step, and compacts then
 * retries after a context-overflow failure (`agent/request-error`).
 */
export function apply(ctx: Context, config: Config) {
  if (!(config.thresholdRatio > 0)) throw new Error(`@loom/compaction: thresholdRatio must be > 0, got ${config.thresholdRatio}`)
  const pruner = new ToolResultPruner(prunerConfig({ ...config.pruner }))
  const compaction = new Compaction(ctx, { ...config, pruner: pruner.config })
  ctx.provide('toolResultPruner', pruner)
  ctx.provide('compaction', compaction)
  if (config.auto) {
    ctx.on('agent/pre-step', async (payload, next) => {
      await compaction.preStep(payload)
      return next()
    })
  }
  ctx.on('agent/request-error', async (payload, next) => {
    if (await compaction.requestError(payload)) return { kind: 'retry' }
    return next()
  })
}
