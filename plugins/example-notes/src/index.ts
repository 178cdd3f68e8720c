// The example of docs/plugin-authoring.md: a tool with its guidance section and
// a runtime context, each registered through the plugin's own context, so
// unloading (or hot-reloading) the plugin removes all of them.
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { AssembleContext } from '@loom/system-prompt'
import { defineTool } from '@loom/tools'

export const name = '@loom/example-notes'
export const inject = ['systemPrompt', 'tools']

export interface Config {
  /** Most notes one agent keeps; the oldest go first. */
  maxNotes: number
}

export const Config: Schema<Config> = Schema.object({
  maxNotes: Schema.natural().min(1).default(20).description('Most notes one agent keeps; the oldest go first.'),
})

/** The notes of calls and assemblies that belong to no agent. */
const GLOBAL = 'global'

export function apply(ctx: Context, config: Config) {
  // Plugin state lives in apply: a reload starts from a fresh map.
  const notes = new Map<string, string[]>()

  // Guidance: static text in the third-party band, so it never breaks the cache.
  ctx.systemPrompt.section({
    name: 'notes:guidance',
    order: 200,
    text: 'Use `note` to keep short notes across steps (decisions, open questions). Your open notes are listed in the runtime context.',
  })

  // The notes change between steps: a runtime context, never system text.
  ctx.systemPrompt.context({
    name: 'notes:open',
    order: 50,
    literal: true, // note text is the model's own: never a template
    text: (context: AssembleContext) => {
      const list = notes.get(context.agent?.id ?? GLOBAL) ?? []
      return list.length ? `Open notes:\n${list.map(note => `- ${note}`).join('\n')}` : ''
    },
  })

  ctx.tools.register(
    defineTool<{ text: string }>({
      name: 'note',
      description: 'Keep a short note. Notes are shown back to you in the runtime context.',
      parameters: {
        type: 'object',
        properties: { text: { type: 'string', minLength: 1, maxLength: 500 } },
        required: ['text'],
        additionalProperties: false,
      },
      // Notes live in this host's memory, shown back to the agent: nothing outside the session changes.
      effects: ['read'],
      execute: (args, exec) => {
        const list = notes.get(exec.agent?.id ?? GLOBAL) ?? []
        list.push(args.text)
        const dropped = list.splice(0, Math.max(0, list.length - config.maxNotes))
        notes.set(exec.agent?.id ?? GLOBAL, list)
        return dropped.length ? `Noted. (${dropped.length} oldest note dropped: at most ${config.maxNotes}.)` : 'Noted.'
      },
    }),
  )
}
