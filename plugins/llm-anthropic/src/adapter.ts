import {
  ROUTE_LIMITS,
  abortedError,
  DEFAULT_RETRY_POLICY,
  fetchEventStream,
  resolveEndpoint,
  LlmAdapter,
  LlmError,
  reasoningInfo,
  type GenerateOptions,
  type LlmModelInfo,
  type ResolvedRetryPolicy,
  type StreamChunk,
} from '@loom/llm'
import { httpError, type CredentialHint } from './errors.ts'
import { buildBody, type ThinkingMode } from './request.ts'
import { EventMapper } from './response.ts'

/** Sent as `User-Agent: loom/<VERSION>`; kept equal to package.json by a test. */
export const VERSION = '0.1.0'
/** The `anthropic-version` header every request carries. */
export const ANTHROPIC_VERSION = '2023-06-01'

/** Current model ids (November 2026), the default first. Other ids pass through. */
export const DEFAULT_MODELS: readonly string[] = Object.freeze(['claude-sonnet-5-5', 'claude-opus-5-5', 'claude-fable-5-1', 'claude-haiku-4-5'])
/** `off` sends `thinking: {type: "disabled"}`; the rest go as `output_config.effort`. */
export const DEFAULT_REASONING_EFFORTS: readonly string[] = Object.freeze(['off', 'low', 'medium', 'high', 'xhigh', 'max'])

export interface AnthropicOptions {
  /** Base URL, without `/v1/messages` (a trailing `/v1` is accepted). Wins over `baseUrlEnv`. */
  baseUrl?: string
  /** Environment variable read per request when `baseUrl` is unset. */
  baseUrlEnv?: string
  /** Used when neither `baseUrl` nor `baseUrlEnv` gives one. Default `https://api.anthropic.com`. */
  defaultBaseUrl?: string
  /** API key. Wins over `apiKeyEnv`. */
  apiKey?: string
  /** Environment variable read per request when `apiKey` is unset. */
  apiKeyEnv?: string
  /** Model ids reported by `listModels()`; other ids still pass through. */
  models?: readonly string[]
  /** Context window reported for every model. Default 200 000. */
  contextWindow?: number
  /** `max_tokens` of a call that gives none, reported as `defaultMaxTokens`. Default 32 000. */
  maxTokens?: number
  /** How to ask for thinking. Default `auto` (no `thinking` field: the model's default). */
  thinking?: ThinkingMode
  /** `budget_tokens` with `thinking: 'enabled'` (at least 1024, less than max_tokens). Default 8000. */
  thinkingBudgetTokens?: number
  /** Sent as `thinking.block_binding.prefix_mismatch_behavior` with a thinking object; unset sends none. */
  prefixMismatchBehavior?: 'error' | 'drop_block'
  /** Reasoning efforts offered to callers (`off` turns thinking off). Default DEFAULT_REASONING_EFFORTS. */
  reasoningEfforts?: readonly string[]
  /** The effort of a call that names none; unset: the model's own default. */
  reasoningEffort?: string
  /** Retries the agent loop makes (the route's retry policy); the adapter makes one attempt per call. Default 5. */
  maxRetries?: number
  /** Longest wait for the next bytes (response headers or stream data). Default 300 000. */
  idleTimeoutMs?: number
  /** Wall-clock limit for one request, headers to last byte. Default none. */
  requestTimeoutMs?: number
  /** Most bytes of one streamed answer. Default 32 MiB. */
  maxResponseBytes?: number
  /** Extra request headers (e.g. `anthropic-beta`). */
  headers?: Readonly<Record<string, string>>
  /** Where `*Env` variables are read from, at call time. Default `process.env`. */
  env?: () => Readonly<Record<string, string | undefined>>
}

export const DEFAULTS = {
  defaultBaseUrl: 'https://api.anthropic.com',
  contextWindow: 200_000,
  maxTokens: 32_000,
  thinkingBudgetTokens: 8_000,
  ...ROUTE_LIMITS,
}

/**
 * An adapter for the Anthropic Messages API (`POST <base>/v1/messages` with
 * `stream: true`) over `fetchEventStream`. Each `stream()` is exactly one HTTP
 * attempt; the agent loop retries by `providerRetryPolicy`. Credentials and
 * base URL are resolved on every call.
 */
export class AnthropicAdapter extends LlmAdapter {
  readonly options: AnthropicOptions

  constructor(options: AnthropicOptions = {}) {
    super()
    this.options = options
  }

  override providerRetryPolicy(_provider: string): ResolvedRetryPolicy {
    return { ...DEFAULT_RETRY_POLICY, ...(this.options.maxRetries !== undefined && { maxRetries: this.options.maxRetries }) }
  }

  override async listModels(provider: string): Promise<readonly LlmModelInfo[]> {
    return (this.options.models ?? DEFAULT_MODELS).map(id => this.modelInfo(provider, id))
  }

  override async resolveModel(provider: string, model: string): Promise<LlmModelInfo> {
    return this.modelInfo(provider, model)
  }

  private modelInfo(provider: string, id: string): LlmModelInfo {
    const efforts = this.options.reasoningEfforts ?? DEFAULT_REASONING_EFFORTS
    return {
      provider,
      id,
      name: id,
      context: { contextWindow: this.options.contextWindow ?? DEFAULTS.contextWindow },
      defaultMaxTokens: this.options.maxTokens ?? DEFAULTS.maxTokens,
      ...reasoningInfo(efforts, this.options.reasoningEffort),
    }
  }

  /** The base URL and key of this call (read on every call). */
  private endpoint(provider: string) {
    return resolveEndpoint(provider, { ...this.options, defaultBaseUrl: this.options.defaultBaseUrl ?? DEFAULTS.defaultBaseUrl })
  }

  /** The request one call sends; throws MISSING_CREDENTIAL / BAD_REQUEST for bad configuration. */
  buildRequest(
    options: GenerateOptions,
    endpoint = this.endpoint(options.provider),
  ): { url: string; headers: Record<string, string>; body: Record<string, unknown> } {
    const { apiKey, baseUrl } = endpoint
    let url: string
    try {
      const base = baseUrl.replace(/\/+$/, '')
      url = new URL(`${base}${/\/v1$/.test(base) ? '' : '/v1'}/messages`).href
    } catch (cause) {
      throw new LlmError(`${options.provider}: route "${options.provider}" has an invalid base URL: ${baseUrl}`, 'BAD_REQUEST', { cause })
    }
    const headers: Record<string, string> = {
      ...this.options.headers,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-api-key': apiKey,
      'anthropic-version': ANTHROPIC_VERSION,
      'user-agent': `loom/${VERSION}`,
    }
    const body = buildBody(options, {
      maxTokens: this.options.maxTokens ?? DEFAULTS.maxTokens,
      thinking: this.options.thinking ?? 'auto',
      thinkingBudgetTokens: this.options.thinkingBudgetTokens ?? DEFAULTS.thinkingBudgetTokens,
      ...(this.options.prefixMismatchBehavior && { prefixMismatchBehavior: this.options.prefixMismatchBehavior }),
    })
    return { url, headers, body }
  }

  async *stream(options: GenerateOptions): AsyncGenerator<StreamChunk, void, undefined> {
    const { signal, provider } = options
    if (signal?.aborted) throw abortedError(signal)
    const endpoint = this.endpoint(provider)
    const request = this.buildRequest(options, endpoint)
    const hint: CredentialHint = { credential: endpoint.keySource }
    const redact = endpoint.redact
    const events = fetchEventStream({
      provider,
      url: request.url,
      headers: request.headers,
      body: JSON.stringify(request.body),
      signal,
      idleTimeoutMs: this.options.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs,
      ...(this.options.requestTimeoutMs !== undefined && { requestTimeoutMs: this.options.requestTimeoutMs }),
      maxResponseBytes: this.options.maxResponseBytes ?? DEFAULTS.maxResponseBytes,
      httpError: (status, text, headers) => httpError(provider, status, text, headers, hint),
      redact,
    })
    const mapper = new EventMapper(provider, redact, hint)
    for await (const event of events) {
      yield* mapper.handle(event)
      // Ending the iteration releases the connection; nothing follows message_stop.
      if (mapper.stopped) break
    }
    yield* mapper.finish()
  }
}
