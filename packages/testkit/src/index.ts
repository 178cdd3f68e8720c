export {
  createHost,
  HOST_PLUGIN,
  manifestOutline,
  SCRIPTED_MODEL,
  SCRIPTED_PROVIDER,
  type CallToolOptions,
  type DeltaOptions,
  type Host,
  type HostLog,
  type HostOptions,
  type Mounted,
  type OutlineRow,
  type StablePromptOptions,
  type PromptDelta,
  type PromptDeltaEntry,
  type PromptDeltaVariable,
  type RunOptions,
  type RunResult,
} from './host.ts'
export { snapshotRequest } from './snapshot.ts'
export type { ScriptEntry } from '@loom/llm/testing'
