// How a turn is read as it runs and reported when it ends, for every view of
// it: `readTurn` tells a live view (the terminal's, turn.ts; JSON lines,
// stream-json.ts) each thing that happened when it may be shown, and
// `runReport` makes the turn's events into data (what `loom run --json` prints,
// and every view's footer).
import type { TokenUsage } from '@loom/llm'
import type { PluginDrift, RequestHeaderChanges, SessionEvent, SessionEventMap, TurnEndReason } from '@loom/session'
import { usageCost, type CachePrices } from '@loom/session'
import type { TurnResult, TurnWatcher } from '../runner.ts'
import { assistantText, parseArguments, resultOf } from './describe.ts'
import { DurableOutput } from './durable.ts'

export interface ToolCallReport {
  id: string
  name: string
  arguments: unknown
  isError: boolean | null
  result: string | null
  errorCode?: string
}

/** What `loom run --json` prints. */
export interface RunReport {
  sessionId: string
  status: TurnEndReason['kind'] | 'not-started'
  reason: unknown
  text: string
  toolCalls: ToolCallReport[]
  usage: Required<TokenUsage>
  /** Cache reads over all input tokens, as the provider reported them; null without usage. */
  cacheHitShare: number | null
  /** Estimated US dollars at the model's prices (an upper bound where off-peak hours bill less); null when its price is unknown. */
  costUsd: number | null
  provider: string
  model: string
}

/**
 * What a live view of a turn is told, in log order. `readTurn` calls each
 * method when it may be shown: a finished message, a tool result and the end
 * of the turn once their events are on disk (see durable.ts), the rest at once
 * unless something before it still waits.
 */
export interface TurnView {
  /** The turn's session is ready: its id and route (the agent's options). */
  begin(session: { id: string; provider: string | null; model: string | null }): void
  /** A model request starts. */
  step(): void
  /**
   * The request's system text, tools or config differ from the previous request's
   * (a reload, a new plugin, a resume on edited plugins): `changes` says whose, and
   * on a resume `drift` which plugins differ from those the session last ran on.
   */
  headerChange(changes: RequestHeaderChanges, drift?: PluginDrift): void
  text(delta: string): void
  /** `shown`: reasoning is to be shown (`--show-reasoning`); otherwise a view may only say that the model reasons. */
  reasoning(delta: string, shown: boolean): void
  /** A model request is answered and its message is on disk. */
  message(data: SessionEventMap['assistant/message']): void
  /** A failed request is retried: what it streamed is not part of the answer. */
  retry(retry: SessionEventMap['request/retry']): void
  toolCall(call: SessionEventMap['tool/call']): void
  /** `name`: the tool of the call this result answers. */
  toolResult(result: SessionEventMap['tool/result'], name: string): void
  /** The turn's end is on disk. */
  turnEnd(data: SessionEventMap['turn/end']): void
  /** Watching is over (every event is on disk and shown). */
  stop(): void
  /** After the turn: how it ended, from its report. */
  end(report: RunReport, result: TurnResult): void
}

/** Follows the turn's session through the runner's events and tells `view`, each when it may be shown, until the returned function is called. */
export function readTurn(view: TurnView, options: { reasoning: boolean }): TurnWatcher {
  return (ctx, session) => {
    // What presents something as done waits for the disk (see durable.ts).
    const shown = new DurableOutput(ctx.get('sessionPersistence') !== undefined)
    const names = new Map<string, string>()
    const agent = ctx.agents.get(session.id)
    view.begin({ id: session.id, provider: agent?.options.provider ?? null, model: agent?.options.model ?? null })
    const read = (event: SessionEvent) => {
      switch (event.type) {
        case 'step/start':
          return shown.live(() => view.step())
        case 'request/header': {
          const { changes, drift } = event.data
          if (changes) shown.live(() => view.headerChange(changes, drift))
          return
        }
        case 'assistant/chunk': {
          const { chunk } = event.data
          if (chunk.type === 'text-delta') shown.live(() => view.text(chunk.text))
          else if (chunk.type === 'reasoning-delta') shown.live(() => view.reasoning(chunk.text, options.reasoning))
          return
        }
        case 'assistant/message':
          return shown.done(event.seq, () => view.message(event.data))
        case 'request/retry':
          return shown.live(() => view.retry(event.data))
        case 'tool/call':
          names.set(event.data.callId, event.data.name)
          return shown.live(() => view.toolCall(event.data))
        case 'tool/result': {
          const name = names.get(event.data.message.content[0].toolCallId) ?? 'tool'
          return shown.done(event.seq, () => view.toolResult(event.data, name))
        }
        case 'turn/end':
          return shown.done(event.seq, () => view.turnEnd(event.data))
      }
    }
    const stopDurable = ctx.on('session/durable', (id, seq) => {
      if (id === session.id) shown.durable(seq)
    })
    const stopEvents = ctx.on('session/event', (target, event) => {
      if (target === session) read(event)
    })
    return () => {
      view.stop()
      stopEvents()
      stopDurable()
    }
  }
}

/** The turn's events as data: the last answer, the tool calls with their results, usage and cost. */
export function runReport(
  sessionId: string,
  route: { provider: string; model: string },
  events: readonly SessionEvent[],
  reason: TurnEndReason | undefined,
  prices: CachePrices | null = null,
): RunReport {
  const usage: Required<TokenUsage> = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 }
  const calls = new Map<string, ToolCallReport>()
  let text = ''
  for (const event of events) {
    if (event.type === 'assistant/message') {
      const data = event.data
      const said = assistantText(data.message)
      if (said.trim()) text = said
      for (const key of Object.keys(usage) as (keyof TokenUsage)[]) usage[key] += data.usage?.[key] ?? 0
    } else if (event.type === 'tool/call') {
      const data = event.data
      calls.set(data.callId, { id: data.callId, name: data.name, arguments: parseArguments(data.arguments), isError: null, result: null })
    } else if (event.type === 'tool/result') {
      const data = event.data
      const message = data.message
      const call = calls.get(message.content[0].toolCallId)
      if (call) {
        const { text: result, isError } = resultOf(message)
        call.result = result
        call.isError = isError
        if (data.error) call.errorCode = data.error.code
      }
    }
  }
  const detail = reason?.kind === 'error' ? reason.error : reason?.kind === 'aborted' ? reason.reason : reason?.kind === 'limit' ? reason : null
  const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
  const cost = prices && usageCost(usage, prices)
  return {
    sessionId,
    status: reason?.kind ?? 'not-started',
    reason: detail,
    text,
    toolCalls: [...calls.values()],
    usage,
    cacheHitShare: input ? usage.cacheReadTokens / input : null,
    costUsd: cost && cost.input + cost.output,
    provider: route.provider,
    model: route.model,
  }
}
