import { Compaction, type CompactionConfig } from './compaction.ts'
import type { ToolResultPruner } from './pruner.ts'

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
  budgetStub,
  measureContent,
  PRUNE_MARKER,
  PRUNE_MARKER_LENGTH,
  PRUNER_DEFAULTS,
  pruneContent,
  prunerConfig,
  pruneSession,
  pruneToBudget,
  ToolResultPruner,
  type PrunedResult,
  type PruneReport,
  type PrunerConfig,
} from './pruner.ts'
export { balancedCuts, chooseCut, surfaceNodes, type SurfaceNode } from './surface.ts'

export type Config = CompactionConfig
export const Config = Compaction.Config

declare module '@deepseek-ai/cordis' {
  interface Context {
    compaction: Compaction
    toolResultPruner: ToolResultPruner
  }
}

export default Compaction
