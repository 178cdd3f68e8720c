import { errorChain, HarnessError, type JsonValue, type UserMessage } from '@loom/llm'
import { describeViolations, type CompiledTool } from './define.ts'
import {
  abortedBeforeDispatchResult,
  abortedResult,
  errorResult,
  isAbortResult,
  ToolArgsError,
  ToolNotFoundError,
  ToolOutputError,
  ToolTimeoutError,
} from './errors.ts'
import { isPlainObject, snapshotJson } from './json.ts'
import { redactResult } from './redact.ts'
import { describe, normalizeContent, normalizeMeta, normalizeResult, normalizeUserMessage, textOf } from './result.ts'
import type { Ask, AskOutcome } from './approval.ts'
import type { PreToolDecision, ToolCallInput, ToolDecision, ToolExecutionResult, ToolRunContext, Unattended } from './types.ts'

/** What a call needs from the runtime, bound to the call's scope. */
export interface CallHost {
  /** The tool visible under `name` in the call's scope, restrictions applied. */
  lookup(name: string): CompiledTool | undefined
  /** Names visible in the call's scope, restrictions applied, sorted. */
  available(): string[]
  /** The pre-execute waterfall; `DEFAULT_DECISION` when every listener passed it through. */
  preExecute(exec: ToolRunContext): Promise<unknown>
  /** Settles an `ask`: an earlier allow-session, the approver, or no one. */
  settleAsk(exec: ToolRunContext, ask: Ask): Promise<AskOutcome>
  execute(exec: ToolRunContext, inner: () => Promise<ToolExecutionResult>): Promise<unknown>
  postExecute(exec: ToolRunContext, result: ToolExecutionResult): Promise<unknown>
  emitResult(exec: ToolRunContext, result: ToolExecutionResult): void
}

/** The innermost pre-execute step: no listener decided. */
export const DEFAULT_DECISION: PreToolDecision = Object.freeze({ kind: 'allow' })

export type ParsedArguments = { ok: true; value: unknown } | { ok: false; raw: string; problem: string }

/**
 * Arguments as the model meant them. The loop parses the model's JSON text and
 * passes the raw text on when it is not JSON; a string is parsed here again (so a
 * caller may also pass the text), `''` meaning no arguments.
 */
export function parseArguments(raw: unknown): ParsedArguments {
  if (typeof raw !== 'string') return { ok: true, value: raw }
  if (raw.trim() === '') return { ok: true, value: {} }
  try {
    return { ok: true, value: JSON.parse(raw) }
  } catch (error) {
    return { ok: false, raw, problem: error instanceof Error ? error.message : String(error) }
  }
}

type Phase = 'new' | 'preparing' | 'prepared' | 'dispatching' | 'dispatched' | 'finalizing' | 'done' | 'failed'

type BodyOutcome = { value: unknown } | { error: unknown } | 'aborted' | 'timeout'

/**
 * One call through the pipeline, in the scheduler's three phases:
 * `prepare` (snapshot, abort check, pre-execute), `dispatch` (the execute
 * waterfall around the body) and `finalize` (post-execute, late abort, freeze,
 * `tools/result`). Tool failures become error results; a hook that throws or
 * returns something malformed rejects the phase.
 */
export class ToolCallRun {
  private readonly host: CallHost
  private readonly input: ToolCallInput
  readonly exec: ToolRunContext
  private phase: Phase = 'new'
  /** Why the arguments cannot reach a body (invalid JSON text). */
  private readonly argsProblem: string | undefined
  /** A result decided before dispatch: lossy arguments, a denial, an early abort. */
  private early: ToolExecutionResult | undefined
  private dispatched: ToolExecutionResult | undefined
  /** How a listener's pre-execute decision was settled, for the result's meta. */
  private decision: ToolDecision | undefined
  private invoked = false
  private bodyStarted = false
  private readonly deferred: UserMessage[] = []
  private concluded = false
  private open = true

  constructor(host: CallHost, input: ToolCallInput) {
    this.host = host
    this.input = input
    const parsed = parseArguments(input.arguments)
    let args: unknown
    if (!parsed.ok) {
      args = parsed.raw
      this.argsProblem = `arguments are not valid JSON (${parsed.problem})`
    } else {
      const snapshot = snapshotJson(parsed.value)
      if (snapshot.ok) {
        args = snapshot.value
      } else {
        args = parsed.value
        this.early = errorResult(`tool execution arguments must be losslessly JSON-serializable (found ${snapshot.problem})`, {
          name: 'ToolArgsError',
          code: 'INVALID_ARGS',
        })
      }
    }
    this.exec = Object.freeze({
      callId: input.callId,
      name: input.name,
      arguments: args,
      ...(input.agent !== undefined && { agent: input.agent }),
      ...(input.scope !== undefined && { scope: input.scope }),
      signal: input.signal,
      deferContext: (message: UserMessage) => this.defer(message),
      concludeTurn: () => this.conclude(),
    })
  }

  /** True once prepared, when the call still has to run its body. */
  get needsDispatch(): boolean {
    return this.phase === 'prepared' && this.early === undefined
  }

  async prepare(): Promise<void> {
    this.enter('new', 'preparing')
    try {
      if (this.early === undefined) this.early = await this.decide()
      this.phase = 'prepared'
    } catch (error) {
      this.phase = 'failed'
      throw error
    }
  }

  async dispatch(): Promise<void> {
    if (!this.needsDispatch)
      throw new Error(`tool call "${this.input.callId}" cannot be dispatched (phase ${this.phase}${this.early ? ', already settled' : ''})`)
    this.phase = 'dispatching'
    try {
      const result = await this.host.execute(this.exec, () => this.invoke())
      this.dispatched = this.checked(result, 'a tools/execute listener')
      this.phase = 'dispatched'
    } catch (error) {
      this.phase = 'failed'
      throw error
    }
  }

  async finalize(): Promise<ToolExecutionResult> {
    if (!(this.phase === 'dispatched' || (this.phase === 'prepared' && this.early !== undefined))) {
      throw new Error(`tool call "${this.input.callId}" cannot be finalized (phase ${this.phase})`)
    }
    this.phase = 'finalizing'
    this.open = false
    try {
      let result = this.withDeferred(this.early ?? this.dispatched!)
      // Post-execute reviews every call that was dispatched (or denied), aborted ones
      // included: a call in flight at an abort is still committed with the contexts
      // its review attaches. An abort result keeps its content whatever the review says.
      if (this.bodyStarted || !isAbortResult(result)) {
        const reviewed = this.review(result, await this.host.postExecute(this.exec, result))
        if (isAbortResult(result)) {
          result = { ...result, ...(reviewed.additionalContexts && { additionalContexts: reviewed.additionalContexts }) }
        } else {
          result = this.input.signal.aborted && !reviewed.isError ? this.abortOf(reviewed) : reviewed
        }
      }
      if (this.decision) result = withDecision(result, this.decision)
      const final = redactResult(normalizeResult(result))
      this.phase = 'done'
      this.host.emitResult(this.exec, final)
      return final
    } catch (error) {
      this.phase = 'failed'
      throw error
    }
  }

  private enter(from: Phase, to: Phase) {
    if (this.phase !== from) throw new Error(`tool call "${this.input.callId}" is already ${this.phase}`)
    this.phase = to
  }

  /** Abort check, pre-execute (and the approver on `ask`), abort check again. `undefined` means dispatch. */
  private async decide(): Promise<ToolExecutionResult | undefined> {
    if (this.input.signal.aborted) return abortedBeforeDispatchResult()
    const decision = this.validDecision(await this.host.preExecute(this.exec))
    // Only what a listener decided is recorded: the default passed through is no decision.
    if (decision !== DEFAULT_DECISION) {
      const settled: ToolDecision | 'aborted' =
        decision.kind === 'ask'
          ? await this.host.settleAsk(this.exec, decision)
          : decision.kind === 'deny'
            ? { policy: 'deny', reason: decision.reason }
            : { policy: 'allow' }
      if (settled === 'aborted') return abortedBeforeDispatchResult()
      this.decision = settled
      const denial = denialOf(this.input.name, settled)
      if (denial !== undefined) return errorResult(denial)
    }
    if (this.input.signal.aborted) return abortedBeforeDispatchResult()
    return undefined
  }

  private validDecision(decision: unknown): PreToolDecision {
    if (decision === DEFAULT_DECISION) return DEFAULT_DECISION
    const bad = (detail: string): never => {
      throw new TypeError(
        `a tools/pre-execute listener returned ${detail} for tool "${this.input.name}"; expected { kind: 'allow' }, { kind: 'deny', reason } or { kind: 'ask', reason?, rule?, unattended?, refusal? }`,
      )
    }
    if (!isPlainObject(decision)) return bad(describe(decision))
    switch (decision.kind) {
      case 'allow':
        return { kind: 'allow' }
      case 'deny':
        if (typeof decision.reason !== 'string' || decision.reason === '') bad('a deny without a reason')
        return { kind: 'deny', reason: decision.reason as string }
      case 'ask':
        if (decision.reason !== undefined && typeof decision.reason !== 'string') bad('an ask with a non-string reason')
        if (decision.rule !== undefined && typeof decision.rule !== 'string') bad('an ask with a non-string rule')
        if (decision.unattended !== undefined && decision.unattended !== 'allow' && decision.unattended !== 'deny')
          bad(`an ask with unattended ${JSON.stringify(decision.unattended)} (expected 'allow' or 'deny')`)
        if (decision.refusal !== undefined && typeof decision.refusal !== 'string') bad('an ask with a non-string refusal')
        return {
          kind: 'ask',
          ...(decision.reason !== undefined && decision.reason !== '' && { reason: decision.reason as string }),
          ...(decision.rule !== undefined && { rule: decision.rule as string }),
          ...(decision.unattended !== undefined && { unattended: decision.unattended as Unattended }),
          ...(decision.refusal !== undefined && decision.refusal !== '' && { refusal: decision.refusal as string }),
        }
      default:
        return bad(`kind ${JSON.stringify(decision.kind) ?? 'undefined'}`)
    }
  }

  /** The innermost step of the execute waterfall. Never rejects. */
  private async invoke(): Promise<ToolExecutionResult> {
    const name = this.input.name
    if (this.invoked) throw new Error(`tool call "${this.input.callId}" (${name}): a tools/execute listener called next() twice`)
    this.invoked = true
    if (this.input.signal.aborted) return abortedBeforeDispatchResult()
    const tool = this.host.lookup(name)
    if (!tool) {
      const names = this.host.available()
      const available = names.length ? `available tools: ${names.join(', ')}` : 'no tools are available'
      return failureOf(new ToolNotFoundError(`unknown tool "${name}"; ${available}`))
    }
    if (this.argsProblem !== undefined) return failureOf(new ToolArgsError(`invalid arguments for tool "${name}": ${this.argsProblem}`))
    if (!tool.validate(this.exec.arguments)) {
      return failureOf(new ToolArgsError(`invalid arguments for tool "${name}": ${describeViolations(tool.validate.errors)}`))
    }
    const outcome = await this.runBody(tool)
    if (this.input.signal.aborted) return abortedResult()
    if (outcome === 'timeout') return failureOf(new ToolTimeoutError(`tool "${name}" timed out after ${tool.timeoutMs} ms`))
    if (outcome === 'aborted') return abortedResult()
    if ('error' in outcome) return failureOf(outcome.error)
    try {
      return this.successOf(outcome.value)
    } catch (error) {
      return failureOf(new ToolOutputError(`tool "${name}" returned an invalid output: ${error instanceof Error ? error.message : String(error)}`))
    }
  }

  /** Runs the body, racing it against the caller's abort and the timeout. */
  private async runBody(tool: CompiledTool): Promise<BodyOutcome> {
    this.bodyStarted = true
    const caller = this.input.signal
    const timeout = tool.timeoutMs
    const controller = timeout === undefined ? undefined : new AbortController()
    const exec = controller ? Object.freeze({ ...this.exec, signal: AbortSignal.any([caller, controller.signal]) }) : this.exec
    let timer: ReturnType<typeof setTimeout> | undefined
    let onAbort: (() => void) | undefined
    const interrupted = new Promise<'aborted' | 'timeout'>(resolve => {
      onAbort = () => resolve('aborted')
      caller.addEventListener('abort', onAbort, { once: true })
      if (controller) {
        timer = setTimeout(() => {
          resolve('timeout')
          controller.abort(new ToolTimeoutError(`tool "${tool.name}" timed out after ${timeout} ms`))
        }, timeout)
      }
    })
    try {
      const body = new Promise<unknown>(resolve => resolve(tool.execute(exec.arguments, exec)))
      // Settles either way, so a body that loses the race never leaves an unhandled rejection.
      const settled = body.then(
        value => ({ value }),
        (error: unknown) => ({ error }),
      )
      const outcome = await Promise.race([settled, interrupted])
      // A body still running after an abort or timeout can no longer add to this call.
      if (typeof outcome === 'string') this.open = false
      return outcome
    } finally {
      clearTimeout(timer)
      caller.removeEventListener('abort', onAbort!)
    }
  }

  private successOf(output: unknown): ToolExecutionResult {
    let content: unknown = output
    let meta: unknown
    let concludes = false
    if (isPlainObject(output)) {
      if (!('content' in output))
        throw new TypeError(`expected a string, content blocks or { content, meta?, concludesTurn? }, got an object without "content"`)
      content = output.content
      meta = output.meta
      if (output.concludesTurn !== undefined && typeof output.concludesTurn !== 'boolean') throw new TypeError('concludesTurn must be a boolean')
      concludes = output.concludesTurn === true
    } else if (typeof output !== 'string' && !Array.isArray(output)) {
      throw new TypeError(`expected a string, content blocks or { content, meta?, concludesTurn? }, got ${describe(output)}`)
    }
    return {
      isError: false,
      content: normalizeContent(content),
      ...(meta !== undefined && { meta: normalizeMeta(meta) }),
      ...((concludes || this.concluded) && { concludesTurn: true as const }),
    }
  }

  private checked(result: unknown, who: string): ToolExecutionResult {
    try {
      return normalizeResult(result)
    } catch (error) {
      throw new TypeError(`${who} returned an invalid result for tool "${this.input.name}": ${(error as Error).message}`)
    }
  }

  /** Contexts deferred during the call come first, then those the result carries. */
  private withDeferred(result: ToolExecutionResult): ToolExecutionResult {
    if (this.deferred.length === 0) return result
    return { ...result, additionalContexts: [...this.deferred, ...(result.additionalContexts ?? [])] }
  }

  private review(result: ToolExecutionResult, decision: unknown): ToolExecutionResult {
    const name = this.input.name
    const bad = (detail: string): never => {
      throw new TypeError(
        `a tools/post-execute listener returned ${detail} for tool "${name}"; expected { kind: 'accept', content?, additionalContexts? } or { kind: 'block', feedback, additionalContexts? }`,
      )
    }
    if (!isPlainObject(decision)) return bad(describe(decision))
    let contexts: UserMessage[] = []
    if (decision.additionalContexts !== undefined) {
      if (!Array.isArray(decision.additionalContexts)) bad('additionalContexts that are not an array')
      contexts = (decision.additionalContexts as unknown[]).map((message, i) => normalizeUserMessage(message, `additionalContexts[${i}]`))
    }
    try {
      switch (decision.kind) {
        case 'accept': {
          const content = decision.content === undefined ? result.content : normalizeContent(decision.content)
          const all = [...(result.additionalContexts ?? []), ...contexts]
          return { ...result, content, ...(all.length > 0 && { additionalContexts: all }) }
        }
        case 'block': {
          // The body's deferred contexts are dropped with its result.
          const content = normalizeContent(decision.feedback, 'feedback')
          return {
            isError: true,
            error: { message: textOf(content) || `tool "${name}" was blocked by a tools/post-execute listener` },
            content,
            ...(contexts.length > 0 && { additionalContexts: contexts }),
          }
        }
        default:
          return bad(`kind ${JSON.stringify(decision.kind) ?? 'undefined'}`)
      }
    } catch (error) {
      if (error instanceof TypeError && error.message.startsWith('a tools/post-execute')) throw error
      return bad(`an invalid decision (${(error as Error).message})`)
    }
  }

  private abortOf(result: ToolExecutionResult): ToolExecutionResult {
    if (!this.bodyStarted) return abortedBeforeDispatchResult()
    return { ...abortedResult(), ...(result.additionalContexts && { additionalContexts: result.additionalContexts }) }
  }

  private defer(message: UserMessage) {
    if (!this.open) throw new Error(`deferContext: tool call "${this.input.callId}" (${this.input.name}) has already settled`)
    this.deferred.push(normalizeUserMessage(message, 'deferContext(message)'))
  }

  private conclude() {
    if (!this.open) throw new Error(`concludeTurn: tool call "${this.input.callId}" (${this.input.name}) has already settled`)
    this.concluded = true
  }
}

/** What the model reads when a decision stops the call; `undefined` when it may run. */
function denialOf(name: string, decision: ToolDecision): string | undefined {
  if (decision.policy === 'allow') return undefined
  if (decision.policy === 'deny') return decision.reason
  switch (decision.answer) {
    case 'no-approver': {
      const base = `tool "${name}" requires approval, and no one can approve here (no approver is registered)`
      return decision.reason ? `${base}: ${decision.reason}` : base
    }
    case 'deny':
      return `tool "${name}" was not approved${decision.reason ? ` (${decision.reason})` : ''}${decision.note ? `: ${decision.note}` : ''}`
    default:
      return undefined
  }
}

/**
 * The decision joins the result's meta (the log's, never the model's): an object
 * meta gets a `decision` key, no meta becomes `{ decision }`, any other meta is
 * kept as `{ value, decision }`.
 */
function withDecision(result: ToolExecutionResult, decision: ToolDecision): ToolExecutionResult {
  const meta = result.meta
  const record = decision as JsonValue
  return {
    ...result,
    meta: meta === undefined ? { decision: record } : isPlainObject(meta) ? { ...meta, decision: record } : { value: meta, decision: record },
  }
}

/** `Error: <message>`; `info` only for a HarnessError, whose code is stable. */
function failureOf(error: unknown): ToolExecutionResult {
  return errorResult(errorChain(error), error instanceof HarnessError ? { name: error.name, code: error.code } : undefined)
}
