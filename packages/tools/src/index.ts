import { ToolRuntime } from './service.ts'

export default ToolRuntime
export { isRead, ToolRuntime, type ToolRuntimeConfig } from './service.ts'
export { defineTool, describeViolations, TOOL_EFFECTS, TOOL_NAME, type ToolSpec } from './define.ts'
export { CREDENTIAL_STORES, installedFrom, PROTECTED_REFUSAL, PROTECTED_RULE, type ProtectedPath } from './protect.ts'
export type { ReadRule, ReadRules } from './workspace/read-policy.ts'
export { runToolCalls, type RunToolCallsOptions, type ToolCallRequest } from './schedule.ts'
export {
  ABORTED,
  ABORTED_BEFORE_DISPATCH,
  abortedBeforeDispatchResult,
  abortedResult,
  errorResult,
  ToolArgsError,
  ToolNotFoundError,
  ToolOutputError,
  ToolTimeoutError,
} from './errors.ts'
export type * from './types.ts'
