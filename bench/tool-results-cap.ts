// The tool-results cap and the provider's cache: the 30-step session of
// `cache-economics` (29 file reads of about 1.6k characters each) through the
// DeepSeek adapter and the loopback server of `provider-cache`, with
// `@loom/compaction` keeping the history's tool results within a cap of a third
// of their total. Three runs:
//
// - no cap: the reference;
// - just enough (`toolResultsLowWater: 1`): each crossing stubs just enough old
//   results to fit again, so once the cap is reached nearly every step rewrites
//   the history (how the cap worked before low-water marks);
// - low-water (the default): a crossing stubs old results down to the mark, and
//   the history stays as it is until the next crossing.
//
// A history rewrite is a request that does not extend the previous one (its
// prefix reuse is below 1): the provider's cache stops at the first changed byte.
import Compaction, { measureContent, type Config as CompactionConfig } from '../plugins/compaction/src/index.ts'
import { isReplacementSurfaceEvent, reconstructRequests, requestEconomics, type SessionEvent } from '../packages/session/src/index.ts'
import { STEPS } from '../packages/agent-loop/bench/cache-economics.ts'
import { deepseekRun } from './provider-cache.ts'

export interface ToolResultsCapFigure {
  bench: 'tool-results cap'
  pruning: 'no cap' | 'just enough' | 'low-water'
  /** `toolResultsLowWater` as the plugin ran with it. */
  low_water: number | null
  cap_chars: number | null
  results_chars: number
  requests: number
  history_rewrites: number
  stubbed_results: number
  reported_input_tokens: number
  reported_hit_share: number
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits

/** Σ code points of the tool results the session produced (the originals, not their replacements). */
function resultsChars(events: readonly SessionEvent[]): number {
  let total = 0
  for (const event of events) {
    if (event.type === 'tool/result' && !isReplacementSurfaceEvent(event))
      total += measureContent((event as SessionEvent<'tool/result'>).data.message.content[0].content)
  }
  return total
}

/** One run; `config` of `@loom/compaction` (loaded only with a cap). */
async function play(pruning: ToolResultsCapFigure['pruning'], cap: number | null, config: Partial<CompactionConfig> = {}): Promise<ToolResultsCapFigure> {
  let lowWater: number | null = null
  const events =
    cap === null
      ? await deepseekRun()
      : await deepseekRun({ persona: '', budgets: { categories: { 'tool-results': { cap } } } }, async root => {
          await root.plugin(Compaction, { auto: false, ...config } as CompactionConfig)
          lowWater = root.compaction.config.toolResultsLowWater
        })
  const { requests, totals } = requestEconomics(reconstructRequests(events))
  if (totals.reported?.requests !== STEPS)
    throw new Error(`tool-results cap (${pruning}): the server reported usage for ${totals.reported?.requests ?? 0} of ${STEPS} requests`)
  return {
    bench: 'tool-results cap',
    pruning,
    low_water: lowWater,
    cap_chars: cap,
    results_chars: resultsChars(events),
    requests: requests.length,
    history_rewrites: requests.filter(row => row.reuse !== null && row.reuse < 1).length,
    stubbed_results: events.filter(event => event.type === 'compaction/prune').length,
    reported_input_tokens: totals.reported?.inputTokens ?? 0,
    reported_hit_share: round(totals.reported?.hitShare ?? 0, 4),
  }
}

export async function benchToolResultsCap(): Promise<ToolResultsCapFigure[]> {
  const reference = await play('no cap', null)
  const cap = Math.round(reference.results_chars / 3)
  return [reference, await play('just enough', cap, { toolResultsLowWater: 1 }), await play('low-water', cap)]
}
