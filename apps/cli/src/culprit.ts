// Which plugin an uncaught error came from. Node reports such an error with no
// owner, so its stack is read: the first frame in the code of a mounted row
// (the package of a row that names one, the file or folder of a row by path)
// names that row. The CLI's own package is Loom's code, not a plugin's: an
// error there, or in code of no row, is an internal error.
import { existsSync, realpathSync } from 'node:fs'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CLI_ROOT } from './compose.ts'

/** A mounted row: its id, its name as shown, and where its module is. */
export interface RowModule {
  id: string
  shown: string
  /** The module's file (a file URL or a path). */
  file: string
  /** The row names a package: all of the package's files are its code; else only `file` (or, for a folder, what is in it). */
  package: boolean
}

export interface Culprit {
  /** The row's id. */
  id: string
  /** The row as messages name it: `row "id" (name)`. */
  label: string
}

/** The row whose code the first frame of `error`'s stack is in; none for Loom's own code, or an error without a stack. */
export function findCulprit(error: unknown, rows: readonly RowModule[]): Culprit | undefined {
  const stack = error instanceof Error ? error.stack : undefined
  if (!stack) return undefined
  const cli = realpathSync(CLI_ROOT)
  const owners = rows.flatMap(row => {
    const root = codeOf(row)
    return root && root !== cli ? [{ row, root }] : []
  })
  for (const file of stackFiles(stack)) {
    // The innermost owner: a row by path inside a package's folder is that row's code.
    const owner = owners
      .filter(({ root }) => file === root || (file.startsWith(root + sep) && !file.slice(root.length).includes(`${sep}node_modules${sep}`)))
      .sort((a, b) => b.root.length - a.root.length)[0]
    if (owner) return { id: owner.row.id, label: `row "${owner.row.id}" (${owner.row.shown})` }
  }
  return undefined
}

/** The files of a stack's frames, top first (`at f (file:///a/b.ts:1:2)`, `at /a/b.js:1:2`; a module's `?query` dropped). */
function stackFiles(stack: string): string[] {
  const files: string[] = []
  for (const line of stack.split('\n')) {
    const location = /^\s+at (?:.* \()?(file:\/\/\/[^\s)]+?|\/[^\s)]+?)(?:\?[^\s):]*)?:\d+:\d+\)?$/.exec(line)?.[1]
    if (!location) continue
    try {
      files.push(location.startsWith('file:') ? fileURLToPath(location) : location)
    } catch {
      // not a file
    }
  }
  return files
}

/** Where a row's code is, as real paths: its package's folder, or its own file or folder. */
function codeOf(row: RowModule): string | undefined {
  let file: string
  try {
    file = realpathSync(row.file.startsWith('file:') ? fileURLToPath(row.file) : row.file)
  } catch {
    return undefined
  }
  if (!row.package) return file
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir
    if (dirname(dir) === dir) return undefined
  }
}
