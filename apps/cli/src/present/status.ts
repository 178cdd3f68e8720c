// The conversation's status line: the route, how full the model's context is,
// the share of input tokens served from the provider's cache, and what the
// session has cost so far. Read from the session's events, so it is the same
// after a resume; shown above the prompt and with the spinner at each step.
import { type CachePrices, type SessionEvent, usageCost } from '@loom/session'
import type { Style } from './markdown.ts'

export interface SessionStatus {
  provider: string
  model: string
  /** What the last request sent and received (input, cache reads and writes, output); null before any. */
  contextTokens: number | null
  /** The model's context window as its adapter reports it; null when unknown. */
  contextWindow: number | null
  /** Cache reads over all input tokens of the session; null before any usage. */
  cacheHitShare: number | null
  /** US dollars at each request's model's prices; null when a price is unknown (or nothing was used). */
  costUsd: number | null
}

/** The status of a session from its events, on `route` (the one its next request takes). */
export function sessionStatus(
  events: readonly SessionEvent[],
  route: { provider: string; model: string },
  prices: (provider: string, model: string) => CachePrices | null,
): SessionStatus {
  let contextTokens: number | null = null
  let contextWindow: number | null = null
  let read = 0
  let input = 0
  let cost: number | null = 0
  let used = false
  let current: { provider: string; model: string } | undefined
  for (const event of events) {
    if (event.type === 'request/context') {
      current = event.data
      contextWindow = event.data.contextWindow ?? null
    } else if (event.type === 'assistant/message' && event.data.usage) {
      const { usage } = event.data
      const sent = usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)
      contextTokens = sent + usage.outputTokens
      read += usage.cacheReadTokens ?? 0
      input += sent
      used = true
      const price = current && prices(current.provider, current.model)
      if (cost !== null && price) {
        const { input: inputCost, output } = usageCost(usage, price)
        cost += inputCost + output
      } else cost = null
    }
  }
  // A switched route's window is not known before its first request.
  if (current && (current.provider !== route.provider || current.model !== route.model)) contextWindow = null
  return { ...route, contextTokens, contextWindow, cacheHitShare: input ? read / input : null, costUsd: used ? cost : null }
}

/** `deepseek/deepseek-chat · context 12.3k of 128k tokens (10%) · cache hit 75% · $0.0123`; the parts not known yet are left out. */
export function describeStatus(status: SessionStatus, style?: Pick<Style, 'dim'>): string {
  const parts = [`${status.provider}/${status.model}`]
  if (status.contextTokens !== null) {
    parts.push(
      status.contextWindow
        ? `context ${describeTokens(status.contextTokens)} of ${describeTokens(status.contextWindow)} tokens (${Math.round((100 * status.contextTokens) / status.contextWindow)}%)`
        : `context ${describeTokens(status.contextTokens)} tokens`,
    )
  }
  if (status.cacheHitShare !== null) parts.push(`cache hit ${Math.round(status.cacheHitShare * 100)}%`)
  if (status.costUsd !== null && status.costUsd > 0) parts.push(`$${status.costUsd.toFixed(4)}`)
  const text = parts.join(' · ')
  return style ? style.dim(text) : text
}

/** `812`, `12.3k`, `128k`, `1.2M` */
function describeTokens(count: number): string {
  if (count < 1000) return String(count)
  if (count < 1_000_000) return `${trim((count / 1000).toFixed(count < 10_000 ? 1 : count < 100_000 ? 1 : 0))}k`
  return `${trim((count / 1_000_000).toFixed(1))}M`
}

const trim = (text: string) => text.replace(/\.0$/, '')
