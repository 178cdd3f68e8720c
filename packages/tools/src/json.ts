import { deepFreeze } from '@loom/llm'
import type { JsonValue } from './types.ts'

export type Snapshot<T = JsonValue> = { ok: true; value: T } | { ok: false; problem: string }

/**
 * A detached, deeply frozen copy of a JSON value, or the first reason it is not
 * one that survives a JSON round trip unchanged: `undefined`, functions,
 * symbols, BigInts, non-finite numbers, class instances, sparse arrays, cycles.
 */
export function snapshotJson(value: unknown): Snapshot {
  try {
    return { ok: true, value: deepFreeze(copy(value, '', new Set())) }
  } catch (error) {
    if (error instanceof LossyJson) return { ok: false, problem: error.message }
    throw error
  }
}

class LossyJson extends Error {}

function fail(path: string, what: string): never {
  throw new LossyJson(`${what}${path ? ` at ${path}` : ''}`)
}

function copy(value: unknown, path: string, ancestors: Set<object>): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) fail(path, `non-finite number ${value}`)
      return value
    case 'undefined':
    case 'function':
    case 'symbol':
    case 'bigint':
      return fail(path, `a value of type ${typeof value}`)
  }
  if (value === null) return null
  const object = value as object
  if (ancestors.has(object)) fail(path, 'a reference cycle')
  ancestors.add(object)
  let result: JsonValue
  if (Array.isArray(object)) {
    const array: JsonValue[] = []
    for (let i = 0; i < object.length; i++) {
      if (!(i in object)) fail(`${path}/${i}`, 'an array hole')
      array.push(copy(object[i], `${path}/${i}`, ancestors))
    }
    result = array
  } else {
    const proto = Object.getPrototypeOf(object)
    if (proto !== Object.prototype && proto !== null) {
      fail(path, `an instance of ${(object as { constructor?: { name?: string } }).constructor?.name || 'a class'}`)
    }
    const record: Record<string, JsonValue> = {}
    for (const key of Object.keys(object)) {
      const item = copy((object as Record<string, unknown>)[key], `${path}/${key}`, ancestors)
      // JSON.parse produces an own "__proto__" key; keep it as data.
      if (key === '__proto__') Object.defineProperty(record, key, { value: item, enumerable: true, writable: true, configurable: true })
      else record[key] = item
    }
    result = record
  }
  ancestors.delete(object)
  return result
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}
