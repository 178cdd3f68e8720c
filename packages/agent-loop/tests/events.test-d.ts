// Compile-time checks of the agent/* event types, checked by `tsc -b` (never run):
// each `@ts-expect-error` line must stay an error, or the typecheck fails.
import type { Context } from '@deepseek-ai/cordis'
import type { LlmCallConfig, UserMessage } from '@loom/llm'
import type { AgentRef } from '@loom/scope'
import type { AssembleContext } from '@loom/system-prompt'
import type { ToolRunContext } from '@loom/tools'
import { expectTypeOf } from 'vitest'
import type { Agent, PreStepDecision, RequestErrorAction } from '@loom/agent-loop'

export function listeners(ctx: Context) {
  ctx.on('agent/pre-step', async (payload, next) => {
    expectTypeOf(payload.agent).toEqualTypeOf<Agent>()
    expectTypeOf(payload.messages).toEqualTypeOf<readonly UserMessage[]>()
    expectTypeOf(payload.step).toBeNumber()
    expectTypeOf(next).toEqualTypeOf<() => Promise<PreStepDecision>>()
    return next()
  })
  ctx.on('agent/pre-step', async (payload, next) => (payload.turn > 1 ? { kind: 'reject' } : next()))
  ctx.on('agent/pre-step', async payload => ({ kind: 'enter', messages: [...payload.messages] }))
  // @ts-expect-error a pre-step listener must return a PreStepDecision
  ctx.on('agent/pre-step', async () => ({ kind: 'skip' }))
  // @ts-expect-error `enter` needs its messages
  ctx.on('agent/pre-step', async () => ({ kind: 'enter' }))
  // @ts-expect-error the payload has no such field
  ctx.on('agent/pre-step', async (payload, next) => (payload.decision, next()))

  ctx.on('agent/request', async (_payload, next) => {
    expectTypeOf(next).returns.resolves.toEqualTypeOf<LlmCallConfig>()
    return { ...(await next()), reasoningEffort: 'high' }
  })
  // @ts-expect-error a request listener returns a call config
  ctx.on('agent/request', async () => ({ provider: 1 }))

  ctx.on('agent/request-error', (payload, next) => {
    expectTypeOf(payload.failure.code).toBeString()
    expectTypeOf(next).returns.resolves.toEqualTypeOf<RequestErrorAction>()
    return payload.failure.code === 'CONTEXT_OVERFLOW' ? { kind: 'retry' } : next()
  })
  // @ts-expect-error `retry` is the only action
  ctx.on('agent/request-error', () => ({ kind: 'give-up' }))

  ctx.on('agent/inbox/claimed', ({ agent, message, turn }) => {
    expectTypeOf(agent).toEqualTypeOf<Agent>()
    expectTypeOf(message).toEqualTypeOf<UserMessage>()
    expectTypeOf(turn).toBeNumber()
  })
  ctx.on('agent/status', ({ status }) => {
    expectTypeOf(status).toEqualTypeOf<'idle' | 'running'>()
  })
  // @ts-expect-error an annotated payload must match the declared one (listeners are checked strictly)
  ctx.on('agent/status', (payload: { status: number }) => payload)
  ctx.on('agent/session-start', ({ source }) => {
    expectTypeOf(source).toEqualTypeOf<'startup' | 'resume'>()
  })
  ctx.on('agent/turn-stopping', async ({ turn, signal }) => {
    expectTypeOf(turn).toBeNumber()
    expectTypeOf(signal).toEqualTypeOf<AbortSignal>()
  })
  ctx.on('agent/error', ({ error }) => {
    expectTypeOf(error).toBeUnknown()
  })
  // @ts-expect-error no such agent event
  ctx.on('agent/created-later', () => {})
}

export function agentRef() {
  expectTypeOf<Agent>().toExtend<AgentRef>()
  expectTypeOf<AssembleContext['agent']>().toEqualTypeOf<AgentRef | undefined>()
  expectTypeOf<ToolRunContext['agent']>().toEqualTypeOf<AgentRef | undefined>()
  expectTypeOf<AgentRef['cwd']>().toEqualTypeOf<string | undefined>()
}
