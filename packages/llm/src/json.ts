/**
 * Lossless JSON. Everything that is logged to a session or handed to a tool must
 * survive a JSON round trip unchanged, so values JSON would drop or alter are
 * refused: `undefined`, functions, symbols, bigints, -0, NaN and ±Infinity,
 * cycles, sparse or decorated arrays, and exotic objects (Map, Set, Date, class
 * instances). Plain objects from another realm and null-prototype objects are
 * fine. Each property is read exactly once, so a getter cannot change its answer
 * between the check and the copy.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }

/** Thrown by `jsonSnapshot`; `message` says what was found and where (`/a/0`). */
export class NonJsonError extends TypeError {
  readonly path: string
  readonly found: string

  constructor(path: string, found: string) {
    super(`${found}${path ? ` at ${path}` : ''}`)
    this.path = path
    this.found = found
    this.name = 'NonJsonError'
  }
}

/** A detached copy of a JSON value, or a `NonJsonError` naming the first bad value. */
export function jsonSnapshot<T>(value: T): T {
  return copy(value, '', new Set()) as T
}

function isPlainRecord(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  // A foreign realm's Object.prototype also has a null prototype.
  return proto === null || (Object.getPrototypeOf(proto) === null && Object.prototype.toString.call(value) === '[object Object]')
}

function copy(value: unknown, path: string, ancestors: Set<object>): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) throw new NonJsonError(path, `non-finite number ${value}`)
      if (Object.is(value, -0)) throw new NonJsonError(path, '-0 (JSON writes it as 0)')
      return value
    case 'object':
      break
    default:
      throw new NonJsonError(path, `a value of type ${typeof value}`)
  }
  if (value === null) return null
  if (ancestors.has(value)) throw new NonJsonError(path, 'a reference cycle')
  ancestors.add(value)
  let result: JsonValue
  if (Array.isArray(value)) {
    if (Object.keys(value).length !== value.length) throw new NonJsonError(path, 'a sparse or decorated array')
    result = Array.from(value, (item, i) => copy(item, `${path}/${i}`, ancestors))
  } else {
    if (!isPlainRecord(value)) {
      throw new NonJsonError(path, `an instance of ${(value as { constructor?: { name?: string } }).constructor?.name || 'a class'}`)
    }
    const record: Record<string, JsonValue> = {}
    for (const key of Object.keys(value)) {
      const item = copy((value as Record<string, unknown>)[key], `${path}/${key}`, ancestors)
      // JSON.parse produces an own "__proto__" key; keep it as data.
      if (key === '__proto__') Object.defineProperty(record, key, { value: item, enumerable: true, writable: true, configurable: true })
      else record[key] = item
    }
    result = record
  }
  ancestors.delete(value)
  return result
}
