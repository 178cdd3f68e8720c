// Shared fixtures: a host with the prompt registry and the tool runtime, plugins and scopes.
import { Context } from '@deepseek-ai/cordis'
import { userText } from '@loom/llm'
import { createScope, type AgentRef, type Scope, type ScopeKey } from '@loom/scope'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool, type ToolDefinition, type ToolExecutionResult, type ToolRunContext, type ToolSpec } from '@loom/tools'

export interface Host {
  root: Context
  /** A plugin context named `host` that injects `tools` and `systemPrompt`. */
  ctx: Context
  tools: ToolRuntime
  /** Mounts a named plugin injecting both services (under `parent`, default the host). */
  plugin(name: string, parent?: Context): Promise<Context>
  /** Mints a scope under the host plugin. */
  mint(key?: ScopeKey, options?: { parent?: ScopeKey }): Scope & { key: ScopeKey }
  /** Assembled tool names for a scope. */
  promptTools(scope?: ScopeKey): Promise<string[]>
  /** Runs one call with a fresh signal unless given. */
  run(name: string, args?: unknown, extra?: Partial<{ callId: string; scope: object; agent: AgentRef; signal: AbortSignal }>): Promise<ToolExecutionResult>
  errors: unknown[]
}

export async function host(): Promise<Host> {
  const root = new Context()
  const errors: unknown[] = []
  root.logger.exporter({
    levels: { default: 3 },
    export(message) {
      if (message.type === 'error') errors.push(message.args[0])
    },
  })
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime)
  const fiber = await root.plugin({ name: 'host', inject: ['tools', 'systemPrompt'], apply() {} })
  const ctx = fiber.ctx
  let calls = 0
  const h: Host = {
    root,
    ctx,
    tools: ctx.tools,
    errors,
    async plugin(name, parent = ctx) {
      const child = await parent.plugin({ name, inject: ['tools', 'systemPrompt'], apply() {} })
      return child.ctx
    },
    mint(key = {}, options) {
      return Object.assign(createScope(ctx, key, options), { key })
    },
    async promptTools(scope) {
      const assembly = await ctx.systemPrompt.assemble(scope === undefined ? {} : { scope })
      return assembly.tools.map(tool => tool.name)
    },
    run(name, args = {}, extra = {}) {
      return ctx.tools.execute({ callId: extra.callId ?? `c${++calls}`, name, arguments: args, signal: extra.signal ?? new AbortController().signal, ...extra })
    },
  }
  return h
}

export const OBJECT = { type: 'object', properties: {}, additionalProperties: false } as const

/** A tool that answers with `text` (default its name). */
export function simple(name: string, text = name, extra: Partial<ToolSpec> = {}): ToolDefinition {
  return defineTool({ name, description: `the ${name} tool`, parameters: { ...OBJECT }, execute: () => text, ...extra })
}

export function text(result: ToolExecutionResult): string {
  return result.content.map(block => (block.type === 'text' ? block.text : `[${block.type}]`)).join('')
}

export function deferred<T = void>() {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/** Lets pending promise reactions and zero-delay timers run. */
export const flush = () => new Promise(resolve => setTimeout(resolve, 0))

export { userText }
export type { ToolRunContext }
