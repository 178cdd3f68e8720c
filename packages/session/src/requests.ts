import type { Message, StreamChunk, TokenUsage, ToolSchema } from '@loom/llm'
import type { RequestHeader, RequestSources, SessionEvent } from './events.ts'
import { canonicalHeader } from './header.ts'
import { DEFAULT_CACHE_PRICES, type CachePrices, usageCost } from './prices.ts'
import { Session } from './session.ts'
import { Surface } from './surface.ts'

/**
 * Requests rebuilt from a session log. The agent loop guarantees that the log
 * prefix up to a request's first `assistant/chunk` gives back that request: its
 * messages are `Session.create(id, prefix).deriveMessages()` and its header is
 * `foldRequestHeader(prefix)`. `reconstructRequests` applies that theorem to every
 * request of a log in one pass.
 */
export interface ReconstructedRequest {
  /** Turn and step of the first chunk (null when the chunk carries none). */
  turn: number | null
  step: number | null
  /** Seq of the request's first `assistant/chunk`: the prefix is `events[0 .. seq)`. */
  seq: number
  /** Seq of its last chunk. */
  endSeq: number
  /** The history the model received. */
  messages: Message[]
  /** The header in force (config, system text, tools), canonical; undefined when none was logged. */
  header: RequestHeader | undefined
  /** What that header's event recorded of its sections, tools and plugins. */
  sources: RequestSources | undefined
  /** When its first chunk was logged (ms since the epoch). */
  time: number
  /** Characters the model produced in answer (text, reasoning, tool names and arguments of the finished blocks). */
  outputChars: number
  /** Usage the provider reported for this request, if any. */
  usage?: TokenUsage
}

const isTerminal = (chunk: StreamChunk) => chunk.type === 'finish'

/**
 * Every model request of `events`, in order. A request starts at an
 * `assistant/chunk` that follows a non-chunk event, or that follows a `finish`
 * chunk (the llm service ends every attempt, failed ones included, with exactly
 * one `finish`, so a retry inside a step starts a new request even when nothing
 * was logged in between). One pass: the surface and the header are folded as
 * the events go by; each request gets its own copy of the message array.
 */
export function reconstructRequests(events: readonly SessionEvent[]): ReconstructedRequest[] {
  const requests: ReconstructedRequest[] = []
  const surface = new Surface()
  const projector = Session.create('reconstruct')
  let messages: Message[] = []
  let header: RequestHeader | undefined
  let sources: RequestSources | undefined
  let current: ReconstructedRequest | undefined
  let previousChunk: StreamChunk | undefined

  for (const event of events) {
    if (event.type === 'assistant/chunk') {
      const { turn, step, chunk } = event.data
      if (!current || (previousChunk && isTerminal(previousChunk))) {
        current = {
          turn: turn ?? null,
          step: step ?? null,
          seq: event.seq,
          endSeq: event.seq,
          messages: messages.slice(),
          header,
          sources,
          time: event.time,
          outputChars: 0,
        }
        requests.push(current)
      }
      current.endSeq = event.seq
      if (chunk.type === 'block-end') current.outputChars += blockChars(chunk.block)
      else if (chunk.type === 'usage') current.usage = chunk.usage
      previousChunk = chunk
      // Chunks are not model-visible: nothing else to fold.
      continue
    }
    current = undefined
    previousChunk = undefined
    const replacement = surface.apply(event)
    if (replacement) {
      messages = surface.nodes.map(seq => projector.deriveEventMessage(surface.eventAt(seq)!)).filter(m => m !== null)
    } else if (event.surfaceOp === 'append') {
      const message = projector.deriveEventMessage(event)
      if (message) messages.push(message)
    }
    if (event.type === 'request/header') {
      header = canonicalHeader(event.data.header)
      sources = event.data.sources
    }
  }
  return requests
}

function blockChars(block: { type: string; text?: string; name?: string; arguments?: string }): number {
  if (block.type === 'tool-call') return (block.name?.length ?? 0) + (block.arguments?.length ?? 0)
  return block.text?.length ?? 0
}

/** What a serialization needs: the messages and the header (or its system text and tools directly). */
export interface SerializableRequest {
  messages: readonly Message[]
  header?: Pick<RequestHeader, 'system' | 'tools'>
  system?: string
  tools?: readonly ToolSchema[]
}

/**
 * The request in the order a provider reads it (and caches it): tools, then the
 * system text, then the messages. The text is JSON Lines: line 1 is the JSON of
 * the tools array, line 2 the JSON of the system text, then one line per message,
 * the JSON of `{ role, content }` (what a provider receives: message ids and
 * sources are Loom's bookkeeping), each line ending with `\n`. A request that only appends messages to
 * the previous one therefore extends its serialization, byte for byte (a single
 * JSON object would close its arrays, so even a pure append would differ in the
 * last two bytes). `header` wins over top-level `system`/`tools`; a missing
 * system text serializes as `""`, missing tools as `[]`.
 */
export function serializeRequest(request: SerializableRequest): string {
  return serializedLines(request).join('')
}

/**
 * The lines of `serializeRequest`, each ending with `\n`. With a `cache` (one
 * pass over requests that do not change meanwhile), a line is made once per
 * message and tools array object: the requests of one log share their
 * messages, so each is serialized once, and two requests' common lines are the
 * same strings, compared without reading their characters.
 */
function serializedLines(request: SerializableRequest, cache?: WeakMap<object, string>): string[] {
  const tools = request.header ? request.header.tools : request.tools
  const system = request.header ? request.header.system : request.system
  let toolsLine = tools && cache?.get(tools)
  if (toolsLine === undefined) {
    toolsLine = JSON.stringify(tools ?? []) + '\n'
    if (tools) cache?.set(tools, toolsLine)
  }
  const lines = new Array<string>(request.messages.length + 2)
  lines[0] = toolsLine
  lines[1] = JSON.stringify(system ?? '') + '\n'
  for (let i = 0; i < request.messages.length; i++) {
    const message = request.messages[i]
    let line = cache?.get(message)
    if (line === undefined) {
      line = JSON.stringify({ role: message.role, content: message.content }) + '\n'
      cache?.set(message, line)
    }
    lines[i + 2] = line
  }
  return lines
}

/** The common prefix length of two serializations given as lines: whole equal lines, then the first differing pair's prefix. */
function commonLinesPrefix(a: readonly string[], b: readonly string[]): number {
  let length = 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    if (a[i] === b[i]) {
      length += a[i].length
      continue
    }
    // Every line ends with its only line break, so the prefix ends inside this pair.
    return length + commonPrefixLength(a[i], b[i])
  }
  return length
}

/** Length of the common prefix of two strings. */
export function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

/**
 * The share (0..1) of the earlier request's serialization that the later one
 * reuses unchanged as its prefix. An empty earlier serialization counts as fully
 * reused.
 */
export function prefixReuse(earlier: string | SerializableRequest, later: string | SerializableRequest): number {
  const a = typeof earlier === 'string' ? earlier : serializeRequest(earlier)
  const b = typeof later === 'string' ? later : serializeRequest(later)
  return a.length === 0 ? 1 : commonPrefixLength(a, b) / a.length
}

/** The token estimate of these figures: one token per four characters of the serialization, rounded up. */
const estimateTokens = (chars: number) => Math.ceil(chars / 4)

/** A cost in the prices' currency; `null` where the model's price is unknown (`requestEconomics(requests, null)`). */
type Money = number | null

export interface RequestEconomics<Cost extends Money = number> {
  index: number
  turn: number | null
  step: number | null
  seq: number
  chars: number
  /** Characters of this request that repeat the previous request's serialization (its cached prefix). */
  reusedChars: number
  /** Share of the previous request's serialization reused as this one's prefix; null for the first. */
  reuse: number | null
  hitTokens: number
  missTokens: number
  outputTokens: number
  /** Estimated cost of the input at the hit and miss prices, and of the output. */
  inputCost: Cost
  outputCost: Cost
  /** What the provider reported for this request, priced the same way; null when it reported no usage. */
  reported: ReportedEconomics<Cost> | null
}

/** Provider-reported tokens: input includes cache reads and writes; `hitShare` is cache reads over input. */
export interface ReportedEconomics<Cost extends Money = number> {
  inputTokens: number
  hitTokens: number
  /** Input tokens written to the provider's cache (billed at the write price where there is one). */
  writeTokens: number
  outputTokens: number
  hitShare: number | null
  inputCost: Cost
  outputCost: Cost
}

export interface SessionEconomics<Cost extends Money = number> {
  /** The prices the costs are at; null when the model's price is unknown (and every cost is null). */
  prices: Cost extends number ? CachePrices : null
  requests: RequestEconomics<Cost>[]
  totals: {
    requests: number
    chars: number
    hitTokens: number
    missTokens: number
    outputTokens: number
    inputCost: Cost
    outputCost: Cost
    /** Mean reuse over consecutive pairs (null with fewer than two requests), and the smallest. */
    meanReuse: number | null
    minReuse: number | null
    /** What the input would cost with no cache at all (every token a miss). */
    uncachedInputCost: Cost
    /** The sums of the provider-reported figures over the requests that have them; null when none has. */
    reported: (ReportedEconomics<Cost> & { requests: number }) | null
  }
}

type EconomicsRequest = SerializableRequest & { turn?: number | null; step?: number | null; seq?: number; outputChars?: number; usage?: TokenUsage }

/**
 * Prefix reuse and estimated cost of a sequence of requests. Each request's
 * input is split into the part that repeats the previous request's serialization
 * (a cache hit) and the rest (a miss); tokens are `ceil(chars / 4)`. The
 * first request is all miss. Output tokens are estimated from `outputChars`.
 * Reported usage is priced as billed: cache writes at the write price. With
 * `prices` null (an unknown model) the figures are the same and every cost is null.
 */
export function requestEconomics(requests: readonly EconomicsRequest[], prices?: CachePrices): SessionEconomics
export function requestEconomics(requests: readonly EconomicsRequest[], prices: CachePrices | null): SessionEconomics<Money>
export function requestEconomics(requests: readonly EconomicsRequest[], prices: CachePrices | null = DEFAULT_CACHE_PRICES): SessionEconomics<Money> {
  const priced = (cost: (prices: CachePrices) => number): Money => (prices ? cost(prices) : null)
  const reportedOf = (usage: TokenUsage): ReportedEconomics<Money> => {
    const hitTokens = usage.cacheReadTokens ?? 0
    const inputTokens = usage.inputTokens + hitTokens + (usage.cacheWriteTokens ?? 0)
    return {
      inputTokens,
      hitTokens,
      writeTokens: usage.cacheWriteTokens ?? 0,
      outputTokens: usage.outputTokens,
      hitShare: inputTokens ? hitTokens / inputTokens : null,
      inputCost: priced(p => usageCost(usage, p).input),
      outputCost: priced(p => usageCost(usage, p).output),
    }
  }
  const rows: RequestEconomics<Money>[] = []
  // Lines, not one string: a long session's requests share most of their lines, compared by reference.
  let previous: { lines: string[]; chars: number } | undefined
  const cache = new WeakMap<object, string>()
  for (const [index, request] of requests.entries()) {
    const lines = serializedLines(request, cache)
    const chars = lines.reduce((sum, line) => sum + line.length, 0)
    const reusedChars = previous === undefined ? 0 : commonLinesPrefix(previous.lines, lines)
    const reuse = previous === undefined ? null : previous.chars === 0 ? 1 : reusedChars / previous.chars
    const hitTokens = Math.floor(reusedChars / 4)
    const missTokens = Math.max(0, estimateTokens(chars) - hitTokens)
    const outputTokens = estimateTokens(request.outputChars ?? 0)
    const { usage } = request
    rows.push({
      index,
      turn: request.turn ?? null,
      step: request.step ?? null,
      seq: request.seq ?? index,
      chars,
      reusedChars,
      reuse,
      hitTokens,
      missTokens,
      outputTokens,
      inputCost: priced(p => (hitTokens * p.hit + missTokens * p.miss) / 1e6),
      outputCost: priced(p => (outputTokens * p.output) / 1e6),
      reported: usage ? reportedOf(usage) : null,
    })
    previous = { lines, chars }
  }
  const total = <T>(items: readonly T[], key: (item: T) => Money): Money => (prices ? items.reduce((sum, item) => sum + (key(item) as number), 0) : null)
  const count = <T>(items: readonly T[], key: (item: T) => number) => items.reduce((sum, item) => sum + key(item), 0)
  const reportedRows = rows.flatMap(row => (row.reported ? [row.reported] : []))
  const reuses = rows.map(row => row.reuse).filter((r): r is number => r !== null)
  const hitTokens = count(rows, row => row.hitTokens)
  const missTokens = count(rows, row => row.missTokens)
  const reportedInput = count(reportedRows, row => row.inputTokens)
  const reportedHits = count(reportedRows, row => row.hitTokens)
  return {
    prices: prices && { ...prices },
    requests: rows,
    totals: {
      requests: rows.length,
      chars: count(rows, row => row.chars),
      hitTokens,
      missTokens,
      outputTokens: count(rows, row => row.outputTokens),
      inputCost: total(rows, row => row.inputCost),
      outputCost: total(rows, row => row.outputCost),
      meanReuse: reuses.length ? reuses.reduce((a, b) => a + b, 0) / reuses.length : null,
      minReuse: reuses.length ? Math.min(...reuses) : null,
      uncachedInputCost: priced(p => ((hitTokens + missTokens) * p.miss) / 1e6),
      reported: reportedRows.length
        ? {
            requests: reportedRows.length,
            inputTokens: reportedInput,
            hitTokens: reportedHits,
            writeTokens: count(reportedRows, row => row.writeTokens),
            outputTokens: count(reportedRows, row => row.outputTokens),
            hitShare: reportedInput ? reportedHits / reportedInput : null,
            inputCost: total(reportedRows, row => row.inputCost),
            outputCost: total(reportedRows, row => row.outputCost),
          }
        : null,
    },
  }
}
