// What a model's tokens cost: list prices by provider route and model, and the
// cost of one response's reported usage. A model with no known price has none:
// callers show "unknown price" rather than guess with another model's rates.
import type { TokenUsage } from '@loom/llm'

/** Prices in currency units (US dollars for the built-in lists) per million tokens. */
export interface CachePrices {
  /** Input tokens served from the provider's prompt cache. */
  hit: number
  /** Input tokens not in the cache. */
  miss: number
  /** Output tokens. */
  output: number
  /** Input tokens written to the prompt cache (Anthropic bills them above a miss); default: the miss price. */
  write?: number
}

/**
 * DeepSeek's list prices for `deepseek-flash` at peak hours (USD per million
 * tokens): cache hit 0.006, cache miss 0.30, output 1.20. Off-peak hours bill
 * half, so figures at these prices are an upper bound. The benches' reference
 * prices; never a fallback for another model.
 */
export const DEFAULT_CACHE_PRICES: Readonly<CachePrices> = Object.freeze({ hit: 0.006, miss: 0.3, output: 1.2 })

const price = (miss: number, write: number, hit: number, output: number): Readonly<CachePrices> => Object.freeze({ hit, miss, output, write })

/**
 * Anthropic's list prices per million tokens (base input, 5-minute cache write,
 * cache hit, output), from https://platform.claude.com/docs/en/about-claude/pricing
 * and the model pages it links (November 2026); Sonnet 5.5's cache hits are the
 * $0.10 of the 2026-10-07 cut. Loom's `cache_control` markers are ephemeral
 * (5 minutes), so writes are billed at the 5-minute rate. Haiku 5.5 is left out:
 * its price depends on each request's prompt length, which a total cannot say.
 */
const OPUS_4_5 = price(5, 6.25, 0.5, 25)
const OPUS_4 = price(15, 18.75, 1.5, 75)
const SONNET_4 = price(3, 3.75, 0.3, 15)
const ANTHROPIC: Readonly<Record<string, Readonly<CachePrices>>> = Object.freeze({
  'claude-fable-5-1': price(10, 12.5, 0.25, 50),
  'claude-fable-5': price(10, 12.5, 1, 50),
  'claude-opus-5-5': price(4, 5, 0.2, 20),
  'claude-opus-5': OPUS_4_5,
  'claude-opus-4-8': OPUS_4_5,
  'claude-opus-4-7': OPUS_4_5,
  'claude-opus-4-6': OPUS_4_5,
  'claude-opus-4-5': OPUS_4_5,
  'claude-opus-4-1': OPUS_4,
  'claude-opus-4-0': OPUS_4,
  'claude-opus-4': OPUS_4,
  'claude-sonnet-5-5': price(2, 2.5, 0.1, 10),
  'claude-sonnet-5': price(2, 2.5, 0.2, 10),
  'claude-sonnet-4-6': SONNET_4,
  'claude-sonnet-4-5': SONNET_4,
  'claude-sonnet-4-0': SONNET_4,
  'claude-sonnet-4': SONNET_4,
  'claude-haiku-4-5': price(1, 1.25, 0.1, 5),
  'claude-3-5-haiku': price(0.8, 1, 0.08, 4),
})

/** Built-in list prices by provider route, then model id: the same model id costs what its provider bills. */
export const LIST_PRICES: Readonly<Record<string, Readonly<Record<string, Readonly<CachePrices>>>>> = Object.freeze({
  deepseek: Object.freeze({
    'deepseek-flash': DEFAULT_CACHE_PRICES,
    'deepseek-v4-pro': Object.freeze({ hit: 0.044, miss: 1.32, output: 3.96 }),
  }),
  anthropic: ANTHROPIC,
})

/** The list price of `model` on `provider`; a dated snapshot (`claude-haiku-4-5-20251001`) costs what its model does. Undefined when unknown. */
export function listPrices(provider: string, model: string): CachePrices | undefined {
  const table = ownValue(LIST_PRICES, provider)
  return table && (ownValue(table, model) ?? ownValue(table, model.replace(/-\d{8}$/, '')))
}

/** `table[key]` when it is the table's own entry (a model named `constructor` has no price). */
export function ownValue<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined
}

/** What one response's reported usage costs: cache reads at `hit`, cache writes at `write` (else `miss`), other input at `miss`. */
export function usageCost(usage: TokenUsage, prices: CachePrices): { input: number; output: number } {
  const read = usage.cacheReadTokens ?? 0
  const written = usage.cacheWriteTokens ?? 0
  return {
    input: (read * prices.hit + usage.inputTokens * prices.miss + written * (prices.write ?? prices.miss)) / 1e6,
    output: (usage.outputTokens * prices.output) / 1e6,
  }
}

/**
 * USD per million tokens for `model` on `provider`: `configured` (a deployment's
 * prices, by `provider/model` then model id), else the provider's list price;
 * undefined when neither knows it (an unknown price is shown as such, never guessed).
 */
export function modelPrices(provider: string, model: string, configured: Readonly<Record<string, CachePrices>> = {}): CachePrices | undefined {
  return ownValue(configured, `${provider}/${model}`) ?? ownValue(configured, model) ?? listPrices(provider, model)
}
