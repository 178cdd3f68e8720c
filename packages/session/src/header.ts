import type { LlmCallConfig, ToolSchema } from '@loom/llm'
import { lastEventOfType, type RequestHeader, type SessionEvent } from './events.ts'

/**
 * Request headers: what a model call carried besides the history. The loop logs
 * a header only when it differs from the last one, so the comparison must ignore
 * representation noise (an empty system text, an empty tool list) and nothing else.
 */
export function canonicalHeader(header: RequestHeader): RequestHeader {
  const canonical: RequestHeader = { config: header.config }
  const defaults = header.adapterDefaults
  if (defaults?.reasoningEffort === true || defaults?.maxTokens === true) {
    canonical.adapterDefaults = {
      ...(defaults.reasoningEffort === true && { reasoningEffort: true as const }),
      ...(defaults.maxTokens === true && { maxTokens: true as const }),
    }
  }
  if (header.system) canonical.system = header.system
  if (header.tools?.length) canonical.tools = header.tools
  return canonical
}

export function callConfigEquals(a: LlmCallConfig, b: LlmCallConfig): boolean {
  return (
    a.provider === b.provider &&
    a.model === b.model &&
    a.reasoningEffort === b.reasoningEffort &&
    a.temperature === b.temperature &&
    a.maxTokens === b.maxTokens &&
    ((a.stop === undefined && b.stop === undefined) ||
      (a.stop !== undefined && b.stop !== undefined && a.stop.length === b.stop.length && a.stop.every((s, i) => s === b.stop![i])))
  )
}

export function headerEquals(a: RequestHeader, b: RequestHeader): boolean {
  const toolsA = a.tools ?? []
  const toolsB = b.tools ?? []
  return (
    callConfigEquals(a.config, b.config) &&
    a.adapterDefaults?.reasoningEffort === b.adapterDefaults?.reasoningEffort &&
    a.adapterDefaults?.maxTokens === b.adapterDefaults?.maxTokens &&
    (a.system ?? '') === (b.system ?? '') &&
    toolsA.length === toolsB.length &&
    toolsA.every((tool, i) => sameTool(tool, toolsB[i]))
  )
}

/**
 * Tools are equal when their JSON is. Field by field first: a step's tools are new
 * objects, but their parameters are the frozen copy every assembly shares (and a
 * logged header's are frozen too), so each value is serialized once at most.
 */
function sameTool(a: ToolSchema, b: ToolSchema): boolean {
  if (a === b) return true
  const fieldsA = a as unknown as Record<string, unknown>
  const fieldsB = b as unknown as Record<string, unknown>
  const keys = Object.keys(a)
  const keysB = Object.keys(b)
  if (keys.length === keysB.length && keys.every((key, i) => key === keysB[i] && sameValue(fieldsA[key], fieldsB[key]))) return true
  return json(a) === json(b)
}

const sameValue = (a: unknown, b: unknown) => a === b || (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && json(a) === json(b))

// Frozen values cannot change: each is serialized once for all the comparisons of later steps.
const jsons = new WeakMap<object, string>()
function json(value: object): string {
  let text = jsons.get(value)
  if (text === undefined) {
    text = JSON.stringify(value)
    if (Object.isFrozen(value)) jsons.set(value, text)
  }
  return text
}

/** The header in force at the end of `events` (the last `request/header`), else `from`. */
export function foldRequestHeader(events: readonly SessionEvent[], from?: RequestHeader): RequestHeader | undefined {
  const event = lastEventOfType(events, 'request/header')
  return event ? canonicalHeader(event.data.header) : from
}
