import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'

// A tool plugin as a plugin author writes one: its schemas and its guidance
// section come from the same fiber, so unloading it removes both.
export const name = 'demo-file-tools'
export const inject = ['systemPrompt']

export interface Config {
  maxLines: number
}

export const Config: Schema<Config> = Schema.object({
  maxLines: Schema.natural().default(2000).description('Lines returned by one read.'),
})

export function apply(ctx: Context, config: Config) {
  ctx.systemPrompt.section({
    name: 'tool:read',
    order: 100,
    text: `Use \`read\` to look at a file before you change it. It returns at most ${config.maxLines} numbered lines; pass \`offset\` to continue.`,
  })
  ctx.systemPrompt.section({
    name: 'tool:edit',
    order: 102,
    text: 'Use `edit` for targeted changes: the `old` text must match exactly once.',
  })
  ctx.systemPrompt.tools(() => ({
    schemas: [
      {
        name: 'read',
        description: 'Read a text file of the workspace.',
        parameters: {
          type: 'object',
          properties: { path: { type: 'string' }, offset: { type: 'integer', minimum: 1 } },
          required: ['path'],
        },
      },
      {
        name: 'edit',
        description: 'Replace one exact occurrence of a text in a file.',
        parameters: {
          type: 'object',
          properties: { path: { type: 'string' }, old: { type: 'string' }, new: { type: 'string' } },
          required: ['path', 'old', 'new'],
        },
      },
    ],
  }))
}
