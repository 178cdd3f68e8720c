import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'

// Facts about where the agent runs. The working directory is fixed for a
// session, so it may appear in system text; the clock changes every step, so it
// is a runtime context and reaches the model as a user-role snapshot.
export const name = 'demo-workspace-facts'
export const inject = ['systemPrompt']

export interface Config {
  cwd?: string
  timeZone?: string
}

export const Config: Schema<Config> = Schema.object({
  cwd: Schema.string().description('Working directory reported to the model (default: the process cwd).'),
  timeZone: Schema.string().description('IANA time zone of the clock (default: the host zone).'),
})

export function apply(ctx: Context, config: Config) {
  const cwd = config.cwd ?? process.cwd()
  const timeZone = config.timeZone ?? Intl.DateTimeFormat().resolvedOptions().timeZone
  ctx.systemPrompt.variable('cwd', () => cwd)
  ctx.systemPrompt.variable('now', () => new Date().toLocaleString('sv-SE', { timeZone }), { stability: 'step' })
  ctx.systemPrompt.context({ name: 'workspace:cwd', order: 10, text: 'Working directory: {{cwd}}', stability: 'session' })
  ctx.systemPrompt.context({ name: 'clock:now', order: 20, text: `Current time: {{now}} (${timeZone})` })
}
