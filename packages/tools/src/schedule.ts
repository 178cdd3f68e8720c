import type { AgentRef } from '@loom/scope'
import type { ToolCallRun } from './call.ts'
import { abortedBeforeDispatchResult } from './errors.ts'
import { normalizeResult } from './result.ts'
import { beginCall, type ToolRuntime } from './service.ts'
import type { ExecutionMode, ToolExecutionResult } from './types.ts'

/** One tool call of an assistant message, as the model asked for it. */
export interface ToolCallRequest {
  callId: string
  name: string
  /** Parsed JSON; the raw text when the model's JSON was invalid. */
  arguments: unknown
}

export interface RunToolCallsOptions<C extends ToolCallRequest = ToolCallRequest> {
  /** In model order. */
  calls: readonly C[]
  agent?: AgentRef
  scope?: object
  signal: AbortSignal
  /** Most bodies in flight at once; a positive integer (the loop's default is 10). */
  maxParallel: number
  /** Synchronous, in model order, before the call is prepared. */
  onStart(call: C): void
  /** Synchronous, strictly in model order, once per started call. */
  onCommit(call: C, result: ToolExecutionResult): void
}

interface State {
  next: number
  concluded: boolean
  failure: { error: unknown } | undefined
}

/**
 * Runs the tool calls of one assistant message. Calls are grouped: an exclusive
 * call runs alone; a parallel group admits consecutive concurrency-safe calls,
 * at most `maxParallel` bodies at a time. Calls start in model order (`onStart`,
 * then the pre-execute phase) and are committed in model order (post-execute,
 * then `onCommit`). After an abort nothing new starts: calls in flight finish and
 * are committed, every call not started gets `onStart` + `onCommit` with the
 * `ABORTED_BEFORE_DISPATCH` result. A throw from a hook or a callback stops
 * starting, waits for the calls in flight and rethrows the first failure; no
 * result is made up for the calls left open.
 */
export async function runToolCalls<C extends ToolCallRequest>(tools: ToolRuntime, options: RunToolCallsOptions<C>): Promise<{ concluded: boolean }> {
  const { calls, signal } = options
  if (!Number.isInteger(options.maxParallel) || options.maxParallel < 1) {
    throw new RangeError(`maxParallel must be a positive integer, got ${options.maxParallel}`)
  }
  const state: State = { next: 0, concluded: false, failure: undefined }
  while (state.next < calls.length && !state.failure && !signal.aborted) {
    await runGroup(tools, options, state)
  }
  if (state.failure) throw state.failure.error
  for (; state.next < calls.length; state.next++) {
    const call = calls[state.next]
    options.onStart(call)
    options.onCommit(call, normalizeResult(abortedBeforeDispatchResult()))
  }
  return { concluded: state.concluded }
}

interface Slot<C> {
  call: C
  run: ToolCallRun
  settled: boolean
}

async function runGroup<C extends ToolCallRequest>(tools: ToolRuntime, options: RunToolCallsOptions<C>, state: State) {
  const { calls, signal, agent, scope } = options
  const fail = (error: unknown) => {
    state.failure ??= { error }
  }
  const slots: Slot<C>[] = []
  let committed = 0
  let inFlight = 0
  let mode: ExecutionMode | undefined
  let closed = false
  let wake: (() => void) | undefined

  for (;;) {
    // Commit, in model order, every settled call whose predecessors are committed.
    while (!state.failure && committed < slots.length && slots[committed].settled) {
      const slot = slots[committed++]
      try {
        const result = await slot.run.finalize()
        options.onCommit(slot.call, result)
        state.concluded ||= !result.isError && result.concludesTurn === true
      } catch (error) {
        fail(error)
      }
    }

    // Start the next call when the group admits it and the pool has room.
    if (!closed && !state.failure && !signal.aborted && state.next < calls.length && inFlight < options.maxParallel) {
      const call = calls[state.next]
      let callMode: ExecutionMode
      try {
        callMode = tools.executionMode({ name: call.name, arguments: call.arguments, scope })
      } catch (error) {
        fail(error)
        continue
      }
      if (mode === undefined) {
        mode = callMode
      } else if (callMode !== 'parallel') {
        // A barrier: it waits for this group and opens the next one.
        closed = true
        continue
      }
      if (mode === 'exclusive') closed = true
      state.next++
      let slot: Slot<C>
      try {
        slot = { call, run: tools[beginCall]({ callId: call.callId, name: call.name, arguments: call.arguments, agent, scope, signal }), settled: false }
        slots.push(slot)
        options.onStart(call)
        await slot.run.prepare()
      } catch (error) {
        fail(error)
        continue
      }
      if (slot.run.needsDispatch) {
        inFlight++
        slot.run
          .dispatch()
          .then(() => {
            slot.settled = true
          }, fail)
          .finally(() => {
            inFlight--
            wake?.()
          })
      } else {
        slot.settled = true
      }
      continue
    }

    if (inFlight === 0) {
      // Everything committed, or a failure (its call never settles): the group is over.
      if (state.failure || committed === slots.length || !slots[committed].settled) return
      continue
    }
    await new Promise<void>(resolve => {
      wake = resolve
    })
    wake = undefined
  }
}
