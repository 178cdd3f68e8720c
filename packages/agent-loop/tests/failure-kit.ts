// Helpers of the error, cancellation and tool-scheduling tests: gates, event
// waits, hand-made chunks and the structural checks of a log.
import type { Agent } from '@loom/agent-loop'
import { createUserMessage, type LlmFailure, type Message, type StreamChunk, type UserMessage } from '@loom/llm'
import { eventsOfType, type Session, type SessionEvent } from '@loom/session'

export interface Gate {
  promise: Promise<void>
  release(): void
}

/** A promise released by hand. */
export function gate(): Gate {
  let release!: () => void
  const promise = new Promise<void>(resolve => {
    release = resolve
  })
  return { promise, release }
}

/** Resolves once every pending microtask (and promise chain) has run. */
export function quiesce(): Promise<void> {
  return new Promise(resolve => setImmediate(resolve))
}

export function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

/** Resolves (never rejects) when the signal aborts. */
export function untilAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise(resolve => signal.addEventListener('abort', () => resolve(), { once: true }))
}

/** The first event of the agent's session appended from now on that matches. */
export function nextEvent(agent: Agent, match: (event: SessionEvent) => boolean): Promise<SessionEvent> {
  return new Promise(resolve => {
    let done = false
    const dispose = agent.ctx.on('session/event', (session: Session, event: SessionEvent) => {
      if (done || session !== agent.session || !match(event)) return
      done = true
      resolve(event)
      queueMicrotask(() => dispose())
    })
  })
}

/** Collects the payloads of an agent event. */
export function collect<T = any>(agent: Agent, name: string): T[] {
  const seen: T[] = []
  agent.ctx.on(name as any, (payload: T) => {
    seen.push(payload)
  })
  return seen
}

/** A context message from a plugin (what hooks and tools attach). */
export function contextMessage(text: string): UserMessage {
  return createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: 'test-plugin' } })
}

export function textOf(message: Message): string {
  return message.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

export function textsOf(messages: readonly Message[]): string[] {
  return messages.map(textOf)
}

/** One tool-call block with arbitrary argument text (the model's raw JSON, or not JSON at all). */
export function rawToolCall(id: string, name: string, args: string, index = 0): StreamChunk[] {
  return [
    { type: 'block-start', index, blockType: 'tool-call' },
    { type: 'tool-call-delta', index, id, name, argumentsDelta: args },
    { type: 'block-end', index, block: { type: 'tool-call', id, name, arguments: args } },
  ]
}

/** Several tool calls in one response, each with JSON arguments. */
export function toolCallsResponse(calls: { id: string; name: string; args: unknown }[]): StreamChunk[] {
  return [
    ...calls.flatMap(({ id, name, args }, index) => rawToolCall(id, name, JSON.stringify(args), index)),
    { type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } },
    { type: 'finish', reason: { kind: 'tool-calls' } },
  ]
}

export function finishWith(kind: 'error' | 'aborted', failure: LlmFailure): StreamChunk {
  return { type: 'finish', reason: { kind, failure } }
}

export function textChunks(text: string, index = 0): StreamChunk[] {
  return [
    { type: 'block-start', index, blockType: 'text' },
    { type: 'text-delta', index, text },
    { type: 'block-end', index, block: { type: 'text', text } },
  ]
}

export const ofType = eventsOfType

export function turnEndReasons(events: readonly SessionEvent[]): unknown[] {
  return ofType(events, 'turn/end').map(event => (event.data as any).reason)
}

/** The user/message events written by plugins (contexts), as texts. */
export function pluginTexts(events: readonly SessionEvent[]): string[] {
  return ofType(events, 'user/message')
    .filter(event => (event.data as any).source.kind === 'plugin')
    .map(event => textOf(event.data as Message))
}

/**
 * Structural problems of a log: turns and steps that are not balanced and
 * nested, tool calls outside a step, results without their call (or citing
 * another event), and calls left without a result when their step ends.
 */
export function logProblems(events: readonly SessionEvent[]): string[] {
  const problems: string[] = []
  let turn: number | undefined
  let step: number | undefined
  const open = new Map<string, number>()
  for (const event of events) {
    const data = event.data as any
    switch (event.type) {
      case 'turn/start':
        if (turn !== undefined) problems.push(`#${event.seq}: turn ${data.turn} starts inside turn ${turn}`)
        turn = data.turn
        break
      case 'step/start':
        if (turn === undefined || data.turn !== turn) problems.push(`#${event.seq}: step/start outside its turn`)
        if (step !== undefined) problems.push(`#${event.seq}: step ${data.step} starts inside step ${step}`)
        step = data.step
        break
      case 'step/end':
        if (step !== data.step || turn !== data.turn) problems.push(`#${event.seq}: step/end ${data.turn}.${data.step} does not close the open step`)
        for (const callId of open.keys()) problems.push(`#${event.seq}: tool call ${callId} has no result when its step ends`)
        open.clear()
        step = undefined
        break
      case 'turn/end':
        if (turn !== data.turn) problems.push(`#${event.seq}: turn/end ${data.turn} does not close the open turn`)
        if (step !== undefined) problems.push(`#${event.seq}: turn/end while step ${step} is open`)
        turn = undefined
        break
      case 'tool/call':
        if (step === undefined) problems.push(`#${event.seq}: tool/call outside a step`)
        open.set(data.callId, event.seq)
        break
      case 'tool/result': {
        const callId = data.message.source.callId
        const callSeq = open.get(callId)
        if (callSeq === undefined) problems.push(`#${event.seq}: tool/result ${callId} without an open call`)
        else if (JSON.stringify(event.sourceEventSeqs) !== JSON.stringify([callSeq]))
          problems.push(`#${event.seq}: tool/result ${callId} cites ${JSON.stringify(event.sourceEventSeqs)}`)
        open.delete(callId)
        break
      }
    }
  }
  if (step !== undefined) problems.push(`step ${step} left open`)
  if (turn !== undefined) problems.push(`turn ${turn} left open`)
  for (const callId of open.keys()) problems.push(`tool call ${callId} left without a result`)
  return problems
}

/** Tool-call blocks of the history that no later tool-result answers. */
export function danglingToolCalls(messages: readonly Message[]): string[] {
  const dangling: string[] = []
  messages.forEach((message, i) => {
    for (const block of message.content) {
      if (block.type !== 'tool-call') continue
      const answered = messages.slice(i + 1).some(later => later.content.some(b => b.type === 'tool-result' && b.toolCallId === block.id))
      if (!answered) dangling.push(block.id)
    }
  })
  return dangling
}
