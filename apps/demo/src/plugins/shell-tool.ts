import type { Context } from '@deepseek-ai/cordis'

export const name = 'demo-shell-tool'
export const inject = ['systemPrompt']

export function apply(ctx: Context) {
  ctx.systemPrompt.section({
    name: 'tool:bash',
    order: 105,
    text: 'Use `bash` for builds, tests and git. Each call runs in a fresh shell in {{cwd}}.',
  })
  ctx.systemPrompt.tools(() => ({
    schemas: [{
      name: 'bash',
      description: 'Run a shell command and return its output and exit code.',
      parameters: {
        type: 'object',
        properties: { command: { type: 'string' }, timeout: { type: 'integer', maximum: 600 } },
        required: ['command'],
      },
    }],
  }))
}
