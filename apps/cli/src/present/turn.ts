// A turn as the terminal shows it (`loom run`, `loom sessions resume`, a task in
// `loom dev`): assistant text and tool calls as they stream, a tool result or
// the end of an answer once it is on disk, a spinner on a TTY while the agent
// waits; then the answer if nothing streamed, and the footer on stderr. With
// `--json`, only the report at the end; with `--output stream-json`, one JSON
// line per thing that happened (stream-json.ts). Both live views read the turn
// through `readTurn` (turn-view.ts), so they show the same things at the same moments.
import type { PluginDrift, RequestHeaderChanges, SessionEventMap } from '@loom/session'
import type { TurnResult, TurnWatcher } from '../runner.ts'
import { describeCall, describeHeaderChanges, describeReason, describeResult, describeRetry, parseArguments } from './describe.ts'
import { editDiff } from './diff.ts'
import { MarkdownStream, renderMarkdown } from './markdown.ts'
import { StreamJsonTurn } from './stream-json.ts'
import { Spinner, styler, type Io } from './term.ts'
import { readTurn, runReport, type RunReport, type TurnView } from './turn-view.ts'

export type OutputFormat = 'text' | 'stream-json'

export interface TurnFlags {
  json?: boolean
  /** `text` (the default) or `stream-json`; `json` wins over it (the command line refuses both). */
  output?: OutputFormat
  /** Print the model's reasoning as it streams, dimmed. */
  showReasoning?: boolean
  /** Asks are answered at this terminal, whose question shows an edit's diff (the result does not show it again). */
  asksAtTerminal?: boolean
  /** A status shown with the spinner (the conversation's: route, context, cost), asked for again at each step. */
  status?: () => string | undefined
  /** Receives the live view's controls while the turn runs (the conversation prints its notes through them). */
  control?: (control: TurnControl) => void
}

/** What a conversation may do to the live view of a running turn. */
export interface TurnControl {
  /** Prints `text` on stderr under what the turn showed so far: the spinner cleared, the text streamed until now shown first. */
  note(text: string): void
}

const EXIT_INTERRUPTED = 130
/** As a writer that SIGPIPE stops: 128 + 13. */
const EXIT_OUTPUT_CLOSED = 141

/**
 * Runs `turn` with the terminal watching it, then prints how it ended. Resolves
 * to the exit code: 0 when the turn completed, 130 when a stop signal aborted
 * it, 141 when its output was closed (nothing reads it any more), else 1.
 */
export async function showTurn(io: Io, flags: TurnFlags, turn: (watch?: TurnWatcher) => Promise<TurnResult>): Promise<number> {
  const view = flags.json ? undefined : flags.output === 'stream-json' ? new StreamJsonTurn(io) : new LiveTurn(io, flags)
  if (view instanceof LiveTurn) flags.control?.(view)
  const result = await turn(view && readTurn(view, { reasoning: flags.showReasoning === true }))
  const report = runReport(result.sessionId, result, result.events, result.reason, result.prices)
  if (view) view.end(report, result)
  else io.stdout.write(JSON.stringify(report, null, 2) + '\n')
  if (report.status === 'completed') return 0
  if (outputClosed(result)) return EXIT_OUTPUT_CLOSED
  return result.cancelled && report.status === 'aborted' ? EXIT_INTERRUPTED : 1
}

/** The turn stopped because nothing reads its output any more (`loom run … | head -1`). */
const outputClosed = ({ reason }: TurnResult) => reason?.kind === 'aborted' && reason.reason.kind === 'output-closed'

/**
 * The live view of one turn on the terminal. On a TTY the answer is rendered as
 * markdown a block at a time, hidden reasoning is counted on the spinner, and an
 * edit call shows its diff.
 */
class LiveTurn implements TurnView, TurnControl {
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
  private readonly status: (() => string | undefined) | undefined

  constructor(io: Io, flags: TurnFlags) {
    this.io = io
    this.asksAtTerminal = flags.asksAtTerminal === true
    this.status = flags.status
    this.out = styler(io.stdout)
    this.spinner = new Spinner(io.stderr)
    this.markdown = this.out.enabled ? new MarkdownStream(this.out) : undefined
  }

  begin() {}

  step() {
    this.reasoned = 0
    this.spinner.setDetail(this.status?.())
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

  note(text: string) {
    // The answer's unfinished block is shown as far as it came, then the note under it.
    if (this.markdown) this.write(this.markdown.end())
    this.spinner.stop()
    if (!this.atLineStart) this.write('\n')
    this.io.stderr.write(text + '\n')
  }

  stop() {
    this.spinner.stop()
  }

  /** The answer if it did not stream, why a turn that did not complete ended, and the footer. */
  end(report: RunReport, result: TurnResult) {
    const { reason, error } = result
    if (this.markdown) this.write(this.markdown.end())
    if (!this.atLineStart) this.write('\n')
    if (!this.streamedText && report.text) this.line(this.out.enabled ? renderMarkdown(report.text, this.out) : report.text)
    const err = styler(this.io.stderr)
    // Output closed by its reader: the turn stops quietly (the footer names the session it is in).
    if (report.status !== 'completed' && !outputClosed(result)) {
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

/** The route of the offline models (the demo model, a scripted one): they call no provider, so they cost nothing. */
const OFFLINE_PROVIDER = 'scripted'

/**
 * `8194 in (6144 cached, 75%) / 216 out tokens · ~$0.0012`; `· unknown price` for
 * a model with none; no cost at all when it is zero or the route is offline.
 */
export function describeUsage(report: RunReport): string {
  const { usage } = report
  const input = usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens
  const cached = report.cacheHitShare === null ? '' : ` (${usage.cacheReadTokens} cached, ${Math.round(report.cacheHitShare * 100)}%)`
  const tokens = `${input} in${cached} / ${usage.outputTokens} out tokens`
  if (report.costUsd === 0 || (report.costUsd === null && report.provider === OFFLINE_PROVIDER)) return tokens
  return `${tokens} · ${report.costUsd === null ? 'unknown price' : `~$${report.costUsd.toFixed(4)}`}`
}
