// The files that decide what a deployment runs and what it allows, protected from the agent's own
// tools (`tools.protect`): file tools ask before changing them (and are refused headless), the
// shell's sandbox mounts them read-only. Without this, one `write` of loom.yml turns the next run's
// permissions off or runs a `!!js` value as the user.
import type { Context } from '@deepseek-ai/cordis'
import type { EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import { installedFrom } from '@loom/tools'
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CLI_ROOT, type Composition, loomHome, packageOf, projectLayerPlaces, readJson, resolvePackage } from './compose.ts'
import { pluginImports } from './imports.ts'

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
 * code the next run executes: the files of plugins mounted by path and what they import, the CLI's folder, the
 * package of each plugin named by package, and, for packages inside the workspace (a
 * project's node_modules), the packages they depend on.
 */
export function protectedPaths({ cwd, composition }: ProtectOptions): Protected[] {
  const found: Protected[] = []
  const add = (path: string, reason: string) => {
    if (!found.some(entry => entry.path === path)) found.push({ path, reason })
  }
  for (const layer of composition.layers) {
    if (layer.kind === 'bundle') {
      if (!isInside(CLI_ROOT, layer.file)) add(layer.file, `a bundle this deployment is composed from (${layer.label}): it decides which plugins run`)
    } else add(layer.file, `a config layer of this deployment (${layer.kind}): it decides which plugins run and what they allow`)
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
    const hooks = hooksPath(join(git, 'config'))
    if (hooks) add(resolve(root, hooks), 'git runs the hooks in its core.hooksPath as the user at the next commit, checkout or merge')
  }
  const cli = realpathSync(CLI_ROOT)
  add(cli, 'the Loom CLI, which the next run executes as the user')
  const packages = [cli]
  const workspace = [realpathSync(cwd), ...(repository ? [realpathSync(root)] : [])]
  const within = (folder: string) => workspace.some(dir => isInside(dir, folder))
  for (const row of rowsOf(composition.rows)) {
    const file = pathPlugin(row.name, cwd)
    if (file) {
      add(file, `the source of plugin ${row.name}, which the next run executes as the user`)
      const info = statSync(file, { throwIfNoEntry: false })
      if (info?.isDirectory()) packages.push(realpathSync.native(file))
      else if (info) {
        const imported = pluginImports(realpathSync.native(file), within)
        for (const module of imported.files) add(module, `a module plugin ${row.name} imports, which the next run executes as the user`)
        for (const folder of imported.packages) add(folder, `a package plugin ${row.name} imports, which the next run executes as the user`)
        packages.push(...imported.packages)
      }
    }
    const folder = file || row.name.startsWith('cordis:') ? undefined : packageFolder(row.name, cwd)
    if (folder) {
      add(folder, `the package of plugin ${row.name}, which the next run executes as the user`)
      packages.push(folder)
    }
  }
  for (const folder of dependenciesWithin(packages, within))
    add(folder, 'a package that plugins of this deployment import, which the next run executes as the user')
  // With Loom's code in the workspace, so are the launchers that run it (`npx loom`, npm
  // scripts), and npm's config, whose `node-options` every process npx starts takes.
  if (found.some(entry => within(entry.path) && entry.path.split(sep).includes('node_modules'))) {
    for (const dir of workspace) {
      add(join(dir, 'node_modules', '.bin'), 'the commands npx and npm scripts run (the loom launcher among them)')
      add(join(dir, '.npmrc'), 'npm config: its node-options reach every process npx starts, the loom launcher among them')
    }
  }
  return found
}

/** The folder of the package a row names, as the boot resolves it; undefined when it is not installed (its mount says so). */
function packageFolder(name: string, cwd: string): string | undefined {
  try {
    return packageOf(name, resolvePackage(name, cwd))?.folder
  } catch {
    return undefined
  }
}

/**
 * The packages that packages lying inside the workspace depend on, found as Node finds
 * them (the nearest node_modules up from the package's real folder), through their own
 * dependencies while they lie inside too. A package outside the workspace finds its own
 * dependencies outside it, where the agent's tools do not reach.
 */
function dependenciesWithin(packages: readonly string[], within: (folder: string) => boolean): string[] {
  const seen = new Set(packages)
  const found: string[] = []
  const queue = packages.filter(within)
  for (const folder of queue) {
    const manifest = readJson(join(folder, 'package.json')) as Record<string, unknown> | undefined
    const names = ['dependencies', 'optionalDependencies', 'peerDependencies'].flatMap(key => Object.keys((manifest?.[key] as object | undefined) ?? {}))
    for (const name of names) {
      const dependency = installedFrom(folder, name)
      if (dependency === undefined || seen.has(dependency)) continue
      seen.add(dependency)
      found.push(dependency)
      if (within(dependency)) queue.push(dependency)
    }
  }
  return found
}

function isInside(dir: string, path: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep)
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

/** `core.hooksPath` of a git config file (husky's `.husky`, say): relative to the work tree, `~/` the home folder. */
function hooksPath(config: string): string | undefined {
  let text: string
  try {
    text = readFileSync(config, 'utf8')
  } catch {
    return undefined
  }
  let core = false
  let found: string | undefined
  for (const line of text.split('\n')) {
    const section = /^\s*\[\s*([^\]\s"]+)/.exec(line)
    if (section) core = section[1].toLowerCase() === 'core'
    const value = core ? /^\s*hookspath\s*=\s*"?([^"#;]*?)"?\s*(?:[#;].*)?$/i.exec(line)?.[1] : undefined
    // The last one wins, as git reads it.
    if (value) found = value.replace(/^~(?=\/)/, homedir())
  }
  return found
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
