import { isSurfaceEventType, type SessionEvent, type SurfaceOp } from './events.ts'

/**
 * The surface is the model-visible history: the ordered seqs of the events that
 * project to messages. `append` adds an event; `replace` swaps a contiguous run of
 * current nodes for one event (a summary, a pruned tool result), so what the model
 * sees can shrink while the log itself only grows.
 */
export interface SurfaceState {
  readonly nodes: readonly number[]
  /** Increases on every replace: projections cached per node must be rebuilt. */
  readonly replaceGeneration: number
}

export interface Replacement {
  seq: number
  start: number
  end: number
  shadowedSeqs: number[]
}

const isSafeSeq = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0

/** Checks the surface markers of an event that is about to get `event.seq`. */
export function checkSurfaceMarkers(event: Pick<SessionEvent, 'type' | 'seq' | 'surfaceOp' | 'sourceEventSeqs'>): void {
  const { type, seq, surfaceOp, sourceEventSeqs } = event
  if (!isSurfaceEventType(type)) {
    if (surfaceOp !== undefined) throw new Error(`session event "${type}" is not surface-eligible and cannot carry surfaceOp`)
    if (sourceEventSeqs !== undefined) throw new Error(`session event "${type}" is not surface-eligible and cannot carry sourceEventSeqs`)
    return
  }
  if (surfaceOp === undefined) throw new Error(`session event "${type}" is surface-eligible and requires a surfaceOp marker`)
  if (surfaceOp !== 'append') {
    if (typeof surfaceOp !== 'object' || surfaceOp === null || surfaceOp.op !== 'replace') {
      throw new Error(`session event "${type}" carries an invalid surfaceOp`)
    }
    if (Object.keys(surfaceOp).length !== 3 || !isSafeSeq(surfaceOp.start) || !isSafeSeq(surfaceOp.end)) {
      throw new Error(`session event "${type}" carries an invalid replace surfaceOp`)
    }
  }
  if (sourceEventSeqs === undefined) return
  if (!Array.isArray(sourceEventSeqs)) throw new Error(`session event "${type}" carries invalid sourceEventSeqs`)
  if (sourceEventSeqs.length === 0 && type !== 'assistant/message') {
    throw new Error('sourceEventSeqs must not be empty except on assistant/message')
  }
  // Ascending seqs (as the loop writes them) cannot repeat: only others need a Set.
  let ascending = true
  let previous = -1
  for (const source of sourceEventSeqs) {
    if (!isSafeSeq(source)) throw new Error(`session event "${type}" carries invalid sourceEventSeqs`)
    if (source >= seq) throw new Error(`sourceEventSeqs must reference earlier events: ${source} >= current seq ${seq}`)
    if (source <= previous) ascending = false
    previous = source
  }
  if (!ascending && new Set(sourceEventSeqs).size !== sourceEventSeqs.length) throw new Error('sourceEventSeqs must not contain duplicates')
}

export class Surface implements SurfaceState {
  private readonly logged?: (seq: number) => SessionEvent | undefined
  nodes: number[] = []
  replaceGeneration = 0
  /** The events of the current nodes by seq (holes elsewhere), unless a log is lent. */
  readonly #kept: (SessionEvent | undefined)[] | undefined

  /**
   * `logged`: the event of a seq, from a log the caller keeps anyway; without it the
   * surface keeps the events of its nodes itself (for the tool/result rewrite rules).
   */
  constructor(logged?: (seq: number) => SessionEvent | undefined) {
    this.logged = logged
    this.#kept = logged ? undefined : []
  }

  /**
   * Validates `event` against the current surface, then applies it: a refused
   * event throws before anything changes, so the surface stays as it was.
   */
  apply(event: SessionEvent): Replacement | undefined {
    checkSurfaceMarkers(event)
    const op: SurfaceOp | undefined = event.surfaceOp
    if (op === undefined) return undefined
    if (op === 'append') {
      this.nodes.push(event.seq)
      if (this.#kept) this.#kept[event.seq] = event
      return undefined
    }
    const i = this.nodes.indexOf(op.start)
    const j = this.nodes.indexOf(op.end)
    if (i === -1) throw new Error(`surface replace: start seq ${op.start} not found in surface`)
    if (j === -1) throw new Error(`surface replace: end seq ${op.end} not found in surface`)
    if (i > j) throw new Error(`surface replace: start seq ${op.start} (index ${i}) is after end seq ${op.end} (index ${j})`)
    const shadowed = this.nodes.slice(i, j + 1)
    const sources = new Set(event.sourceEventSeqs ?? [])
    const missing = shadowed.filter(seq => !sources.has(seq))
    if (missing.length) {
      throw new Error(`surface replace: sourceEventSeqs must include every shadowed surface node; missing ${missing.join(', ')}`)
    }
    if (event.type === 'tool/result') this.#checkToolResultRewrite(event, shadowed)
    this.nodes.splice(i, j - i + 1, event.seq)
    if (this.#kept) {
      for (const seq of shadowed) this.#kept[seq] = undefined
      this.#kept[event.seq] = event
    }
    this.replaceGeneration++
    return { seq: event.seq, start: op.start, end: op.end, shadowedSeqs: shadowed }
  }

  /** The event of a current node. */
  eventAt(seq: number): SessionEvent | undefined {
    return this.logged ? this.logged(seq) : this.#kept![seq]
  }

  /** A pruned tool result may change only the content of its result block. */
  #checkToolResultRewrite(event: SessionEvent, shadowed: number[]) {
    if (shadowed.length !== 1) throw new Error('tool/result surface replacement must rewrite exactly one current node')
    const original = this.eventAt(shadowed[0])
    if (original?.type !== 'tool/result') throw new Error('tool/result surface replacement must target a current tool/result')
    if (JSON.stringify(withoutResultContent(event.data)) !== JSON.stringify(withoutResultContent(original.data))) {
      throw new Error('tool/result surface replacement may change only content')
    }
  }
}

function withoutResultContent(data: unknown): unknown {
  const copy = structuredClone(data) as { message?: { content?: { content?: unknown }[] } }
  const block = copy.message?.content?.[0]
  if (block) block.content = null
  return canonicalKeys(copy)
}

/** Key order must not make two equal values differ. */
function canonicalKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonicalKeys)
  if (typeof value !== 'object' || value === null) return value
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map(key => [key, canonicalKeys((value as Record<string, unknown>)[key])]),
  )
}

/** The surface a log ends with, computed offline (same rules and errors as live appends). */
export function foldSurface(events: readonly SessionEvent[]): { nodes: number[]; replacements: Replacement[] } {
  const surface = new Surface()
  const replacements: Replacement[] = []
  for (const event of events) {
    const replacement = surface.apply(event)
    if (replacement) replacements.push(replacement)
  }
  return { nodes: surface.nodes, replacements }
}

export const isAppendSurfaceEvent = (event: SessionEvent) => event.surfaceOp === 'append'
export const isReplacementSurfaceEvent = (event: SessionEvent) => typeof event.surfaceOp === 'object' && event.surfaceOp !== null
