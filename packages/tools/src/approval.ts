import { isPlainObject } from './json.ts'
import { describe } from './result.ts'
import type { ApprovalAnswer, ApprovalRequest, Approver, ToolDecision, ToolRunContext, Unattended } from './types.ts'

export type Ask = { reason?: string; rule?: string; unattended?: Unattended; refusal?: string }

/** What the question shows about the tool itself (see `ApprovalRequest`). */
export type ToolFacts = Pick<ApprovalRequest, 'effects' | 'origin' | 'destructive' | 'writes'>

/** How an `ask` was settled; `aborted` when the call was aborted while the approver was asked. */
export type AskOutcome = Extract<ToolDecision, { policy: 'ask' }> | 'aborted'

/**
 * Settles `ask` decisions: with an earlier `allow-session` of the calling session,
 * else with the approver. What `allow-session` granted is kept per session id for
 * the runtime's life (in memory: a resumed session in a new process asks again).
 */
export class Approvals {
  private readonly approver: () => Approver | undefined
  /** Session id → keys of the (tool, rule) pairs allowed for the rest of the session. */
  private readonly granted = new Map<string, Set<string>>()

  constructor(approver: () => Approver | undefined) {
    this.approver = approver
  }

  async settle(exec: ToolRunContext, ask: Ask, tool: ToolFacts = {}): Promise<AskOutcome> {
    const asked = { policy: 'ask' as const, ...(ask.reason !== undefined && { reason: ask.reason }), ...(ask.rule !== undefined && { rule: ask.rule }) }
    const session = exec.agent?.sessionId
    const key = JSON.stringify([exec.name, ask.rule ?? null])
    if (session !== undefined && this.granted.get(session)?.has(key)) return { ...asked, answer: 'remembered' }
    const approver = this.approver()
    if (!approver) return { ...asked, answer: 'no-approver' }
    let answer: unknown
    try {
      answer = await untilAborted(exec.signal, () =>
        approver.approve({
          tool: exec.name,
          callId: exec.callId,
          args: exec.arguments,
          ...asked,
          ...(ask.unattended !== undefined && { unattended: ask.unattended }),
          ...(ask.refusal !== undefined && { refusal: ask.refusal }),
          ...tool,
          ...(exec.agent !== undefined && { agent: exec.agent }),
          ...(session !== undefined && { session }),
          signal: exec.signal,
        }),
      )
    } catch (error) {
      throw new Error(`the approver failed for tool "${exec.name}": ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    }
    if (answer === 'aborted') return answer
    const checked = checkAnswer(answer, exec.name)
    if (checked.kind === 'allow-session' && session !== undefined) {
      let keys = this.granted.get(session)
      if (!keys) this.granted.set(session, (keys = new Set()))
      keys.add(key)
    }
    if (checked.kind !== 'deny') return { ...asked, answer: checked.kind }
    return { ...asked, answer: 'deny', ...(checked.note !== undefined && checked.note !== '' && { note: checked.note }) }
  }
}

/** The approver's answer, or `aborted` as soon as the call's signal fires (an approver that ignores it is not waited for). */
async function untilAborted(signal: AbortSignal, ask: () => Promise<unknown>): Promise<unknown> {
  if (signal.aborted) return 'aborted'
  let onAbort: (() => void) | undefined
  const aborted = new Promise<'aborted'>(resolve => {
    onAbort = () => resolve('aborted')
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    const answer = new Promise<unknown>(resolve => resolve(ask()))
    // A late rejection after an abort must not go unhandled.
    answer.catch(() => {})
    return await Promise.race([answer, aborted])
  } finally {
    signal.removeEventListener('abort', onAbort!)
  }
}

function checkAnswer(answer: unknown, tool: string): ApprovalAnswer {
  const expected = "expected { kind: 'allow' }, { kind: 'allow-session' } or { kind: 'deny', note? }"
  if (isPlainObject(answer)) {
    if (answer.kind === 'allow' || answer.kind === 'allow-session') return { kind: answer.kind }
    if (answer.kind === 'deny' && (answer.note === undefined || typeof answer.note === 'string')) return answer as ApprovalAnswer
  }
  throw new TypeError(`the approver answered ${describe(answer)} for tool "${tool}"; ${expected}`)
}
