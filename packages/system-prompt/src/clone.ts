import { frozenJsonSnapshot, NonJsonError } from '@loom/llm'

/**
 * Detaches tool parameters from the provider's objects. JSON-shaped data (plain
 * objects, arrays, primitives) takes a fast path, several times cheaper than
 * `structuredClone`; anything else goes through `structuredClone`, so a function
 * still fails with a `DataCloneError`, here naming the tool and its plugin.
 */
export function cloneParameters<T>(value: T, tool: string, owner: string): T {
  if (typeof value !== 'object' || value === null) return detach(value, tool, owner)
  const shared = copies.get(value)
  if (shared !== undefined) return shared as T
  const copy = detach(value, tool, owner)
  // Parameters nobody can change (a defined tool's are deeply frozen) are copied once, and
  // every later assembly shares that frozen copy: a step's tools then compare by identity,
  // and a session logs them without copying them again (a JSON snapshot, see @loom/llm).
  if (!deeplyFrozen(value)) return copy
  const frozen = frozenCopy(copy)
  copies.set(value, frozen)
  return frozen
}

const copies = new WeakMap<object, unknown>()

function detach<T>(value: T, tool: string, owner: string): T {
  try {
    try {
      return clone(value, 0)
    } catch (error) {
      if (error !== TOO_DEEP) throw error
      // Deeper than any real schema: maybe a cycle. The exact walk tells.
      return cloneTracked(value, new Set())
    }
  } catch (error) {
    if (!(error instanceof Error)) throw error
    throw new DOMException(`parameters of tool "${tool}" (plugin "${owner}") cannot be cloned: ${error.message}`, 'DataCloneError')
  }
}

// The fast walk counts depth instead of tracking ancestors (a Set per call costs
// more than the copy); past this depth it hands over to the tracked walk.
const MAX_DEPTH = 64
const TOO_DEEP = Symbol('too deep')

function clone<T>(value: T, depth: number): T {
  if (typeof value !== 'object' || value === null) return leaf(value)
  if (depth > MAX_DEPTH) throw TOO_DEEP
  if (Array.isArray(value)) {
    const copy = new Array(value.length)
    for (let i = 0; i < value.length; i++) copy[i] = clone(value[i], depth + 1)
    return copy as T
  }
  if (!isPlain(value)) return structuredClone(value)
  const copy: Record<string, unknown> = {}
  for (const key of Object.keys(value)) copy[key] = clone((value as Record<string, unknown>)[key], depth + 1)
  return copy as T
}

function cloneTracked<T>(value: T, ancestors: Set<object>): T {
  if (typeof value !== 'object' || value === null) return leaf(value)
  if (!Array.isArray(value) && !isPlain(value)) return structuredClone(value)
  if (ancestors.has(value)) throw new Error('they contain a reference cycle')
  ancestors.add(value)
  const copy: Record<string, unknown> = Array.isArray(value) ? ([] as unknown as Record<string, unknown>) : {}
  for (const key of Object.keys(value)) copy[key] = cloneTracked((value as Record<string, unknown>)[key], ancestors)
  ancestors.delete(value)
  return copy as T
}

function leaf<T>(value: T): T {
  return typeof value === 'function' || typeof value === 'symbol' ? structuredClone(value) : value
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function deeplyFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (!Object.isFrozen(value)) return false
  for (const key of Object.keys(value)) if (!deeplyFrozen((value as Record<string, unknown>)[key])) return false
  return true
}

function frozenCopy<T>(value: T): T {
  try {
    return frozenJsonSnapshot(value)
  } catch (error) {
    if (!(error instanceof NonJsonError)) throw error
    return freezeDeep(value) // refused where it is logged, not here
  }
}

function freezeDeep<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) freezeDeep((value as Record<string, unknown>)[key])
  }
  return value
}
