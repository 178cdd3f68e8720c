import {
  ROUTE_LIMITS,
  abortedError,
  DEFAULT_RETRY_POLICY,
  fetchEventStream,
  LlmAdapter,
  LlmError,
  reasoningInfo,
  parseRetryAfter,
  requestIdOf,
  resolveEndpoint,
  type ContentBlock,
  type GenerateOptions,
  type LlmModelInfo,
  type Message,
  type ResolvedRetryPolicy,
  type SseEvent,
  type StreamChunk,
  type TokenUsage,
  type ToolSchema,
} from '@loom/llm'

/** Sent as `User-Agent: loom/<VERSION>`; kept equal to package.json by a test. */
export const VERSION = '0.1.0'

export interface RetryOptions {
  /** First backoff delay; doubles per retry. Default 500. */
  initialDelayMs?: number
  /** Backoff ceiling. Default 10 000. */
  maxDelayMs?: number
  /** Uniform jitter of ±ratio around the delay. Default 0.1. */
  jitterRatio?: number
}

export interface OpenAICompatibleOptions {
  /** Base URL (up to, not including, `/chat/completions`). Wins over `baseUrlEnv`. */
  baseUrl?: string
  /** Environment variable read per request when `baseUrl` is unset. */
  baseUrlEnv?: string
  /** Used when neither `baseUrl` nor `baseUrlEnv` gives one. */
  defaultBaseUrl?: string
  /** API key. Wins over `apiKeyEnv`. */
  apiKey?: string
  /** Environment variable read per request when `apiKey` is unset. */
  apiKeyEnv?: string
  /** Model ids reported by `listModels()`; other ids still pass through. */
  models?: readonly string[]
  /** Context window reported by `resolveModel()` / `listModels()`. */
  contextWindow?: number
  /** Retries the agent loop makes after 429, 5xx, 408, overload, stalls and resets (the route's retry policy). Default 5. */
  maxRetries?: number
  retry?: RetryOptions
  /** Longest wait for the next bytes (response headers or stream data). Default 300 000. */
  idleTimeoutMs?: number
  /** Wall-clock limit for one attempt, headers to last byte. Default none. */
  requestTimeoutMs?: number
  /** Most bytes of one streamed answer. Default 32 MiB. */
  maxResponseBytes?: number
  /** DeepSeek-style `thinking: {type}` sent with every request (a call's `reasoningEffort: 'off'` overrides it). */
  thinking?: 'enabled' | 'disabled'
  /** The reasoning efforts the models offer (`off` turns thinking off); empty: the models do not reason. */
  reasoningEfforts?: readonly string[]
  /** The effort used when a call names none. */
  reasoningEffort?: string
  /**
   * Which past reasoning is sent back as `reasoning_content`: that of assistant
   * messages that called tools (DeepSeek's thinking-mode rule), or none.
   */
  reasoningHistory?: 'tool-calls' | 'none'
  /** Extra request headers. */
  headers?: Readonly<Record<string, string>>
  /** Where `*Env` variables are read from, at call time. Default `process.env`. */
  env?: () => Readonly<Record<string, string | undefined>>
}

export const DEFAULTS = {
  defaultBaseUrl: 'https://api.deepseek.com',
  contextWindow: 128_000,
  ...ROUTE_LIMITS,
}

const CONTEXT_RE = /context[ _-]?length|context[ _-]?window|maximum context|too many tokens|prompt is too long|input is too long|reduce the length/i
const QUOTA_RE = /quota|insufficient[ _-]?(balance|funds|credits?)|billing|credit balance|payment required/i

/**
 * An adapter for the OpenAI chat-completions protocol (`POST <base>/chat/completions`
 * with `stream: true`), as spoken by DeepSeek, OpenAI and most self-hosted servers.
 * Credentials and base URL are resolved on every call. One `stream()` is one HTTP
 * attempt: the agent loop retries by the policy `providerRetryPolicy` returns, so a
 * failed attempt's partial output never reaches the history.
 */
export class OpenAICompatibleAdapter extends LlmAdapter {
  readonly options: OpenAICompatibleOptions

  constructor(options: OpenAICompatibleOptions = {}) {
    super()
    this.options = options
  }

  override providerRetryPolicy(_provider: string): ResolvedRetryPolicy {
    return { ...DEFAULT_RETRY_POLICY, ...this.options.retry, ...(this.options.maxRetries !== undefined && { maxRetries: this.options.maxRetries }) }
  }

  override async listModels(provider: string): Promise<readonly LlmModelInfo[]> {
    return (this.options.models ?? []).map(id => this.modelInfo(provider, id))
  }

  override async resolveModel(provider: string, model: string): Promise<LlmModelInfo> {
    return this.modelInfo(provider, model)
  }

  private modelInfo(provider: string, id: string): LlmModelInfo {
    const efforts = this.options.reasoningEfforts ?? []
    return {
      provider,
      id,
      name: id,
      context: { contextWindow: this.options.contextWindow ?? DEFAULTS.contextWindow },
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
    let url: string
    try {
      url = new URL(`${endpoint.baseUrl.replace(/\/+$/, '')}/chat/completions`).href
    } catch (cause) {
      throw new LlmError(`provider "${options.provider}" has an invalid base URL: ${endpoint.baseUrl}`, 'BAD_REQUEST', { cause })
    }
    const headers: Record<string, string> = {
      ...this.options.headers,
      'content-type': 'application/json',
      accept: 'text/event-stream',
      authorization: `Bearer ${endpoint.apiKey}`,
      'user-agent': `loom/${VERSION}`,
    }
    return { url, headers, body: buildBody(options, this.options.thinking, this.options.reasoningHistory ?? 'tool-calls') }
  }

  async *stream(options: GenerateOptions): AsyncGenerator<StreamChunk, void, undefined> {
    const { signal, provider } = options
    if (signal?.aborted) throw abortedError(signal)
    const endpoint = this.endpoint(provider)
    const request = this.buildRequest(options, endpoint)
    const events = fetchEventStream({
      provider,
      url: request.url,
      headers: request.headers,
      body: JSON.stringify(request.body),
      signal,
      idleTimeoutMs: this.options.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs,
      requestTimeoutMs: this.options.requestTimeoutMs,
      maxResponseBytes: this.options.maxResponseBytes ?? DEFAULTS.maxResponseBytes,
      httpError: (status, text, headers) => httpError(provider, status, text, headers, endpoint.keySource),
      redact: endpoint.redact,
    })
    const mapper = new ChunkMapper(provider)
    try {
      for await (const event of events) {
        if (event.data.trim() === '[DONE]') {
          mapper.done = true
          break
        }
        yield* mapper.handle(event)
      }
    } catch (error) {
      // The answer was complete; a failure while waiting for usage or [DONE] loses nothing.
      if (mapper.finishReason === undefined || signal?.aborted) throw error
    }
    yield* mapper.finish()
  }
}

// ---------------------------------------------------------------------------
// Request

function buildBody(options: GenerateOptions, thinking: 'enabled' | 'disabled' | undefined, reasoningHistory: 'tool-calls' | 'none'): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: options.model,
    messages: mapMessages(options.messages, options.system, reasoningHistory),
    stream: true,
    stream_options: { include_usage: true },
  }
  if (options.tools?.length) body.tools = options.tools.map(mapTool)
  if (options.maxTokens !== undefined) body.max_tokens = options.maxTokens
  if (options.temperature !== undefined) body.temperature = options.temperature
  if (options.stop?.length) body.stop = [...options.stop]
  if (options.reasoningEffort === 'off') body.thinking = { type: 'disabled' }
  else {
    if (thinking) body.thinking = { type: thinking }
    if (options.reasoningEffort) body.reasoning_effort = options.reasoningEffort
  }
  return body
}

function mapTool(tool: ToolSchema) {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } }
}

type WireMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; reasoning_content?: string; tool_calls?: WireToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string }
interface WireToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

const textOf = (blocks: readonly ContentBlock[], type: 'text' | 'reasoning' = 'text') =>
  blocks.flatMap(block => (block.type === type ? [block.text] : [])).join(type === 'text' ? '\n' : '')

/**
 * Loom messages → chat-completions messages. Tool results become `role: 'tool'`
 * messages (placed before any text of the same user message, so they directly
 * follow the assistant's `tool_calls`).
 *
 * Reasoning goes back by one rule that looks only at the message itself, so a
 * past message serializes the same in every later request (prefix caches keep
 * hitting): an assistant message that called tools and has reasoning blocks
 * carries them as `reasoning_content` (DeepSeek's thinking mode answers 400
 * without it); any other reasoning is dropped, as the API ignores it.
 */
export function mapMessages(messages: readonly Message[], system?: string, reasoningHistory: 'tool-calls' | 'none' = 'tool-calls'): WireMessage[] {
  const wire: WireMessage[] = []
  if (system) wire.push({ role: 'system', content: system })
  for (const message of messages) {
    if (message.role === 'system') {
      const text = textOf(message.content)
      if (text) wire.push({ role: 'system', content: text })
    } else if (message.role === 'assistant') {
      const text = textOf(message.content)
      const calls: WireToolCall[] = message.content.flatMap(block =>
        block.type === 'tool-call' ? [{ id: block.id, type: 'function' as const, function: { name: block.name, arguments: block.arguments || '{}' } }] : [],
      )
      if (!calls.length) {
        if (text) wire.push({ role: 'assistant', content: text })
        continue
      }
      const reasons = reasoningHistory === 'tool-calls' && message.content.some(block => block.type === 'reasoning')
      wire.push({ role: 'assistant', content: text || null, ...(reasons && { reasoning_content: textOf(message.content, 'reasoning') }), tool_calls: calls })
    } else {
      for (const block of message.content) {
        if (block.type !== 'tool-result') continue
        const text = textOf(block.content)
        // The wire has no error flag: the text says it, once (a tool error's text already starts with `Error:`).
        wire.push({ role: 'tool', tool_call_id: block.toolCallId, content: block.isError && !text.startsWith('Error:') ? `Error: ${text}` : text })
      }
      const text = textOf(message.content)
      if (text) wire.push({ role: 'user', content: text })
    }
  }
  return wire
}

// ---------------------------------------------------------------------------
// Response

interface OpenBlock {
  kind: 'text' | 'reasoning'
  index: number
  text: string
}
interface ToolBlock {
  kind: 'tool'
  index: number
  id: string
  name: string
  arguments: string
  ended: boolean
}

/** Turns chat-completion chunks into Loom stream chunks with stable block indexes. */
class ChunkMapper {
  private readonly provider: string
  finishReason: string | undefined
  done = false
  private usage: TokenUsage | undefined
  private nextIndex = 0
  private current: OpenBlock | ToolBlock | undefined
  private readonly tools = new Map<number, ToolBlock>()
  private lastToolKey: number | undefined
  private sawContent = false
  /** The stream carried `reasoning_content` (thinking mode), even if empty. */
  private thinking = false
  private reasoned = false

  constructor(provider: string) {
    this.provider = provider
  }

  *handle(event: SseEvent): Generator<StreamChunk> {
    let json: unknown
    try {
      json = JSON.parse(event.data)
    } catch (cause) {
      throw new LlmError(`${this.provider}: malformed JSON in the event stream: ${truncate(event.data, 200)}`, 'PROTOCOL', { cause })
    }
    if (!isObject(json)) throw new LlmError(`${this.provider}: unexpected event in the stream: ${truncate(event.data, 200)}`, 'PROTOCOL')
    if (json.error !== undefined) throw streamError(this.provider, json.error)
    if (isObject(json.usage)) this.usage = mapUsage(json.usage)
    const choice = Array.isArray(json.choices) ? (json.choices.find(c => isObject(c) && (c.index ?? 0) === 0) ?? json.choices[0]) : undefined
    if (!isObject(choice)) return
    const delta = isObject(choice.delta) ? choice.delta : {}
    if (typeof delta.reasoning_content === 'string') this.thinking = true
    const reasoning = typeof delta.reasoning_content === 'string' ? delta.reasoning_content : typeof delta.reasoning === 'string' ? delta.reasoning : ''
    if (reasoning) yield* this.text('reasoning', reasoning)
    if (typeof delta.content === 'string' && delta.content) yield* this.text('text', delta.content)
    if (Array.isArray(delta.tool_calls)) {
      for (const call of delta.tool_calls) if (isObject(call)) yield* this.toolCall(call)
    }
    if (typeof choice.finish_reason === 'string' && choice.finish_reason) this.finishReason = choice.finish_reason
  }

  private *text(kind: 'text' | 'reasoning', text: string): Generator<StreamChunk> {
    this.sawContent = true
    if (kind === 'reasoning') this.reasoned = true
    if (this.current?.kind !== kind) {
      yield* this.close()
      this.current = { kind, index: this.nextIndex++, text: '' }
      yield { type: 'block-start', index: this.current.index, blockType: kind }
    }
    const block = this.current as OpenBlock
    block.text += text
    yield kind === 'text' ? { type: 'text-delta', index: block.index, text } : { type: 'reasoning-delta', index: block.index, text }
  }

  private *toolCall(call: Record<string, unknown>): Generator<StreamChunk> {
    this.sawContent = true
    const fn = isObject(call.function) ? call.function : {}
    const id = typeof call.id === 'string' && call.id ? call.id : undefined
    const name = typeof fn.name === 'string' && fn.name ? fn.name : undefined
    const argumentsDelta = typeof fn.arguments === 'string' ? fn.arguments : ''
    let key: number
    if (typeof call.index === 'number') key = call.index
    else if (this.lastToolKey === undefined || (id !== undefined && id !== this.tools.get(this.lastToolKey)?.id))
      key = this.tools.size ? Math.max(...this.tools.keys()) + 1 : 0
    else key = this.lastToolKey
    this.lastToolKey = key
    let tool = this.tools.get(key)
    if (!tool) {
      yield* this.close()
      tool = { kind: 'tool', index: this.nextIndex++, id: id ?? `call_${crypto.randomUUID()}`, name: name ?? '', arguments: '', ended: false }
      this.tools.set(key, tool)
      this.current = tool
      yield { type: 'block-start', index: tool.index, blockType: 'tool-call' }
      tool.arguments += argumentsDelta
      yield { type: 'tool-call-delta', index: tool.index, id: tool.id, ...(name !== undefined && { name }), argumentsDelta }
      return
    }
    if (tool.ended) throw new LlmError(`${this.provider}: tool call ${key} continued after another block started`, 'PROTOCOL')
    const newName = name !== undefined && !tool.name ? name : undefined
    if (newName) tool.name = newName
    if (!argumentsDelta && !newName) return
    tool.arguments += argumentsDelta
    yield { type: 'tool-call-delta', index: tool.index, id: tool.id, ...(newName !== undefined && { name: newName }), argumentsDelta }
  }

  private *close(): Generator<StreamChunk> {
    const block = this.current
    this.current = undefined
    if (!block) return
    if (block.kind === 'tool') {
      block.ended = true
      yield { type: 'block-end', index: block.index, block: { type: 'tool-call', id: block.id, name: block.name, arguments: block.arguments || '{}' } }
    } else {
      yield { type: 'block-end', index: block.index, block: { type: block.kind, text: block.text } }
    }
  }

  *finish(): Generator<StreamChunk> {
    if (this.finishReason === undefined) {
      if (!this.sawContent) throw new LlmError(`${this.provider}: the response has no content and no finish reason`, 'EMPTY_RESPONSE')
      if (!this.done) throw new LlmError(`${this.provider}: the stream ended before the response finished`, 'NETWORK')
    }
    yield* this.close()
    if (this.thinking && !this.reasoned && this.tools.size) {
      // Thinking mode with empty reasoning: the block still marks the message, so its
      // (empty) reasoning_content goes back with its tool calls.
      const index = this.nextIndex++
      yield { type: 'block-start', index, blockType: 'reasoning' }
      yield { type: 'block-end', index, block: { type: 'reasoning', text: '' } }
    }
    if (this.usage) yield { type: 'usage', usage: this.usage }
    switch (this.finishReason) {
      case 'length':
        yield { type: 'finish', reason: { kind: 'max-tokens' } }
        return
      case 'tool_calls':
      case 'function_call':
        yield { type: 'finish', reason: { kind: 'tool-calls' } }
        return
      case 'content_filter':
        throw new LlmError(`${this.provider}: the response was stopped by the provider's content filter`, 'BAD_REQUEST')
      case 'insufficient_system_resource':
        throw new LlmError(`${this.provider}: the provider ran out of resources mid-response`, 'SERVICE_UNAVAILABLE')
      default:
        // 'stop', a server that says 'stop' after tool calls, or [DONE] without a reason.
        yield { type: 'finish', reason: { kind: this.tools.size ? 'tool-calls' : 'stop' } }
    }
  }
}

/** Provider usage → disjoint Loom buckets: input excludes cache reads/writes; reasoning is part of output. */
export function mapUsage(usage: Record<string, unknown>): TokenUsage {
  const promptDetails = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {}
  const completionDetails = isObject(usage.completion_tokens_details) ? usage.completion_tokens_details : {}
  const prompt = count(usage.prompt_tokens) ?? 0
  const cacheRead = count(usage.prompt_cache_hit_tokens) ?? count(promptDetails.cached_tokens)
  // Only explicit cache-write counts; DeepSeek's prompt_cache_miss_tokens are plain input.
  const cacheWrite = count(promptDetails.cache_write_tokens) ?? count(promptDetails.cache_creation_tokens) ?? count(usage.cache_creation_input_tokens)
  const reasoning = count(completionDetails.reasoning_tokens)
  return {
    inputTokens: Math.max(0, prompt - (cacheRead ?? 0) - (cacheWrite ?? 0)),
    outputTokens: count(usage.completion_tokens) ?? 0,
    ...(cacheRead !== undefined && { cacheReadTokens: cacheRead }),
    ...(cacheWrite !== undefined && { cacheWriteTokens: cacheWrite }),
    ...(reasoning !== undefined && { reasoningTokens: reasoning }),
  }
}

// ---------------------------------------------------------------------------
// Errors

/** An HTTP error answer → LlmError. */
export function httpError(provider: string, status: number, bodyText: string, headers: Headers, credentialSource?: string): LlmError {
  const { message: detail, code: providerCode } = errorDetail(bodyText)
  const text = `${detail} ${providerCode}`
  let code: string
  if (status === 401 || status === 403) code = 'AUTH'
  else if (status === 402 || (status >= 400 && status < 500 && QUOTA_RE.test(text))) code = 'QUOTA'
  else if (status === 429) code = 'RATE_LIMIT'
  else if (status === 408) code = 'TIMEOUT'
  else if (status === 413 || (status >= 400 && status < 500 && CONTEXT_RE.test(text))) code = 'CONTEXT_OVERFLOW'
  else if (status === 503 || status === 529) code = 'SERVICE_UNAVAILABLE'
  else if (status >= 500) code = 'SERVER'
  else code = 'BAD_REQUEST'
  const retryAfter = parseRetryAfter(headers)
  const validStatus = status >= 100 && status <= 599
  const hint = code === 'AUTH' && credentialSource ? ` (route "${provider}": check ${credentialSource})` : ''
  return new LlmError(`${provider}: HTTP ${status}${detail ? `: ${detail}` : ''}${hint}`, code, {
    ...(validStatus && { status }),
    ...(retryAfter !== undefined && { providerRetryAfterMs: retryAfter }),
    ...requestIdOf(headers),
  })
}

/** An `{"error": …}` object inside a 200 event stream. */
function streamError(provider: string, error: unknown): LlmError {
  const detail = isObject(error) ? errorDetail(JSON.stringify({ error })) : { message: String(error), code: '' }
  const text = `${detail.message} ${detail.code}`
  const code = CONTEXT_RE.test(text)
    ? 'CONTEXT_OVERFLOW'
    : QUOTA_RE.test(text)
      ? 'QUOTA'
      : /rate.?limit/i.test(text)
        ? 'RATE_LIMIT'
        : /overload|unavailable/i.test(text)
          ? 'SERVICE_UNAVAILABLE'
          : 'SERVER'
  return new LlmError(`${provider}: error in the event stream: ${detail.message || 'unknown error'}`, code)
}

function errorDetail(bodyText: string): { message: string; code: string } {
  try {
    const json: unknown = JSON.parse(bodyText)
    if (isObject(json)) {
      const error = isObject(json.error) ? json.error : json
      const message = typeof error.message === 'string' ? error.message : typeof json.error === 'string' ? json.error : ''
      const code = [error.code, error.type].filter(v => typeof v === 'string').join(' ')
      if (message || code) return { message: truncate(message || code, 500), code }
    }
  } catch {
    // not JSON
  }
  return { message: truncate(bodyText.trim(), 500), code: '' }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}
