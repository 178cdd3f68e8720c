// The directory walk of both tools, run in the search worker (sync I/O: the worker
// has nothing else to do, and one readdir per directory is all it costs).
import { type Dirent, readdirSync, realpathSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { allowedBelow, isInside, readDenial, type ReadRules } from '@loom/tools/workspace'
import { type Chain, chainBelow, enter, type GitEnv, startChain, verdict } from './ignore-files.ts'

export interface WalkedFile {
  /** Path relative to the directory the walk started in, `/`-separated. */
  rel: string
  /** Path relative to the workspace root, `/`-separated (what the model is shown). */
  display: string
  /** Absolute path to read (a symlink's target, checked to be inside the workspace). */
  real: string
}

export interface WalkOptions {
  /** The workspace root, symlinks resolved. */
  root: string
  /** How the start directory is shown to the model (relative to the root, `.` for the root). */
  display: string
  /** Entry names skipped wherever they occur, whatever the other options say (directories are not entered). */
  names: readonly string[]
  /** Also walk hidden entries (names starting with a dot). */
  hidden: boolean
  /** Honour ignore files (`.gitignore`, `.ignore`, `.git/info/exclude`, the global excludes file); with it, where git's configuration is. */
  ignoreFiles: GitEnv | undefined
  /** Directory levels below the start to look at (1: only the start's own entries). */
  maxDepth: number
  /** What tools may not read (credential stores): entries they cover are skipped, a folder with an allowed path below it is entered. */
  reads: ReadRules
  /** The same for a symlinked file's target, which may lie anywhere in the workspace (rules for the whole workspace). */
  targetReads: ReadRules
  /** Called for each entry left out as hidden, ignored or denied (a directory counts once), for the notices. */
  onSkip(reason: 'ignored' | 'hidden' | 'denied'): void
}

/** A directory to list: its path, its path from the walk's start and from the ignore files' top, its depth and chain. */
interface Dir {
  path: string
  rel: string
  fromTop: string
  depth: number
  chain: Chain
}

/** An entry met in a listing, waiting for its turn; `chain` is set for a directory a negation re-included. */
interface Pending {
  parent: Dir
  name: string
  kind: 'file' | 'dir' | 'link'
  chain?: Chain
}

/**
 * The regular files under `start` (a resolved directory inside the workspace), one at
 * a time in path order (code units, as a sort of the full paths would give), so a
 * search can stream its results and stop early. Names in `names` are skipped; hidden
 * entries and ignored ones unless asked; symlinked directories are not entered (no
 * loops, no escapes); a symlinked file is listed only when its target is inside the
 * workspace; unreadable directories are skipped; so are the paths the read rules deny
 * (a symlinked file by its target).
 */
export function* walkFiles(start: string, options: WalkOptions): Generator<WalkedFile> {
  const names = new Set(options.names)
  // Most walks meet no rule (the host passes only those at or below the start): one test per entry then.
  const reads = options.reads.deny.length > 0 ? options.reads : undefined
  const denied = (path: string, dir: boolean) => {
    if (reads === undefined || readDenial(reads, path) === undefined || (dir && allowedBelow(reads, path))) return false
    options.onSkip('denied')
    return true
  }
  // A link's target is checked against every rule of the workspace: it can lead out of the walk to a denied file.
  const deniedTarget = (real: string) => {
    if (readDenial(options.targetReads, real) === undefined) return false
    options.onSkip('denied')
    return true
  }
  const top = options.ignoreFiles === undefined ? undefined : startChain(start, options.root, options.ignoreFiles)
  const stack: Pending[] = []
  const list = (dir: Dir) => {
    let entries: Dirent[]
    try {
      entries = readdirSync(dir.path, { withFileTypes: true })
    } catch {
      return
    }
    const present = (name: string) => entries.some(e => e.name === name)
    // Below the start, a folder holding .git is a repository of its own (the start's is the top's).
    const chain = top === undefined ? dir.chain : enter(dir.chain, dir.path, dir.fromTop, present, dir.depth > 1 && present('.git'))
    const parent = { ...dir, chain }
    const pending: (Pending & { key: string })[] = []
    for (const entry of entries) {
      const name = entry.name
      if (names.has(name)) continue
      if (!options.hidden && name.charCodeAt(0) === 0x2e) {
        options.onSkip('hidden')
        continue
      }
      const kind = entry.isDirectory() ? 'dir' : entry.isFile() ? 'file' : entry.isSymbolicLink() ? 'link' : undefined
      if (kind === undefined || (kind === 'dir' && dir.depth >= options.maxDepth)) continue
      let below: Chain | undefined
      if (top !== undefined && chain.length > 0) {
        const path = kind === 'dir' ? `${dir.fromTop}${name}/` : `${dir.fromTop}${name}`
        const decided = verdict(chain, path)
        if (decided.ignored) {
          options.onSkip('ignored')
          continue
        }
        if (kind === 'dir' && decided.by >= 0) below = chainBelow(chain, path, decided.by)
      }
      // A directory sorts as its name plus `/`: its files then come exactly where a sort of the full paths puts them.
      pending.push({ parent, name, kind, chain: below, key: kind === 'dir' ? `${name}/` : name })
    }
    pending.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0)) // popped in path order
    for (const item of pending) stack.push(item)
  }

  list({ path: start, rel: '', fromTop: top?.prefix ?? '', depth: 1, chain: top?.chain ?? [] })
  while (stack.length > 0) {
    const { parent, name, kind, chain } = stack.pop()!
    const path = join(parent.path, name)
    const rel = parent.rel === '' ? name : `${parent.rel}/${name}`
    if (kind === 'dir') {
      if (!denied(path, true)) list({ path, rel, fromTop: `${parent.fromTop}${name}/`, depth: parent.depth + 1, chain: chain ?? parent.chain })
      continue
    }
    let real = path
    if (kind === 'link') {
      try {
        real = realpathSync(path)
        if (!isInside(options.root, real) || !statSync(real).isFile()) continue
      } catch {
        continue // dangling or looping
      }
      if (deniedTarget(real)) continue
    } else if (denied(real, false)) continue
    yield { rel, display: options.display === '.' ? rel : `${options.display}/${rel}`, real }
  }
}
