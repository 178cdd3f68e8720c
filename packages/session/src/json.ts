/**
 * Lossless JSON snapshots. A session log must round-trip through JSON exactly, so
 * anything `JSON.stringify` would drop or change silently is refused at append:
 * bigint, functions, symbols, `undefined` properties, -0, NaN and ±Infinity,
 * cycles, sparse or decorated arrays, and exotic objects (Map, Set, Date, class
 * instances). Plain objects from another realm and null-prototype objects are
 * fine. Each property is read exactly once, so a getter cannot change its answer
 * between the check and the copy.
 */
export class NonJsonError extends TypeError {
  constructor(readonly path: string, readonly reason: string) {
    super(`${reason} at ${path}`)
  }
}

export function jsonSnapshot<T>(value: T): T {
  return copy(value, '$', new Set()) as T
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  // A foreign realm's Object.prototype also has a null prototype.
  return proto === null || Object.getPrototypeOf(proto) === null && Object.prototype.toString.call(value) === '[object Object]'
}

function copy(value: unknown, path: string, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) throw new NonJsonError(path, `${value} is not a JSON number`)
      if (Object.is(value, -0)) throw new NonJsonError(path, '-0 does not survive JSON')
      return value
    case 'object':
      break
    default:
      throw new NonJsonError(path, `a ${typeof value} is not JSON`)
  }
  if (value === null) return null
  if (ancestors.has(value)) throw new NonJsonError(path, 'a cycle is not JSON')
  ancestors.add(value)
  let out: unknown
  if (Array.isArray(value)) {
    const keys = Object.keys(value)
    if (keys.length !== value.length) throw new NonJsonError(path, 'a sparse or decorated array is not JSON')
    const items: unknown[] = []
    for (let i = 0; i < value.length; i++) items.push(copy(value[i], `${path}[${i}]`, ancestors))
    out = items
  } else {
    if (!isPlainObject(value)) throw new NonJsonError(path, `a ${value.constructor?.name ?? 'exotic'} object is not JSON`)
    const record: Record<string, unknown> = {}
    for (const key of Object.keys(value)) {
      const item = (value as Record<string, unknown>)[key]
      if (item === undefined) throw new NonJsonError(`${path}.${key}`, 'an undefined property is not JSON')
      record[key] = copy(item, `${path}.${key}`, ancestors)
    }
    out = record
  }
  ancestors.delete(value)
  return out
}
