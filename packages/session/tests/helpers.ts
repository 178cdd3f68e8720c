// Shared fixtures for the session tests: realistic logs built through the public append API.
import { createAssistantMessage, createToolResultMessage, userText, type ContentBlock, type ToolCallBlock } from '@loom/llm'
import type { SessionEventMap } from '../src/events.ts'
import type { Session } from '../src/session.ts'

export const MODEL = { provider: 'test', model: 'test-model' } as const

export const toolCall = (id: string, name = 'read_file', args = '{"path":"a.txt"}'): ToolCallBlock => ({ type: 'tool-call', id, name, arguments: args })

export const assistantData = (turn: number, step: number, content: ContentBlock[]): SessionEventMap['assistant/message'] => ({
  turn,
  step,
  message: createAssistantMessage({ content, source: MODEL }),
})

export const toolResultData = (turn: number, step: number, callId: string, text = `result of ${callId}`): SessionEventMap['tool/result'] => ({
  turn,
  step,
  message: createToolResultMessage({ callId, content: [{ type: 'text', text }] }),
})

export interface TurnSeqs {
  turnStart: number
  stepStart: number
  user: number
  assistant: number
  toolCall: number
  toolResult: number
  stepEnd: number
  turnEnd: number
}

/**
 * Appends one closed turn: turn/start, step/start, the user's message, an assistant
 * message with one tool-call block, tool/call, tool/result, step/end, turn/end.
 */
export function appendToolTurn(session: Session, turn: number, callId = `call-${turn}`): TurnSeqs {
  const turnStart = session.append('turn/start', { turn }).seq
  const stepStart = session.append('step/start', { turn, step: 1 }).seq
  const user = session.append('user/message', userText(`question ${turn}`), { surfaceOp: 'append' }).seq
  const assistant = session.append('assistant/message', assistantData(turn, 1, [{ type: 'text', text: `answer ${turn}` }, toolCall(callId)]), {
    surfaceOp: 'append',
  }).seq
  const call = session.append('tool/call', { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"a.txt"}' }).seq
  const result = session.append('tool/result', toolResultData(turn, 1, callId), { surfaceOp: 'append', sourceEventSeqs: [call] }).seq
  const stepEnd = session.append('step/end', { turn, step: 1 }).seq
  const turnEnd = session.append('turn/end', { turn, reason: { kind: 'completed' } }).seq
  return { turnStart, stepStart, user, assistant, toolCall: call, toolResult: result, stepEnd, turnEnd }
}

/** Appends turn/start, step/start and a user message: a turn left open. */
export function appendOpenTurn(session: Session, turn: number): { turnStart: number; stepStart: number; user: number } {
  const turnStart = session.append('turn/start', { turn }).seq
  const stepStart = session.append('step/start', { turn, step: 1 }).seq
  const user = session.append('user/message', userText(`question ${turn}`), { surfaceOp: 'append' }).seq
  return { turnStart, stepStart, user }
}

/** True when `value` and everything reachable from it is frozen. */
export function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (!Object.isFrozen(value)) return false
  return Reflect.ownKeys(value).every(key => isDeepFrozen((value as Record<PropertyKey, unknown>)[key]))
}
