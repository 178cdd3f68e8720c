import { deepFreeze, frozenJsonSnapshot, NonJsonError, type Message, type SessionId } from '@loom/llm'
import {
  SESSION_FORMAT_VERSION,
  isSurfaceEventType,
  type RequestContext,
  type RequestHeader,
  type SessionEvent,
  type SessionEventMap,
  type SessionEventType,
  type SessionHeader,
  type SurfaceEventType,
  type SurfaceIntent,
} from './events.ts'
import { type EventBlocks, EventLog } from './event-log.ts'
import { canonicalHeader } from './header.ts'
import { Surface, type SurfaceState } from './surface.ts'
import { dataProblem, envelopeProblem } from './validate.ts'

type AppendArgs<T extends SessionEventType> = T extends SurfaceEventType ? [intent: SurfaceIntent] : []

/** Called with every committed live append; set by the session store. */
export type Publisher = (session: Session, event: SessionEvent) => void
const publishers = new WeakMap<Session, Publisher>()

/** Lets the store publish a session's appends; returns the detach. */
export function bindPublisher(session: Session, publish: Publisher): () => void {
  publishers.set(session, publish)
  return () => {
    if (publishers.get(session) === publish) publishers.delete(session)
  }
}

/**
 * An event-sourced session log. Appends are synchronous and atomic: the event is
 * validated in full (JSON-only data, surface markers, shape) before the log
 * changes, seq is dense from 0, and every stored event is deep-frozen. The model
 * history (`deriveMessages`) is projected incrementally as events arrive (from
 * scratch at the first read after a seed or a replacement).
 */
export class Session {
  readonly header: SessionHeader
  /** Length of the seed this session was built from (0 for a fresh session). */
  readonly firstLiveSeq: number

  readonly #log: EventLog
  #snapshot: readonly SessionEvent[] | undefined
  readonly #surface = new Surface(seq => this.#log.get(seq))
  /**
   * The history of the current surface, kept up with appends; undefined until a
   * reader wants it after a seed or a replacement (a load validates the log and
   * pays for no projection it may not need).
   */
  #messages: Message[] | undefined = []
  #requestHeader: RequestHeader | undefined
  #requestContext: RequestContext | undefined
  #publishing = false
  /** The events of seqs [0, #unfrozen) were adopted from a restore and are frozen only when first handed out. */
  #unfrozen = 0
  /**
   * The seqs of each type's events, in order: readers of one type of a long log
   * touch only those. Built at its first use, not with a restore (a load pays
   * for nothing it may not need), then kept up with every append.
   */
  #seqsByType: Map<string, number[]> | undefined

  /** A detached session from a copy of `seed`; with a seed (even `[]`) it ends with a `session/end-seed` marker. */
  static create(id: SessionId, seed?: readonly SessionEvent[], header?: SessionHeader): Session {
    return new Session(id, seed && [seed], header, false)
  }

  /**
   * Like `create`, but takes ownership of `seed` (freshly parsed: plain JSON trees
   * no one else holds) and freezes each event in place the first time this session
   * hands it out (a whole long log is frozen only for `events`; the history's
   * messages for `deriveMessages`). The seed, one array or the blocks a store read
   * (see `EventBlocks`), becomes the start of the session's log as it is: the
   * session never changes it, and neither may the caller.
   */
  static fromRestore(id: SessionId, seed: readonly SessionEvent[] | EventBlocks, header: SessionHeader): Session {
    // Events are objects, never arrays: a first element that is an array is a block.
    const blocks = Array.isArray(seed[0]) ? (seed as EventBlocks) : [seed as readonly SessionEvent[]]
    return new Session(id, blocks, header, true)
  }

  private constructor(id: SessionId, seed: EventBlocks | undefined, header: SessionHeader | undefined, adopt: boolean) {
    this.header = deepFreeze(adopt ? header! : structuredClone(header ?? { version: SESSION_FORMAT_VERSION, id, createdAt: Date.now() }))
    if (this.header.id !== id) throw new Error(`session header id "${this.header.id}" does not match session id "${id}"`)
    if (!seed) {
      this.#log = new EventLog()
      this.firstLiveSeq = 0
      return
    }
    // Adopted events become the log's prefix as they are, blocks and all.
    this.#log = new EventLog(adopt ? seed : [])
    this.#messages = undefined
    let index = 0
    for (const block of seed) {
      for (let k = 0; k < block.length; k++, index++) {
        const raw = block[k]
        const problem = envelopeProblem(raw)
        if (problem) throw new Error(`seed event at index ${index} ${problem}`)
        if (raw.seq !== index) throw new Error(`seed event at index ${index} has seq ${raw.seq} (expected ${index}); seed must be contiguous from 0`)
        const event = adopt ? raw : jsonOnly(raw, raw.type, 'data')
        const shape = dataProblem(event.type, event.data)
        if (shape) throw new Error(`seed event at index ${index} ("${event.type}") ${shape}`)
        // Most of a restored log (chunks, step and turn brackets) has no surface
        // marker and nothing to fold: all the surface would do is check that.
        if (adopt && quiet(event)) continue
        this.#commit(event, adopt ? 'adopted' : 'copied')
      }
    }
    this.firstLiveSeq = index
    if (adopt) this.#unfrozen = index
    // The marker closes the inherited prefix; it is never published (no store is attached yet).
    if (seed.at(-1)?.at(-1)?.type !== 'session/end-seed') this.#commit(deepFreeze({ type: 'session/end-seed', seq: index, time: Date.now(), data: {} }))
  }

  get id(): SessionId {
    return this.header.id
  }

  /**
   * The whole log, frozen; the same array until the next append. A copy of the
   * log after each append: a reader that runs every step (or at the start of a
   * resumed long session) wants `eventAt`, `eventsFrom`, `lastOfType` or
   * `eventsOfType`, which hand out only what they return.
   */
  get events(): readonly SessionEvent[] {
    this.#freezeAdopted()
    return (this.#snapshot ??= Object.freeze(this.#log.slice()))
  }

  /** Event `seq`, frozen; undefined past the end of the log. */
  eventAt(seq: number): SessionEvent | undefined {
    const event = this.#log.get(seq)
    return event && deepFreezeJson(event)
  }

  /** The events from `seq` on, frozen (the tail of `events`). */
  eventsFrom(seq: number): SessionEvent[] {
    const tail = this.#log.slice(Math.max(0, seq))
    if (seq < this.#unfrozen) for (const event of tail) deepFreezeJson(event)
    return tail
  }

  /** The latest event of `type`, frozen; with `before`, the latest below that seq. */
  lastOfType<T extends SessionEventType>(type: T, before = Infinity): SessionEvent<T> | undefined {
    const seqs = this.#typeIndex().get(type)
    if (!seqs) return undefined
    const i = firstAtOrAfter(seqs, before) - 1
    return i < 0 ? undefined : (deepFreezeJson(this.#log.get(seqs[i])) as SessionEvent<T>)
  }

  /** The events of `type` from seq `from` on, in log order, frozen. */
  eventsOfType<T extends SessionEventType>(type: T, from = 0): SessionEvent<T>[] {
    const seqs = this.#typeIndex().get(type) ?? []
    const found: SessionEvent<T>[] = []
    for (let i = firstAtOrAfter(seqs, from); i < seqs.length; i++) found.push(deepFreezeJson(this.#log.get(seqs[i])) as SessionEvent<T>)
    return found
  }

  #typeIndex(): Map<string, number[]> {
    if (!this.#seqsByType) {
      this.#seqsByType = new Map()
      for (let seq = 0; seq < this.#log.length; seq++) indexEvent(this.#seqsByType, this.#log.get(seq)!)
    }
    return this.#seqsByType
  }

  /** The seq the next event gets. */
  get seq(): number {
    return this.#log.length
  }

  get surface(): SurfaceState {
    return { nodes: Object.freeze(this.#surface.nodes.slice()), replaceGeneration: this.#surface.replaceGeneration }
  }

  append<T extends SessionEventType>(type: T, data: SessionEventMap[T], ...intent: AppendArgs<T>): SessionEvent<T> {
    const copy = jsonOnly(data, type, 'data')
    const markers: Partial<SurfaceIntent> = intent[0] === undefined ? {} : jsonOnly(intent[0], type, 'surface metadata')
    const shape = dataProblem(type, copy)
    if (shape) throw new Error(`session event "${type}" ${shape}`)
    if (this.#publishing) throw new Error('session append cannot reenter while another append is being published')

    // `type` and `data` correlate through T, which TypeScript cannot follow into the union: one cast.
    // The data and markers are frozen copies already.
    const event = Object.freeze({
      type,
      seq: this.#log.length,
      time: Date.now(),
      data: copy,
      ...(markers.surfaceOp !== undefined && { surfaceOp: markers.surfaceOp }),
      ...(markers.sourceEventSeqs !== undefined && { sourceEventSeqs: markers.sourceEventSeqs }),
    }) as SessionEvent<T> & SessionEvent
    this.#commit(event)

    const publish = publishers.get(this)
    if (publish) {
      this.#publishing = true
      try {
        publish(this, event)
      } finally {
        this.#publishing = false
      }
    }
    return event
  }

  /**
   * Validates against the surface, then stores: a rejected event leaves no trace.
   * An adopted event is in the log already.
   */
  #commit(event: SessionEvent, seed?: 'copied' | 'adopted') {
    const replacement = this.#surface.apply(event)
    if (seed !== 'adopted') {
      this.#log.push(event)
      if (this.#seqsByType) indexEvent(this.#seqsByType, event)
    }
    this.#snapshot = undefined
    if (event.type === 'request/header') {
      // The event is the log's own (frozen) copy: the header shares it rather than cloning every tool schema.
      this.#requestHeader = deepFreeze(canonicalHeader(event.data.header))
    } else if (event.type === 'request/context') {
      this.#requestContext = event.data
    }
    if (replacement) {
      this.#messages = undefined
    } else if (event.surfaceOp === 'append' && this.#messages) {
      const message = this.deriveEventMessage(event)
      if (message) this.#messages.push(message)
    }
  }

  /**
   * The history of the current surface, from scratch. Adopted messages are
   * frozen here, when first handed out, not the whole log with them.
   */
  #project(): Message[] {
    const messages: Message[] = []
    for (const seq of this.#surface.nodes) {
      const message = this.deriveEventMessage(this.#log.get(seq)!)
      if (message) messages.push(seq < this.#unfrozen ? deepFreezeJson(message) : message)
    }
    return messages
  }

  /** Freezes the adopted events before anything of them leaves this session. */
  #freezeAdopted() {
    for (let seq = 0; seq < this.#unfrozen; seq++) deepFreezeJson(this.#log.get(seq))
    this.#unfrozen = 0
  }

  /** The header of the latest `request/header`, canonical and frozen. */
  requestHeader(): RequestHeader | undefined {
    return this.#requestHeader
  }

  requestContext(): RequestContext | undefined {
    return this.#requestContext && deepFreezeJson(this.#requestContext)
  }

  /** The model history: a fresh array over the shared frozen messages of the surface. */
  deriveMessages(): Message[] {
    this.#messages ??= this.#project()
    return this.#messages.slice()
  }

  /** The message an event contributes to the history, if any. */
  deriveEventMessage(event: SessionEvent): Message | null {
    switch (event.type) {
      case 'user/message':
        return event.data
      case 'assistant/message': {
        const { message } = event.data
        return message.content.length ? message : null
      }
      case 'tool/result':
        return event.data.message
      default:
        return null
    }
  }
}

function indexEvent(index: Map<string, number[]>, event: SessionEvent) {
  const seqs = index.get(event.type)
  if (seqs) seqs.push(event.seq)
  else index.set(event.type, [event.seq])
}

/** The index of the first of the ascending `seqs` that is at least `seq` (their length if none is). */
function firstAtOrAfter(seqs: readonly number[], seq: number): number {
  let low = 0
  let high = seqs.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (seqs[middle] < seq) low = middle + 1
    else high = middle
  }
  return low
}

/** An event that changes neither the surface nor the request state of a session (and may not). */
function quiet(event: SessionEvent): boolean {
  return (
    event.surfaceOp === undefined &&
    event.sourceEventSeqs === undefined &&
    !isSurfaceEventType(event.type) &&
    event.type !== 'request/header' &&
    event.type !== 'request/context'
  )
}

/**
 * `deepFreeze` for plain JSON values (what JSON.parse builds, such as events read
 * from a log), in place and several times faster: only plain objects and arrays to
 * walk, and a frozen object is not walked again.
 */
export function deepFreezeJson<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value
  Object.freeze(value)
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) deepFreezeJson(value[i])
  } else {
    // for-in allocates no key array; a JSON object has no inherited enumerable keys.
    for (const key in value) {
      const item = (value as Record<string, unknown>)[key]
      if (typeof item === 'object' && item !== null) deepFreezeJson(item)
    }
  }
  return value
}

/** A JSON-only copy, deeply frozen, with an error that names the event type. */
function jsonOnly<T>(value: T, type: string, what: 'data' | 'surface metadata'): T {
  try {
    return frozenJsonSnapshot(value)
  } catch (error) {
    if (!(error instanceof NonJsonError)) throw error
    throw new TypeError(`session event "${type}" carries non-JSON-serializable ${what} (${error.message})`, { cause: error })
  }
}
