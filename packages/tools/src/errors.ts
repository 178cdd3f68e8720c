import { HarnessError } from '@loom/llm'
import type { ToolErrorInfo, ToolExecutionResult } from './types.ts'

/** The model called a tool that is not visible in its scope (or was restricted away). */
export class ToolNotFoundError extends HarnessError {
  constructor(message: string) {
    super(message, 'UNKNOWN_TOOL')
  }
}

/** The arguments do not match the tool's schema, or are not JSON at all. */
export class ToolArgsError extends HarnessError {
  constructor(message: string) {
    super(message, 'INVALID_ARGS')
  }
}

/** The body ran past the tool's `timeoutMs`. */
export class ToolTimeoutError extends HarnessError {
  constructor(message: string) {
    super(message, 'TIMEOUT')
  }
}

/** The body returned something that is not a `ToolOutput`. */
export class ToolOutputError extends HarnessError {
  constructor(message: string) {
    super(message, 'INVALID_TOOL_OUTPUT')
  }
}

export const ABORTED_BEFORE_DISPATCH = 'ABORTED_BEFORE_DISPATCH'
export const ABORTED = 'ABORTED'

/** `{isError: true, content: 'Error: <message>', error: {message, info?}}`. */
export function errorResult(message: string, info?: ToolErrorInfo): Extract<ToolExecutionResult, { isError: true }> {
  return {
    isError: true,
    error: { message, ...(info && { info: { name: info.name, code: info.code } }) },
    content: [{ type: 'text', text: `Error: ${message}` }],
  }
}

/** The result of a call that never reached its body because the caller aborted. */
export function abortedBeforeDispatchResult() {
  return errorResult('tool call aborted before dispatch', { name: 'AbortError', code: ABORTED_BEFORE_DISPATCH })
}

/** The result of a call whose body had started when the caller aborted. */
export function abortedResult() {
  return errorResult('tool call aborted', { name: 'AbortError', code: ABORTED })
}

export function isAbortResult(result: ToolExecutionResult): boolean {
  const code = result.isError ? result.error.info?.code : undefined
  return result.isError && result.error.info?.name === 'AbortError' && (code === ABORTED || code === ABORTED_BEFORE_DISPATCH)
}
