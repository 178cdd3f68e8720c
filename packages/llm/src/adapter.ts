import type { LlmCallConfig, LlmFailure, Message, SessionId, StreamChunk, ToolSchema } from './types.ts'

/** One model call: the call config plus everything the model sees. */
export interface GenerateOptions extends LlmCallConfig {
  messages: readonly Message[]
  system?: string
  tools?: readonly ToolSchema[]
  signal?: AbortSignal
  /** The session this call belongs to (checkpoint policies flush it before the call). */
  sessionId?: SessionId
  purpose?: 'compaction' | 'session-title'
}

/**
 * How the agent loop retries a failed request of a route: `normal` retries the
 * listed codes up to `maxRetries` times (`RETRIED_ONCE_CODES` once), `always` retries every failure but an
 * abort without a count. Backoff doubles from `initialDelayMs` up to
 * `maxDelayMs` with ±`jitterRatio`; a provider's Retry-After wins when it is at
 * most `maxRetryAfterMs` (else the failure is final); the waits of one request
 * add up to at most `maxTotalWaitMs`.
 */
export type ResolvedRetryPolicy =
  | {
      mode: 'normal'
      maxRetries: number
      retryableCodes: readonly string[]
      initialDelayMs: number
      maxDelayMs: number
      jitterRatio: number
      maxRetryAfterMs?: number
      maxTotalWaitMs?: number
    }
  | { mode: 'always'; initialDelayMs: number; maxDelayMs: number; jitterRatio: number; maxRetryAfterMs?: number; maxTotalWaitMs?: number }

export const DEFAULT_RETRY_POLICY = Object.freeze({
  mode: 'normal',
  maxRetries: 5,
  retryableCodes: Object.freeze(['RATE_LIMIT', 'SERVER', 'SERVICE_UNAVAILABLE', 'TIMEOUT', 'NETWORK', 'UNREACHABLE']),
  initialDelayMs: 500,
  maxDelayMs: 10_000,
  jitterRatio: 0.1,
}) satisfies ResolvedRetryPolicy

const DEFAULT_MAX_RETRY_AFTER_MS = 60_000
const DEFAULT_MAX_TOTAL_WAIT_MS = 120_000

/**
 * Failures that waiting seldom heals (a refused connection, an unknown host, an
 * untrusted certificate: mostly a wrong baseUrl): a `normal` policy retries them
 * once at most, so the turn fails in about a second with the reason instead of
 * after every backoff.
 */
export const RETRIED_ONCE_CODES: readonly string[] = Object.freeze(['UNREACHABLE'])

/** How many times a `normal` policy retries this failure: its `maxRetries`, or once for `RETRIED_ONCE_CODES`. */
export function maxRetriesOf(policy: Extract<ResolvedRetryPolicy, { mode: 'normal' }>, failure: LlmFailure): number {
  return RETRIED_ONCE_CODES.includes(failure.code) ? Math.min(1, policy.maxRetries) : policy.maxRetries
}

/**
 * The wait before retry number `retry + 1` of a request that has already waited
 * `waitedMs`, or `undefined` when the failure is final under `policy`.
 */
export function retryDelay(policy: ResolvedRetryPolicy, failure: LlmFailure, retry: number, waitedMs: number, random = Math.random): number | undefined {
  if (failure.code === 'ABORTED') return undefined
  if (policy.mode === 'normal' && (retry >= maxRetriesOf(policy, failure) || !policy.retryableCodes.includes(failure.code))) return undefined
  let delay: number
  if (failure.providerRetryAfterMs !== undefined) {
    if (failure.providerRetryAfterMs > (policy.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS)) return undefined
    delay = failure.providerRetryAfterMs
  } else {
    const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** retry)
    delay = Math.max(0, Math.round(base * (1 + policy.jitterRatio * (2 * random() - 1))))
  }
  return waitedMs + delay > (policy.maxTotalWaitMs ?? DEFAULT_MAX_TOTAL_WAIT_MS) ? undefined : delay
}

/** `LlmModelInfo.reasoning` of a route that offers `efforts` (none: its models do not reason). */
export function reasoningInfo(efforts: readonly string[], defaultEffort?: string): Pick<LlmModelInfo, 'reasoning'> {
  if (!efforts.length) return {}
  return { reasoning: { efforts: efforts.map(id => ({ id, name: id })), ...(defaultEffort !== undefined && { defaultEffort }) } }
}

export interface LlmModelInfo {
  provider: string
  id: string
  name: string
  context?: { contextWindow: number }
  defaultMaxTokens?: number
  reasoning?: { efforts: { id: string; name: string }[]; defaultEffort?: string }
}

/**
 * A model provider. Only `stream` is required: it yields the chunks of one call
 * and ends with a `finish` chunk (or throws; the runtime turns a throw into a
 * terminal `finish` with the failure).
 */
export abstract class LlmAdapter {
  providerInfo(provider: string): { id: string; name: string } {
    return { id: provider, name: provider }
  }

  /** `undefined`: the runtime's default policy. */
  providerRetryPolicy(_provider: string): ResolvedRetryPolicy | undefined {
    return undefined
  }

  async listModels(_provider: string): Promise<readonly LlmModelInfo[]> {
    return []
  }

  async resolveModel(provider: string, model: string, _signal?: AbortSignal): Promise<LlmModelInfo> {
    return { provider, id: model, name: model }
  }

  abstract stream(options: GenerateOptions): AsyncIterable<StreamChunk>
}
