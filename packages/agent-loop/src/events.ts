import type { LlmCallConfig, LlmFailure, PreparedLlmCall, UserMessage } from '@loom/llm'
import type { Scoped } from '@loom/scope'
import type { Agent, AgentStatus, PreStepDecision, RequestErrorAction } from './agent.ts'
import type { AgentLoop } from './service.ts'

// Every event the loop dispatches. The dispatch `this` is the agent's scope
// carrier: a listener registered through `agent.ctx` hears only that agent.

/** `agent/created`, `agent/disposed`. */
export interface AgentPayload {
  agent: Agent
}

/** `agent/session-start`: the agent's session is new (`startup`) or continues a stored one (`resume`). */
export interface SessionStartPayload {
  agent: Agent
  source: 'startup' | 'resume'
}

export interface StatusPayload {
  agent: Agent
  status: AgentStatus
}

/** `agent/inbox/inserted`, `agent/inbox/discarded`. */
export interface InboxPayload {
  agent: Agent
  message: UserMessage
}

export interface InboxClaimedPayload {
  agent: Agent
  message: UserMessage
  turn: number
}

export interface ErrorPayload {
  agent: Agent
  turn: number
  step: number
  error: unknown
}

export interface TurnStoppingPayload {
  agent: Agent
  turn: number
  signal: AbortSignal
}

export interface PreStepPayload {
  agent: Agent
  /** The input claimed for this step (the runtime-context snapshot is added by the innermost `next`). */
  messages: readonly UserMessage[]
  turn: number
  step: number
  signal: AbortSignal
}

export interface RequestPayload {
  agent: Agent
  turn: number
  step: number
  signal: AbortSignal
}

export interface RequestErrorPayload {
  agent: Agent
  turn: number
  step: number
  provider: string
  failure: LlmFailure
  /** The route's retry policy; the innermost `next` applies it. */
  retryPolicy: PreparedLlmCall['retryPolicy'] | undefined
  signal: AbortSignal
}

/**
 * A waterfall listener: calls `next()` to run the rest of the chain (finally the
 * loop's default) or returns its own result. `next()` always returns a promise.
 */
export type AgentWaterfallListener<P, R> = (this: Scoped<AgentLoop>, payload: P, next: () => Promise<R>) => R | Promise<R>

// Function-typed properties, not methods: listener parameters are then checked
// strictly (a method signature would accept a listener of an unrelated payload type).
declare module '@deepseek-ai/cordis' {
  interface Events {
    'agent/created': (this: Scoped<AgentLoop>, payload: AgentPayload) => void
    'agent/session-start': (this: Scoped<AgentLoop>, payload: SessionStartPayload) => void
    'agent/disposed': (this: Scoped<AgentLoop>, payload: AgentPayload) => void
    /** `running` when a turn (or a queue of turns) starts, `idle` when the driver stops. */
    'agent/status': (this: Scoped<AgentLoop>, payload: StatusPayload) => void
    'agent/inbox/inserted': (this: Scoped<AgentLoop>, payload: InboxPayload) => void
    /** Pending input removed before a turn claimed it (a cancel, `inbox.remove`, `inbox.replace`). */
    'agent/inbox/discarded': (this: Scoped<AgentLoop>, payload: InboxPayload) => void
    /** Input taken from the inbox into a turn, before the prompt is assembled. */
    'agent/inbox/claimed': (this: Scoped<AgentLoop>, payload: InboxClaimedPayload) => void
    /** A turn failed for a reason other than a cancel. */
    'agent/error': (this: Scoped<AgentLoop>, payload: ErrorPayload) => void
    /** Serial: the turn is about to end; a listener may still queue input (`steer`) to continue it. */
    'agent/turn-stopping': (this: Scoped<AgentLoop>, payload: TurnStoppingPayload) => void | Promise<void>
    /** Waterfall before each step: what enters the step, or `{ kind: 'reject' }` to end the turn as `blocked`. */
    'agent/pre-step': AgentWaterfallListener<PreStepPayload, PreStepDecision>
    /** Waterfall for each request's call config (route, effort, limits). */
    'agent/request': AgentWaterfallListener<RequestPayload, LlmCallConfig>
    /** Waterfall after a failed request: `{ kind: 'retry' }` repeats it in the same step; the default applies the retry policy. */
    'agent/request-error': AgentWaterfallListener<RequestErrorPayload, RequestErrorAction>
  }
}
