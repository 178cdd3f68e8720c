import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/llm'
import { AnthropicAdapter, DEFAULT_MODELS, DEFAULT_REASONING_EFFORTS, DEFAULTS } from './adapter.ts'
import type { ThinkingMode } from './request.ts'

export {
  ANTHROPIC_VERSION,
  AnthropicAdapter,
  DEFAULT_MODELS,
  DEFAULT_REASONING_EFFORTS,
  VERSION,
  type AnthropicOptions,
} from './adapter.ts'
export { httpError, streamError } from './errors.ts'
export {
  breakpointsOf,
  buildBody,
  mapMessages,
  mapTools,
  markHistoryBreakpoints,
  RAW_ARGUMENTS_KEY,
  toolInput,
  type ReplayBlock,
  type ThinkingMode,
  type WireBlock,
  type WireMessage,
} from './request.ts'
export { EventMapper, mapUsage } from './response.ts'

export const name = '@loom/llm-anthropic'
export const inject = ['llm']

export interface Config {
  /** The route (provider id) this adapter serves. */
  provider: string
  baseUrl?: string
  baseUrlEnv: string
  apiKey?: string
  apiKeyEnv: string
  defaultBaseUrl: string
  models: string[]
  contextWindow: number
  maxTokens: number
  thinking: ThinkingMode
  thinkingBudgetTokens: number
  prefixMismatchBehavior?: 'error' | 'drop_block'
  reasoningEfforts: string[]
  reasoningEffort?: string
  idleTimeoutMs: number
  requestTimeoutMs?: number
  maxResponseBytes: number
  maxRetries: number
}

/** Input: every field is optional (defaults fill the rest). */
export const Config: Schema<Partial<Config>, Config> = Schema.object({
  provider: Schema.string().default('anthropic').description('The provider route this adapter serves.'),
  baseUrl: Schema.string().description('Base URL of the API, before `/v1/messages`. Wins over `baseUrlEnv`.'),
  baseUrlEnv: Schema.string().default('ANTHROPIC_BASE_URL').description('Environment variable holding the base URL, read on every call.'),
  apiKey: Schema.string().role('secret').description('API key (sent as `x-api-key`). Wins over `apiKeyEnv`; prefer the environment variable.'),
  apiKeyEnv: Schema.string().default('ANTHROPIC_API_KEY').description('Environment variable holding the API key, read on every call.'),
  defaultBaseUrl: Schema.string().default(DEFAULTS.defaultBaseUrl).description('Base URL used when neither `baseUrl` nor `baseUrlEnv` gives one.'),
  models: Schema.array(Schema.string())
    .default([...DEFAULT_MODELS])
    .description('Model ids listed for this route, the default first; other ids still pass through.'),
  contextWindow: Schema.natural().default(DEFAULTS.contextWindow).description('Context window reported for every model, in tokens.'),
  maxTokens: Schema.natural()
    .min(1)
    .default(DEFAULTS.maxTokens)
    .description('`max_tokens` of a call that sets none (the API requires one); thinking counts against it.'),
  thinking: Schema.union(['auto', 'adaptive', 'enabled', 'disabled'])
    .default('auto')
    .description(
      "`auto` sends no `thinking` field (the model's default); `adaptive`, `enabled` (with `thinkingBudgetTokens`) and `disabled` send that `thinking.type`.",
    ),
  thinkingBudgetTokens: Schema.natural()
    .min(1024)
    .default(DEFAULTS.thinkingBudgetTokens)
    .description('`budget_tokens` with `thinking: enabled`; must stay below `maxTokens`.'),
  prefixMismatchBehavior: Schema.union(['error', 'drop_block']).description(
    'Sent as `thinking.block_binding.prefix_mismatch_behavior` when a thinking object is sent (`drop_block`: the API drops thinking whose history changed, e.g. after compaction, instead of answering 400).',
  ),
  reasoningEfforts: Schema.array(Schema.string())
    .default([...DEFAULT_REASONING_EFFORTS])
    .description('Reasoning efforts callers may ask for: `off` sends `thinking: {type: disabled}`, any other goes as `output_config.effort`. Empty: none.'),
  reasoningEffort: Schema.string().description("The reasoning effort of a call that names none (one of `reasoningEfforts`); unset: the model's own default."),
  idleTimeoutMs: Schema.natural()
    .default(DEFAULTS.idleTimeoutMs)
    .description('Fail with TIMEOUT (retried by the loop) when the provider sends nothing for this long.'),
  requestTimeoutMs: Schema.natural().description('Wall-clock limit for one request; unset means none.'),
  maxResponseBytes: Schema.natural()
    .default(DEFAULTS.maxResponseBytes)
    .description('Most bytes of one streamed answer; a larger one fails with RESPONSE_TOO_LARGE.'),
  maxRetries: Schema.natural()
    .default(DEFAULTS.maxRetries)
    .description('Retries the agent loop makes after 429, 5xx, 529 overload, timeouts and network failures (each call is one HTTP attempt).'),
})

/** Registers an Anthropic Messages adapter for `config.provider`; the route goes away with this plugin. */
export function apply(ctx: Context, config: Config): void {
  if (config.thinking === 'enabled' && !(config.thinkingBudgetTokens < config.maxTokens)) {
    throw new Error(`${name}: thinkingBudgetTokens (${config.thinkingBudgetTokens}) must be less than maxTokens (${config.maxTokens})`)
  }
  if (config.reasoningEffort !== undefined && !config.reasoningEfforts.includes(config.reasoningEffort)) {
    throw new Error(`${name}: reasoningEffort "${config.reasoningEffort}" is not one of reasoningEfforts (${config.reasoningEfforts.join(', ') || 'none'})`)
  }
  const adapter = new AnthropicAdapter({
    baseUrl: config.baseUrl,
    baseUrlEnv: config.baseUrlEnv,
    defaultBaseUrl: config.defaultBaseUrl,
    apiKey: config.apiKey,
    apiKeyEnv: config.apiKeyEnv,
    models: config.models,
    contextWindow: config.contextWindow,
    maxTokens: config.maxTokens,
    thinking: config.thinking,
    thinkingBudgetTokens: config.thinkingBudgetTokens,
    prefixMismatchBehavior: config.prefixMismatchBehavior,
    reasoningEfforts: config.reasoningEfforts,
    reasoningEffort: config.reasoningEffort,
    idleTimeoutMs: config.idleTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    maxResponseBytes: config.maxResponseBytes,
    maxRetries: config.maxRetries,
  })
  ctx.llm.registerAdapter([config.provider], adapter)
}
