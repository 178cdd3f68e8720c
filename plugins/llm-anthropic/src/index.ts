import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { routeConfigFields, type RouteConfig } from '@loom/llm'
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

export interface Config extends RouteConfig {
  maxTokens: number
  thinking: ThinkingMode
  thinkingBudgetTokens: number
  prefixMismatchBehavior?: 'error' | 'drop_block'
  reasoningEfforts: string[]
  reasoningEffort?: string
}

/** Input: every field is optional (defaults fill the rest). */
export const Config: Schema<Partial<Config>, Config> = Schema.object({
  ...routeConfigFields({
    provider: 'anthropic',
    baseUrlEnv: 'ANTHROPIC_BASE_URL',
    apiKeyEnv: 'ANTHROPIC_API_KEY',
    defaultBaseUrl: DEFAULTS.defaultBaseUrl,
    models: DEFAULT_MODELS,
    contextWindow: DEFAULTS.contextWindow,
    path: '/v1/messages',
  }),
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
