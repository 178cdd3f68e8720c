import { deepFreeze, jsonSnapshot, NonJsonError } from '@loom/llm'
import type { JsonValue } from './types.ts'

export type Snapshot<T = JsonValue> = { ok: true; value: T } | { ok: false; problem: string }

/**
 * A detached, deeply frozen copy of a JSON value, or the first reason it would
 * not survive a JSON round trip unchanged.
 */
export function snapshotJson(value: unknown): Snapshot {
  try {
    return { ok: true, value: deepFreeze(jsonSnapshot(value) as JsonValue) }
  } catch (error) {
    if (error instanceof NonJsonError) return { ok: false, problem: error.message }
    throw error
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}
