// The files that decide what a deployment runs and what it allows, protected from the agent's own
// tools (`tools.protect`): file tools ask before changing them (and are refused headless), the
// shell's sandbox mounts them read-only. Without this, one `write` of loom.yml turns the next run's
// permissions off or runs a `!!js` value as the user.
import type { Context } from '@deepseek-ai/cordis'
import type { EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import type {} from '@loom/tools'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Composition, loomHome, projectLayerPlaces } from './compose.ts'

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
  const places = projectLayerPlaces(cwd)
  for (const place of places) add(place, "where Loom looks for the project's loom.yml, which decides which plugins run and what they allow")
  // The last place is the project root's when the project is a git repository.
  const root = dirname(places.at(-1)!)
  const repository = existsSync(join(root, '.git'))
  // Skills and memory are found relative to the working folder; the project root's too.
  for (const dir of new Set([resolve(cwd), ...(repository ? [root] : [])])) {
    add(join(dir, '.loom'), "the project's Loom folder: its skills and memory become the agent's instructions")
  }
  add(loomHome(), "Loom's home: the operator's config, sessions and records")
  const git = repository ? gitDir(root) : undefined
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

/**
 * The git folder whose hooks and config git uses for the work tree at `root`: `.git` itself, or
 * for a linked worktree or a submodule (a `.git` file) the folder it points to, or that folder's
 * common one (worktrees share the main repository's hooks and config).
 */
function gitDir(root: string): string | undefined {
  const dotGit = join(root, '.git')
  if (statSync(dotGit).isDirectory()) return dotGit
  const pointer = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim()
  if (!pointer) return undefined
  const dir = resolve(root, pointer)
  const common = existsSync(join(dir, 'commondir')) ? readFileSync(join(dir, 'commondir'), 'utf8').trim() : ''
  return common ? resolve(dir, common) : dir
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
