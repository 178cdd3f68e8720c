// The files that decide what a deployment runs and what it allows, protected from the agent's own
// tools (`tools.protect`): file tools ask before changing them (and are refused headless), the
// shell's sandbox mounts them read-only. Without this, one `write` of loom.yml turns the next run's
// permissions off or runs a `!!js` value as the user.
import type { Context } from '@deepseek-ai/cordis'
import type { EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import type {} from '@loom/tools'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Composition } from './compose.ts'

export interface Protected {
  path: string
  reason: string
}

export interface ProtectOptions {
  cwd: string
  composition: Composition
}

/**
 * What a deployment in `cwd` protects: its config layers and every place a project layer
 * would be found, `.loom/` of the project, `$LOOM_HOME`, the git hooks and config, and the
 * files of plugins mounted by path.
 */
export function protectedPaths({ cwd, composition }: ProtectOptions): Protected[] {
  const found: Protected[] = []
  const add = (path: string, reason: string) => {
    if (!found.some(entry => entry.path === path)) found.push({ path, reason })
  }
  for (const layer of composition.layers) {
    if (layer.kind !== 'bundle') add(layer.file, `a config layer of this deployment (${layer.kind}): it decides which plugins run and what they allow`)
  }
  const root = projectRoot(cwd)
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    add(join(dir, 'loom.yml'), "where Loom looks for the project's loom.yml, which decides which plugins run and what they allow")
    if (dir === root || dirname(dir) === dir) break
  }
  // Skills and memory are found relative to the working folder; the project root's too.
  for (const dir of new Set([resolve(cwd), root])) add(join(dir, '.loom'), "the project's Loom folder: its skills and memory become the agent's instructions")
  add(loomHome(), "Loom's home: the operator's config, sessions and records")
  const git = gitDir(root)
  if (git) {
    add(join(git, 'hooks'), 'git runs its hooks as the user at the next commit, checkout or merge')
    add(join(git, 'config'), 'git config can name programs git runs as the user (hooks path, fsmonitor, filters, pager)')
  }
  for (const row of rowsOf(composition.rows)) {
    const file = pathPlugin(row.name, cwd)
    if (file) add(file, `the source of plugin ${row.name}, which the next run executes as the user`)
  }
  return found
}

/** A plugin registering `paths` through `ctx.tools.protect` once the tools service is up. */
export function protectPlugin(paths: readonly Protected[]) {
  return {
    name: '@loom/cli/protect',
    inject: ['tools'],
    apply(ctx: Context) {
      for (const { path, reason } of paths) ctx.tools.protect(path, reason)
    },
  }
}

/** The nearest folder up from `cwd` holding `.git` (where the project layer search stops), else `cwd`. */
function projectRoot(cwd: string): string {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    if (existsSync(join(dir, '.git'))) return dir
    if (dirname(dir) === dir) return resolve(cwd)
  }
}

/** The repository's git folder: `.git` itself, or where a worktree's `.git` file points. */
function gitDir(root: string): string | undefined {
  const dotGit = join(root, '.git')
  const stat = statSync(dotGit, { throwIfNoEntry: false })
  if (stat?.isDirectory()) return dotGit
  if (!stat?.isFile()) return undefined
  const pointer = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim()
  return pointer ? resolve(root, pointer) : undefined
}

function loomHome(): string {
  const home = process.env.LOOM_HOME || '~/.loom'
  return resolve(home === '~' || home.startsWith('~/') ? join(homedir(), home.slice(1)) : home)
}

/** A row's module when it is a path (`./plugin.ts`, `/abs/plugin`, `file:...`): the file or folder the next run loads. */
function pathPlugin(name: string, cwd: string): string | undefined {
  if (name.startsWith('file:')) return fileURLToPath(name)
  if (name.startsWith('.') || isAbsolute(name)) return resolve(cwd, name)
  return undefined
}

function rowsOf(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => [row, ...(row.group && Array.isArray(row.config) ? rowsOf(row.config as EntryOptions[]) : [])])
}
