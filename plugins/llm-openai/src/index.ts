import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/llm'
import { OpenAICompatibleAdapter } from './adapter.ts'

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
  maxRetries: number
  idleTimeoutMs: number
  requestTimeoutMs?: number
  maxResponseBytes: number
  thinking?: 'enabled' | 'disabled'
  reasoningEfforts: string[]
  reasoningEffort?: string
  reasoningHistory: 'tool-calls' | 'none'
}

/** Input: every field is optional (defaults fill the rest). */
export const Config: Schema<Partial<Config>, Config> = Schema.object({
  provider: Schema.string().default('deepseek').description('The provider route this adapter serves (e.g. `deepseek`, `openai`).'),
  baseUrl: Schema.string().description('Base URL of the API, before `/chat/completions`. Wins over `baseUrlEnv`.'),
  baseUrlEnv: Schema.string().default('DEEPSEEK_BASE_URL').description('Environment variable holding the base URL, read on every call.'),
  apiKey: Schema.string().role('secret').description('API key. Wins over `apiKeyEnv`; prefer the environment variable.'),
  apiKeyEnv: Schema.string().default('DEEPSEEK_API_KEY').description('Environment variable holding the API key, read on every call.'),
  defaultBaseUrl: Schema.string().default('https://api.deepseek.com').description('Base URL used when neither `baseUrl` nor `baseUrlEnv` gives one.'),
  models: Schema.array(Schema.string())
    .default(['deepseek-flash', 'deepseek-v4-pro'])
    .description('Model ids listed for this provider, the default first; other ids still pass through.'),
  contextWindow: Schema.natural().default(128_000).description('Context window reported for every model, in tokens.'),
  maxRetries: Schema.natural()
    .default(5)
    .description('Retries of a failed request (429, 408, 5xx, overload, a stall or a reset, before or during the stream).'),
  idleTimeoutMs: Schema.natural().default(300_000).description('Abort and retry when the provider sends nothing for this long.'),
  requestTimeoutMs: Schema.natural().description('Wall-clock limit for one request attempt; unset means none.'),
  maxResponseBytes: Schema.natural()
    .default(32 * 1024 * 1024)
    .description('Most bytes of one streamed answer; a larger one fails with RESPONSE_TOO_LARGE.'),
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
