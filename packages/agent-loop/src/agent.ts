import type { Context } from '@deepseek-ai/cordis'
import {
  BlockAssembler,
  createAssistantMessage,
  createToolResultMessage,
  deepFreeze,
  errorChain,
  HarnessError,
  LlmError,
  markAgentLoopRequest,
  maxRetriesOf,
  retryDelay,
  type GenerateOptions,
  type LlmFailure,
  type LlmCallConfig,
  type PreparedLlmCall,
  type StreamChunk,
  type TokenUsage,
  type ToolCallBlock,
  type ToolSchema,
  type UserMessage,
} from '@loom/llm'
import { createScope, type AgentRef, type Scope } from '@loom/scope'
import {
  canonicalHeader,
  headerEquals,
  usageCost,
  type AgentCancelCause,
  type CachePrices,
  type RequestHeader,
  type RequestHeaderChanges,
  type RequestSources,
  type Session,
  type SessionEvent,
  type TurnEndReason,
} from '@loom/session'
import { joinContextSections, PromptUnstableError, renderPrompt, type PromptAssembly } from '@loom/system-prompt'
import { runToolCalls } from '@loom/tools'
import { Inbox, type InboxTarget } from './inbox.ts'
import { headerChanges, pluginDrift, promptSources } from './provenance.ts'
import { RuntimeContextProjection, snapshotSections } from './runtime-context.ts'
import type { AgentLoop } from './service.ts'

export interface AgentOptions {
  /** The agent's name (`AgentRef.name`): a role that plugins select agents by, unlike the per-session id. */
  name?: string
  provider?: string
  model?: string
  /** Output cap for every request; otherwise the adapter's default. */
  maxTokens?: number
  /**
   * Freeze the system text and tools at the session's first request (a resumed
   * session: at its latest logged header); plugins loaded later reach new sessions only.
   */
  pinPrompt?: boolean
  /** The reasoning effort of every request (`off` turns thinking off); otherwise the model's default. */
  reasoningEffort?: string
  /** Budgets of one turn; `maxSteps` defaults to the loop's config. */
  limits?: TurnLimits
}

/** Budgets of one turn: when one is reached, the turn ends with `{kind: 'limit'}` before the next model request. */
export interface TurnLimits {
  /** Model requests (steps) per turn; retries of a request do not count. */
  maxSteps?: number
  /** Input tokens (cache reads and writes included) the turn's requests may use, as the provider reported them. */
  maxInputTokens?: number
  /** US dollars the turn's requests may cost at `prices`. */
  maxCostUsd?: number
  /** Per million tokens; needed for `maxCostUsd`. */
  prices?: CachePrices
}

export type AgentStatus = 'idle' | 'running'
export type PreStepDecision = { kind: 'reject' } | { kind: 'enter'; messages: UserMessage[] }
export type RequestErrorAction = { kind: 'retry' } | undefined
export interface CancelOptions {
  keepInbox?: boolean
}

type Phase =
  | { kind: 'idle'; lastTurn: number }
  | { kind: 'maintenance'; abort: AbortController; lastTurn: number; wakeRequested: boolean }
  | { kind: 'running'; abort: AbortController; turn: number; step: number; wakeRequested: boolean }

type StepEnd = TurnEndReason | null

/**
 * What follows each live agent's session, looked up by the loop's one
 * `session/event` listener: a listener per agent would make every append of
 * every session call all of them (a host with 200 sessions, 200 calls an event).
 */
export const sessionObservers = new WeakMap<Session, (event: SessionEvent) => void>()

/**
 * One agent: a session, an inbox and a driver. `followup` queues a prompt for a
 * new turn, `steer` adds input to the next step and wakes the driver, `inject`
 * adds input without waking it. Each turn claims its input, assembles the prompt
 * for the agent's scope, logs what changed, freezes the request, streams the
 * model, runs the tools it asked for, and repeats until the model is done.
 */
export class Agent implements AgentRef {
  private readonly loop: AgentLoop
  readonly session: Session
  #options: Readonly<AgentOptions>
  readonly inbox: Inbox
  #phase: Phase
  #activity: Promise<void> | undefined
  readonly #projection: RuntimeContextProjection
  #headerLogged = false
  /** The pinned system text and tools (`pinPrompt`), set at the first request. */
  #pinned: PromptSelection | undefined
  #disposal: Promise<void> | undefined

  /** The agent's scope: registrations through it apply to this agent only and die with it. */
  readonly ctx: Context
  readonly #scope: Scope

  constructor(loop: AgentLoop, home: Context, session: Session, options: Readonly<AgentOptions>) {
    this.loop = loop
    this.session = session
    this.#options = options
    // The agent is its own scope key: `assemble({ scope: agent })` sees its layer.
    this.#scope = createScope(home, this)
    this.ctx = this.#scope.ctx
    this.#phase = { kind: 'idle', lastTurn: session.lastOfType('turn/start')?.data.turn ?? 0 }
    this.inbox = new Inbox(session, {
      inserted: message => loop.emit(this, 'agent/inbox/inserted', { agent: this, message }),
      discarded: message => loop.emit(this, 'agent/inbox/discarded', { agent: this, message }),
      claimed: (message, turn) => loop.emit(this, 'agent/inbox/claimed', { agent: this, message, turn }),
    })
    this.#projection = new RuntimeContextProjection(session)
    this.ctx.effect(() => {
      sessionObservers.set(session, event => this.#projection.observe(event))
      return () => sessionObservers.delete(session)
    }, 'agent: runtime-context projection')
  }

  get id(): string {
    return this.session.id
  }

  /** The options the agent was created with; `switchRoute` replaces its route. */
  get options(): Readonly<AgentOptions> {
    return this.#options
  }

  get name(): string | undefined {
    return this.options.name
  }

  get sessionId(): string {
    return this.session.id
  }

  /** The working directory recorded in the session header, if any. */
  get cwd(): string | undefined {
    return this.session.header.cwd
  }

  get status(): AgentStatus {
    return this.#phase.kind === 'running' ? 'running' : 'idle'
  }

  /** A prompt for a new turn; wakes the agent. */
  followup(message: UserMessage): void {
    this.send(message, 'next-turn', true)
  }

  /** Input for the next step of the running turn (or a new turn); wakes the agent. */
  steer(message: UserMessage): void {
    this.send(message, 'next-step', true)
  }

  /** Context for the next step, whenever it happens; does not wake the agent. */
  inject(message: UserMessage): void {
    this.send(message, 'next-step', false)
  }

  send(message: UserMessage, target: InboxTarget, wakeup: boolean): void {
    const phase = this.#phase
    const wakingAfterAbort = wakeup && phase.kind !== 'idle' && phase.abort.signal.aborted
    this.inbox.splice(wakingAfterAbort ? 'next-turn' : target, Infinity, 0, [message])
    if (wakeup) this.#wake(wakingAfterAbort)
  }

  /**
   * Switches the route of the agent's next requests while its session stays open
   * (a person's `/model`): logged as `agent/route`, and the next request's header
   * change names the switch. `options` replaces what belongs to the old route:
   * the limits (their prices) and the reasoning effort (absent: the new model's
   * default). False, and nothing logged, when `route` is the one in use.
   */
  switchRoute(route: { provider: string; model: string }, options: RouteSwitchOptions = {}): boolean {
    if (!route.provider || !route.model) throw new Error(`agent "${this.id}": switchRoute needs a provider and a model`)
    const current = this.#pendingSwitch()?.data ?? this.session.requestHeader()?.config ?? this.#options
    if (current.provider === route.provider && current.model === route.model) return false
    const from = current.provider && current.model ? { provider: current.provider, model: current.model } : undefined
    this.session.append('agent/route', { provider: route.provider, model: route.model, ...(from && { from }), ...(options.by && { by: options.by }) })
    // The `{{provider}}` and `{{model}}` variables change with it: announced, not unstable.
    this.loop.systemPrompt.rebaseStability(this)
    const { reasoningEffort: _old, ...kept } = this.#options
    this.#options = Object.freeze({
      ...kept,
      provider: route.provider,
      model: route.model,
      ...(options.reasoningEffort !== undefined && { reasoningEffort: options.reasoningEffort }),
      ...(options.limits !== undefined && { limits: options.limits }),
    })
    return true
  }

  /** The route switch logged since the last request header: the next request takes it. */
  #pendingSwitch() {
    return pendingRouteSwitch(this.session)
  }

  /** Aborts the running turn (the first cause wins) and, unless `keepInbox`, discards pending input. */
  cancel(cause: AgentCancelCause, options: CancelOptions = {}): void {
    const phase = this.#phase
    if (!options.keepInbox) {
      this.inbox.clear()
      if (phase.kind !== 'idle') phase.wakeRequested = false
    }
    if (phase.kind !== 'idle') phase.abort.abort(cause)
  }

  /** Resolves when the driver is idle, following any driver that replaced it. */
  async idle(): Promise<void> {
    let current: Promise<void> | undefined
    do {
      current = this.#activity
      await current
    } while (current !== this.#activity)
  }

  /** Runs work that needs the agent quiet (compaction, say); refused while a turn runs. */
  async runMaintenance<T>(task: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const phase = this.#phase
    if (phase.kind !== 'idle') throw new Error(`agent "${this.id}" already has active work`)
    const abort = new AbortController()
    this.#phase = { kind: 'maintenance', abort, lastTurn: phase.lastTurn, wakeRequested: false }
    try {
      return await task(abort.signal)
    } finally {
      const done = this.#phase as Extract<Phase, { kind: 'maintenance' }>
      this.#phase = { kind: 'idle', lastTurn: done.lastTurn }
      if (done.wakeRequested && this.inbox.hasPending) this.#wake(false)
    }
  }

  /**
   * Cancels the running turn, waits for the driver, then tears the agent down.
   * Input queued on an idle agent is kept: it is parked work that a resumed agent
   * picks up. Idempotent.
   */
  dispose(): Promise<void> {
    return (this.#disposal ??= (async () => {
      if (this.#phase.kind !== 'idle') this.cancel({ kind: 'disposed' })
      await this.idle()
      await this.#scope.dispose()
      await this.loop.release(this)
    })())
  }

  #setPhase(next: Phase) {
    const before = this.status
    this.#phase = next
    if (this.status !== before) this.loop.emit(this, 'agent/status', { agent: this, status: this.status })
  }

  #wake(afterAbort: boolean) {
    const phase = this.#phase
    if (phase.kind !== 'idle') {
      const reason = phase.abort.signal.reason as AgentCancelCause | undefined
      if (reason?.kind !== 'disposed' && (phase.kind === 'maintenance' || afterAbort)) phase.wakeRequested = true
      return
    }
    if (this.#disposal) return
    this.#setPhase({ kind: 'running', abort: new AbortController(), turn: phase.lastTurn, step: 0, wakeRequested: false })
    this.#activity = this.#drive()
  }

  async #drive() {
    try {
      while (await this.#turn()) {
        /* the next queued turn */
      }
    } catch {
      // Already reported through agent/error or the turn's end reason.
    } finally {
      const phase = this.#phase as Extract<Phase, { kind: 'running' }>
      this.#setPhase({ kind: 'idle', lastTurn: phase.turn })
      if (phase.wakeRequested && this.inbox.hasPending) this.#wake(false)
    }
  }

  #running(): Extract<Phase, { kind: 'running' }> {
    if (this.#phase.kind !== 'running') {
      const error = new Error(`agent "${this.id}": turn without driver reservation`)
      this.#reportError(0, 0, error)
      throw error
    }
    return this.#phase
  }

  /** One turn; `true` when another queued turn should follow. */
  async #turn(): Promise<boolean> {
    const phase = this.#running()
    const { signal } = phase.abort
    signal.throwIfAborted()
    const turn = phase.turn + 1
    try {
      this.session.append('turn/start', { turn })
    } catch (error) {
      this.#reportError(phase.turn, 0, error)
      throw error
    }
    phase.turn = turn
    phase.step = 0
    let turnEnds: TurnEndReason | null = null
    let target: InboxTarget = 'next-turn'
    const spent: TurnSpending = { inputTokens: 0, costUsd: 0 }
    try {
      for (;;) {
        signal.throwIfAborted()
        const limit = turnEnds === null && phase.step > 0 ? this.#limitReached(phase.step, spent) : undefined
        if (limit) {
          turnEnds = limit
          break
        }
        const step = phase.step + 1
        const decision = await this.#preStep(target, turn, step, signal)
        if (decision.kind === 'reject') {
          turnEnds = { kind: 'blocked' }
          return false
        }
        if (turnEnds && decision.messages.length === 0) break
        if (phase.step === 0 && decision.messages.length === 0) {
          turnEnds = { kind: 'completed' }
          return false
        }
        signal.throwIfAborted()
        this.session.append('step/start', { turn, step })
        phase.step = step
        try {
          for (const message of decision.messages) this.session.append('user/message', message, { surfaceOp: 'append' })
          const stepEnd = await this.#step(decision.assembly, turn, step, signal, spent)
          if (turnEnds?.kind !== 'max-tokens') turnEnds = stepEnd // max-tokens is sticky within a turn
        } finally {
          this.session.append('step/end', { turn, step })
        }
        signal.throwIfAborted()
        if (turnEnds && this.inbox.nextStep.length === 0) {
          await this.loop.serial(this, 'agent/turn-stopping', { agent: this, turn, signal })
          signal.throwIfAborted()
        }
        if (turnEnds && this.inbox.nextStep.length === 0) break
        target = 'next-step'
      }
    } catch (error) {
      if (signal.aborted) {
        turnEnds = { kind: 'aborted', reason: signal.reason as AgentCancelCause }
      } else {
        turnEnds = { kind: 'error', error: error instanceof LlmError ? error.failure : { message: errorChain(error), code: errorCode(error) } }
        this.#reportError(turn, phase.step, error)
      }
      throw error
    } finally {
      try {
        this.session.append('turn/end', { turn, reason: turnEnds! })
      } catch (error) {
        this.#reportError(turn, phase.step, error)
        // eslint-disable-next-line no-unsafe-finally
        throw error
      }
    }
    if (!this.inbox.hasPending) return false
    phase.abort = new AbortController()
    phase.wakeRequested = false
    phase.step = 0
    return true
  }

  async #preStep(
    target: InboxTarget,
    turn: number,
    step: number,
    signal: AbortSignal,
  ): Promise<{ kind: 'reject' } | { kind: 'enter'; messages: UserMessage[]; assembly: PromptAssembly }> {
    const claimed = Object.freeze(this.inbox.claim(target, turn))
    const assembly = await this.loop.systemPrompt.assemble({ agent: this, scope: this, signal })
    signal.throwIfAborted()
    const sections = snapshotSections(assembly)
    const candidate = this.#projection.project(joinContextSections(sections), sections)
    const decision = await this.loop.waterfall(this, 'agent/pre-step', { agent: this, messages: claimed, turn, step, signal }, async () => ({
      kind: 'enter',
      messages: candidate ? [...claimed, candidate] : [...claimed],
    }))
    signal.throwIfAborted()
    return decision.kind === 'reject' ? decision : { kind: 'enter', messages: decision.messages, assembly }
  }

  /** The budget of `limits` this turn has used up, if any. */
  #limitReached(steps: number, spent: TurnSpending): TurnEndReason | undefined {
    const limits = this.options.limits ?? {}
    const maxSteps = limits.maxSteps ?? this.loop.config.maxSteps
    if (steps >= maxSteps) return { kind: 'limit', limit: 'max-steps', used: steps, max: maxSteps }
    if (limits.maxInputTokens !== undefined && spent.inputTokens >= limits.maxInputTokens) {
      return { kind: 'limit', limit: 'max-input-tokens', used: spent.inputTokens, max: limits.maxInputTokens }
    }
    if (limits.maxCostUsd !== undefined && spent.costUsd >= limits.maxCostUsd) {
      return { kind: 'limit', limit: 'max-cost-usd', used: Math.round(spent.costUsd * 1e6) / 1e6, max: limits.maxCostUsd }
    }
    return undefined
  }

  /**
   * The default reaction to a failed request: retry by the route's policy
   * (backoff, Retry-After, capped in count and total wait), logging the wait.
   */
  async #retryByPolicy(
    turn: number,
    step: number,
    failure: LlmFailure,
    retryPolicy: PreparedLlmCall['retryPolicy'] | undefined,
    retries: { count: number; waitedMs: number },
    signal: AbortSignal,
  ): Promise<RequestErrorAction> {
    if (!retryPolicy) return undefined
    const delayMs = retryDelay(retryPolicy, failure, retries.count, retries.waitedMs)
    if (delayMs === undefined) return undefined
    retries.count++
    retries.waitedMs += delayMs
    this.session.append('request/retry', {
      turn,
      step,
      retry: retries.count,
      ...(retryPolicy.mode === 'normal' && { maxRetries: maxRetriesOf(retryPolicy, failure) }),
      delayMs,
      failure,
    })
    await sleep(delayMs, signal)
    return { kind: 'retry' }
  }

  /** One model call and the tools it asked for; `null` when the model is owed another request. */
  async #step(assembly: PromptAssembly, turn: number, step: number, signal: AbortSignal, spent: TurnSpending): Promise<StepEnd> {
    signal.throwIfAborted()
    const { system, tools, sources } = this.#pinned ?? this.#selectPrompt(assembly)
    const retries = { count: 0, waitedMs: 0 }
    for (;;) {
      const boundary = this.session.deriveMessages()
      const { request, prepared } = await this.#buildRequest(turn, step, tools, system, sources, boundary, signal)
      const stream = prepared ? prepared.stream(request) : this.loop.llm.stream(request)
      signal.throwIfAborted()
      const assembler = new BlockAssembler()
      const chunkSeqs: number[] = []
      try {
        for await (const chunk of untilAborted(stream, signal)) {
          signal.throwIfAborted()
          chunkSeqs.push(this.session.append('assistant/chunk', { turn, step, chunk }).seq)
          assembler.push(chunk)
        }
        signal.throwIfAborted()
      } catch (error) {
        const visible = signal.aborted ? assembler.interruptedBlocks() : []
        if (visible.length) {
          const message = createAssistantMessage({ content: visible, source: { provider: request.provider, model: request.model } })
          this.session.append(
            'assistant/message',
            { turn, step, message, interrupted: true, ...(assembler.usage && { usage: assembler.usage }) },
            { surfaceOp: 'append', sourceEventSeqs: chunkSeqs },
          )
        }
        throw error
      }

      const finish = assembler.finish
      if (finish.kind === 'error' || finish.kind === 'aborted') {
        const action = await this.loop.waterfall(
          this,
          'agent/request-error',
          {
            agent: this,
            turn,
            step,
            provider: request.provider,
            failure: finish.failure,
            retryPolicy: prepared?.retryPolicy,
            signal,
          },
          () => this.#retryByPolicy(turn, step, finish.failure, prepared?.retryPolicy, retries, signal),
        )
        signal.throwIfAborted() // a cancel wins over a retry
        if (action?.kind !== 'retry') throw new LlmError(finish.failure.message, finish.failure.code, finish.failure)
        continue // a new attempt in the same step; the failed chunks stay in the log, uncited
      }

      const replayState = assembler.replayState
      const message = createAssistantMessage({
        content: assembler.blocks(),
        source: { provider: request.provider, model: request.model, ...(replayState !== undefined && { replayState }) },
      })
      // Appended even when empty: it anchors the completion.
      this.session.append(
        'assistant/message',
        { turn, step, message, ...(assembler.usage && { usage: assembler.usage }) },
        { surfaceOp: 'append', sourceEventSeqs: chunkSeqs },
      )
      spend(spent, assembler.usage, this.options.limits?.prices)
      if (finish.kind === 'max-tokens') return { kind: 'max-tokens' }
      const calls = message.content.filter((block): block is ToolCallBlock => block.type === 'tool-call')
      if (!calls.length) return { kind: 'completed' }
      const { concluded } = await this.#runTools(calls, turn, step, signal)
      return concluded ? { kind: 'completed' } : null
    }
  }

  /**
   * The system text and tools of this step, from the assembly; with `pinPrompt`
   * the first selection (or the session's latest logged header) is kept for good.
   */
  #selectPrompt(assembly: PromptAssembly): PromptSelection {
    if (this.options.pinPrompt) {
      const last = this.session.requestHeader()
      if (last) {
        const sources = this.session.lastOfType('request/header')?.data.sources
        return (this.#pinned = { system: last.system ?? '', tools: last.tools ?? [], sources: () => sources })
      }
    }
    const system = renderPrompt(assembly)
    const tools = assembly.tools.map(({ name, description, parameters }): ToolSchema => ({ name, description, parameters }))
    let sources: RequestSources | undefined
    const selection: PromptSelection = { system, tools, sources: () => (sources ??= promptSources(assembly, name => this.loop.pluginIdentity(name))) }
    if (this.options.pinPrompt) this.#pinned = selection
    return selection
  }

  async #buildRequest(
    turn: number,
    step: number,
    tools: ToolSchema[],
    system: string,
    sources: () => RequestSources | undefined,
    messages: GenerateOptions['messages'],
    signal: AbortSignal,
  ) {
    const proposed = await this.loop.waterfall(this, 'agent/request', { agent: this, turn, step, signal }, async () =>
      deepFreeze(structuredClone(this.#seedConfig())),
    )
    signal.throwIfAborted()
    if (!proposed.provider || !proposed.model) {
      throw new Error(
        `agent "${this.id}" has no provider/model: set AgentOptions.provider and AgentOptions.model or supply both via the agent/request waterfall`,
      )
    }
    let prepared: PreparedLlmCall | undefined
    let config = proposed
    try {
      prepared = await this.loop.llm.prepareCall(proposed, signal)
      config = prepared.config
    } catch (error) {
      // An llm/stream listener may still serve the route; plain dispatch then fails with NO_ADAPTER.
      if (!(error instanceof LlmError && error.code === 'NO_ADAPTER')) throw error
    }
    signal.throwIfAborted()

    const header = canonicalHeader({ config, adapterDefaults: prepared?.adapterDefaults, system, tools })
    // A switched route explains the change of provider or model it causes.
    const switched = this.#pendingSwitch()
    const withRoute = (changes: RequestHeaderChanges, baseline: RequestHeader): RequestHeaderChanges =>
      switched && (baseline.config.provider !== config.provider || baseline.config.model !== config.model)
        ? { ...changes, route: { ...switched.data, seq: switched.seq } }
        : changes
    if (!this.#headerLogged) {
      // Every new loop instance anchors its first request, even when nothing changed.
      const provenance = sources()
      const baseline = this.session.requestHeader()
      // A resume on other plugins says which: compared with the session's last request, once, here.
      const before = baseline ? this.session.lastOfType('request/header')?.data.sources : undefined
      const drift = before && provenance ? pluginDrift(before.plugins, provenance.plugins) : undefined
      // A resumed request that differs breaks the cached prefix: attributed as a change is.
      const changes =
        baseline && !headerEquals(baseline, header)
          ? withRoute(headerChanges({ header: baseline, sources: before }, { header, sources: provenance }), baseline)
          : undefined
      this.session.append('request/header', {
        header,
        reason: baseline ? 'resume' : 'initial',
        ...(provenance && { sources: provenance }),
        ...(changes && { changes }),
        ...(drift && { drift }),
      })
      this.#headerLogged = true
    } else {
      const baseline = this.session.requestHeader()
      if (!baseline || !headerEquals(baseline, header)) {
        // Provenance is metadata: the comparison above ignores it; `changes` attributes the break.
        const provenance = sources()
        const changes = baseline
          ? withRoute(
              headerChanges({ header: baseline, sources: this.session.lastOfType('request/header')?.data.sources }, { header, sources: provenance }),
              baseline,
            )
          : undefined
        this.session.append('request/header', { header, reason: 'change', ...(provenance && { sources: provenance }), ...(changes && { changes }) })
      }
    }
    const contextWindow = prepared?.context?.contextWindow
    const last = this.session.requestContext()
    if (!last || last.provider !== config.provider || last.model !== config.model || last.contextWindow !== contextWindow) {
      this.session.append('request/context', { provider: config.provider, model: config.model, ...(contextWindow !== undefined && { contextWindow }) })
    }
    signal.throwIfAborted()

    // The logged header equals this one now (it was equal, or was just logged): its tools are the same
    // frozen list at every step while they hold, so what is priced or serialized per list is done once.
    const loggedTools = header.tools && this.session.requestHeader()?.tools
    const request: GenerateOptions = markAgentLoopRequest(
      deepFreeze({
        ...header.config,
        // The session's messages are frozen already: freezing the array is enough, and
        // the per-step cost stays flat however long the history is.
        messages: Object.freeze(messages),
        ...(header.system !== undefined && { system: header.system }),
        ...(loggedTools !== undefined && { tools: loggedTools }),
        sessionId: this.session.id,
        signal,
      }),
    )
    return { request, prepared }
  }

  /**
   * The config before `agent/request` listeners: on the first request of this
   * loop instance the agent's route (restoring an explicit reasoning effort of the
   * same route); later, the last logged config minus what the adapter filled in.
   */
  #seedConfig(): LlmCallConfig {
    const persisted = this.session.requestHeader()
    // After a route switch, the route comes from the options again, as on a first request.
    if (!this.#headerLogged || this.#pendingSwitch()) {
      const route = { provider: this.options.provider ?? '', model: this.options.model ?? '' }
      const effort =
        this.options.reasoningEffort ??
        (persisted &&
        persisted.config.provider === route.provider &&
        persisted.config.model === route.model &&
        persisted.adapterDefaults?.reasoningEffort !== true
          ? persisted.config.reasoningEffort
          : undefined)
      return {
        ...route,
        ...(effort !== undefined && { reasoningEffort: effort }),
        ...(this.options.maxTokens !== undefined && { maxTokens: this.options.maxTokens }),
      }
    }
    const { config, adapterDefaults } = persisted!
    const seed: LlmCallConfig = { ...config }
    if (adapterDefaults?.reasoningEffort) delete seed.reasoningEffort
    if (adapterDefaults?.maxTokens) delete seed.maxTokens
    return seed
  }

  async #runTools(calls: ToolCallBlock[], turn: number, step: number, signal: AbortSignal) {
    const raw = new Map(calls.map(call => [call.id, call.arguments]))
    const callSeqs = new Map<string, number>()
    return runToolCalls(this.loop.tools, {
      calls: calls.map(call => ({ callId: call.id, name: call.name, arguments: parseArguments(call.arguments) })),
      agent: this,
      scope: this,
      signal,
      maxParallel: this.loop.config.maxParallelToolCalls,
      onStart: call => {
        const event = this.session.append('tool/call', { turn, step, callId: call.callId, name: call.name, arguments: raw.get(call.callId)! })
        callSeqs.set(call.callId, event.seq)
      },
      onCommit: (call, result) => {
        const message = createToolResultMessage({ callId: call.callId, content: result.content, isError: result.isError })
        const error = result.isError ? result.error.info : undefined
        this.session.append(
          'tool/result',
          {
            turn,
            step,
            message,
            ...(error && { error }),
            ...(result.meta !== undefined && { meta: result.meta }),
          },
          { surfaceOp: 'append', sourceEventSeqs: [callSeqs.get(call.callId)!] },
        )
        // Contexts enter the next step, after every result: call/result pairs stay adjacent.
        for (const context of result.additionalContexts ?? []) this.inbox.splice('next-step', Infinity, 0, [context])
      },
    })
  }

  #reportError(turn: number, step: number, error: unknown) {
    this.loop.emit(this, 'agent/error', { agent: this, turn, step, error })
  }
}

export interface RouteSwitchOptions {
  /** Who switches (`/model`, a plugin's name): recorded with the switch. */
  by?: string
  /** The limits on the new route (their prices are the new model's); absent: kept. */
  limits?: TurnLimits
  /** The reasoning effort on the new route; absent: the new model's default. */
  reasoningEffort?: string
}

/** The `agent/route` switch of `session` logged after its last request header (the next request takes it), if any. */
export function pendingRouteSwitch(session: Session): SessionEvent<'agent/route'> | undefined {
  const switched = session.lastOfType('agent/route')
  if (!switched) return undefined
  const header = session.lastOfType('request/header')
  return header && header.seq > switched.seq ? undefined : switched
}

/** What the requests of one turn have used so far. */
interface TurnSpending {
  inputTokens: number
  costUsd: number
}

/** Adds one response's reported usage, priced as billed (cache writes at the write price). */
function spend(spent: TurnSpending, usage: TokenUsage | undefined, prices: CachePrices | undefined): void {
  if (!usage) return
  spent.inputTokens += usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)
  if (prices) {
    const cost = usageCost(usage, prices)
    spent.costUsd += cost.input + cost.output
  }
}

/** The code a turn that failed with `error` ends with: a harness error's or a prompt stability failure's own, else UNKNOWN. */
function errorCode(error: unknown): string {
  return error instanceof HarnessError || error instanceof PromptUnstableError ? error.code : 'UNKNOWN'
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** The system text and tools a request carries, and their provenance (computed when a header is logged). */
interface PromptSelection {
  system: string
  tools: ToolSchema[]
  sources: () => RequestSources | undefined
}

/** `''` is no arguments; text that is not JSON is passed on as is (the tool reports it). */
function parseArguments(text: string): unknown {
  if (text === '') return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Iterates a stream until the signal aborts, even if the adapter ignores the
 * signal: a cancel never waits for a stalled provider.
 */
async function* untilAborted(stream: AsyncIterable<StreamChunk>, signal: AbortSignal): AsyncIterable<StreamChunk> {
  const iterator = stream[Symbol.asyncIterator]()
  let onAbort: (() => void) | undefined
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
  })
  aborted.catch(() => {})
  try {
    for (;;) {
      signal.throwIfAborted()
      const next = await Promise.race([iterator.next(), aborted])
      if (next.done) return
      yield next.value
    }
  } finally {
    signal.removeEventListener('abort', onAbort!)
    void iterator.return?.()?.catch?.(() => {})
  }
}
