// The git state of a work tree, read again only when the tree may have changed.
// A `git status` is a process: spawning it costs the host several milliseconds
// of CPU at every model step of every agent, while the state changes rarely.
// So each work tree's folders are watched (the ones git does not ignore, and
// the git directory), and the last state is kept until a watch reports a
// change, or a tool call that does more than read ends (a command may change
// any tree, in ways a watch does not see).
import { existsSync, readdirSync, readFileSync, statSync, watch, type FSWatcher } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { mayBeInRepository, readGitState, type GitRunner, type GitState } from './git.ts'

/** Where a work tree keeps what `git status` reads. */
export interface WorkTree {
  /** The folder holding `.git`. */
  top: string
  /** Its git directory: `.git`, or the folder a linked work tree's `.git` file names. */
  gitDir: string
  /** Where the branches are: the git directory, or the main one of a linked work tree. */
  commonDir: string
}

/**
 * The work tree `dir` belongs to, as git finds it: the nearest folder holding a
 * `.git` folder, or a `.git` file that names the git directory (a linked work
 * tree). `undefined` outside every work tree, in a bare repository or inside a
 * git directory: those are read every time.
 */
export function findWorkTree(dir: string): WorkTree | undefined {
  for (let at = resolve(dir); ; at = dirname(at)) {
    const dotGit = join(at, '.git')
    const stat = statSync(dotGit, { throwIfNoEntry: false })
    if (stat?.isDirectory()) return { top: at, gitDir: dotGit, commonDir: dotGit }
    if (stat?.isFile()) {
      const named = /^gitdir: (.+)$/m.exec(readText(dotGit) ?? '')?.[1]
      if (!named) return undefined
      const gitDir = resolve(at, named.trim())
      const common = readText(join(gitDir, 'commondir'))?.trim()
      return { top: at, gitDir, commonDir: common ? resolve(gitDir, common) : gitDir }
    }
    if (dirname(at) === at) return undefined
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

interface Tree {
  readonly where: WorkTree
  readonly watchers: Map<string, FSWatcher>
  /** `off`: too many folders, submodules, or the folders could not be listed: git runs at every read. */
  mode: 'unlisted' | 'on' | 'off'
  /** Bumped by every change a watch reports; a state read across a bump is not kept. */
  generation: number
  /** A folder appeared that is not watched: list the folders again at the next read. */
  relist: boolean
  kept?: { generation: number; state: GitState }
}

/** The git states of the work trees the agents work in, one entry and one set of watches per tree. */
export class GitStateCache {
  readonly #runner: GitRunner
  readonly #maxFolders: number
  readonly #trees = new Map<string, Tree>()
  #disposed = false

  /** `maxFolders`: a work tree with more folders to watch is not watched (git runs at every read); 0 watches none. */
  constructor(runner: GitRunner, maxFolders: number) {
    this.#runner = runner
    this.#maxFolders = maxFolders
  }

  /** The git facts of `cwd`, as `readGitState` gives them, from the kept state when nothing changed since. */
  async read(cwd: string, timeoutMs: number, signal?: AbortSignal): Promise<GitState | undefined> {
    // As without the cache: a few stats, and no git outside every repository.
    if (!mayBeInRepository(cwd)) return undefined
    const where = this.#maxFolders > 0 && !this.#disposed ? findWorkTree(cwd) : undefined
    if (!where) return readGitState(this.#runner, cwd, timeoutMs, signal)
    const tree = this.#tree(where)
    // A change made just before this read has its watch event queued, not yet
    // delivered: two turns of the event loop pass a poll phase, which delivers it.
    await nextTurn()
    await nextTurn()
    if (tree.mode === 'off') return readGitState(this.#runner, cwd, timeoutMs, signal)
    if (tree.kept?.generation === tree.generation) return tree.kept.state
    const generation = tree.generation
    if (tree.mode === 'unlisted' || tree.relist) {
      // The folders are listed while status runs; what status saw before the
      // watches were in place is not kept, so the next read runs it again.
      tree.relist = false
      const [state] = await Promise.all([readGitState(this.#runner, cwd, timeoutMs, signal), this.#list(tree, timeoutMs, signal)])
      return state
    }
    const state = await readGitState(this.#runner, cwd, timeoutMs, signal)
    if (state !== undefined && tree.generation === generation) tree.kept = { generation, state }
    return state
  }

  /** Every kept state is stale: a command ran, and may have changed any tree. */
  invalidate(): void {
    for (const tree of this.#trees.values()) tree.generation++
  }

  /** Closes every watch; later reads run git every time. */
  dispose(): void {
    this.#disposed = true
    for (const tree of this.#trees.values()) for (const watcher of tree.watchers.values()) watcher.close()
    this.#trees.clear()
  }

  #tree(where: WorkTree): Tree {
    let tree = this.#trees.get(where.top)
    if (!tree || tree.where.gitDir !== where.gitDir) {
      if (tree) this.#drop(tree)
      tree = { where, watchers: new Map(), mode: 'unlisted', generation: 0, relist: false }
      this.#trees.set(where.top, tree)
    }
    return tree
  }

  /** Watches the folders git looks at: those of tracked files, untracked folders, the git directory and the branches. */
  async #list(tree: Tree, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const { top, gitDir, commonDir } = tree.where
    // Submodules change inside folders of their own: their state is read every time.
    if (existsSync(join(top, '.gitmodules'))) return this.#off(tree)
    const listed = await this.#runner.run(['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--directory'], top, timeoutMs, signal)
    if (this.#disposed || this.#trees.get(top) !== tree) return
    if (listed === undefined && signal?.aborted) return // the step was cancelled: list at the next read
    // Git failed, was too slow, or listed more than its output cap: this tree is read every time.
    if (typeof listed !== 'string') return this.#off(tree)
    const folders = new Set([top, gitDir, commonDir, ...branchFolders(join(commonDir, 'refs', 'heads'))])
    for (const path of listed.split('\0')) {
      if (path === '') continue
      // An untracked folder is listed as `name/`: it is watched itself (a file in it makes it show).
      let at = path.endsWith('/') ? path.slice(0, -1) : dirname(path)
      while (at !== '.' && at !== '' && !folders.has(join(top, at))) {
        folders.add(join(top, at))
        at = dirname(at)
      }
      if (folders.size > this.#maxFolders) return this.#off(tree)
    }
    for (const [folder, watcher] of tree.watchers) {
      if (folders.has(folder)) continue
      watcher.close()
      tree.watchers.delete(folder)
    }
    for (const folder of folders) {
      if (tree.watchers.has(folder)) continue
      try {
        const watcher = watch(folder, { persistent: false }, (event, name) => this.#changed(tree, folder, event, name))
        watcher.on('error', () => this.#off(tree))
        tree.watchers.set(folder, watcher)
      } catch {
        // Gone since it was listed: the change that removed it bumps the generation anyway.
        tree.generation++
      }
    }
    tree.mode = 'on'
    tree.generation++
  }

  #changed(tree: Tree, folder: string, event: string, name: string | Buffer | null) {
    tree.generation++
    if (event !== 'rename') return
    // A watched folder removed: its watch is gone with it (one made again will be listed).
    if (!existsSync(folder)) {
      tree.watchers.get(folder)?.close()
      tree.watchers.delete(folder)
      tree.relist = true
      return
    }
    // A folder created in a watched one may hold files git sees: list again.
    const path = typeof name === 'string' ? join(folder, name) : undefined
    if (path && !tree.watchers.has(path) && statSync(path, { throwIfNoEntry: false })?.isDirectory()) tree.relist = true
  }

  #off(tree: Tree) {
    for (const watcher of tree.watchers.values()) watcher.close()
    tree.watchers.clear()
    tree.mode = 'off'
    tree.kept = undefined
  }

  #drop(tree: Tree) {
    this.#off(tree)
    this.#trees.delete(tree.where.top)
  }
}

/** `refs/heads` and its subfolders (branch names with slashes); none when it is missing. */
function branchFolders(heads: string): string[] {
  try {
    const entries = readdirSync(heads, { withFileTypes: true, recursive: true })
    return [heads, ...entries.filter(entry => entry.isDirectory()).map(entry => join(entry.parentPath, entry.name))]
  } catch {
    return []
  }
}

const nextTurn = () => new Promise<void>(done => setImmediate(done))
