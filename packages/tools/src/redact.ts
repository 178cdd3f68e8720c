import { deepFreeze, type ContentBlock } from '@loom/llm'
import { createRedactor, hostRedactor } from '@loom/secrets'
import type { ToolExecutionResult } from './types.ts'

// With no host secret known, credentials recognized by their shape (a GitHub token, a private key) still go.
const shapesOnly = createRedactor([], { contextual: false })

/** The redactor of tool results, read at each use (the host's secrets may change). */
function resultRedactor(): (text: string) => string {
  // Only the secrets themselves: the model edits files from what it read, so nothing else may move.
  return hostRedactor({ contextual: false }) ?? shapesOnly
}

/** `text` redacted as a tool result's text is (see `redactResult`): for what a tool keeps beside its result, such as an artifact. */
export function redactText(text: string): string {
  return resultRedactor()(text)
}

/**
 * The result with every secret value of the host (its environment's, and those
 * registered from files), and every credential recognized by its shape, replaced
 * by `[REDACTED]`, in its text and its error message: whatever a tool read (a
 * `.env` file, a command's output, an error echoing a request), the host's keys
 * never reach the model or the session log. The same frozen result when nothing
 * was found.
 */
export function redactResult(result: ToolExecutionResult): ToolExecutionResult {
  const redactor = resultRedactor()
  let changed = false
  const text = (value: string) => {
    const out = redactor(value)
    if (out !== value) changed = true
    return out
  }
  const content = result.content.map((block): ContentBlock => (block.type === 'text' ? { ...block, text: text(block.text) } : block))
  const error = result.isError ? { ...result.error, message: text(result.error.message) } : undefined
  if (!changed) return result
  return deepFreeze({ ...result, content, ...(error && { error }) }) as ToolExecutionResult
}
