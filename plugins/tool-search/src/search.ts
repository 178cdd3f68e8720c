import { stat } from 'node:fs/promises'
import { isAbsolute, posix } from 'node:path'
import { resolveInWorkspace, type WorkspacePath } from '@loom/tools/workspace'
import { plural } from '@loom/tools/workspace'
import { compileGlob, globDepth, splitGlob } from './pattern.ts'
import type { ScanFile, ScanResult, ScanWorkers } from './scan.ts'
import { walkFiles, type WalkedFile } from './walk.ts'

export interface SearchLimits {
  globMaxResults: number
  grepMaxMatches: number
  grepMaxLineBytes: number
  ignore: readonly string[]
  /** Milliseconds a search may take (grep stops at it with partial results). */
  timeoutMs: number
}

export interface GlobArgs {
  pattern: string
  path?: string
}

export interface GrepArgs {
  pattern: string
  path?: string
  glob?: string
  ignore_case?: boolean
}

/** Files larger than this are not searched by grep (they are counted in a notice). */
export const GREP_MAX_FILE_BYTES = 16 * 1024 * 1024

/** Resolves the `path` argument: a directory (or, when `file` is allowed, a file) inside the workspace. */
async function searchRoot(root: string, path: string | undefined, allowFile: boolean): Promise<{ at: WorkspacePath; isFile: boolean }> {
  const at = await resolveInWorkspace(root, path === undefined || path === '' ? '.' : path)
  let info
  try {
    info = await stat(at.path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new Error(`path not found: "${at.display}" (paths are relative to the workspace root)`)
    throw new Error(`cannot search "${at.display}": ${(error as Error).message}`)
  }
  if (info.isDirectory()) return { at, isFile: false }
  if (allowFile && info.isFile()) return { at, isFile: true }
  throw new Error(`"${at.display}" is not a directory; glob's path is the directory to search in`)
}

/**
 * Files whose path (relative to `path`, default the workspace root) matches the glob,
 * newest modification first (ties by path), at most `globMaxResults`.
 */
export async function globFiles(root: string, args: GlobArgs, limits: SearchLimits, signal: AbortSignal) {
  const { at } = await searchRoot(root, args.path, false)
  // Literal leading directories of the pattern narrow the walk (and are confined like any path).
  const { base, rest } = splitGlob(args.pattern)
  let start = at
  if (base !== '') {
    start = await resolveInWorkspace(root, isAbsolute(base) ? base : posix.join(at.display, base))
    const info = await stat(start.path).catch(() => undefined)
    if (!info?.isDirectory()) return noFiles(args, at)
  }
  const matcher = globMatcher(rest, `invalid glob pattern "${args.pattern}"`)
  const found: WalkedFile[] = []
  for await (const file of walkFiles(start.path, { root: at.root, display: start.display, ignore: limits.ignore, maxDepth: globDepth(rest), signal })) {
    if (matcher.test(file.rel)) found.push(file)
  }
  if (found.length === 0) return noFiles(args, at)
  found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
  const shown = found.slice(0, limits.globMaxResults)
  const lines = shown.map(file => file.display)
  if (found.length > shown.length) {
    lines.push('', `(Showing ${shown.length} of ${found.length} files, newest first. Narrow the pattern or the path to see the others.)`)
  }
  return {
    content: lines.join('\n'),
    meta: { pattern: args.pattern, path: at.display, total: found.length, shown: shown.length },
  }
}

function noFiles(args: GlobArgs, at: WorkspacePath) {
  return {
    content: `No files match "${args.pattern}" in "${at.display}".`,
    meta: { pattern: args.pattern, path: at.display, total: 0, shown: 0 },
  }
}

/** Compiles a glob, naming the argument in the error when it is refused. */
function globMatcher(pattern: string, what: string) {
  try {
    return compileGlob(pattern)
  } catch (error) {
    throw new Error(`${what}: ${(error as Error).message}`)
  }
}

/** Compiles the model's regular expression: with the `u` flag when it is valid so, else without. */
export function compileRegExp(pattern: string, ignoreCase: boolean): RegExp {
  const flags = ignoreCase ? 'i' : ''
  try {
    return new RegExp(pattern, `${flags}u`)
  } catch {
    try {
      return new RegExp(pattern, flags)
    } catch (error) {
      throw new Error(`invalid regular expression ${JSON.stringify(pattern)}: ${(error as Error).message}`)
    }
  }
}

/**
 * Lines matching a JavaScript regular expression, as `file:line: text`, in files
 * under `path` (or in that one file) whose name matches `glob`; files in path order,
 * binary files skipped, at most `grepMaxMatches` lines of at most `grepMaxLineBytes`.
 *
 * The lines are matched in a worker thread (see scan.ts). The call stops itself at
 * `timeoutMs`: while listing files that is an error, while matching the answer is
 * what was found so far, with a notice.
 */
export async function grepFiles(root: string, args: GrepArgs, limits: SearchLimits, workers: ScanWorkers, signal: AbortSignal) {
  const regex = compileRegExp(args.pattern, args.ignore_case === true)
  const { at, isFile } = await searchRoot(root, args.path, true)
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), limits.timeoutMs)
  let found: ScanResult
  try {
    const files = isFile
      ? [{ display: at.display, real: at.path, size: (await stat(at.path)).size }]
      : await filesToGrep(at, args.glob, limits, signal, deadline.signal)
    const job = {
      source: regex.source,
      flags: regex.flags,
      files,
      maxMatches: limits.grepMaxMatches,
      maxLineBytes: limits.grepMaxLineBytes,
      maxFileBytes: GREP_MAX_FILE_BYTES,
    }
    found = await workers.run(job, signal, deadline.signal)
  } finally {
    clearTimeout(timer)
  }

  const notes: string[] = []
  if (found.timedOut) {
    const where = found.stoppedIn === undefined ? '' : ` while searching "${found.stoppedIn}"`
    notes.push(
      `(grep timed out after ${limits.timeoutMs} ms and was stopped${where}: the results are partial. A pattern with nested quantifiers such as (a+)+ can take exponential time on one line; simplify it, or narrow the path or the glob.)`,
    )
  }
  if (found.cut) notes.push(`(Showing the first ${limits.grepMaxMatches} matches; there are more. Narrow the pattern, the path or the glob to see the others.)`)
  if (found.large > 0) notes.push(`(Skipped ${plural(found.large, 'file')} larger than ${GREP_MAX_FILE_BYTES / 1024 / 1024} MiB.)`)
  if (isFile && found.binary > 0) notes.push(`("${at.display}" is a binary file; grep searches text files only.)`)
  const meta = {
    pattern: args.pattern,
    path: at.display,
    matches: found.lines.length,
    files: found.files,
    cut: found.cut,
    binarySkipped: found.binary,
    largeSkipped: found.large,
    truncatedLines: found.truncatedLines,
    timedOut: found.timedOut,
  }
  if (found.lines.length === 0) {
    const where = args.glob ? `"${at.display}" (glob "${args.glob}")` : `"${at.display}"`
    return { content: [`No matches for /${args.pattern}/${args.ignore_case ? 'i' : ''} in ${where}.`, ...notes].join('\n'), meta }
  }
  return { content: notes.length > 0 ? `${found.lines.join('\n')}\n\n${notes.join('\n')}` : found.lines.join('\n'), meta }
}

/** The files grep searches under the directory `at`: walked, filtered by `glob`, in path order. */
async function filesToGrep(at: WorkspacePath, glob: string | undefined, limits: SearchLimits, signal: AbortSignal, deadline: AbortSignal): Promise<ScanFile[]> {
  let filter: ((file: WalkedFile) => boolean) | undefined
  if (glob !== undefined && glob !== '') {
    const matcher = globMatcher(glob, `invalid glob "${glob}"`)
    // A glob without a slash matches the file name at any depth, like ripgrep's --glob.
    filter = glob.includes('/') ? file => matcher.test(file.rel) : file => matcher.test(posix.basename(file.rel))
  }
  const files: ScanFile[] = []
  try {
    for await (const file of walkFiles(at.path, {
      root: at.root,
      display: at.display,
      ignore: limits.ignore,
      maxDepth: Infinity,
      signal: AbortSignal.any([signal, deadline]),
    })) {
      if (filter === undefined || filter(file)) files.push({ display: file.display, real: file.real, size: file.size })
    }
  } catch (error) {
    if (signal.aborted || !deadline.aborted) throw error
    throw new Error(
      `grep timed out after ${limits.timeoutMs} ms while listing the files in "${at.display}" (nothing was searched); narrow the path or the glob`,
    )
  }
  return files.sort((a, b) => (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
}
