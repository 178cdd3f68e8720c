// `@loom/llm/testing`: a model that plays scripted replies (or replays a
// session log) and the canonical chunk sequences, for tests and demos. The
// `@loom/llm-scripted` plugin mounts it as a route; the test kit uses it directly.
export {
  ScriptedAdapter,
  type ScriptedConfig,
  type ScriptedToolCall,
  type ScriptEntry,
  type ScriptFailure,
  type ScriptFunction,
  type ScriptReply,
  type ScriptResult,
} from './scripted.ts'
export { blockChunks, estimateInputTokens, textResponse, toolCallResponse } from './chunks.ts'
export { loadReplay, type RecordedResponse } from './replay.ts'
