// Shared fixtures for the system-prompt tests, named after the spec's notation.
import { Context } from '@deepseek-ai/cordis'
import { createScope, type Scope, type ScopeKey } from '@loom/scope'
import SystemPrompt, { type AssembleContext, type PromptAssembly, type SystemPromptConfig } from '@loom/system-prompt'

export const IDENTITY = 'You are an AI agent powered by Loom.'
export const BUILT_INS = ['harness:identity', 'deployment:persona']

export interface Host {
  root: Context
  /** A plugin context that injects `systemPrompt`: the unscoped registration context. */
  ctx: Context
  /** The service reached through `ctx` (global layer). */
  sp: SystemPrompt
  /** Mints a scope under the host plugin. */
  mint(key?: ScopeKey, options?: { parent?: ScopeKey }): Scope & { key: ScopeKey; sp: SystemPrompt }
  /** `sp.assemble(scope === undefined ? undefined : { scope })` */
  asm(scope?: ScopeKey, extra?: AssembleContext): Promise<PromptAssembly>
  /** Mounts a named plugin that injects systemPrompt under ctx (or under `parent`). */
  plugin(name: string, parent?: Context): Promise<Context>
  /** Collected logger warnings. */
  warnings: string[]
}

export async function root(config: SystemPromptConfig = {}): Promise<Host> {
  const root = new Context()
  const warnings: string[] = []
  root.logger.exporter({
    levels: { default: 3 }, // Cordis filters warnings out unless asked (WARN = 2 > INFO = 1)
    export(message) {
      if (message.type === 'warn') warnings.push(String(message.args[0]))
    },
  })
  await root.plugin(SystemPrompt, config)
  const fiber = await root.plugin({ name: 'host', inject: ['systemPrompt'], apply() {} })
  const ctx = fiber.ctx
  const sp = ctx.systemPrompt
  return {
    root,
    ctx,
    sp,
    warnings,
    mint(key = {}, options) {
      const scope = createScope(ctx, key, options)
      return Object.assign(scope, { key, sp: scope.ctx.systemPrompt })
    },
    asm(scope, extra) {
      if (scope === undefined && extra === undefined) return sp.assemble()
      return sp.assemble({ ...extra, ...(scope !== undefined && { scope }) })
    },
    async plugin(name, parent = ctx) {
      const child = await parent.plugin({ name, inject: ['systemPrompt'], apply() {} })
      return child.ctx
    },
  }
}

export const names = (a: PromptAssembly) => a.sections.map(s => s.name)
export const texts = (a: PromptAssembly) => a.sections.map(s => s.text)
export const contrib = (a: PromptAssembly) => a.sections.filter(s => !BUILT_INS.includes(s.name))
export const toolNames = (a: PromptAssembly) => a.tools.map(t => t.name)
export const schema = (name: string, description = name) => ({ name, description, parameters: {} })
/** Counts `system-prompt/change` events heard through the host. */
export function changeCounter(ctx: Context) {
  const counter = { count: 0 }
  ctx.on('system-prompt/change', () => {
    counter.count++
  })
  return counter
}
