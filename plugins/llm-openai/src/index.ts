import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { routeConfigFields, type RouteConfig } from '@loom/llm'
import { DEFAULTS, OpenAICompatibleAdapter } from './adapter.ts'

export {
  httpError,
  mapMessages,
  mapUsage,
  OpenAICompatibleAdapter,
  VERSION,
  type OpenAICompatibleOptions,
  type RetryOptions,
} from './adapter.ts'

export const name = '@loom/llm-openai'
export const inject = ['llm']

export interface Config extends RouteConfig {
  thinking?: 'enabled' | 'disabled'
  reasoningEfforts: string[]
  reasoningEffort?: string
  reasoningHistory: 'tool-calls' | 'none'
}

/** Input: every field is optional (defaults fill the rest). */
export const Config: Schema<Partial<Config>, Config> = Schema.object({
  ...routeConfigFields({
    provider: 'deepseek',
    baseUrlEnv: 'DEEPSEEK_BASE_URL',
    apiKeyEnv: 'DEEPSEEK_API_KEY',
    defaultBaseUrl: DEFAULTS.defaultBaseUrl,
    models: ['deepseek-flash', 'deepseek-v4-pro'],
    contextWindow: DEFAULTS.contextWindow,
    path: '/chat/completions',
  }),
  thinking: Schema.union(['enabled', 'disabled']).description('DeepSeek-style `thinking: {type}` sent with every request; unset sends none.'),
  reasoningEfforts: Schema.array(Schema.string())
    .default([])
    .description('Reasoning efforts the models offer (`off` turns thinking off); empty: the models do not reason.'),
  reasoningEffort: Schema.string().description('The reasoning effort of a call that names none (one of `reasoningEfforts`).'),
  reasoningHistory: Schema.union(['tool-calls', 'none'])
    .default('tool-calls')
    .description('Past reasoning sent back as `reasoning_content`: that of assistant messages that called tools (DeepSeek thinking mode needs it), or none.'),
})

/** Registers an OpenAI-compatible adapter for `config.provider`; the route goes away with this plugin. */
export function apply(ctx: Context, config: Config): void {
  const adapter = new OpenAICompatibleAdapter({
    baseUrl: config.baseUrl,
    baseUrlEnv: config.baseUrlEnv,
    defaultBaseUrl: config.defaultBaseUrl,
    apiKey: config.apiKey,
    apiKeyEnv: config.apiKeyEnv,
    models: config.models,
    contextWindow: config.contextWindow,
    maxRetries: config.maxRetries,
    idleTimeoutMs: config.idleTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    maxResponseBytes: config.maxResponseBytes,
    thinking: config.thinking,
    reasoningEfforts: config.reasoningEfforts,
    reasoningEffort: config.reasoningEffort,
    reasoningHistory: config.reasoningHistory,
  })
  ctx.llm.registerAdapter([config.provider], adapter)
}
