import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/llm'
import { OpenAICompatibleAdapter } from './adapter.ts'

export {
  httpError,
  mapMessages,
  mapUsage,
  OpenAICompatibleAdapter,
  parseRetryAfter,
  VERSION,
  type OpenAICompatibleOptions,
  type RetryOptions,
} from './adapter.ts'
export { SseParser, type SseEvent } from './sse.ts'

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
  thinking?: 'enabled' | 'disabled'
}

/** Input: every field is optional (defaults fill the rest). */
export const Config: Schema<Partial<Config>, Config> = Schema.object({
  provider: Schema.string().default('deepseek').description('The provider route this adapter serves (e.g. `deepseek`, `openai`).'),
  baseUrl: Schema.string().description('Base URL of the API, before `/chat/completions`. Wins over `baseUrlEnv`.'),
  baseUrlEnv: Schema.string().default('DEEPSEEK_BASE_URL').description('Environment variable holding the base URL, read on every call.'),
  apiKey: Schema.string().role('secret').description('API key. Wins over `apiKeyEnv`; prefer the environment variable.'),
  apiKeyEnv: Schema.string().default('DEEPSEEK_API_KEY').description('Environment variable holding the API key, read on every call.'),
  defaultBaseUrl: Schema.string().default('https://api.deepseek.com').description('Base URL used when neither `baseUrl` nor `baseUrlEnv` gives one.'),
  models: Schema.array(Schema.string()).default(['deepseek-chat', 'deepseek-reasoner']).description('Model ids listed for this provider; other ids still pass through.'),
  contextWindow: Schema.natural().default(128_000).description('Context window reported for every model, in tokens.'),
  maxRetries: Schema.natural().default(3).description('Retries after 429, 5xx and network failures that happen before any output.'),
  idleTimeoutMs: Schema.natural().default(300_000).description('Fail with TIMEOUT when the provider sends nothing for this long.'),
  requestTimeoutMs: Schema.natural().description('Wall-clock limit for one request attempt; unset means none.'),
  thinking: Schema.union(['enabled', 'disabled']).description('DeepSeek-style `thinking: {type}` sent with every request; unset sends none.'),
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
    thinking: config.thinking,
  })
  ctx.llm.registerAdapter([config.provider], adapter)
}
