// Helpers of request.test.ts and runtime-context.test.ts: a host whose adapters
// and persistence the test chooses, without a pre-made agent.
import { Context } from '@deepseek-ai/cordis'
import Llm, { createUserMessage, userText, type LlmModelInfo, type UserMessage } from '@loom/llm'
import SessionStore, { type SessionEvent } from '@loom/session'
import { type MemoryLogs, MemoryPersistence } from '@loom/session/testing'
import SystemPrompt, { type SystemPromptConfig } from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import AgentLoop, { type Agent } from '@loom/agent-loop'
import { MockAdapter, type ScriptStep } from './harness.ts'

/** A mock adapter whose model info depends on the model id. */
export class TableAdapter extends MockAdapter {
  private readonly table: Record<string, Partial<LlmModelInfo>>

  constructor(script: ScriptStep[], table: Record<string, Partial<LlmModelInfo>>) {
    super(script)
    this.table = table
  }

  override async resolveModel(provider: string, model: string) {
    return { provider, id: model, name: model, ...this.table[model] }
  }
}

export interface Host {
  root: Context
  ctx: Context
  /** The adapters by provider id. */
  adapters: Record<string, MockAdapter>
}

/**
 * The spine services (and, with `logs`, an in-memory persistence over them, mounted
 * before any agent: hosts given the same logs are one process restarted), plus one
 * mock adapter per entry of `providers`.
 */
export async function host(
  options: { prompt?: SystemPromptConfig; providers?: Record<string, MockAdapter>; logs?: MemoryLogs; setup?: (ctx: Context) => void | Promise<void> } = {},
): Promise<Host> {
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: '', ...options.prompt })
  await root.plugin(SessionStore)
  if (options.logs !== undefined) await root.plugin(MemoryPersistence, { logs: options.logs })
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  const fiber = await root.plugin({ name: 'test-host', inject: ['systemPrompt', 'sessions', 'llm', 'tools', 'agents'], apply() {} })
  const ctx = fiber.ctx
  const adapters = options.providers ?? { mock: new MockAdapter() }
  for (const [provider, adapter] of Object.entries(adapters)) ctx.llm.registerAdapter([provider], adapter)
  await options.setup?.(ctx)
  return { root, ctx, adapters }
}

/** A user message from a plugin. */
export function pluginText(text: string, plugin = 'test-plugin'): UserMessage {
  return createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin } })
}

export function ofType<T = any>(events: readonly SessionEvent[], type: string): T[] {
  return events.filter(event => event.type === type).map(event => event.data as T)
}

/** The runtime-context owner, spelled out: a wrong constant in src must fail the tests. */
export const OWNER = '@loom/system-prompt'
export const CONTEXT_HEADER = 'Current runtime context. This snapshot supersedes earlier runtime-context snapshots.'
export const CLEARED = 'Current runtime context: none. Earlier runtime-context snapshots no longer apply.'

/** A message (or a user/message event's data) owned by the runtime-context projection. */
export function isOwnedMessage(message: { source?: unknown }): boolean {
  const source = message.source as { kind?: string; plugin?: string } | undefined
  return source?.kind === 'plugin' && source.plugin === OWNER
}

export function isOwned(event: SessionEvent): boolean {
  return event.type === 'user/message' && isOwnedMessage(event.data as UserMessage)
}

export function ownedEvents(events: readonly SessionEvent[]): SessionEvent[] {
  return events.filter(isOwned)
}

/** The turn/end reasons of the log, in order. */
export function turnEnds(events: readonly SessionEvent[]): any[] {
  return ofType(events, 'turn/end').map(data => data.reason)
}

/** The text of one message (its text blocks joined). */
export function textOf(message: { content: readonly unknown[] }): string {
  return message.content.map((block: any) => block.text ?? '').join('')
}

/** Runs `text` as a new turn and waits for the agent to be idle. */
export async function turn(agent: Agent, text: string): Promise<UserMessage> {
  const message = userText(text)
  agent.followup(message)
  await agent.idle()
  return message
}
