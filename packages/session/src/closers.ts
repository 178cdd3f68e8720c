import { BlockAssembler, type CallId, type StreamChunk } from '@loom/llm'
import { type EventBlocks, joinBlocks } from './event-log.ts'
import type { SessionEvent } from './events.ts'

export const TOOL_NOT_STARTED_TEXT = 'The tool call was interrupted before Loom recorded it as started. Retry it if it is still needed.'
export const TOOL_OUTCOME_UNKNOWN_TEXT =
  'The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. ' +
  'Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; ' +
  'if it may have side effects, first verify external state or ask the user. Do not retry blindly.'

/** The `error` of the `compaction/end` that crash repair appends for a compaction that never committed its summary. */
export const COMPACTION_INTERRUPTED_ERROR = 'interrupted: the compaction did not finish before the process stopped (closed by repair)'

/** A `compaction/start` with no `compaction/end` after it: a crash inside a compaction. */
export interface UnfinishedCompaction {
  compactionId: string
  turn: number | null
  /** Seq of its `compaction/start`. */
  startSeq: number
  /** Its summary and replacement message are in the log: only the end is missing. */
  committed: boolean
}

/** Every compaction the log started (from `from` on) and never ended, in log order. Pure. */
export function unfinishedCompactions(events: readonly SessionEvent[], from = 0): UnfinishedCompaction[] {
  const open = new Map<string, UnfinishedCompaction>()
  // A summary commits with the replacement message appended right after it.
  let summarized: UnfinishedCompaction | undefined
  for (let i = from; i < events.length; i++) {
    const event = events[i]
    const justSummarized = summarized
    summarized = undefined
    switch (event.type) {
      case 'compaction/start': {
        const { compactionId, turn } = event.data
        open.set(compactionId, { compactionId, turn, startSeq: event.seq, committed: false })
        break
      }
      case 'compaction/summary':
        summarized = open.get(event.data.compactionId)
        break
      case 'user/message':
        if (justSummarized && typeof event.surfaceOp === 'object' && event.surfaceOp.op === 'replace') justSummarized.committed = true
        break
      case 'compaction/end':
        open.delete(event.data.compactionId)
        break
    }
  }
  return [...open.values()]
}

/**
 * The events that close what a crash left open. First a `compaction/end` for
 * every unfinished compaction (no error when its summary had committed, else
 * COMPACTION_INTERRUPTED_ERROR). Then, for an open turn, so the history never
 * holds a tool call without a result: one explicit error result per call that
 * has none (whether the tool had started decides what the model is told), then
 * `step/end` if a step is open, then `turn/end` with reason `interrupted`. A
 * stream the crash cut short (chunks logged, no message citing them) is kept
 * first as an interrupted assistant message of its text and reasoning. `[]`
 * when nothing is open. Pure: the caller appends them.
 */
export function interruptedTurnClosers(events: readonly SessionEvent[]): SessionEvent[] {
  // Only what follows the last turn/end can be open: a writer closes what a crash
  // left open (these closers) before it writes anything else. So a long log costs
  // a scan of its last turn, not of its whole history.
  const from = afterLastTurnEnd(events)
  let turn: number | undefined
  let step: number | undefined
  let pending = new Map<CallId, { step: number; callSeq?: number }>()
  // The chunks of a stream the crash cut short: logged, but no assistant/message cites them yet.
  let streamed: SessionEvent<'assistant/chunk'>[] = []
  // The model of the open turn's latest request: a cut stream came from it.
  let context: { provider: string; model: string } | undefined
  for (let i = from; i < events.length; i++) {
    const event = events[i]
    switch (event.type) {
      case 'request/context':
        context = event.data
        break
      case 'assistant/chunk': {
        const { chunk } = event.data
        // A failed attempt's chunks are never part of the history; the retry starts afresh.
        if (chunk.type === 'finish' && (chunk.reason.kind === 'error' || chunk.reason.kind === 'aborted')) streamed = []
        else streamed.push(event)
        break
      }
      case 'turn/start':
        turn = event.data.turn
        step = undefined
        pending = new Map()
        break
      case 'turn/end':
        turn = undefined
        step = undefined
        pending = new Map()
        break
      case 'step/start':
        step = event.data.step
        streamed = []
        break
      case 'step/end':
        step = undefined
        pending = new Map()
        break
      case 'assistant/message': {
        streamed = []
        const data = event.data
        for (const block of data.message.content) {
          if (block.type === 'tool-call') pending.set(block.id, { step: data.step })
        }
        break
      }
      case 'tool/call': {
        const call = pending.get(event.data.callId)
        if (call) call.callSeq = event.seq
        break
      }
      case 'tool/result':
        pending.delete(event.data.message.source.callId)
        break
    }
  }
  const compactions = unfinishedCompactions(events, from)
  if (turn === undefined && !compactions.length) return []

  const last = events.at(-1)!
  let seq = last.seq + 1
  const time = last.time
  const closers: SessionEvent[] = []
  // A compaction runs inside a step (or between turns): it closes first.
  for (const open of compactions) {
    const error = open.committed ? {} : { error: COMPACTION_INTERRUPTED_ERROR }
    closers.push({ type: 'compaction/end', seq: seq++, time, data: { compactionId: open.compactionId, turn: open.turn, ...error } })
  }
  if (turn === undefined) return closers
  // What the stream had shown survives as a partial, interrupted message (text and reasoning only).
  const partial = step === undefined ? [] : interruptedContent(streamed.map(event => event.data.chunk))
  if (partial.length) {
    const { provider, model } = context ?? { provider: 'unknown', model: 'unknown' }
    closers.push({
      type: 'assistant/message',
      seq,
      time,
      data: {
        turn,
        step: step!,
        message: { id: `interrupted-assistant-message-${seq}`, role: 'assistant', source: { kind: 'model', provider, model }, content: partial },
        interrupted: true,
      },
      surfaceOp: 'append',
      sourceEventSeqs: streamed.map(event => event.seq),
    })
    seq++
  }
  for (const [callId, call] of pending) {
    const started = call.callSeq !== undefined
    closers.push({
      type: 'tool/result',
      seq,
      time,
      data: {
        turn,
        step: call.step,
        message: {
          id: `interrupted-tool-result-${callId}-${seq}`,
          role: 'user',
          source: { kind: 'tool', callId },
          content: [
            {
              type: 'tool-result',
              toolCallId: callId,
              isError: true,
              content: [{ type: 'text', text: started ? TOOL_OUTCOME_UNKNOWN_TEXT : TOOL_NOT_STARTED_TEXT }],
            },
          ],
        },
        error: started ? { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' } : { name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' },
      },
      surfaceOp: 'append',
      ...(started && { sourceEventSeqs: [call.callSeq!] }),
    })
    seq++
  }
  if (step !== undefined) closers.push({ type: 'step/end', seq: seq++, time, data: { turn, step } })
  closers.push({ type: 'turn/end', seq, time, data: { turn, reason: { kind: 'interrupted' } } })
  return closers
}

/**
 * The events of `blocks` from the block that holds the last `turn/end` on (all
 * of them without one): all `interruptedTurnClosers` reads of a long log.
 */
export function openTail(blocks: EventBlocks): SessionEvent[] {
  let first = blocks.length - 1
  while (first > 0 && !blocks[first].some(event => event.type === 'turn/end')) first--
  return joinBlocks(blocks.slice(Math.max(0, first)))
}

/** The index after the log's last `turn/end` (0 without one). */
function afterLastTurnEnd(events: readonly SessionEvent[]): number {
  let i = events.length
  while (i > 0 && events[i - 1].type !== 'turn/end') i--
  return i
}

function interruptedContent(chunks: readonly StreamChunk[]) {
  const assembler = new BlockAssembler()
  for (const chunk of chunks) assembler.push(chunk)
  return assembler.interruptedBlocks()
}
