// `@loom/tools/artifacts`: long tool output kept whole with the calling session, so
// the model reads its head and tail and can page through the rest with `read`.
//
// A session store keeps the bytes (`ArtifactStorage`: a folder beside a JSONL log, a
// table keyed by session in PostgreSQL; in memory for a host without persistence);
// `Artifacts` (`ctx.tools.artifacts`) is the policy every tool shares: names,
// redaction, the bounds per artifact and per session, the reference and the excerpt.
import { redactText } from './redact.ts'
import type { ToolRunContext } from './types.ts'

/** What a reference starts with: `artifact://<name>`, a path `read` accepts. */
export const ARTIFACT_SCHEME = 'artifact://'

/** A name is one safe path segment (it becomes a file name in a JSONL store), never `.` or `..`. */
const NAME = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/

export interface ArtifactEntry {
  readonly name: string
  /** UTF-8 bytes of its content. */
  readonly bytes: number
  /** When it was stored (ms since the epoch): the oldest is evicted first. */
  readonly createdAt: number
}

/**
 * Where a session store keeps the artifacts of its sessions (the `artifacts` member of
 * `ctx.sessionPersistence`). Keyed by session id, so nothing here reaches another
 * session's artifacts; names are checked by the caller (`NAME`).
 */
export interface ArtifactStorage {
  /** Stores `content` atomically (a reader sees all of it or nothing) as `name` of session `sessionId`. */
  put(sessionId: string, name: string, content: string): Promise<void>
  /** The content, or `undefined` when the session has no such artifact. */
  get(sessionId: string, name: string): Promise<string | undefined>
  /** The session's artifacts, in any order. */
  list(sessionId: string): Promise<ArtifactEntry[]>
  /** Removes these artifacts of the session (missing ones are no error). */
  remove(sessionId: string, names: readonly string[]): Promise<void>
}

/** The artifacts of sessions kept in this process: for a host without a session store, and for tests. */
export class MemoryArtifactStorage implements ArtifactStorage {
  readonly #sessions = new Map<string, Map<string, { content: string; entry: ArtifactEntry }>>()

  async put(sessionId: string, name: string, content: string): Promise<void> {
    let session = this.#sessions.get(sessionId)
    if (!session) this.#sessions.set(sessionId, (session = new Map()))
    session.set(name, { content, entry: { name, bytes: Buffer.byteLength(content), createdAt: Date.now() } })
  }

  async get(sessionId: string, name: string): Promise<string | undefined> {
    return this.#sessions.get(sessionId)?.get(name)?.content
  }

  async list(sessionId: string): Promise<ArtifactEntry[]> {
    return [...(this.#sessions.get(sessionId)?.values() ?? [])].map(stored => stored.entry)
  }

  async remove(sessionId: string, names: readonly string[]): Promise<void> {
    const session = this.#sessions.get(sessionId)
    for (const name of names) session?.delete(name)
  }

  /** Forgets every artifact of a session (it was disposed: nothing can read them any more). */
  drop(sessionId: string): void {
    this.#sessions.delete(sessionId)
  }
}

export interface ArtifactLimits {
  /** UTF-8 bytes one artifact keeps at most; a longer output keeps its head and tail. */
  maxBytes: number
  /** UTF-8 bytes of all artifacts of one session; past it the oldest are removed first. */
  sessionMaxBytes: number
}

/** How much of an output the model is shown. A size is either characters or bytes; lines may bound it too. */
export interface ExcerptLimit {
  /** UTF-16 code units shown at most. */
  maxChars?: number
  /** UTF-8 bytes shown at most. */
  maxBytes?: number
  /** Lines shown at most. */
  maxLines?: number
}

export interface Excerpt {
  /** What the model reads: all of the output, or its head, one line saying what was left out, and its tail. */
  text: string
  /** Lines left out (wholly or partly), numbered as in the artifact; absent when everything is shown. */
  omitted?: { fromLine: number; toLine: number; lines: number; size: number }
}

export interface ExcerptWhere {
  /** The artifact holding the whole output. */
  reference?: string
  /** The line of the artifact this text starts at (default 1): a stream inside a larger artifact. */
  firstLine?: number
}

/** An output as the model reads it within a limit, with the artifact that keeps the whole: `(text, limit) => ctx.tools.artifacts.shorten(exec, text, limit)`. */
export type Shorten = (text: string, limit: ExcerptLimit) => Promise<Excerpt & { reference?: string }>

type Call = Pick<ToolRunContext, 'callId' | 'agent'>

/**
 * The artifact policy of a host (`ctx.tools.artifacts`): each call's long output is stored
 * redacted, under a name made from its call id, in the calling agent's session, which keeps
 * at most `sessionMaxBytes` (the oldest go first). A reference is only ever resolved in the
 * session of the call that reads it: no argument reaches another session's artifacts.
 */
export class Artifacts {
  readonly limits: Readonly<ArtifactLimits>
  readonly #storage: () => ArtifactStorage
  /** Per session, the chain of its stores: the eviction of one sees the artifacts of the one before. */
  readonly #queues = new Map<string, Promise<unknown>>()

  constructor(storage: () => ArtifactStorage, limits: ArtifactLimits) {
    if (limits.maxBytes > limits.sessionMaxBytes) {
      throw new RangeError(`artifacts.maxBytes (${limits.maxBytes}) exceeds artifacts.sessionMaxBytes (${limits.sessionMaxBytes}) (@loom/tools config)`)
    }
    this.#storage = storage
    this.limits = Object.freeze({ ...limits })
  }

  /** Whether the call can keep artifacts: it was made by an agent, whose session holds them. */
  available(exec: Call): boolean {
    return typeof exec.agent?.sessionId === 'string'
  }

  /**
   * The output as the model should read it: all of it when it fits `limit`; otherwise its
   * head and tail with one line in between naming the artifact that keeps the whole output
   * (redacted first, so line numbers agree with what `read` shows) and the offset to read on
   * from. Short output costs no I/O.
   */
  async shorten(exec: Call, text: string, limit: ExcerptLimit): Promise<Excerpt & { reference?: string }> {
    if (fits(text, limit)) return { text }
    const clean = redactText(text)
    const reference = await this.#store(exec, clean)
    return { ...excerpt(clean, limit, { reference }), ...(reference !== undefined && { reference }) }
  }

  /** Stores `text` (redacted, bounded to `maxBytes`) as an artifact of the call's session; its reference, or `undefined` without a session. */
  keep(exec: Call, text: string): Promise<string | undefined> {
    return this.#store(exec, redactText(text))
  }

  /** The content of an artifact of the calling session; an error that says why when there is none. */
  async read(exec: Call, reference: string): Promise<string> {
    const name = artifactName(reference)
    const sessionId = exec.agent?.sessionId
    if (sessionId === undefined) throw new Error(`"${reference}" cannot be read: artifacts belong to an agent's session, and this call has none`)
    const content = await this.#storage().get(sessionId, name)
    if (content === undefined) {
      throw new Error(
        `${reference} is not an artifact of this session: the session keeps at most ${this.limits.sessionMaxBytes} bytes of artifacts and removes the oldest first, and another session's artifacts cannot be read; run the command again to see its output`,
      )
    }
    return content
  }

  async #store(exec: Call, clean: string): Promise<string | undefined> {
    const sessionId = exec.agent?.sessionId
    if (sessionId === undefined) return undefined
    const content = bound(clean, this.limits.maxBytes)
    const bytes = Buffer.byteLength(content)
    return this.#serial(sessionId, async () => {
      const storage = this.#storage()
      const entries = await storage.list(sessionId)
      const name = uniqueName(exec.callId, new Set(entries.map(entry => entry.name)))
      let total = entries.reduce((sum, entry) => sum + entry.bytes, 0)
      const evicted: string[] = []
      for (const entry of [...entries].sort((a, b) => a.createdAt - b.createdAt || (a.name < b.name ? -1 : 1))) {
        if (total + bytes <= this.limits.sessionMaxBytes) break
        evicted.push(entry.name)
        total -= entry.bytes
      }
      if (evicted.length > 0) await storage.remove(sessionId, evicted)
      await storage.put(sessionId, name, content)
      return `${ARTIFACT_SCHEME}${name}`
    })
  }

  #serial<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(sessionId) ?? Promise.resolve()
    const next = previous.then(work, work)
    const settled = next.catch(() => {})
    this.#queues.set(sessionId, settled)
    void settled.then(() => {
      if (this.#queues.get(sessionId) === settled) this.#queues.delete(sessionId)
    })
    return next
  }
}

/** Whether `path` is an artifact reference (what `read` hands to `ctx.tools.artifacts.read`). */
export function isArtifactReference(path: string): boolean {
  return path.startsWith(ARTIFACT_SCHEME)
}

/** The artifact name of a reference; a malformed one is refused, naming what a reference looks like. */
export function artifactName(reference: string): string {
  const name = reference.startsWith(ARTIFACT_SCHEME) ? reference.slice(ARTIFACT_SCHEME.length) : undefined
  if (name === undefined || !NAME.test(name)) {
    throw new Error(`"${reference}" is not an artifact reference: one reads ${ARTIFACT_SCHEME}<name>, exactly as a tool result gave it`)
  }
  return name
}

/** The call id as a name (unsafe characters become `_`), with `-2`, `-3`... when the session already has it. */
function uniqueName(callId: string, taken: ReadonlySet<string>): string {
  let base = callId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 120)
  if (base === '') base = 'output'
  if (!taken.has(base)) return base
  for (let n = 2; ; n++) if (!taken.has(`${base}-${n}`)) return `${base}-${n}`
}

/** Content of at most `max` bytes: past it, its head and tail around a line saying how much was not kept. */
function bound(text: string, max: number): string {
  const bytes = Buffer.byteLength(text)
  if (bytes <= max) return text
  const marker = (dropped: number) => `\n[… ${dropped} bytes not kept here: the output is over the artifact limit of ${max} bytes]\n`
  const room = Math.max(0, max - Buffer.byteLength(marker(bytes)))
  const head = cutUtf8(text, Math.ceil(room / 2), 'head')
  const tail = cutUtf8(text, Math.floor(room / 2), 'tail')
  return `${head}${marker(bytes - Buffer.byteLength(head) - Buffer.byteLength(tail))}${tail}`
}

/** The first (or last) at most `max` UTF-8 bytes of `text`, never splitting a character. */
function cutUtf8(text: string, max: number, side: 'head' | 'tail'): string {
  const bytes = Buffer.from(text)
  if (side === 'head') {
    let end = Math.min(max, bytes.length)
    while (end > 0 && end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end--
    return bytes.subarray(0, end).toString('utf8')
  }
  let start = Math.max(0, bytes.length - max)
  while (start < bytes.length && (bytes[start]! & 0xc0) === 0x80) start++
  return bytes.subarray(start).toString('utf8')
}

function sizeOf(limit: ExcerptLimit): { max: number; measure: (text: string) => number; unit: string } {
  if (limit.maxBytes !== undefined) return { max: limit.maxBytes, measure: text => Buffer.byteLength(text), unit: 'bytes' }
  return { max: limit.maxChars ?? Number.POSITIVE_INFINITY, measure: text => text.length, unit: 'characters' }
}

/** Whether all of `text` fits the limit (no artifact needed). */
export function fits(text: string, limit: ExcerptLimit): boolean {
  const { max, measure } = sizeOf(limit)
  // A UTF-16 code unit is at most 3 UTF-8 bytes: a short text is not measured.
  if (text.length * 3 > max && measure(text) > max) return false
  if (limit.maxLines === undefined) return true
  let lines = 1
  for (let at = text.indexOf('\n'); at !== -1 && at < text.length - 1; at = text.indexOf('\n', at + 1)) {
    if (++lines > limit.maxLines) return false
  }
  return true
}

/**
 * `text` within `limit`: when it does not fit, the head and the tail (each about half of
 * the limit, whole lines where they fit, else a cut of the one line) around one line that
 * says which lines were left out and how to read them (`read` of the reference, from the
 * first left-out line), or that the whole output was not kept.
 */
export function excerpt(text: string, limit: ExcerptLimit, where: ExcerptWhere = {}): Excerpt {
  if (fits(text, limit)) return { text }
  const { max, measure, unit } = sizeOf(limit)
  const lines = text.split('\n')
  if (lines.length > 1 && lines.at(-1) === '') lines.pop()
  const maxLines = limit.maxLines ?? Number.POSITIVE_INFINITY
  const headRoom = Math.ceil(max / 2)
  const tailRoom = Math.floor(max / 2)

  let head = 0
  for (let used = 0; head < lines.length && head < Math.ceil(maxLines / 2); head++) {
    used += measure(lines[head]!) + 1
    if (used > headRoom) break
  }
  let tail = 0
  for (let used = 0; tail < lines.length - head - 1 && tail < Math.floor(maxLines / 2); tail++) {
    used += measure(lines[lines.length - 1 - tail]!) + 1
    if (used > tailRoom) break
  }
  // No whole line fits: a cut of the first (and of the last) line shows something all the same.
  const headCut = head === 0 ? cutTo(lines[0]!, headRoom, unit, 'head') : ''
  const tailCut = tail === 0 && headCut !== '' ? cutTo(lines.at(-1)!, tailRoom, unit, 'tail') : ''
  const shownHead = [...lines.slice(0, head), ...(headCut === '' ? [] : [headCut])]
  const shownTail = [...(tailCut === '' ? [] : [tailCut]), ...lines.slice(lines.length - tail)]
  const offset = (where.firstLine ?? 1) - 1
  const fromLine = head + 1 + offset
  const toLine = lines.length - tail + offset
  const size = Math.max(0, measure(text) - measure(shownHead.join('\n')) - measure(shownTail.join('\n')))
  const omitted = { fromLine, toLine, lines: toLine - fromLine + 1, size }
  const range = `${headCut === '' && tailCut === '' ? '' : 'part of '}${fromLine === toLine ? `line ${fromLine}` : `lines ${fromLine}-${toLine}`}`
  const how =
    where.reference === undefined
      ? 'The whole output was not kept (the call has no session to keep it in).'
      : `The whole output is kept as ${where.reference}: read it with \`read\` (path "${where.reference}", offset ${fromLine}).`
  const notice = `[… ${range} not shown (${size} ${unit}). ${how}]`
  return { text: [...shownHead, notice, ...shownTail].join('\n'), omitted }
}

function cutTo(line: string, room: number, unit: string, side: 'head' | 'tail'): string {
  if (unit === 'bytes') return cutUtf8(line, room, side)
  if (side === 'head') {
    const end = Math.min(room, line.length)
    const code = line.charCodeAt(end - 1)
    return line.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end)
  }
  let start = Math.max(0, line.length - room)
  const code = line.charCodeAt(start)
  if (code >= 0xdc00 && code <= 0xdfff) start++
  return line.slice(start)
}
