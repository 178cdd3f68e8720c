import { SessionStore } from './store.ts'

export default SessionStore
export * from './events.ts'
export { interruptedTurnClosers, openTail, TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT } from './closers.ts'
export { appendToBlocks, EVENT_BLOCK, type EventBlocks, joinBlocks } from './event-log.ts'
export { callConfigEquals, canonicalHeader, foldRequestHeader, headerEquals } from './header.ts'
export { jsonSnapshot, NonJsonError } from '@loom/llm'
export { deepFreezeJson, Session } from './session.ts'
export * from './requests.ts'
export * from './prices.ts'
export { lastRoute, outlineSession, type SessionOutline } from './summary.ts'
export { describeDrift, describeHeaderChanges, describeReason, describeRetry, describeRouteSwitch, headerChangeCauses, headerChangeOwners } from './describe.ts'
export {
  SessionForkError,
  SessionLeaseError,
  SessionStore,
  type PrepareOptions,
  type SessionForkErrorCode,
  type SessionLeaseErrorCode,
  type SessionLeaseHolder,
  type SessionMeta,
  type SessionPersistence,
  type StoredSession,
} from './store.ts'
export {
  checkSurfaceMarkers,
  foldSurface,
  isAppendSurfaceEvent,
  isReplacementSurfaceEvent,
  type Replacement,
  type SurfaceState,
} from './surface.ts'
export { dataProblem, envelopeProblem } from './validate.ts'
export { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from './errors.ts'
export { checkStored, type StoredSessionCheck } from './check.ts'
export { defaultLeaseCommand, processExists } from './lease.ts'
export { SessionWriteBehind, type SessionWriteBehindOptions } from './write-behind.ts'
export { SessionTracker, type TrackedLog } from './tracker.ts'
