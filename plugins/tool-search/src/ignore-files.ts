// Ignore files, read the way ripgrep reads them: `.rgignore`, `.ignore` and `.gitignore`
// in every directory (patterns relative to that directory, git's syntax), then the
// repository's `.git/info/exclude`, then the global excludes file. A repository nested in
// the walk (a folder holding `.git`) is git's own: the enclosing `.gitignore` files and
// exclude file stop at it, its exclude file applies. Runs in the search worker (sync
// I/O); the ripgrep engine asks where the repository and the global file are.
import { readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import ignore from 'ignore'

type Rules = ReturnType<typeof ignore>

/** Where each kind of ignore file ranks: a lower rank wins over a higher one, like ripgrep. */
export const RANK = { '.rgignore': 0, '.ignore': 1, '.gitignore': 2, exclude: 3, global: 4 } as const

/** The ranks a repository bounds: a nested repository does not inherit them. */
const repositoryRank = (rank: number) => rank === RANK['.gitignore'] || rank === RANK.exclude

/** The names of the per-directory ignore files. */
export const IGNORE_FILES = ['.rgignore', '.ignore', '.gitignore'] as const

/** One ignore file: its rules (and their lines), its rank, and its folder as a path from the walk's top (`''` or ending in `/`). */
interface IgnoreFile {
  rules: Rules
  lines: string[]
  rank: number
  base: string
}

/** The ignore files that apply in one directory, in the order they are asked: highest precedence first. */
export type Chain = readonly IgnoreFile[]

/** Where the walk reads the user's git configuration from. */
export interface GitEnv {
  home: string
  /** `$XDG_CONFIG_HOME`, when set. */
  xdgConfigHome?: string
}

/**
 * A decision for one path (from the top, ending in `/` for a directory): the first
 * ignore file that ignores or re-includes (`!pattern`) it decides; `by` is its index.
 */
export function verdict(chain: Chain, path: string): { ignored: boolean; by: number } {
  for (let i = 0; i < chain.length; i++) {
    const file = chain[i]
    if (!path.startsWith(file.base)) continue
    const result = file.rules.test(path.slice(file.base.length))
    if (result.ignored || result.unignored) return { ignored: result.ignored, by: i }
  }
  return { ignored: false, by: -1 }
}

/**
 * The chain below a directory that a negation re-included (`by` is the file that did):
 * the lower files lose the patterns that ignore the directory, else (the library checks
 * a path's parents) they would ignore everything in it.
 */
export function chainBelow(chain: Chain, dir: string, by: number): Chain {
  return chain.flatMap((file, i) => (i <= by ? [file] : without(file, dir)))
}

/** `file`, or when it ignores the directory `dir` (a path from the top ending in `/`), the file without the patterns that do. */
function without(file: IgnoreFile, dir: string): IgnoreFile[] {
  const rel = dir.slice(file.base.length)
  if (!file.rules.test(rel).ignored) return [file]
  const lines = file.lines.filter(line => !ignore().add(line).test(rel).ignored)
  return lines.some(isRule) ? [{ ...file, rules: ignore().add(lines), lines }] : []
}

/**
 * `chain` plus the ignore files of the directory at `base` (read from `path`), in
 * precedence order. `nested`: the directory is a repository inside the walk, which
 * inherits only the `.rgignore` and `.ignore` files and the global file.
 */
export function enter(chain: Chain, path: string, base: string, present: (name: string) => boolean, nested = false): Chain {
  const own: IgnoreFile[] = []
  for (const name of IGNORE_FILES) {
    if (!present(name)) continue
    const lines = readRules(join(path, name))
    if (lines !== undefined) own.push({ rules: ignore().add(lines), lines, rank: RANK[name], base })
  }
  let inherited = chain
  if (nested) {
    inherited = chain.filter(file => !repositoryRank(file.rank))
    const repository = findRepository(path)
    const lines = repository === undefined ? undefined : readRules(join(repository.commonDir, 'info', 'exclude'))
    if (lines !== undefined) own.push({ rules: ignore().add(lines), lines, rank: RANK.exclude, base })
  }
  if (own.length === 0 && inherited === chain) return chain
  // Stable: within a rank, the deeper directory's file (this one) comes first.
  return [...own, ...inherited].sort((a, b) => a.rank - b.rank)
}

/**
 * The chain that applies to the entries of `start` (an absolute directory): the ignore
 * files of its ancestors up to `top` (the enclosing git repository, else the workspace
 * root), the repository's `info/exclude` and the global excludes file (`globalFile`,
 * when it has rules). `prefix` is `start` as a path from `top`. The patterns that ignore
 * `start` itself are left out (`trimmed` says some were): a directory named explicitly
 * is searched.
 */
export function startChain(
  start: string,
  workspaceRoot: string,
  env: GitEnv,
): { chain: Chain; prefix: string; top: string; trimmed: boolean; globalFile?: string } {
  const repo = findRepository(start)
  const top = repo?.root ?? workspaceRoot
  const rel = relative(top, start).split(sep).join('/')
  let chain: Chain = []
  const add = (file: string | undefined, rank: number) => {
    const lines = file === undefined ? undefined : readRules(file)
    if (lines !== undefined) chain = [...chain, { rules: ignore().add(lines), lines, rank, base: '' }]
    return lines !== undefined
  }
  if (repo !== undefined) add(join(repo.commonDir, 'info', 'exclude'), RANK.exclude)
  const global = globalExcludesFile(env, repo?.commonDir)
  const globalFile = add(global, RANK.global) ? global : undefined
  const segments = rel === '' ? [] : rel.split('/')
  for (let i = 0; i < segments.length; i++) {
    const base = segments
      .slice(0, i)
      .map(s => `${s}/`)
      .join('')
    chain = enter(chain, join(top, base), base, () => true)
  }
  const prefix = rel === '' ? '' : `${rel}/`
  const whole = chain
  if (prefix !== '') chain = chain.flatMap(file => without(file, prefix))
  const trimmed = chain.length !== whole.length || chain.some((file, i) => file !== whole[i])
  return { chain, prefix, top, trimmed, globalFile }
}

/** The lines of an ignore file; undefined when it is missing, unreadable or has no rules. */
function readRules(path: string): string[] | undefined {
  const lines = readText(path)?.split(/\r?\n/)
  return lines?.some(isRule) ? lines : undefined
}

const isRule = (line: string) => /^[ \t]*[^#\s]/.test(line)

/** Whether a pattern is anchored to the folder of its file (a slash at its start or in its middle). */
export const isAnchored = (line: string) => isRule(line) && line.replace(/^!/, '').trimEnd().replace(/\/+$/, '').includes('/')

/** The nearest directory at or above `dir` holding `.git` (a directory, or a file naming the git directory). */
export function findRepository(dir: string): { root: string; commonDir: string } | undefined {
  for (let at = dir; ; at = dirname(at)) {
    const dotGit = join(at, '.git')
    let info
    try {
      info = statSync(dotGit, { throwIfNoEntry: false })
    } catch {
      return undefined // a folder above that cannot be read: no repository is known
    }
    if (info?.isDirectory()) return { root: at, commonDir: dotGit }
    if (info?.isFile()) {
      // A worktree or submodule: `gitdir: <path>`, and in a worktree `commondir` names the shared directory.
      const gitDir = /^gitdir:\s*(.+?)\s*$/m.exec(readText(dotGit) ?? '')?.[1]
      if (gitDir === undefined) return undefined
      const resolved = resolve(at, gitDir)
      const common = readText(join(resolved, 'commondir'))?.trim()
      return { root: at, commonDir: common ? resolve(resolved, common) : resolved }
    }
    if (dirname(at) === at) return undefined
  }
}

/**
 * The global excludes file: `core.excludesFile` from the repository's, the user's and
 * the XDG git config (in that precedence; includes are not followed), else git's
 * default `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`).
 */
export function globalExcludesFile(env: GitEnv, gitDir: string | undefined): string | undefined {
  const xdg = env.xdgConfigHome || join(env.home, '.config')
  const configs = [gitDir === undefined ? undefined : join(gitDir, 'config'), join(env.home, '.gitconfig'), join(xdg, 'git', 'config')]
  for (const config of configs) {
    const value = config === undefined ? undefined : excludesFileIn(readText(config) ?? '')
    if (value !== undefined) return value.startsWith('~/') ? join(env.home, value.slice(2)) : value
  }
  return join(xdg, 'git', 'ignore')
}

/** The last `excludesFile` value of the `[core]` section of a git config text. */
function excludesFileIn(text: string): string | undefined {
  let section = ''
  let value: string | undefined
  for (const line of text.split('\n')) {
    const header = /^\s*\[\s*([^\]\s]+)[^\]]*\]/.exec(line)
    if (header) section = header[1].toLowerCase()
    const entry = section === 'core' ? /^\s*excludesfile\s*=\s*(?:"([^"]*)"|([^#;]*))/i.exec(line) : null
    if (entry) value = (entry[1] ?? entry[2]).trim()
  }
  return value === '' ? undefined : value
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}
