// Approvals over the API (`loom serve --approve api`): a tool call the policy
// asks about waits for a client's answer instead of the headless one. The
// question is an `approval/requested` event in the log of the session the
// server hosts, so it reaches the session's event stream like any other event
// once durable; `POST /v1/sessions/:id/approvals/:callId` answers it, recorded
// as `approval/answered` before the answer is returned. No answer within the
// deadline: the rule's unattended answer (absent: deny), noted so. Cancelling
// the call (a cancel, a drain) ends the wait. The question waits in this
// process: only the host that runs the session can answer it.
import type { Context } from '@deepseek-ai/cordis'
import type { ApprovalAnswered, Session } from '@loom/session'
import { hostname } from 'node:os'
import { ApiError } from './http.ts'
import { Answers, KEY_TTL_MS, keyed } from './idempotency.ts'
import type { HostedSessions } from './sessions.ts'

export type Decision = ApprovalAnswered['decision']
export const DECISIONS: readonly Decision[] = ['allow', 'allow-session', 'deny']

/** What the tool runtime asks (`ApprovalRequest` of `@loom/tools`): the fields used here. */
export interface AskedCall {
  readonly tool: string
  readonly callId: string
  readonly args: unknown
  readonly reason?: string
  readonly rule?: string
  readonly unattended?: 'allow' | 'deny'
  readonly refusal?: string
  readonly effects?: readonly string[]
  readonly origin?: string
  readonly destructive?: boolean
  readonly agent?: { readonly id: string; readonly name?: string }
  readonly session?: string
  readonly signal: AbortSignal
}

/** The approver's answer (`ApprovalAnswer` of `@loom/tools`). */
export type Answer = { kind: 'allow' } | { kind: 'allow-session' } | { kind: 'deny'; note?: string }

/** A client's answer to one question. */
export interface ClientAnswer {
  decision: Decision
  note?: string
  /** Who answered, as the client names them (the bearer token is shared, so it cannot tell). */
  by?: string
}

interface Pending {
  /** The hosted session whose log holds the question. */
  session: Session
  callId: string
  unattended: 'allow' | 'deny'
  /** How a person lets such a call run, for the model when nobody answered (the ask's `refusal`). */
  refusal?: string
  settle(answer: Answer): void
  /** The answer in the log once one was appended; its write may still be under way (or have failed, for a retry to finish). */
  recorded?: Answer
}

/** Longest argument preview in a question; the whole arguments are in the call's `tool/call` event. */
const PREVIEW_CHARS = 2000

export class ApiApprovals {
  private readonly home: Context
  private readonly sessions: HostedSessions
  private readonly deadlineMs: number
  private readonly report: (error: unknown) => void
  /** Open questions by session id and call id. */
  private readonly pending = new Map<string, Pending>()
  private readonly answers: Answers

  constructor(home: Context, sessions: HostedSessions, options: { deadlineMs: number; idempotencyTtlMs?: number; report: (error: unknown) => void }) {
    this.home = home
    this.sessions = sessions
    this.deadlineMs = options.deadlineMs
    this.report = options.report
    this.answers = new Answers(options.idempotencyTtlMs ?? KEY_TTL_MS)
  }

  /** The approver (`ctx.approver`): asks the clients of the session the call belongs to. */
  approve(request: AskedCall): Promise<Answer> {
    const unattended = request.unattended ?? 'deny'
    const session = request.session === undefined ? undefined : this.served(request.session)
    // Not a session of this server (an agent the deployment runs on its own): nobody here follows it.
    if (!session) return Promise.resolve(unattendedAnswer(unattended, 'no client of this server follows the session that asked', request.refusal))
    const key = slot(session.id, request.callId)
    const subagent = session.id !== request.session
    session.append('approval/requested', {
      callId: request.callId,
      tool: request.tool,
      preview: preview(request.args),
      ...(request.reason !== undefined && { reason: request.reason }),
      ...(request.rule !== undefined && { rule: request.rule }),
      unattended,
      deadlineMs: this.deadlineMs,
      ...(request.effects && { effects: [...request.effects] }),
      ...(request.origin !== undefined && { origin: request.origin }),
      ...(request.destructive && { destructive: true as const }),
      ...(subagent && { session: request.session!, ...(request.agent?.name !== undefined && { agent: request.agent.name }) }),
    })
    this.flush(session)
    return new Promise<Answer>(resolve => {
      const onAbort = () => entry.settle({ kind: 'deny' })
      const timer = setTimeout(() => this.expire(key), this.deadlineMs)
      const entry: Pending = {
        session,
        callId: request.callId,
        unattended,
        ...(request.refusal !== undefined && { refusal: request.refusal }),
        settle: answer => {
          clearTimeout(timer)
          request.signal.removeEventListener('abort', onAbort)
          if (this.pending.get(key) === entry) this.pending.delete(key)
          resolve(answer)
        },
      }
      this.pending.set(key, entry)
      // The tool runtime stops waiting on an abort by itself; this frees the question.
      if (request.signal.aborted) onAbort()
      else request.signal.addEventListener('abort', onAbort, { once: true })
    })
  }

  /**
   * A client's answer to the question of call `callId` in session `id`:
   * returned once it is durably in the log, and the call goes on. 404 for a
   * session this host does not serve or a call with no open question, 409 when
   * another host runs the session. A retry with the same `Idempotency-Key` gets
   * the first answer.
   */
  async answer(id: string, callId: string, input: ClientAnswer, key?: string): Promise<{ id: string; callId: string; decision: Decision; note?: string }> {
    if (key !== undefined) return this.answers.once(keyed(`approval\n${id}\n${callId}`, key, input), () => this.answer(id, callId, input))
    const entry = this.pending.get(slot(id, callId))
    if (!entry) {
      // Held elsewhere is 409, so the client goes to the host where the question waits.
      await this.sessions.locate(id)
      throw new ApiError(
        404,
        'APPROVAL_NOT_FOUND',
        `session ${id} has no open approval for call "${callId}": it was answered, its deadline passed, or it never asked`,
      )
    }
    // A retry after a failed write finishes that one: the first answer in the log is the answer.
    const answer =
      entry.recorded ??
      this.record(entry, input.decision === 'deny' ? { kind: 'deny', ...(input.note && { note: input.note }) } : { kind: input.decision }, {
        source: 'client',
        ...(input.note && { note: input.note }),
        ...(input.by && { by: input.by }),
      })
    // An error means not accepted: the question stays open until the answer is durable.
    await this.home.sessions.flush(entry.session)
    entry.settle(answer)
    return { id, callId, decision: answer.kind, ...(answer.kind === 'deny' && answer.note !== undefined && { note: answer.note }) }
  }

  /** The deadline passed: the answer a client gave meanwhile (its write under way), else the rule's unattended one. */
  private expire(key: string) {
    const entry = this.pending.get(key)
    if (!entry) return
    const waited = `no answer within ${this.deadlineMs / 1000} s`
    const answer = entry.recorded ?? unattendedAnswer(entry.unattended, waited, entry.refusal)
    try {
      if (!entry.recorded) this.record(entry, answer, { source: 'deadline', note: `${waited}; the rule's unattended answer: ${entry.unattended}` })
      this.flush(entry.session)
    } catch (error) {
      // The session went away meanwhile (given up, disposed): the call gets the answer anyway.
      this.report(error)
    }
    entry.settle(answer)
  }

  private record(entry: Pending, answer: Answer, how: Pick<ApprovalAnswered, 'source' | 'note' | 'by'>): Answer {
    entry.session.append('approval/answered', { callId: entry.callId, decision: answer.kind, ...how, host: hostname() })
    entry.recorded = answer
    return answer
  }

  /** The session this server hosts that `id` is, or that `id` is a subagent's session of. */
  private served(id: string): Session | undefined {
    for (let at: string | undefined = id, depth = 0; at !== undefined && depth < 32; depth++) {
      const agent = this.sessions.agentOf(at)
      if (agent) return agent.session
      at = this.home.sessions.get(at)?.header.parentSession
    }
    return undefined
  }

  /** Writes the question or a deadline's answer now, so streams show it without waiting for the write-behind window. */
  private flush(session: Session) {
    // A store that cannot take it now writes it later (or the session is given up); the wait goes on either way.
    this.home.sessions.flush(session).catch(this.report)
  }
}

/** The rule's answer for nobody to ask: allow, or deny with `note` for the model. */
/** The rule's answer where nobody answered; a denial says why, and how a person would let the call run when the ask says. */
function unattendedAnswer(unattended: 'allow' | 'deny', why: string, refusal?: string): Answer {
  return unattended === 'allow' ? { kind: 'allow' } : { kind: 'deny', note: refusal === undefined ? why : `${why}; ${refusal}` }
}

const slot = (id: string, callId: string) => `${id}\n${callId}`

/** The command, the path, else the arguments as JSON (a raw string when the model's JSON was invalid). */
function preview(args: unknown): string {
  let text: string
  if (typeof args === 'object' && args !== null && 'command' in args && typeof args.command === 'string') text = args.command
  else if (typeof args === 'object' && args !== null && 'path' in args && typeof args.path === 'string') text = args.path
  else text = typeof args === 'string' ? args : (JSON.stringify(args) ?? String(args))
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text
}
