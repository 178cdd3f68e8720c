import { resolve } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { AssembleContext } from '@loom/system-prompt'
import { isRead } from '@loom/tools'
import { GitRunner, type GitState } from './git.ts'
import { PackageJsonCache, readProjectFacts, type ProjectFacts } from './project.ts'
import { GitStateCache } from './watch.ts'

export { GitRunner, mayBeInRepository, readGitState, type GitState } from './git.ts'
export { LOCKFILES, PackageJsonCache, readProjectFacts, testCommand, type ProjectFacts } from './project.ts'
export { findWorkTree, GitStateCache, type WorkTree } from './watch.ts'

export const name = '@loom/context-workspace'
export const inject = ['systemPrompt']

export const CONTEXT_NAME = 'runtime:workspace'
export const CONTEXT_ORDER = 20

export interface Config {
  /** Directory reported; default: the agent's session cwd, else the process cwd. */
  root?: string
  /** Deadline for all git calls of one assembly. */
  gitTimeoutMs: number
  /** The git executable. */
  git: string
  /** A work tree with more folders than this is not watched: its git state is read at every step. 0: never watch. */
  maxWatchedFolders: number
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description('Directory reported (default: the agent session cwd, else the process cwd).'),
  gitTimeoutMs: Schema.natural().min(1).default(2_000).description('Deadline for the git calls of one assembly, in ms; past it the text has no git facts.'),
  git: Schema.string().default('git').description('The git executable.'),
  maxWatchedFolders: Schema.natural()
    .default(2_000)
    .description('A work tree with more folders than this is not watched, and its git state is read at every step; 0 never watches.'),
}) as Schema<Config>

/** The exact text of the context. */
export function workspaceText(cwd: string, git?: GitState, project: ProjectFacts = {}): string {
  const lines = [`Working directory: ${cwd}`]
  const where =
    git?.branch !== undefined
      ? `branch ${git.branch}${git.unborn ? ' (no commits yet)' : ''}`
      : git?.detached !== undefined
        ? `detached HEAD at ${git.detached}`
        : undefined
  const tree =
    git?.changed === undefined
      ? undefined
      : git.changed === 0
        ? 'working tree clean'
        : `${git.changed} ${git.changed === 1 ? 'file' : 'files'} changed or untracked`
  const facts = [where, tree].filter(Boolean)
  if (git && facts.length) lines.push(`Git: ${facts.join(', ')}`)
  if (project.packageManager) lines.push(`Package manager: ${project.packageManager.name} (${project.packageManager.from})`)
  else if (project.lockfiles) lines.push(`Package manager: unclear, lockfiles of several managers (${project.lockfiles.join(', ')})`)
  if (project.test) lines.push(`Tests: ${project.test.command} (${project.test.from})`)
  return lines.join('\n')
}

/** The rules the project's files assert: a memory or an instruction saying otherwise gets a `[context-conflict]` line. */
export function projectAsserts(project: ProjectFacts): Record<string, { value: string; from: string }> {
  return {
    ...(project.packageManager && { 'package-manager': { value: project.packageManager.name, from: project.packageManager.from } }),
    ...(project.test && { 'test-command': { value: project.test.command, from: project.test.from } }),
  }
}

export function apply(ctx: Context, config: Config) {
  const cwdOf = (context: AssembleContext) => resolve(config.root ?? context.agent?.cwd ?? process.cwd())
  const owner = ctx.fiber.name
  const runner = new GitRunner(config.git)
  const gitStates = new GitStateCache(runner, config.maxWatchedFolders)
  ctx.effect(
    () => () => {
      gitStates.dispose()
      runner.dispose()
    },
    `${name}: git processes and watches`,
  )
  // A call that does more than read (a command, a write) may change any tree, in ways a watch may miss.
  ctx.on('tools/result', exec => {
    if (!isRead(ctx.get('tools')?.effectsOf(exec))) gitStates.invalidate()
  })
  // Text, asserts and the listener of one assembly read the project's files once.
  const packages = new PackageJsonCache()
  const assemblies = new WeakMap<AssembleContext, ProjectFacts>()
  const projectOf = (context: AssembleContext) => {
    let facts = assemblies.get(context)
    if (!facts) assemblies.set(context, (facts = readProjectFacts(cwdOf(context), packages)))
    return facts
  }

  // Without git facts; the assemble listener below fills them in. Literal: a
  // directory or branch named `{{x}}` is shown as it is, never interpolated.
  ctx.systemPrompt.context({
    name: CONTEXT_NAME,
    order: CONTEXT_ORDER,
    stability: 'step',
    literal: true,
    trust: 'workspace',
    text: context => workspaceText(cwdOf(context), undefined, projectOf(context)),
    asserts: context => projectAsserts(projectOf(context)),
  })

  // Git state as it is at every assembly (every model step), asynchronously: read again when the tree may have changed.
  ctx.on('system-prompt/assemble', async (assembly, context, next) => {
    const entry = assembly.contexts.find(c => c.name === CONTEXT_NAME && c.owner === owner)
    if (entry) {
      const cwd = cwdOf(context)
      const git = await gitStates.read(cwd, config.gitTimeoutMs, context.signal)
      // Only the text changes: the entry stays literal.
      entry.text = workspaceText(cwd, git, projectOf(context))
    }
    return next()
  })
}
