// Small plugins the kit's tests mount: a well-behaved one and a leaky one.
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/agent-loop'
import { defineTool } from '@loom/tools'

export interface GreeterConfig {
  greeting: string
  mood: string
}

/** Shaped like a plugin module: name, inject, Config, apply. */
export const Greeter = {
  name: 'greeter',
  inject: ['systemPrompt', 'tools'],
  Config: Schema.object({
    greeting: Schema.string().default('Hello').description('How the greeter greets.'),
    mood: Schema.union(['calm', 'cheerful']).default('calm').description('The mood it reports.'),
  }) as Schema<GreeterConfig>,
  apply(ctx: Context, config: GreeterConfig) {
    ctx.systemPrompt.section({ name: 'greeter:rules', order: 200, text: `${config.greeting}! You work in {{cwd}}.` })
    ctx.systemPrompt.context({ name: 'greeter:mood', order: 30, text: () => 'Mood: {{greeter_mood}}' })
    ctx.systemPrompt.variable('greeter_mood', () => config.mood, { stability: 'step' })
    ctx.tools.register(
      defineTool<{ who: string }>({
        name: 'greet',
        description: 'Greets someone.',
        parameters: {
          type: 'object',
          properties: { who: { type: 'string', description: 'Who to greet.' } },
          required: ['who'],
          additionalProperties: false,
        },
        execute(args, exec) {
          const cwd = (exec.agent as { session?: { header?: { cwd?: string } } } | undefined)?.session?.header?.cwd
          return `${config.greeting}, ${args.who} (from ${cwd})`
        },
      }),
    )
    ctx.on('tools/result', () => {})
  },
}

/** A plugin that hands its context out, so another plugin can misuse it. */
export function victim() {
  const box: { ctx?: Context } = {}
  const plugin = {
    name: 'victim',
    inject: ['systemPrompt', 'tools'],
    apply(ctx: Context) {
      box.ctx = ctx
    },
  }
  return { plugin, box }
}

/**
 * Leaves something of every kind behind: a listener on the root, a section and
 * a tool registered through another plugin's context, an interval it never
 * clears (and an unref'd one), an agent created through the root.
 */
export function leaky(victimCtx: () => Context) {
  const handles: NodeJS.Timeout[] = []
  const plugin = {
    name: 'leaky',
    inject: ['systemPrompt', 'tools', 'agents'],
    apply(ctx: Context) {
      ctx.root.on('tools/change', () => {})
      ctx.on('agent/created', () => {}) // its own: removed on dispose, never reported
      handles.push(setInterval(() => {}, 60_000))
      handles.push(setTimeout(() => {}, 60_000).unref())
      const other = victimCtx()
      other.systemPrompt.section({ name: 'leaky:note', order: 250, text: 'Left behind.' })
      other.tools.register(
        defineTool({
          name: 'sneaky',
          description: 'Registered through another plugin.',
          parameters: { type: 'object', properties: {} },
          execute: () => 'ok',
        }),
      )
      ctx.root.agents.create('orphan', { provider: 'scripted', model: 'scripted', cwd: '/srv/project' })
    },
  }
  return { plugin, clear: () => handles.forEach(handle => clearTimeout(handle)) }
}
