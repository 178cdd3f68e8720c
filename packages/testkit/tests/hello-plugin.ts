// The plugin of the README example, shaped as a plugin module.
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { defineTool } from '@loom/tools'

export const name = '@loom/tool-hello'
export const inject = ['systemPrompt', 'tools']

export interface Config {
  greeting: string
}
export const Config: Schema<Config> = Schema.object({
  greeting: Schema.string().default('Hello').description('How to greet.'),
})

export function apply(ctx: Context, config: Config) {
  ctx.systemPrompt.section({ name: 'tool:hello', order: 200, text: 'Use `hello` to greet people in {{cwd}}.' })
  ctx.tools.register(
    defineTool<{ who: string }>({
      name: 'hello',
      description: 'Greets someone.',
      parameters: { type: 'object', properties: { who: { type: 'string' } }, required: ['who'], additionalProperties: false },
      execute: args => `${config.greeting}, ${args.who}!`,
    }),
  )
}
