import type { CallId } from '@loom/llm'
import type { SessionEvent, SessionEventMap } from './events.ts'

export const TOOL_NOT_STARTED_TEXT =
  'The tool call was interrupted before Loom recorded it as started. Retry it if it is still needed.'
export const TOOL_OUTCOME_UNKNOWN_TEXT =
  'The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. '
  + 'Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; '
  + 'if it may have side effects, first verify external state or ask the user. Do not retry blindly.'

/**
 * The events that close a turn a crash left open, so the history never holds a
 * tool call without a result: one explicit error result per call that has none
 * (whether the tool had started decides what the model is told), then `step/end`
 * if a step is open, then `turn/end` with reason `interrupted`. `[]` when no turn
 * is open. Pure: the caller appends them.
 */
export function interruptedTurnClosers(events: readonly SessionEvent[]): SessionEvent[] {
  let turn: number | undefined
  let step: number | undefined
  let pending = new Map<CallId, { step: number; callSeq?: number }>()
  for (const event of events) {
    switch (event.type) {
      case 'turn/start':
        turn = (event.data as SessionEventMap['turn/start']).turn
        step = undefined
        pending = new Map()
        break
      case 'turn/end':
        turn = undefined
        step = undefined
        pending = new Map()
        break
      case 'step/start':
        step = (event.data as SessionEventMap['step/start']).step
        break
      case 'step/end':
        step = undefined
        pending = new Map()
        break
      case 'assistant/message': {
        const data = event.data as SessionEventMap['assistant/message']
        for (const block of data.message.content) {
          if (block.type === 'tool-call') pending.set(block.id, { step: data.step })
        }
        break
      }
      case 'tool/call': {
        const call = pending.get((event.data as SessionEventMap['tool/call']).callId)
        if (call) call.callSeq = event.seq
        break
      }
      case 'tool/result':
        pending.delete((event.data as SessionEventMap['tool/result']).message.source.callId)
        break
    }
  }
  if (turn === undefined) return []

  const last = events.at(-1)!
  let seq = last.seq + 1
  const time = last.time
  const closers: SessionEvent[] = []
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
          content: [{
            type: 'tool-result',
            toolCallId: callId,
            isError: true,
            content: [{ type: 'text', text: started ? TOOL_OUTCOME_UNKNOWN_TEXT : TOOL_NOT_STARTED_TEXT }],
          }],
        },
        error: started
          ? { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' }
          : { name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' },
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
