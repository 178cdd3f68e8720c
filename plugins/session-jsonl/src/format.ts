// The logical format of a session log: one header line, then one storage record
// per line. A record is either a SessionEvent verbatim, or a packed row holding a
// run of streaming chunks (chunks are most of a log by count, and their envelope
// repeats almost verbatim, so packing them keeps logs small and fast to read).
//
// Packing must be lossless: decoding a row rebuilds events whose JSON is
// byte-identical to the originals. So the writer packs only events whose exact
// shape (keys and key order included) the reader can rebuild; anything else is
// written verbatim, which is always correct.

import { SESSION_FORMAT_VERSION, type SessionEvent, type SessionHeader } from '@loom/session'
import { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from './errors.ts'

type JsonObject = Record<string, unknown>

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

// `-0` survives JSON.parse but not JSON.stringify, so it is refused rather than
// silently rewritten as 0.
function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0 && !Object.is(value, -0)
}

function describe(value: unknown): string {
  if (Object.is(value, -0)) return '-0'
  return JSON.stringify(value) ?? String(value)
}

function hasKeysInOrder(obj: JsonObject, keys: readonly string[]): boolean {
  const actual = Object.keys(obj)
  return actual.length === keys.length && actual.every((key, i) => key === keys[i])
}

// Counted without Object.keys: this runs for every packed row of a long log.
function keyCount(obj: JsonObject): number {
  let count = 0
  for (const _ in obj) count++
  return count
}

// ---------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------

// Fields older writers produced; a log carrying them predates the current
// permission model and must not be read as if it meant nothing.
const RETIRED_HEADER_FIELDS = ['sandboxMode', 'approvalPolicy'] as const

/** Line 1 of a log, keys in the fixed on-disk order. Refuses a header the reader would refuse. */
export function encodeHeaderLine(header: SessionHeader): string {
  if (header.version !== SESSION_FORMAT_VERSION) {
    throw new TypeError(`cannot write session header for "${header.id}": version must be ${SESSION_FORMAT_VERSION}, got ${describe(header.version)}`)
  }
  const record: JsonObject = { type: 'session', version: header.version, id: header.id, createdAt: header.createdAt }
  if (header.cwd !== undefined) record.cwd = header.cwd
  if (header.parentSession !== undefined) record.parentSession = header.parentSession
  if (header.seedLength !== undefined) record.seedLength = header.seedLength
  if (header.origin !== undefined) record.origin = header.origin
  // Always on disk, so a reader never has to guess what a missing depth meant.
  record.delegationDepth = header.delegationDepth ?? 0
  if (header.agentPreset !== undefined) record.agentPreset = header.agentPreset
  // Never write what the reader would refuse.
  const problem = headerShapeProblem(record)
  if (problem !== undefined) throw new TypeError(`cannot write session header for "${header.id}": ${problem}`)
  return JSON.stringify(record)
}

/**
 * Validates a parsed header line and returns the in-memory header.
 * `location` names the raw log in error messages.
 */
export function parseHeaderRecord(value: unknown, location: string): SessionHeader {
  const where = ` (raw log: ${location})`
  if (!isObject(value) || value.type !== 'session') {
    throw new SessionPersistenceCorruptionError(`corrupt session log: first line is not a session header${where}`)
  }
  // The version comes first: a log from another format version may have any
  // shape at all, and must be reported as unsupported rather than as corrupt.
  const version = value.version
  if (typeof version === 'number' && version !== SESSION_FORMAT_VERSION) {
    const id = typeof value.id === 'string' ? value.id : '<unknown id>'
    const detail =
      version > SESSION_FORMAT_VERSION
        ? `but this harness reads only v${SESSION_FORMAT_VERSION}: the log was written by a newer harness — upgrade the harness to open it`
        : `which is older than the supported v${SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it`
    throw new SessionFormatUnsupportedError(`session "${id}" uses log format v${version}, ${detail}${where}`, { location })
  }
  const problem = headerShapeProblem(value)
  if (problem !== undefined) {
    throw new SessionPersistenceCorruptionError(`corrupt session log: invalid session header: ${problem}${where}`)
  }
  // Rebuilt in the on-disk key order. A top-level session (depth 0) carries no
  // depth in memory, so a header round-trips equal to the one it was created from.
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = {
    version: SESSION_FORMAT_VERSION,
    id: value.id as string,
    createdAt: value.createdAt as number,
  }
  if (value.cwd !== undefined) header.cwd = value.cwd as string
  if (value.parentSession !== undefined) header.parentSession = value.parentSession as string
  if (value.seedLength !== undefined) header.seedLength = value.seedLength as number
  if (value.origin !== undefined) header.origin = 'subagent'
  if (value.delegationDepth !== 0) header.delegationDepth = value.delegationDepth as number
  if (value.agentPreset !== undefined) header.agentPreset = value.agentPreset as string
  return header
}

// Returns what is wrong with a header record, or undefined if it is valid.
// Unknown extra fields are tolerated (and dropped on read).
function headerShapeProblem(record: JsonObject): string | undefined {
  if (record.version !== SESSION_FORMAT_VERSION) return `version must be ${SESSION_FORMAT_VERSION}, got ${describe(record.version)}`
  for (const field of RETIRED_HEADER_FIELDS) {
    if (Object.hasOwn(record, field)) return `retired field "${field}" is no longer supported`
  }
  if (typeof record.id !== 'string' || record.id === '') return `id must be a non-empty string, got ${describe(record.id)}`
  if (!isCount(record.createdAt)) return `createdAt must be a safe non-negative integer, got ${describe(record.createdAt)}`
  if (record.cwd !== undefined && typeof record.cwd !== 'string') return `cwd must be a string, got ${describe(record.cwd)}`
  if (record.parentSession !== undefined && typeof record.parentSession !== 'string') {
    return `parentSession must be a string, got ${describe(record.parentSession)}`
  }
  if (record.seedLength !== undefined && !isCount(record.seedLength)) {
    return `seedLength must be a safe non-negative integer, got ${describe(record.seedLength)}`
  }
  if (record.origin !== undefined && record.origin !== 'subagent') return `origin must be "subagent", got ${describe(record.origin)}`
  if (record.delegationDepth === undefined) return 'delegationDepth is missing'
  if (!isCount(record.delegationDepth)) {
    return `delegationDepth must be a safe non-negative integer, got ${describe(record.delegationDepth)}`
  }
  if (record.agentPreset !== undefined && typeof record.agentPreset !== 'string') {
    return `agentPreset must be a string, got ${describe(record.agentPreset)}`
  }
  return undefined
}

// ---------------------------------------------------------------------------
// Events and packed chunk rows
// ---------------------------------------------------------------------------

type DeltaKind = 'text-delta' | 'reasoning-delta' | 'tool-call-delta'

const ROW_TAG_BY_KIND = {
  'text-delta': 'text-chunks',
  'reasoning-delta': 'reasoning-chunks',
  'tool-call-delta': 'tool-call-chunks',
} as const satisfies Record<DeltaKind, string>

type RowTag = (typeof ROW_TAG_BY_KIND)[DeltaKind]

const MIN_PACKED_RUN = 3

// An assistant/chunk event reduced to what a packed row stores.
interface PackableChunk {
  seq: number
  time: number
  turn: number
  step: number
  kind: DeltaKind
  index: number
  /** text for text/reasoning deltas, argumentsDelta for tool-call deltas */
  payload: string
  id?: string
  name?: string
}

// The exact shapes the reader rebuilds; key order matters for byte identity.
const EVENT_KEYS = ['type', 'seq', 'time', 'data']
const DATA_KEYS = ['turn', 'step', 'chunk']
const TEXT_CHUNK_KEYS = ['type', 'index', 'text']
const TOOL_CHUNK_KEYS = ['type', 'index', 'id', 'argumentsDelta']
const NAMED_TOOL_CHUNK_KEYS = ['type', 'index', 'id', 'name', 'argumentsDelta']

function asPackable(event: SessionEvent): PackableChunk | undefined {
  const e = event as unknown as JsonObject
  if (e.type !== 'assistant/chunk' || !hasKeysInOrder(e, EVENT_KEYS)) return undefined
  if (!Number.isSafeInteger(e.seq) || !Number.isSafeInteger(e.time)) return undefined
  const data = e.data
  if (!isObject(data) || !hasKeysInOrder(data, DATA_KEYS)) return undefined
  if (!Number.isSafeInteger(data.turn) || !Number.isSafeInteger(data.step)) return undefined
  const chunk = data.chunk
  if (!isObject(chunk) || !Number.isSafeInteger(chunk.index)) return undefined
  const base = { seq: e.seq as number, time: e.time as number, turn: data.turn as number, step: data.step as number, index: chunk.index as number }
  if (chunk.type === 'text-delta' || chunk.type === 'reasoning-delta') {
    if (!hasKeysInOrder(chunk, TEXT_CHUNK_KEYS) || typeof chunk.text !== 'string') return undefined
    return { ...base, kind: chunk.type, payload: chunk.text }
  }
  if (chunk.type === 'tool-call-delta') {
    const named = Object.hasOwn(chunk, 'name')
    if (!hasKeysInOrder(chunk, named ? NAMED_TOOL_CHUNK_KEYS : TOOL_CHUNK_KEYS)) return undefined
    if (typeof chunk.id !== 'string' || typeof chunk.argumentsDelta !== 'string') return undefined
    if (named && typeof chunk.name !== 'string') return undefined
    const packable: PackableChunk = { ...base, kind: 'tool-call-delta', payload: chunk.argumentsDelta, id: chunk.id }
    if (named) packable.name = chunk.name as string
    return packable
  }
  return undefined
}

// Whether `next` can follow `prev` in one packed row.
function continuesRun(prev: PackableChunk, next: PackableChunk): boolean {
  return (
    next.seq === prev.seq + 1 &&
    next.kind === prev.kind &&
    next.turn === prev.turn &&
    next.step === prev.step &&
    next.index === prev.index &&
    next.id === prev.id &&
    Object.hasOwn(next, 'name') === Object.hasOwn(prev, 'name') &&
    next.name === prev.name &&
    Number.isSafeInteger(next.time - prev.time)
  )
}

function packRow(run: readonly PackableChunk[]): JsonObject {
  const first = run[0]
  const dt = run.slice(1).map((chunk, k) => chunk.time - run[k].time)
  const payloads = run.map(chunk => chunk.payload)
  const type: RowTag = ROW_TAG_BY_KIND[first.kind]
  if (first.kind !== 'tool-call-delta') {
    return { type, seq0: first.seq, time0: first.time, data: { turn: first.turn, step: first.step, index: first.index, dt, texts: payloads } }
  }
  const data: JsonObject = { turn: first.turn, step: first.step, index: first.index, id: first.id }
  if (Object.hasOwn(first, 'name')) data.name = first.name
  data.dt = dt
  data.args = payloads
  return { type, seq0: first.seq, time0: first.time, data }
}

export interface EncodeOptions {
  /** Pack runs of at least 3 compatible assistant/chunk events into one row (default true). */
  packChunks?: boolean
}

/** Storage lines (without newlines) for a batch of events. */
export function encodeEvents(events: readonly SessionEvent[], options: EncodeOptions = {}): string[] {
  const packChunks = options.packChunks ?? true
  const lines: string[] = []
  let i = 0
  while (i < events.length) {
    const first = packChunks ? asPackable(events[i]) : undefined
    if (first === undefined) {
      lines.push(JSON.stringify(events[i]))
      i++
      continue
    }
    // Greedily extend the run; an incompatible event starts the next attempt.
    const run = [first]
    while (i + run.length < events.length) {
      const next = asPackable(events[i + run.length])
      if (next === undefined || !continuesRun(run[run.length - 1], next)) break
      run.push(next)
    }
    if (run.length >= MIN_PACKED_RUN) {
      lines.push(JSON.stringify(packRow(run)))
    } else {
      for (let k = 0; k < run.length; k++) lines.push(JSON.stringify(events[i + k]))
    }
    i += run.length
  }
  return lines
}

/** The events one parsed storage record stands for (a packed row expands to its run). */
export function decodeRecord(value: unknown): SessionEvent[] {
  const decoded = decodeStored(value)
  return Array.isArray(decoded) ? decoded : [decoded]
}

/**
 * `decodeRecord` without wrapping a plain event in an array: most records of a
 * long log are single events, and the reader allocates nothing more for them.
 */
export function decodeStored(value: unknown): SessionEvent | SessionEvent[] {
  if (!isObject(value)) throw new SessionPersistenceCorruptionError(`malformed storage record: expected a JSON object, got ${describe(value)}`)
  if (isRowTag(value.type)) return decodeRow(value.type, value)
  // Only the envelope is checked here; the event contents are validated when the
  // log is restored into a Session.
  if (typeof value.type !== 'string' || value.type === '') {
    throw new SessionPersistenceCorruptionError(`malformed storage record: type must be a non-empty string, got ${describe(value.type)}`)
  }
  if (!isCount(value.seq))
    throw new SessionPersistenceCorruptionError(`malformed storage record: seq must be a safe non-negative integer, got ${describe(value.seq)}`)
  if (typeof value.time !== 'number')
    throw new SessionPersistenceCorruptionError(`malformed storage record: time must be a number, got ${describe(value.time)}`)
  if (!Object.hasOwn(value, 'data')) throw new SessionPersistenceCorruptionError('malformed storage record: data is missing')
  return value as unknown as SessionEvent
}

// A switch, not a lookup in a table: this runs for every line of a log, and a
// lookup hashes each freshly parsed type string first.
function isRowTag(type: unknown): type is RowTag {
  switch (type) {
    case 'text-chunks':
    case 'reasoning-chunks':
    case 'tool-call-chunks':
      return true
    default:
      return false
  }
}

function malformedRow(tag: string, why: string) {
  return new SessionPersistenceCorruptionError(`malformed ${tag} storage row: ${why}`)
}

// Rows are most of a long log: their checks read each field once, by name.
function decodeRow(tag: RowTag, row: JsonObject): SessionEvent[] {
  const isTool = tag === 'tool-call-chunks'
  const kind: DeltaKind = tag === 'text-chunks' ? 'text-delta' : tag === 'reasoning-chunks' ? 'reasoning-delta' : 'tool-call-delta'
  // JSON has no undefined: a key that reads as undefined is absent, and with the
  // count right no other key can be there.
  const { seq0, time0, data } = row
  if (keyCount(row) !== 4 || seq0 === undefined || time0 === undefined || data === undefined) {
    throw malformedRow(tag, `expected keys type, seq0, time0, data, got ${Object.keys(row).join(', ')}`)
  }
  if (!isCount(seq0)) throw malformedRow(tag, `seq0 must be a safe non-negative integer, got ${describe(seq0)}`)
  if (!Number.isSafeInteger(time0)) throw malformedRow(tag, `time0 must be a safe integer, got ${describe(time0)}`)
  const payloadKey = isTool ? 'args' : 'texts'
  if (!isObject(data)) throw malformedRow(tag, `data must be an object, got ${describe(data)}`)
  const { turn, step, index, id, name, dt } = data
  const payloads = data[payloadKey]
  const named = isTool && name !== undefined
  const keys = isTool ? (named ? 7 : 6) : 5
  if (
    keyCount(data) !== keys ||
    turn === undefined ||
    step === undefined ||
    index === undefined ||
    dt === undefined ||
    payloads === undefined ||
    (isTool && id === undefined)
  ) {
    const required = isTool ? 'turn, step, index, id, dt, args (and optionally name)' : 'turn, step, index, dt, texts'
    throw malformedRow(tag, `data must have exactly the keys ${required}, got ${Object.keys(data).join(', ')}`)
  }
  if (!Number.isSafeInteger(turn)) throw malformedRow(tag, `data.turn must be a safe integer, got ${describe(turn)}`)
  if (!Number.isSafeInteger(step)) throw malformedRow(tag, `data.step must be a safe integer, got ${describe(step)}`)
  if (!Number.isSafeInteger(index)) throw malformedRow(tag, `data.index must be a safe integer, got ${describe(index)}`)
  if (isTool && typeof id !== 'string') throw malformedRow(tag, `data.id must be a string, got ${describe(id)}`)
  if (named && typeof name !== 'string') throw malformedRow(tag, `data.name must be a string, got ${describe(name)}`)
  if (!Array.isArray(payloads) || payloads.length === 0) throw malformedRow(tag, `data.${payloadKey} must be a non-empty array of strings`)
  if (!Array.isArray(dt) || dt.length !== payloads.length - 1) throw malformedRow(tag, `data.dt must be an array of ${payloads.length - 1} safe integers`)

  // One loop checks each member and builds its event, in the key order the
  // writer required, so the JSON is byte-identical.
  const events: SessionEvent[] = new Array(payloads.length)
  let time = time0 as number
  for (let k = 0; k < payloads.length; k++) {
    const payload = payloads[k]
    if (typeof payload !== 'string') throw malformedRow(tag, `data.${payloadKey} must be a non-empty array of strings`)
    if (k > 0) {
      const delta = dt[k - 1]
      if (!Number.isSafeInteger(delta)) throw malformedRow(tag, `data.dt must be an array of ${payloads.length - 1} safe integers`)
      time += delta as number
      if (!Number.isSafeInteger(time)) throw malformedRow(tag, `time of member ${k} is not a safe integer`)
    }
    const chunk = !isTool
      ? { type: kind, index, text: payload }
      : named
        ? { type: kind, index, id, name, argumentsDelta: payload }
        : { type: kind, index, id, argumentsDelta: payload }
    events[k] = { type: 'assistant/chunk', seq: (seq0 as number) + k, time, data: { turn, step, chunk } } as unknown as SessionEvent
  }
  return events
}
