// The data that crosses the model boundary: content blocks, messages, stream
// chunks, call configuration, usage and failures. Plain JSON, so every value can
// be logged to a session and rebuilt from it.

export type MessageId = string
export type CallId = string
export type SessionId = string

export interface TextBlock {
  type: 'text'
  text: string
}
export interface ReasoningBlock {
  type: 'reasoning'
  text: string
}
export interface ToolCallBlock {
  type: 'tool-call'
  id: CallId
  name: string
  arguments: string /* raw JSON text */
}
export interface ToolResultBlock {
  type: 'tool-result'
  toolCallId: CallId
  content: ContentBlock[]
  isError?: boolean
}
export type ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock

/**
 * One rendered runtime-context entry, as carried by a snapshot message, with what
 * the manifest of a request shows of it (a snapshot logged before these were
 * recorded has only the name and the text).
 */
export interface ContextSnapshotSection {
  readonly name: string
  readonly text: string
  /** The plugin that registered it. */
  readonly owner?: string
  /** Its registered order. */
  readonly order?: number
  readonly stability?: 'static' | 'session' | 'step'
  /** Who stands behind it and what it is (the `Trust` and `Category` of @loom/system-prompt). */
  readonly trust?: string
  readonly category?: string
  /** sha256 of the source it was read from, and when that source was last written (ms since the epoch). */
  readonly sourceHash?: string
  readonly modifiedAt?: number
}

export type ContextForm =
  | { form?: never }
  | { form: 'instructions' }
  | { form: 'catalog' }
  | { form: 'snapshot'; sections: readonly ContextSnapshotSection[] }
  | { form: 'notice'; summary: string }
  | { form: 'relay' }
  | { form: 'recall' }

export type UserSource = { kind: 'user' }
export type PluginSource = { kind: 'plugin'; plugin: string } & ContextForm
export type ModelSource = { kind: 'model'; provider: string; model: string; replayState?: unknown }
export type ToolSource = { kind: 'tool'; callId: CallId }
export type MessageSource = UserSource | PluginSource | ModelSource | ToolSource

export interface Message {
  readonly id: MessageId
  readonly role: 'system' | 'user' | 'assistant'
  readonly content: readonly ContentBlock[]
  readonly source: MessageSource
}
export interface UserMessage extends Message {
  readonly role: 'user'
}
export interface AssistantMessage extends Message {
  readonly role: 'assistant'
  readonly source: ModelSource
}
export interface ToolResultMessage extends Message {
  readonly role: 'user'
  readonly content: readonly [ToolResultBlock]
  readonly source: ToolSource
}

export interface LlmFailure {
  readonly message: string
  readonly code: string
  readonly status?: number
  readonly providerRetryAfterMs?: number
  readonly requestId?: string
}

export type FinishReason =
  | { kind: 'stop' }
  | { kind: 'tool-calls' }
  | { kind: 'max-tokens' }
  | { kind: 'aborted'; failure: LlmFailure }
  | { kind: 'error'; failure: LlmFailure }

/** Disjoint buckets: cache reads and writes are not part of `inputTokens`; reasoning is part of output. */
export interface TokenUsage {
  inputTokens: number
  outputTokens: number
  cacheReadTokens?: number
  cacheWriteTokens?: number
  reasoningTokens?: number
}

export interface ReplayEnvelope {
  response: unknown
  blocks?: readonly unknown[]
}

export type StreamChunk =
  | { type: 'block-start'; index: number; blockType: ContentBlock['type'] }
  | { type: 'text-delta'; index: number; text: string }
  | { type: 'reasoning-delta'; index: number; text: string }
  | { type: 'tool-call-delta'; index: number; id: CallId; name?: string; argumentsDelta: string }
  | { type: 'block-end'; index: number; block: ContentBlock }
  | { type: 'usage'; usage: TokenUsage }
  | { type: 'finish'; reason: FinishReason; replayState?: ReplayEnvelope }

export interface ToolSchema {
  name: string
  description: string
  parameters: Record<string, unknown>
}

export interface LlmCallConfig {
  provider: string
  model: string
  reasoningEffort?: string
  temperature?: number
  maxTokens?: number
  stop?: string[]
}

/** Marks the config fields the adapter filled in rather than the caller. */
export interface LlmCallConfigAdapterDefaults {
  reasoningEffort?: true
  maxTokens?: true
}
