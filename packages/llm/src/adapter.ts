import type { LlmCallConfig, Message, SessionId, StreamChunk, ToolSchema } from './types.ts'

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

export type ResolvedRetryPolicy =
  | { mode: 'normal'; maxRetries: number; retryableCodes: readonly string[]; initialDelayMs: number; maxDelayMs: number; jitterRatio: number }
  | { mode: 'always'; initialDelayMs: number; maxDelayMs: number; jitterRatio: number }

export const DEFAULT_RETRY_POLICY: ResolvedRetryPolicy = Object.freeze({
  mode: 'normal',
  maxRetries: 5,
  retryableCodes: Object.freeze(['RATE_LIMIT', 'SERVER', 'SERVICE_UNAVAILABLE', 'TIMEOUT', 'NETWORK']),
  initialDelayMs: 500,
  maxDelayMs: 10_000,
  jitterRatio: 0.1,
})

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
