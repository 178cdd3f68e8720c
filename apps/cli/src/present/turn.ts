// A turn as the terminal shows it (`loom run`, `loom sessions resume`, a task in
// `loom dev`): assistant text and tool calls as they stream, a tool result or
// the end of an answer once it is on disk, a spinner on a TTY while the agent
// waits; then the answer if nothing streamed, and the footer on stderr. With
// `--json`, only the report at the end; with `--output stream-json`, one JSON
// line per thing that happened (stream-json.ts). Both live views read the turn
// through `readTurn`, so they show the same things at the same moments.
import type { TokenUsage } from '@loom/llm'
import type { PluginDrift, RequestHeaderChanges, SessionEvent, SessionEventMap, TurnEndReason } from '@loom/session'
import { usageCost, type CachePrices } from '@loom/session'
import type { TurnResult, TurnWatcher } from '../runner.ts'
import { assistantText, describeCall, describeHeaderChanges, describeReason, describeResult, describeRetry, parseArguments, resultOf } from './describe.ts'
import { editDiff } from './diff.ts'
import { DurableOutput } from './durable.ts'
import { MarkdownStream, renderMarkdown } from './markdown.ts'
import { StreamJsonTurn } from './stream-json.ts'
import { Spinner, styler, type Io } from './term.ts'

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

export type OutputFormat = 'text' | 'stream-json'

export interface TurnFlags {
  json?: boolean
  /** `text` (the default) or `stream-json`; `json` wins over it (the command line refuses both). */
  output?: OutputFormat
  /** Print the model's reasoning as it streams, dimmed. */
  showReasoning?: boolean
  /** Asks are answered at this terminal, whose question shows an edit's diff (the result does not show it again). */
  asksAtTerminal?: boolean
}

const EXIT_INTERRUPTED = 130

/**
 * Runs `turn` with the terminal watching it, then prints how it ended. Resolves
 * to the exit code: 0 when the turn completed, 130 when a stop signal aborted
 * it, else 1.
 */
export async function showTurn(io: Io, flags: TurnFlags, turn: (watch?: TurnWatcher) => Promise<TurnResult>): Promise<number> {
  const view = flags.json ? undefined : flags.output === 'stream-json' ? new StreamJsonTurn(io) : new LiveTurn(io, flags.asksAtTerminal === true)
  const result = await turn(view && readTurn(view, { reasoning: flags.showReasoning === true }))
  const report = runReport(result.sessionId, result, result.events, result.reason, result.prices)
  if (view) view.end(report, result)
  else io.stdout.write(JSON.stringify(report, null, 2) + '\n')
  if (report.status === 'completed') return 0
  return result.cancelled && report.status === 'aborted' ? EXIT_INTERRUPTED : 1
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

/**
 * The live view of one turn on the terminal. On a TTY the answer is rendered as
 * markdown a block at a time, hidden reasoning is counted on the spinner, and an
 * edit call shows its diff.
 */
class LiveTurn implements TurnView {
  private readonly io: Io
  private readonly out: ReturnType<typeof styler>
  private readonly spinner: Spinner
  /** Absent without styles: the answer is printed as it streams, raw. */
  private readonly markdown: MarkdownStream | undefined
  private atLineStart = true
  private streamedText = false
  /** What the last streamed delta was: reasoning is set apart from the answer by a line break. */
  private streaming: 'text' | 'reasoning' | undefined
  /** Characters of hidden reasoning in this step, for the spinner. */
  private reasoned = 0
  /** The calls of this turn by id, for what their results show. */
  private readonly calls = new Map<string, { name: string; raw: string }>()

  private readonly asksAtTerminal: boolean

  constructor(io: Io, asksAtTerminal: boolean) {
    this.io = io
    this.asksAtTerminal = asksAtTerminal
    this.out = styler(io.stdout)
    this.spinner = new Spinner(io.stderr)
    this.markdown = this.out.enabled ? new MarkdownStream(this.out) : undefined
  }

  begin() {}

  step() {
    this.reasoned = 0
    this.spinner.start('thinking')
  }

  headerChange(changes: RequestHeaderChanges, drift?: PluginDrift) {
    this.line(this.out.yellow(`↻ ${describeHeaderChanges(changes, drift)}`))
    this.spinner.start('thinking')
  }

  text(delta: string) {
    if (this.streaming === 'reasoning' && !this.atLineStart) this.write('\n')
    this.streamedText = true
    this.streaming = 'text'
    if (!this.markdown) return this.write(delta)
    // A block shows once it is complete; meanwhile the spinner says the answer is coming.
    this.write(this.markdown.push(delta))
    this.spinner.start('writing')
  }

  reasoning(delta: string, shown: boolean) {
    if (!shown) {
      this.reasoned += delta.length
      return this.spinner.start(`reasoning ${this.out.dim(`(${describeChars(this.reasoned)})`)}`)
    }
    if (this.streaming === 'text' && !this.atLineStart) this.write('\n')
    this.write(this.out.dim(delta))
    this.streaming = 'reasoning'
  }

  message() {
    if (this.markdown) this.write(this.markdown.end())
    if (!this.atLineStart) this.write('\n')
    this.streaming = undefined
  }

  retry(retry: SessionEventMap['request/retry']) {
    // What the failed attempt streamed is not part of the answer: the retry repeats the request.
    this.markdown?.discard()
    this.line(this.out.yellow(`${this.streaming ? '(that partial answer is discarded) ' : ''}${describeRetry(retry)}`))
    this.streaming = undefined
    this.spinner.start('waiting to retry')
  }

  toolCall({ callId, name, arguments: raw }: SessionEventMap['tool/call']) {
    if (this.markdown) this.write(this.markdown.end())
    this.line(this.out.cyan(`→ ${describeCall(name, raw)}`))
    this.calls.set(callId, { name, raw })
    this.spinner.start(`running ${name}`)
  }

  toolResult({ message, meta }: SessionEventMap['tool/result']) {
    const { out } = this
    const { ok, summary } = describeResult(message)
    this.line(out.dim(`  ${ok ? out.green('✓') : out.red('✗')} ${summary}`))
    // What an edit changed, unless the approval question already showed it.
    const call = this.calls.get(message.content[0].toolCallId)
    const shownAsked = this.asksAtTerminal && answeredByApprover(meta)
    const diff = ok && call && !shownAsked ? editDiff(call.name, parseArguments(call.raw), out) : undefined
    if (diff?.length) this.write(diff.join('\n') + '\n')
    this.spinner.start('thinking')
  }

  turnEnd() {
    this.spinner.stop()
  }

  stop() {
    this.spinner.stop()
  }

  /** The answer if it did not stream, why a turn that did not complete ended, and the footer. */
  end(report: RunReport, { reason, error }: TurnResult) {
    if (this.markdown) this.write(this.markdown.end())
    if (!this.atLineStart) this.write('\n')
    if (!this.streamedText && report.text) this.line(this.out.enabled ? renderMarkdown(report.text, this.out) : report.text)
    const err = styler(this.io.stderr)
    if (report.status !== 'completed') {
      const why = reason ? describeReason(reason) : `it did not start${error ? `: ${error}` : ''}`
      this.io.stderr.write(err.red(`loom: the turn ended: ${why}`) + '\n')
    }
    this.io.stderr.write(err.dim(`session ${report.sessionId} · ${report.provider}/${report.model} · ${describeUsage(report)}`) + '\n')
  }

  private write(text: string) {
    if (!text) return
    this.spinner.stop()
    this.io.stdout.write(text)
    this.atLineStart = text.endsWith('\n')
  }

  private line(text: string) {
    this.write((this.atLineStart ? '' : '\n') + text + '\n')
  }
}

/** Whether a result's meta records an `ask` the approver allowed (not one an earlier allow-session settled). */
function answeredByApprover(meta: unknown): boolean {
  const decision = typeof meta === 'object' && meta !== null && 'decision' in meta ? meta.decision : undefined
  return typeof decision === 'object' && decision !== null && 'answer' in decision && (decision.answer === 'allow' || decision.answer === 'allow-session')
}

/** `812 chars`, `4.2k chars` */
function describeChars(count: number): string {
  return count < 1000 ? `${count} chars` : `${(count / 1000).toFixed(1)}k chars`
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

/** `8194 in (6144 cached, 75%) / 216 out tokens · ~$0.0012`, or `· unknown price` for a model with none. */
export function describeUsage(report: RunReport): string {
  const { usage } = report
  const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
  const cached = report.cacheHitShare === null ? '' : ` (${usage.cacheReadTokens} cached, ${Math.round(report.cacheHitShare * 100)}%)`
  return `${input} in${cached} / ${usage.outputTokens} out tokens · ${report.costUsd === null ? 'unknown price' : `~$${report.costUsd.toFixed(4)}`}`
}
