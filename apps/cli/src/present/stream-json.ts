// `--output stream-json`: a turn as JSON lines on stdout, one complete object
// per line, written as things happen and under the same rule as the text view
// (a message, a tool result and the turn's end only once on disk). The schema
// is versioned by the first line's `version`; the README documents it.
import type { SessionEventMap } from '@loom/session'
import type { TurnResult } from '../runner.ts'
import { assistantText, parseArguments, resultOf } from './describe.ts'
import type { Io } from './term.ts'
import type { RunReport, TurnView } from './turn-view.ts'

/** Bumped when a line changes incompatibly; adding a field or a line type is compatible. */
export const STREAM_JSON_VERSION = 1

export class StreamJsonTurn implements TurnView {
  private readonly io: Io

  constructor(io: Io) {
    this.io = io
  }

  begin({ id, provider, model }: { id: string; provider: string | null; model: string | null }) {
    this.emit({ type: 'session', version: STREAM_JSON_VERSION, id, provider, model })
  }

  step() {}

  // Not part of stream-json v1: `loom sessions show` has every header change.
  headerChange() {}

  text(delta: string) {
    this.emit({ type: 'text', delta })
  }

  reasoning(delta: string, shown: boolean) {
    if (shown) this.emit({ type: 'reasoning', delta })
  }

  message({ step, message, usage, interrupted }: SessionEventMap['assistant/message']) {
    this.emit({ type: 'message', step, text: assistantText(message), usage: usage ?? null, interrupted: interrupted === true })
  }

  retry({ step, retry, maxRetries, delayMs, failure }: SessionEventMap['request/retry']) {
    this.emit({ type: 'retry', step, retry, maxRetries: maxRetries ?? null, delayMs, error: { code: failure.code, message: failure.message } })
  }

  toolCall({ step, callId, name, arguments: raw }: SessionEventMap['tool/call']) {
    this.emit({ type: 'tool_call', step, id: callId, name, arguments: parseArguments(raw) })
  }

  toolResult({ message, error }: SessionEventMap['tool/result'], name: string) {
    const { text, isError } = resultOf(message)
    this.emit({ type: 'tool_result', id: message.content[0].toolCallId, name, isError, errorCode: error?.code ?? null, content: text })
  }

  // The last line comes from the turn's report (`end`), which the runner returns once everything is on disk.
  turnEnd() {}

  stop() {}

  end(report: RunReport, { error }: TurnResult) {
    const { status, reason, text, usage, cacheHitShare, costUsd } = report
    this.emit({ type: 'turn_end', status, reason, error: error ?? null, text, usage, cacheHitShare, costUsd })
  }

  private emit(line: Record<string, unknown>) {
    this.io.stdout.write(JSON.stringify(line) + '\n')
  }
}
