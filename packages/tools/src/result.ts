import { deepFreeze, freezeMessage, type ContentBlock, type UserMessage } from '@loom/llm'
import { isPlainObject, snapshotJson } from './json.ts'
import type { JsonValue, ToolErrorInfo, ToolExecutionResult } from './types.ts'

/** Thrown (as a `TypeError`) by the normalizers below; the caller adds who produced the value. */
function invalid(detail: string): never {
  throw new TypeError(detail)
}

/** A string becomes one text block; blocks are checked and snapshotted. Returns a frozen array. */
export function normalizeContent(value: unknown, what = 'content'): ContentBlock[] {
  if (typeof value === 'string') return deepFreeze([{ type: 'text', text: value }])
  if (!Array.isArray(value)) return invalid(`${what} must be a string or an array of content blocks, got ${describe(value)}`)
  value.forEach((block, i) => {
    if (!isPlainObject(block) || typeof block.type !== 'string') invalid(`${what}[${i}] must be a content block ({ type, ... }), got ${describe(block)}`)
    if (block.type === 'text' && typeof block.text !== 'string') invalid(`${what}[${i}] is a text block without a string "text"`)
  })
  const snapshot = snapshotJson(value)
  if (!snapshot.ok) return invalid(`${what} must be plain JSON (found ${snapshot.problem})`)
  return snapshot.value as unknown as ContentBlock[]
}

export function normalizeMeta(value: unknown): JsonValue {
  const snapshot = snapshotJson(value)
  if (!snapshot.ok) return invalid(`meta must be plain JSON (found ${snapshot.problem})`)
  return snapshot.value
}

export function normalizeUserMessage(value: unknown, what: string): UserMessage {
  if (!isPlainObject(value) || value.role !== 'user' || !Array.isArray(value.content) || typeof value.id !== 'string' || !isPlainObject(value.source)) {
    return invalid(`${what} must be a user message (see createUserMessage in @loom/llm), got ${describe(value)}`)
  }
  normalizeContent(value.content, `${what}.content`)
  // A detached copy: the caller mutating its object later changes nothing.
  return freezeMessage(value as unknown as UserMessage)
}

function normalizeContexts(value: unknown): UserMessage[] {
  if (value === undefined) return []
  if (!Array.isArray(value)) return invalid(`additionalContexts must be an array of user messages, got ${describe(value)}`)
  return value.map((message, i) => normalizeUserMessage(message, `additionalContexts[${i}]`))
}

/**
 * A checked, detached, deeply frozen result with no undefined optional keys. Any
 * shape problem is a `TypeError`: results come from hooks as well as the runtime.
 */
export function normalizeResult(value: unknown): ToolExecutionResult {
  if (!isPlainObject(value) || typeof value.isError !== 'boolean') {
    return invalid(`a tool result must be an object with a boolean "isError", got ${describe(value)}`)
  }
  const content = normalizeContent(value.content)
  const meta = value.meta === undefined ? undefined : normalizeMeta(value.meta)
  const contexts = normalizeContexts(value.additionalContexts)
  const extras = {
    ...(meta !== undefined && { meta }),
    ...(contexts.length > 0 && { additionalContexts: contexts }),
  }
  if (!value.isError) {
    if (value.concludesTurn !== undefined && typeof value.concludesTurn !== 'boolean') invalid('concludesTurn must be a boolean')
    return deepFreeze({ isError: false, content, ...extras, ...(value.concludesTurn === true && { concludesTurn: true as const }) })
  }
  const error = value.error
  if (!isPlainObject(error) || typeof error.message !== 'string') return invalid('an error result needs error: { message: string, info? }')
  let info: ToolErrorInfo | undefined
  if (error.info !== undefined) {
    const given = error.info
    if (!isPlainObject(given) || typeof given.name !== 'string' || typeof given.code !== 'string') invalid('error.info must be { name: string, code: string }')
    info = { name: given.name as string, code: given.code as string }
  }
  return deepFreeze({ isError: true, error: { message: error.message, ...(info && { info }) }, content, ...extras })
}

/** Joins the text of content blocks, for the error message of a blocked call. */
export function textOf(content: readonly ContentBlock[]): string {
  return content.flatMap(block => (block.type === 'text' ? [block.text] : [])).join('\n')
}

export function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`
  return typeof value === 'object' ? 'an object' : typeof value
}
