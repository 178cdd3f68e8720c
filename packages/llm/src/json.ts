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
  return copy(value, { keys: [], ancestors: new Set(), freeze: false }) as T
}

/**
 * `jsonSnapshot`, deeply frozen as it is built (one walk instead of a copy and then a
 * freeze). A value it made before is taken as it is, wherever it is met: frozen, JSON
 * through and through and nobody else's, it needs no copy (a message logged in two
 * events, or made by `freezeMessage`, is walked once).
 */
export function frozenJsonSnapshot<T>(value: T): T {
  return copy(value, { keys: [], ancestors: new Set(), freeze: true }) as T
}

/** What `frozenJsonSnapshot` made (see there). */
const snapshots = new WeakSet<object>()

function isPlainRecord(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  // A foreign realm's Object.prototype also has a null prototype.
  return proto === null || (Object.getPrototypeOf(proto) === null && Object.prototype.toString.call(value) === '[object Object]')
}

/** Where the walk is: the keys from the root (joined into a path only for an error) and the objects on the way. */
interface Walk {
  keys: (string | number)[]
  ancestors: Set<object>
  freeze: boolean
}

const bad = (walk: Walk, found: string) => new NonJsonError(walk.keys.map(key => `/${key}`).join(''), found)

function copy(value: unknown, walk: Walk): JsonValue {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) throw bad(walk, `non-finite number ${value}`)
      if (Object.is(value, -0)) throw bad(walk, '-0 (JSON writes it as 0)')
      return value
    case 'object':
      break
    default:
      throw bad(walk, `a value of type ${typeof value}`)
  }
  if (value === null) return null
  if (walk.freeze && snapshots.has(value)) return value as JsonValue
  const { keys, ancestors } = walk
  if (ancestors.has(value)) throw bad(walk, 'a reference cycle')
  ancestors.add(value)
  let result: JsonValue
  if (Array.isArray(value)) {
    if (Object.keys(value).length !== value.length) throw bad(walk, 'a sparse or decorated array')
    const items: JsonValue[] = new Array(value.length)
    for (let i = 0; i < value.length; i++) {
      keys.push(i)
      items[i] = copy(value[i], walk)
      keys.pop()
    }
    result = items
  } else {
    if (!isPlainRecord(value)) {
      throw bad(walk, `an instance of ${(value as { constructor?: { name?: string } }).constructor?.name || 'a class'}`)
    }
    const record: Record<string, JsonValue> = {}
    for (const key of Object.keys(value)) {
      keys.push(key)
      const item = copy((value as Record<string, unknown>)[key], walk)
      keys.pop()
      // JSON.parse produces an own "__proto__" key; keep it as data.
      if (key === '__proto__') Object.defineProperty(record, key, { value: item, enumerable: true, writable: true, configurable: true })
      else record[key] = item
    }
    result = record
  }
  ancestors.delete(value)
  if (walk.freeze) snapshots.add(Object.freeze(result))
  return result
}
