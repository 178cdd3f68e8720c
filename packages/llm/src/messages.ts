import { frozenJsonSnapshot, NonJsonError } from './json.ts'
import type { AssistantMessage, CallId, ContentBlock, Message, ModelSource, ToolResultMessage, UserMessage, UserSource, PluginSource } from './types.ts'

/**
 * Freezes a value and everything reachable from it, in place. AbortSignals are
 * left alone so a frozen request keeps a live signal.
 */
export function deepFreeze<T>(value: T): T {
  const stack: unknown[] = [value]
  while (stack.length) {
    const item = stack.pop()
    if (typeof item !== 'object' || item === null || Object.isFrozen(item) || item instanceof AbortSignal) continue
    Object.freeze(item)
    // Arrays by index: listing a long history's keys would allocate a string per element.
    if (Array.isArray(item)) for (const element of item) stack.push(element)
    else for (const key of Reflect.ownKeys(item)) stack.push((item as Record<PropertyKey, unknown>)[key])
  }
  return value
}

/**
 * A detached, deeply frozen copy that keeps the message's id; a message this made
 * already is returned as it is. A JSON message (every one a session can log) is copied
 * as a JSON snapshot, which the session then logs without copying it again.
 */
export function freezeMessage<M extends Message>(message: M): M {
  if (detached.has(message)) return message
  try {
    return own(frozenJsonSnapshot(message))
  } catch (error) {
    if (!(error instanceof NonJsonError)) throw error
    return own(structuredClone(message))
  }
}

/** Messages made here: detached from any caller's objects and deeply frozen, so never copied again. */
const detached = new WeakSet<object>()

function own<M extends Message>(message: M): M {
  detached.add(deepFreeze(message))
  return message
}

export function createUserMessage(input: { content: readonly ContentBlock[]; source: UserSource | PluginSource }): UserMessage {
  return freezeMessage({ id: crypto.randomUUID(), role: 'user', content: [...input.content], source: input.source })
}

export function createAssistantMessage(input: { content: readonly ContentBlock[]; source: Omit<ModelSource, 'kind'> }): AssistantMessage {
  return freezeMessage({ id: crypto.randomUUID(), role: 'assistant', content: [...input.content], source: { kind: 'model', ...input.source } })
}

export function createToolResultMessage(input: { callId: CallId; content: readonly ContentBlock[]; isError?: boolean }): ToolResultMessage {
  const block = {
    type: 'tool-result' as const,
    toolCallId: input.callId,
    content: [...input.content],
    ...(input.isError !== undefined && { isError: input.isError }),
  }
  return freezeMessage({ id: crypto.randomUUID(), role: 'user', source: { kind: 'tool', callId: input.callId }, content: [block] })
}

/** A user message with one text block. */
export function userText(text: string): UserMessage {
  return freezeMessage({ id: crypto.randomUUID(), role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } })
}
