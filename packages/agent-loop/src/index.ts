import { AgentLoop } from './service.ts'

export default AgentLoop
export {
  Agent,
  pendingRouteSwitch,
  type AgentOptions,
  type RouteSwitchOptions,
  type TurnLimits,
  type AgentStatus,
  type CancelOptions,
  type PreStepDecision,
  type RequestErrorAction,
} from './agent.ts'
export type {
  AgentPayload,
  AgentWaterfallListener,
  ErrorPayload,
  InboxClaimedPayload,
  InboxPayload,
  PreStepPayload,
  RequestErrorPayload,
  RequestPayload,
  SessionStartPayload,
  StatusPayload,
  TurnStoppingPayload,
} from './events.ts'
export { Inbox, type InboxNotify, type InboxTarget } from './inbox.ts'
export { CLEARED_RUNTIME_CONTEXT, RUNTIME_CONTEXT_OWNER, RuntimeContextProjection } from './runtime-context.ts'
export { AgentLoop, type AgentLoopConfig, type CreateAgentOptions, type Delegation } from './service.ts'
export {
  buildManifest,
  diffManifests,
  requestManifest,
  type LoggedRequest,
  type Manifest,
  type ManifestDiff,
  type ManifestInput,
  type ManifestKind,
  type ManifestRow,
  type ManifestTotal,
} from './manifest.ts'
export { packageVersion, pluginDrift, promptSources, type IdentifyPlugin } from './provenance.ts'
export type { PluginIdentity } from './identity.ts'
