// The config fields every HTTP adapter plugin shares: where a route's API is,
// its key, its models and the limits of one request. One schema, so that every
// adapter's `loom config` reads and validates alike.
import Schema from '@deepseek-ai/schemastery'
import { DEFAULT_RETRY_POLICY } from './adapter.ts'

export interface RouteConfig {
  /** The route (provider id) the adapter serves. */
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
}

/** The limits of one streamed request when a route sets none. */
export const ROUTE_LIMITS = Object.freeze({ idleTimeoutMs: 300_000, maxResponseBytes: 32 * 1024 * 1024 })

/** What differs between adapters: the route's defaults and the path after the base URL. */
export interface RouteDefaults {
  provider: string
  baseUrlEnv: string
  apiKeyEnv: string
  defaultBaseUrl: string
  models: readonly string[]
  contextWindow: number
  /** e.g. `/chat/completions`, named in the description of `baseUrl`. */
  path: string
}

/** The schemastery fields of a `RouteConfig`, to spread into an adapter plugin's `Config`. */
export function routeConfigFields(defaults: RouteDefaults) {
  return {
    provider: Schema.string().default(defaults.provider).description('The provider route this adapter serves (what a model reference names first).'),
    baseUrl: Schema.string().description(`Base URL of the API, before \`${defaults.path}\`. Wins over \`baseUrlEnv\`.`),
    baseUrlEnv: Schema.string().default(defaults.baseUrlEnv).description('Environment variable holding the base URL, read on every call.'),
    apiKey: Schema.string().role('secret').description('API key. Wins over `apiKeyEnv`; prefer the environment variable.'),
    apiKeyEnv: Schema.string().default(defaults.apiKeyEnv).description('Environment variable holding the API key, read on every call.'),
    defaultBaseUrl: Schema.string().default(defaults.defaultBaseUrl).description('Base URL used when neither `baseUrl` nor `baseUrlEnv` gives one.'),
    models: Schema.array(Schema.string())
      .default([...defaults.models])
      .description('Model ids listed for this route, the default first; other ids still pass through.'),
    contextWindow: Schema.natural().default(defaults.contextWindow).description('Context window reported for every model, in tokens.'),
    maxRetries: Schema.natural()
      .default(DEFAULT_RETRY_POLICY.maxRetries)
      .description('Retries the agent loop makes of a failed request (429, 408, 5xx, overload, a stall or a reset, before or during the stream).'),
    idleTimeoutMs: Schema.natural()
      .default(ROUTE_LIMITS.idleTimeoutMs)
      .description('Fail with TIMEOUT (retried by the loop) when the provider sends nothing for this long.'),
    requestTimeoutMs: Schema.natural().description('Wall-clock limit for one request attempt; unset means none.'),
    maxResponseBytes: Schema.natural()
      .default(ROUTE_LIMITS.maxResponseBytes)
      .description('Most bytes of one streamed answer; a larger one fails with RESPONSE_TOO_LARGE.'),
  }
}
