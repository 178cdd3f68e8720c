// The reference harness of the loop tests: the spine services, a scripted mock
// adapter on provider `mock` that records every request, and an agent `a1`.
import { Context } from '@deepseek-ai/cordis'
import Llm, { LlmAdapter, userText, type GenerateOptions, type StreamChunk } from '@loom/llm'
import SessionStore, { type SessionEvent } from '@loom/session'
import SystemPrompt, { type SystemPromptConfig } from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import AgentLoop, { type Agent, type AgentOptions } from '@loom/agent-loop'

export const IDENTITY = 'You are an AI agent powered by Loom.'

/** A script step: fixed chunks, or a function of the request (may hang on the signal). */
export type ScriptStep = StreamChunk[] | ((request: GenerateOptions) => AsyncIterable<StreamChunk> | StreamChunk[])

export class MockAdapter extends LlmAdapter {
  public script: ScriptStep[]
  private readonly info: Partial<Awaited<ReturnType<LlmAdapter['resolveModel']>>>
  readonly requests: GenerateOptions[] = []
  constructor(script: ScriptStep[] = [], info: Partial<Awaited<ReturnType<LlmAdapter['resolveModel']>>> = {}) {
    super()
    this.script = script
    this.info = info
  }

  override async resolveModel(provider: string, model: string) {
    return { provider, id: model, name: model, ...this.info }
  }

  async *stream(request: GenerateOptions): AsyncIterable<StreamChunk> {
    this.requests.push(request)
    const step = this.script.shift()
    if (!step) throw new Error('MockAdapter: script exhausted')
    yield* typeof step === 'function' ? step(request) : step
  }
}

// The canonical chunk sequences of the spec (section 2.10) ship with the scripted adapter.
export { textResponse, toolCallResponse } from '@loom/llm/testing'

/** A stream that delivers `chunks` and then waits until the request is aborted. */
export function hanging(chunks: StreamChunk[]) {
  return async function* (request: GenerateOptions): AsyncIterable<StreamChunk> {
    yield* chunks
    await new Promise((_, reject) => request.signal!.addEventListener('abort', () => reject(request.signal!.reason), { once: true }))
  }
}

export interface Harness {
  root: Context
  /** A plugin context with every spine service injected: the agent's owner. */
  ctx: Context
  adapter: MockAdapter
  agent: Agent
  events: () => readonly SessionEvent[]
  types: () => string[]
  statuses: string[]
  send(text: string): void
  settle(): Promise<void>
}

export async function harness(
  options: {
    script?: ScriptStep[]
    prompt?: SystemPromptConfig
    agent?: AgentOptions & { cwd?: string }
    id?: string
    loop?: { maxParallelToolCalls?: number; maxSteps?: number }
    setup?: (ctx: Context) => void | Promise<void>
  } = {},
): Promise<Harness> {
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: '', ...options.prompt })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, { maxParallelToolCalls: 10, ...options.loop })
  const fiber = await root.plugin({ name: 'test-host', inject: ['systemPrompt', 'sessions', 'llm', 'tools', 'agents'], apply() {} })
  const ctx = fiber.ctx
  const adapter = new MockAdapter(options.script ?? [])
  ctx.llm.registerAdapter(['mock'], adapter)
  await options.setup?.(ctx)
  const agent = ctx.agents.create(options.id ?? 'a1', options.agent ?? { provider: 'mock', model: 'mock' })
  const statuses: string[] = []
  agent.ctx.on('agent/status', ({ status }: { status: string }) => {
    statuses.push(status)
  })
  return {
    root,
    ctx,
    adapter,
    agent,
    statuses,
    events: () => agent.session.events,
    types: () => agent.session.events.map(event => event.type),
    send: text => agent.followup(userText(text)),
    settle: () => agent.idle(),
  }
}

/** The texts of the user messages of the log. */
export function userTexts(events: readonly SessionEvent[]): string[] {
  return events.filter(event => event.type === 'user/message').map(event => (event.data as any).content.map((block: any) => block.text).join(''))
}
