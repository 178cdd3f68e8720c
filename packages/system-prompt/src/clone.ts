/**
 * Detaches tool parameters from the provider's objects. JSON-shaped data (plain
 * objects, arrays, primitives) takes a fast path, several times cheaper than
 * `structuredClone`; anything else goes through `structuredClone`, so a function
 * still fails with a `DataCloneError`, here naming the tool and its plugin.
 */
export function cloneParameters<T>(value: T, tool: string, owner: string): T {
  try {
    return clone(value, new Set())
  } catch (error) {
    if (!(error instanceof Error)) throw error
    throw new DOMException(`parameters of tool "${tool}" (plugin "${owner}") cannot be cloned: ${error.message}`, 'DataCloneError')
  }
}

function clone<T>(value: T, ancestors: Set<object>): T {
  if (typeof value !== 'object' || value === null) {
    return typeof value === 'function' || typeof value === 'symbol' ? structuredClone(value) : value
  }
  const proto = Object.getPrototypeOf(value)
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return structuredClone(value)
  if (ancestors.has(value)) throw new Error('they contain a reference cycle')
  ancestors.add(value)
  const copy: any = Array.isArray(value) ? [] : {}
  for (const key of Object.keys(value)) copy[key] = clone((value as any)[key], ancestors)
  ancestors.delete(value)
  return copy
}
