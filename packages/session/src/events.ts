import type {
  AssistantMessage,
  JsonValue,
  CallId,
  ContentBlock,
  LlmCallConfig,
  LlmCallConfigAdapterDefaults,
  LlmFailure,
  SessionId,
  StreamChunk,
  TokenUsage,
  ToolResultMessage,
  ToolSchema,
  UserMessage,
} from '@loom/llm'

export type { JsonValue } from '@loom/llm'

/** The on-disk and in-memory format version of a session log. */
export const SESSION_FORMAT_VERSION = 0

export type AgentCancelCause =
  | { kind: 'user' }
  | { kind: 'parent' }
  | { kind: 'hook'; reason: string }
  | { kind: 'disposed' }
  /** An error nothing caught stopped the process: `error` is its first line, `plugin` the row whose code threw it (none: Loom's own). */
  | { kind: 'uncaught'; error: string; plugin?: string }
  /** Nothing reads the output any more (`loom run … | head -1`): the turn stops, as `head`'s writer would. */
  | { kind: 'output-closed' }

export type TurnEndReason =
  | { kind: 'completed' }
  | { kind: 'blocked' }
  | { kind: 'max-tokens' }
  | { kind: 'interrupted' }
  | { kind: 'aborted'; reason: AgentCancelCause }
  | { kind: 'error'; error: LlmFailure }
  | { kind: 'limit'; limit: RunLimit; used: number; max: number }

/** A per-turn budget of the agent loop; `used` and `max` are steps, input tokens or US dollars. */
export type RunLimit = 'max-steps' | 'max-input-tokens' | 'max-cost-usd'

/** What the model was sent, apart from the history: logged only when it changes. */
export interface RequestHeader {
  config: LlmCallConfig
  adapterDefaults?: LlmCallConfigAdapterDefaults
  system?: string
  tools?: ToolSchema[]
}

export type RequestHeaderReason = 'initial' | 'resume' | 'change'

/** One section or tool of a header: its name, the plugin that owns it, the sha256 (hex) of its rendered text / JSON schema. */
export interface RequestSourceEntry {
  name: string
  owner: string
  sha256: string
}

/**
 * A section of a header, with what the manifest of that request shows of it (a
 * header logged before these fields existed has none): its registered order and
 * stability, size, trust, category, and the source it was read from.
 */
export interface RequestSectionSource extends RequestSourceEntry {
  order?: number
  stability?: 'static' | 'session' | 'step'
  chars?: number
  tokens?: number
  trust?: string
  category?: string
  sourceHash?: string
  /** When the source was last written (ms since the epoch). */
  modifiedAt?: number
}

/**
 * A plugin that contributed to a header: its package version when found, the
 * sha256 of its source for a plugin loaded by path or a workspace package (absent
 * in logs written before it was recorded), and a digest of everything it contributed.
 */
export interface RequestSourcePlugin {
  name: string
  version?: string
  sourceHash?: string
  digest: string
}

/** Provenance of a header (metadata: never part of the header comparison). */
export interface RequestSources {
  sections: RequestSectionSource[]
  tools: RequestSourceEntry[]
  plugins: RequestSourcePlugin[]
  /** Sections the prompt budgets left out of this header (absent: none). */
  leftOut?: string[]
}

/** How the plugins behind a resumed session's request differ from those of its last request before the resume. */
export interface PluginDrift {
  added: RequestSourcePlugin[]
  removed: RequestSourcePlugin[]
  /** Same plugin, another version (either side may be unknown). */
  upgraded: { name: string; from?: string; to?: string }[]
  /** Same plugin and version (or none), other source: an edited plugin loaded by path or workspace package (absent in logs written before it was recorded). */
  changed?: { name: string; version?: string; from: string; to: string }[]
}

export interface RequestSourceChange {
  name: string
  owner: string
  change: 'added' | 'removed' | 'changed'
  /** The prompt budgets left it out (`removed`) or let it back in (`added`). */
  byBudget?: true
}

/** What a `change` header changed relative to the previous header. */
export interface RequestHeaderChanges {
  sections: RequestSourceChange[]
  tools: RequestSourceChange[]
  /** Config keys that differ (`adapterDefaults.<key>` for adapter-filled ones). */
  config: string[]
  /** When the budgets left a section out or let one back: the sections whose text grew (or shrank), which made them. */
  resized?: { name: string; owner: string; fromChars: number; toChars: number }[]
  /** The route switch (the `agent/route` event at `seq`) that the new provider or model comes from. */
  route?: AgentRouteSwitch & { seq: number }
  /**
   * UTF-8 byte offset of the first difference between the previous and the new
   * serialized prefix `JSON.stringify({ tools, system })` of the two headers (absent
   * fields omitted); absent when the prefix did not change.
   */
  firstDifference?: number
}

/** The route of an agent's next requests was switched while its session is open (`/model` in a conversation). */
export interface AgentRouteSwitch {
  provider: string
  model: string
  /** The route before the switch. */
  from?: { provider: string; model: string }
  /** Who switched it (`/model`, `/provider`, a plugin's name). */
  by?: string
}

export interface RequestContext {
  provider: string
  model: string
  contextWindow?: number
}

export interface SessionEventMap {
  'turn/start': { turn: number }
  'turn/end': { turn: number; reason: TurnEndReason }
  'step/start': { turn: number; step: number }
  'step/end': { turn: number; step: number }
  'user/message': UserMessage
  'assistant/chunk': { turn: number; step: number; chunk: StreamChunk }
  'assistant/message': { turn: number; step: number; message: AssistantMessage; usage?: TokenUsage; interrupted?: true }
  'tool/call': { turn: number; step: number; callId: CallId; name: string; arguments: string }
  'tool/result': { turn: number; step: number; message: ToolResultMessage; error?: { name: string; code: string }; meta?: JsonValue }
  /** `changes` on a `change` header, and on a `resume` header that differs from the last one; `drift` on a `resume` header whose plugins differ from the last request's. */
  'request/header': { header: RequestHeader; reason: RequestHeaderReason; sources?: RequestSources; changes?: RequestHeaderChanges; drift?: PluginDrift }
  'request/context': RequestContext
  /** The agent's next requests go to this route (`Agent.switchRoute`); the next header names it. Never model-visible. */
  'agent/route': AgentRouteSwitch
  /** A failed request is retried after `delayMs` (the failed attempt's chunks stay uncited); `retry` counts from 1. */
  'request/retry': { turn: number; step: number; retry: number; maxRetries?: number; delayMs: number; failure: LlmFailure }
  'compaction/start': { compactionId: string; turn: number | null }
  'compaction/summary': {
    compactionId: string
    summary: ContentBlock[]
    shadowedRange: { start: number; end: number }
    shadowedSeqs: number[]
    shadowedTokenCount: number
    provider: string
    model: string
    usage?: TokenUsage
  }
  'compaction/end': { compactionId: string; turn: number | null; error?: string }
  'compaction/prune': { shadowedRange: { start: number; end: number }; shadowedSeqs: number[]; shadowedTokenCount: number }
  'session/end-seed': Record<string, never>
  /** A durable change of an agent's inbox (queued input survives a restart). */
  'agent/inbox/spliced': {
    target: 'next-turn' | 'next-step'
    start: number
    removedCount?: number
    inserted: UserMessage[]
    outcome?: 'canceled'
  }
  /**
   * A tool call waits for an answer over the API (`loom serve --approve api`): its id, tool, a
   * preview of its arguments, why the policy asked, the answer at the deadline (`unattended`).
   * `session` and `agent` name a subagent that asks in this session's stream. Never model-visible.
   */
  'approval/requested': ApprovalRequested
  /** How the question of call `callId` was settled: a client's answer (`by`: the name it gave), or the deadline's. Never model-visible. */
  'approval/answered': ApprovalAnswered
}

export interface ApprovalRequested {
  callId: CallId
  tool: string
  /** The command, the path, else the arguments as JSON, cut short. */
  preview: string
  reason?: string
  rule?: string
  unattended: 'allow' | 'deny'
  deadlineMs: number
  effects?: string[]
  origin?: string
  destructive?: true
  session?: SessionId
  agent?: string
}

export interface ApprovalAnswered {
  callId: CallId
  decision: 'allow' | 'allow-session' | 'deny'
  /** The note for the model (a denial's), or why the deadline answered. */
  note?: string
  source: 'client' | 'deadline'
  by?: string
  /** The server that took the answer. */
  host: string
}

export type SessionEventType = keyof SessionEventMap

/**
 * Whether this build understands `type`; a stored log with any other type is
 * refused unless marked ignorable. A switch, not a Set: a load asks it of every
 * event, and a Set hashes each freshly parsed type string first (six times the
 * cost). The compiler checks that every type has its case.
 */
export function isKnownEventType(type: string): type is SessionEventType {
  const known = type as SessionEventType
  switch (known) {
    case 'turn/start':
    case 'turn/end':
    case 'step/start':
    case 'step/end':
    case 'user/message':
    case 'assistant/chunk':
    case 'assistant/message':
    case 'tool/call':
    case 'tool/result':
    case 'request/header':
    case 'request/context':
    case 'agent/route':
    case 'request/retry':
    case 'compaction/start':
    case 'compaction/summary':
    case 'compaction/end':
    case 'compaction/prune':
    case 'session/end-seed':
    case 'agent/inbox/spliced':
    case 'approval/requested':
    case 'approval/answered':
      return true
    default:
      return unlisted(known)
  }
}

/** Model-visible events: each must say how it changes the surface (the model's history). */
export type SurfaceEventType = 'user/message' | 'assistant/message' | 'tool/result'

/** Whether events of `type` are model-visible (a switch, as `isKnownEventType`). */
export function isSurfaceEventType(type: string): type is SurfaceEventType {
  switch (type) {
    case 'user/message':
    case 'assistant/message':
    case 'tool/result':
      return true
    default:
      return false
  }
}

// Compiles only when a switch over the event types left none out.
const unlisted = (_type: never): false => false

export type SurfaceOp = 'append' | { op: 'replace'; start: number; end: number }

export interface SurfaceIntent {
  surfaceOp: SurfaceOp
  sourceEventSeqs?: number[]
}

/** One logged event of the single type `T`. */
export interface SessionEventBase<T extends SessionEventType> {
  readonly type: T
  /** Index in the log: dense from 0. */
  readonly seq: number
  /** Date.now() at append. */
  readonly time: number
  readonly data: SessionEventMap[T]
  readonly surfaceOp?: SurfaceOp
  readonly sourceEventSeqs?: readonly number[]
  /** A reader that does not know this type may skip it. */
  readonly ignorable?: true
}

/**
 * A logged event: a union over the types in `T` (default: every type), so a
 * check of `event.type` narrows `event.data`. `SessionEvent<'turn/end'>` is one type.
 */
export type SessionEvent<T extends SessionEventType = SessionEventType> = { [K in T]: SessionEventBase<K> }[T]

/** The last event of `type` in `events`, scanning back from the end. */
export function lastEventOfType<T extends SessionEventType>(events: readonly SessionEvent[], type: T): SessionEvent<T> | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]
    if (event.type === type) return event as SessionEvent<T>
  }
  return undefined
}

/** Every event of `type`, in log order, typed as that event. */
export function eventsOfType<T extends SessionEventType>(events: readonly SessionEvent[], type: T): SessionEvent<T>[] {
  return events.filter(event => event.type === type) as SessionEvent<T>[]
}

/** Line 1 of a stored log, and `session.header` in memory. */
export interface SessionHeader {
  readonly version: typeof SESSION_FORMAT_VERSION
  readonly id: SessionId
  readonly createdAt: number
  /** Absolute working directory the session was started in. */
  readonly cwd?: string
  readonly parentSession?: SessionId
  /** Length of the inherited seed (without its end-seed marker) for forks. */
  readonly seedLength?: number
  readonly origin?: 'subagent'
  readonly delegationDepth?: number
  readonly agentPreset?: string
}
