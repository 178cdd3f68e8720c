// Session logs for persistence tests: raw event batches and the turns a test
// writes, through the seam or into a live Session (used by the contract suite
// and by each backend's own tests).
import { createAssistantMessage, createToolResultMessage, userText, type ContentBlock } from '@loom/llm'
import type { SessionEvent, SessionEventType, SessionHeader, SurfaceIntent } from '../events.ts'
import type { Session } from '../session.ts'

const MODEL = { provider: 'test', model: 'test-model' } as const
/** The cwd of the logs' headers. */
export const CWD = '/workspace'

/** Receives one event to append: a raw array (seam batches) or a live Session. */
export type Sink = (type: SessionEventType | string, data: unknown, intent?: SurfaceIntent) => SessionEvent

/** Raw events starting at `firstSeq`, with the envelope key order of `Session.append`. */
export function raw(firstSeq: number, fill: (sink: Sink) => void): SessionEvent[] {
  const events: SessionEvent[] = []
  fill((type, data, intent) => {
    const seq = firstSeq + events.length
    const event = {
      type,
      seq,
      time: 1_700_000_000_000 + seq,
      data,
      ...(intent?.surfaceOp !== undefined && { surfaceOp: intent.surfaceOp }),
      ...(intent?.sourceEventSeqs !== undefined && { sourceEventSeqs: intent.sourceEventSeqs }),
    } as unknown as SessionEvent
    events.push(event)
    return event
  })
  return events
}

/** Appends to a live session (published through `session/event`). */
export function live(session: Session): Sink {
  return (type, data, intent) => (intent ? session.append(type as 'user/message', data as never, intent) : session.append(type as 'turn/start', data as never))
}

const toolCallBlock = (id: string): ContentBlock => ({ type: 'tool-call', id, name: 'read_file', arguments: '{"path":"a.txt"}' })
const assistant = (turn: number, step: number, content: ContentBlock[]) => ({ turn, step, message: createAssistantMessage({ content, source: MODEL }) })

/** A closed turn without tools: 6 events. */
export function shortTurn(sink: Sink, turn: number) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  sink('assistant/message', assistant(turn, 1, [{ type: 'text', text: `answer ${turn}` }]), { surfaceOp: 'append' })
  sink('step/end', { turn, step: 1 })
  sink('turn/end', { turn, reason: { kind: 'completed' } })
}

/** A closed turn with streamed text and one tool call: 11 events. */
export function toolTurn(sink: Sink, turn: number, callId = `call-${turn}`) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  for (const text of ['Let ', 'me ', 'look.']) sink('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text } })
  sink('assistant/message', assistant(turn, 1, [{ type: 'text', text: 'Let me look.' }, toolCallBlock(callId)]), { surfaceOp: 'append' })
  const call = sink('tool/call', { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"a.txt"}' })
  sink(
    'tool/result',
    { turn, step: 1, message: createToolResultMessage({ callId, content: [{ type: 'text', text: `contents for ${callId} — ünïcödé "quoted" \\ \u2028` }] }) },
    { surfaceOp: 'append', sourceEventSeqs: [call.seq] },
  )
  sink('step/end', { turn, step: 1 })
  sink('turn/end', { turn, reason: { kind: 'completed' } })
}

/** An open turn whose assistant message asks for `callId`; with `recorded`, the tool/call is logged too. */
export function openToolTurn(sink: Sink, turn: number, callId: string, recorded: boolean) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  sink('assistant/message', assistant(turn, 1, [toolCallBlock(callId)]), { surfaceOp: 'append' })
  if (recorded) sink('tool/call', { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"a.txt"}' })
}

/** A turn left open after its first step started: 2 events. */
export function openStart(sink: Sink, turn: number) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
}

/** A header for `id` in the logs' cwd. */
export const meta = (id: string, extra: Partial<SessionHeader> = {}): SessionHeader => ({ version: 0, id, createdAt: 1_700_000_000_000, cwd: CWD, ...extra })
