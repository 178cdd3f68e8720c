// Which file holds each command's plan. The command table (../commands.ts) and
// this map name the same commands: the type says so. A command's file is
// imported only when that command runs, and imports what it needs only inside
// its plan, so `loom --version` and `loom help` load no host.
import type { CommandName } from '../commands.ts'
import type { PlanMaker } from '../context.ts'

type PlanModule = Promise<{ plan: PlanMaker }>

export const PLANS: Record<CommandName, () => PlanModule> = {
  run: () => import('./run.ts'),
  resume: () => import('./resume.ts'),
  prompt: () => import('./prompt.ts'),
  dev: () => import('./dev.ts'),
  config: () => import('./config.ts'),
  'sessions list': () => import('./sessions-list.ts'),
  'sessions show': () => import('./sessions-show.ts'),
  'sessions resume': () => import('./sessions-resume.ts'),
  'sessions verify': () => import('./sessions-verify.ts'),
  'sessions repair': () => import('./sessions-repair.ts'),
  'sessions stats': () => import('./sessions-stats.ts'),
  'sessions manifest': () => import('./sessions-manifest.ts'),
  'sessions compact': () => import('./sessions-compact.ts'),
  serve: () => import('./serve.ts'),
  inspect: () => import('./inspect.ts'),
  trust: () => import('./trust.ts'),
  schema: () => import('./schema.ts'),
  plugins: () => import('./plugins.ts'),
  'new plugin': () => import('./new-plugin.ts'),
  help: () => import('./help.ts'),
}

/** `loom` with no command: the conversation (not in the table: no word names it). */
export const CONVERSATION_PLAN = (): PlanModule => import('./conversation.ts')
