// The replay fold of the token meter (agent-session-spec 4.2): one state per
// session, advanced event by event. Every event is checked before anything
// changes, so a malformed event throws and leaves the state where it was.
import { BlockAssembler, deepFreeze, estimateHeader, estimateMessage, type TokenUsage } from '@loom/llm'
import {
  canonicalHeader,
  checkSurfaceMarkers,
  dataProblem,
  headerEquals,
  isSurfaceEventType,
  type RequestHeader,
  type Session,
  type SessionEvent,
} from '@loom/session'

/** The estimated tokens of one surface node (a message the model sees). */
export interface TokenNode {
  readonly seq: number
  readonly tokens: number
}

/** What a measurement starts from. */
export type TokenBaseline =
  | { readonly kind: 'none'; readonly tokens: 0 }
  | { readonly kind: 'estimated'; readonly tokens: number }
  | { readonly kind: 'usage'; readonly tokens: number; readonly usage: TokenUsage }

/** A detached, deep-frozen snapshot: `totalTokens` is the request + response pressure. */
export interface TokenMeasurement {
  /** Events folded (the log length this measurement is for). */
  readonly logRevision: number
  readonly baseline: TokenBaseline
  /** Surface tokens added since the anchor (0 without a matching anchor). */
  readonly surfaceDeltaTokens: number
  /** `max(0, baseline.tokens + surfaceDeltaTokens)`. */
  readonly totalTokens: number
  /** Σ `nodes[].tokens`: the estimated history. */
  readonly surfaceTokens: number
  readonly nodes: readonly TokenNode[]
}

/** Anything with an event log: a `Session` (read from where the meter left off), or a hand-built `{ events }`. */
export type MeteredSession = Pick<Session, 'eventAt' | 'eventsFrom'> | { readonly events: readonly SessionEvent[] }

/** Where the meter finds an earlier event by seq (the chunks a message cites). */
export type EventLookup = readonly SessionEvent[] | Pick<Session, 'eventAt'>

interface StepStart {
  turn: number
  step: number
  surfaceTokens: number
}

interface Anchor {
  header: RequestHeader | undefined
  surfaceTokens: number
  baseline: TokenBaseline
}

export interface ReplayState {
  consumedEvents: number
  header: RequestHeader | undefined
  surface: TokenNode[]
  surfaceTokens: number
  stepStart: StepStart | undefined
  anchor: Anchor | undefined
}

export function createReplayState(): ReplayState {
  return { consumedEvents: 0, header: undefined, surface: [], surfaceTokens: 0, stepStart: undefined, anchor: undefined }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0
const USAGE_KEYS = ['inputTokens', 'outputTokens', 'cacheReadTokens', 'cacheWriteTokens', 'reasoningTokens'] as const

/** The price of the message an event projects to (0 when it projects to none). */
function surfacePrice(event: SessionEvent): number {
  switch (event.type) {
    case 'user/message':
      return estimateMessage(event.data)
    case 'assistant/message': {
      const { message } = event.data
      return message.content.length ? estimateMessage(message) : 0
    }
    case 'tool/result':
      return estimateMessage(event.data.message)
    default:
      return 0
  }
}

function stepOf(event: SessionEvent, what: string): { turn: number; step: number } {
  const data: unknown = event.data // a replayed log is checked, not trusted
  if (!isRecord(data) || !isCount(data.turn) || !isCount(data.step)) {
    throw new Error(`token meter: ${what} at seq ${event.seq} has no valid turn and step`)
  }
  return { turn: data.turn, step: data.step }
}

/** The tokens of the assistant content the provider produced, from the chunks the message cites. */
function providerAssistantTokens(event: SessionEvent<'assistant/message'>, events: EventLookup, open: StepStart): number {
  const { data } = event
  const cited = event.sourceEventSeqs
  if (cited === undefined) return data.message.content.length ? estimateMessage(data.message) : 0 // legacy: the durable message
  if (cited.length === 0) return 0 // a known-empty stream
  const assembler = new BlockAssembler()
  const seen = new Set<number>()
  for (const seq of cited) {
    const source = 'eventAt' in events ? events.eventAt(seq) : events[seq]
    const chunk = source?.type === 'assistant/chunk' ? source.data : undefined
    if (seq >= event.seq || seen.has(seq) || !isRecord(chunk) || chunk.turn !== open.turn || chunk.step !== open.step || !isRecord(chunk.chunk)) {
      throw new Error(
        `token meter: assistant/message at seq ${event.seq} cites seq ${seq}, which is not an earlier, distinct assistant/chunk of step ${open.step} of turn ${open.turn}`,
      )
    }
    seen.add(seq)
    assembler.push(chunk.chunk)
  }
  const content = assembler.blocks()
  return content.length ? estimateMessage({ content }) : 0
}

function usageProblem(usage: unknown): boolean {
  if (!isRecord(usage)) return true
  return USAGE_KEYS.some(key => (key === 'inputTokens' || key === 'outputTokens' || usage[key] !== undefined) && !isCount(usage[key]))
}

/**
 * Folds one event into `state`. Everything is checked and computed first; the
 * state changes only at the end, so a throw leaves it untouched.
 */
export function foldEvent(state: ReplayState, event: SessionEvent, events: EventLookup): void {
  if (!isRecord(event) || typeof event.type !== 'string') {
    throw new Error(`token meter: event at index ${state.consumedEvents} is not an event`)
  }
  if (event.seq !== state.consumedEvents) {
    throw new Error(`token meter: event at index ${state.consumedEvents} has seq ${String(event.seq)}; the log must be dense from 0`)
  }
  const problem = dataProblem(event.type, event.data)
  if (problem) throw new Error(`token meter: ${event.type} at seq ${event.seq} ${problem}`)

  let header = state.header
  let stepStart = state.stepStart
  let anchor = state.anchor
  let surfaceEdit: (() => void) | undefined
  let eventTokens = 0
  let surfaceTokens = state.surfaceTokens

  checkSurfaceMarkers(event)
  if (isSurfaceEventType(event.type)) {
    const op = event.surfaceOp!
    eventTokens = surfacePrice(event)
    const node = { seq: event.seq, tokens: eventTokens }
    if (op === 'append') {
      surfaceTokens += eventTokens
      surfaceEdit = () => state.surface.push(node)
    } else {
      const i = state.surface.findIndex(n => n.seq === op.start)
      const j = state.surface.findIndex(n => n.seq === op.end)
      if (i === -1 || j === -1 || i > j) {
        throw new Error(`token surface: replace at seq ${event.seq} has invalid current range ${op.start}-${op.end}`)
      }
      let removed = 0
      for (let k = i; k <= j; k++) removed += state.surface[k].tokens
      surfaceTokens += eventTokens - removed
      surfaceEdit = () => state.surface.splice(i, j - i + 1, node)
    }
  }

  switch (event.type) {
    case 'request/header':
      header = canonicalHeader(event.data.header)
      break
    case 'step/start': {
      const { turn, step } = stepOf(event, 'step/start')
      if (stepStart) {
        throw new Error(`token meter: step/start at seq ${event.seq} while step ${stepStart.step} of turn ${stepStart.turn} is still open`)
      }
      stepStart = { turn, step, surfaceTokens: state.surfaceTokens }
      break
    }
    case 'step/end': {
      const { turn, step } = stepOf(event, 'step/end')
      if (!stepStart || stepStart.turn !== turn || stepStart.step !== step) {
        throw new Error(`token meter: step/end at seq ${event.seq} has no matching step/start event`)
      }
      stepStart = undefined
      break
    }
    case 'assistant/message': {
      const { data } = event
      if (!stepStart || data.turn !== stepStart.turn || data.step !== stepStart.step) {
        throw new Error(`token meter: assistant/message at seq ${event.seq} has no matching step/start event`)
      }
      if (data.usage !== undefined && usageProblem(data.usage)) {
        throw new Error(`token meter: assistant/message at seq ${event.seq} has an invalid usage`)
      }
      if (data.usage !== undefined && header) {
        const anchorSurface = stepStart.surfaceTokens + providerAssistantTokens(event, events, stepStart)
        const { inputTokens, outputTokens, cacheReadTokens = 0, cacheWriteTokens = 0 } = data.usage
        const providerTokens = inputTokens + cacheReadTokens + cacheWriteTokens + outputTokens // reasoning is part of output
        const estimatedAnchor = estimateHeader(header) + anchorSurface
        anchor = {
          header,
          surfaceTokens: anchorSurface,
          baseline:
            providerTokens >= estimatedAnchor
              ? { kind: 'usage', tokens: providerTokens, usage: structuredClone(data.usage) }
              : { kind: 'estimated', tokens: estimatedAnchor },
        }
      } else {
        const anchorSurface = stepStart.surfaceTokens + eventTokens
        anchor = { header, surfaceTokens: anchorSurface, baseline: { kind: 'estimated', tokens: estimateHeader(header) + anchorSurface } }
      }
      break
    }
  }

  // Commit: nothing above changed the state.
  surfaceEdit?.()
  state.surfaceTokens = surfaceTokens
  state.header = header
  state.stepStart = stepStart
  state.anchor = anchor
  state.consumedEvents++
}

/** Two optional headers are equal when both are absent or both canonical-equal. */
export function optionalHeaderEquals(a: RequestHeader | undefined, b: RequestHeader | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return headerEquals(a, b)
}

/** The measurement of a folded state, for the header in force or an override. */
export function measureState(state: ReplayState, requestHeader?: RequestHeader): TokenMeasurement {
  const header = requestHeader ? canonicalHeader(requestHeader) : state.header
  let baseline: TokenBaseline
  let surfaceDeltaTokens = 0
  if (state.anchor && optionalHeaderEquals(state.anchor.header, header)) {
    baseline = structuredClone(state.anchor.baseline)
    surfaceDeltaTokens = state.surfaceTokens - state.anchor.surfaceTokens
  } else if (!header && state.surfaceTokens === 0) {
    baseline = { kind: 'none', tokens: 0 }
  } else {
    baseline = { kind: 'estimated', tokens: estimateHeader(header) + state.surfaceTokens }
  }
  return deepFreeze({
    logRevision: state.consumedEvents,
    baseline,
    surfaceDeltaTokens,
    totalTokens: Math.max(0, baseline.tokens + surfaceDeltaTokens),
    surfaceTokens: state.surfaceTokens,
    nodes: state.surface.map(node => ({ seq: node.seq, tokens: node.tokens })),
  })
}
