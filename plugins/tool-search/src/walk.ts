import type { Dirent } from 'node:fs'
import { readdir, realpath, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { isInside } from '@loom/tools/workspace'

export interface WalkedFile {
  /** Path relative to the directory the walk started in, `/`-separated. */
  rel: string
  /** Path relative to the workspace root, `/`-separated (what the model is shown). */
  display: string
  /** Absolute path to read (a symlink's target, checked to be inside the workspace). */
  real: string
  mtimeMs: number
  size: number
}

export interface WalkOptions {
  /** The workspace root, symlinks resolved. */
  root: string
  /** How the start directory is shown to the model (relative to the root, \`.\` for the root). */
  display: string
  /** Entry names skipped wherever they occur (directories are not entered). */
  ignore: readonly string[]
  /** Directory levels below the start to look at (1: only the start's own entries). */
  maxDepth: number
  signal: AbortSignal
}

/**
 * The regular files under `start` (a resolved directory inside the workspace),
 * depth first. Ignored names are skipped, symlinked directories are not entered
 * (no loops, no escapes), and a symlinked file is listed only when its target is
 * inside the workspace. Unreadable directories are skipped.
 */
export async function* walkFiles(start: string, options: WalkOptions): AsyncGenerator<WalkedFile> {
  const ignore = new Set(options.ignore)
  const stack: { dir: string; rel: string; depth: number }[] = [{ dir: start, rel: '', depth: 1 }]
  while (stack.length > 0) {
    options.signal.throwIfAborted()
    const { dir, rel, depth } = stack.pop()!
    let entries: Dirent[]
    try {
      entries = await readdir(dir, { withFileTypes: true })
    } catch {
      continue
    }
    entries.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0)) // popped in name order
    for (const entry of entries) {
      if (ignore.has(entry.name)) continue
      const path = join(dir, entry.name)
      const childRel = rel === '' ? entry.name : `${rel}/${entry.name}`
      if (entry.isDirectory()) {
        if (depth < options.maxDepth) stack.push({ dir: path, rel: childRel, depth: depth + 1 })
        continue
      }
      let real = path
      if (entry.isSymbolicLink()) {
        try {
          real = await realpath(path)
        } catch {
          continue // dangling or looping
        }
        if (!isInside(options.root, real)) continue
      } else if (!entry.isFile()) {
        continue
      }
      let info
      try {
        info = await stat(real)
      } catch {
        continue
      }
      if (!info.isFile()) continue
      yield { rel: childRel, display: options.display === '.' ? childRel : `${options.display}/${childRel}`, real, mtimeMs: info.mtimeMs, size: info.size }
    }
  }
}
