import { statSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, posix } from 'node:path'
import type { Shorten } from '@loom/tools/artifacts'
import { allowedBelow, ReadDeniedError, readDenial, resolveInWorkspace, rulesFor, type ReadRules, type WorkspacePath } from '@loom/tools/workspace'
import { compileGlob, globDepth, splitGlob } from './pattern.ts'
import type { GlobJob, GrepJob, ScanResult, WalkJob } from './scan.ts'
import { GREP_BLOCK_BYTES } from './text.ts'

export interface SearchLimits {
  globMaxResults: number
  grepMaxMatches: number
  grepMaxLineBytes: number
  ignore: readonly string[]
  /** Milliseconds a search may take (grep stops at it with partial results). */
  timeoutMs: number
}

/** The arguments that widen a walk. */
export interface WalkArgs {
  /** Also search hidden files and directories (names starting with a dot). */
  hidden?: boolean
  /** Also search what `.gitignore`, `.ignore`, `.git/info/exclude` and the global git excludes file ignore. */
  no_ignore?: boolean
}

export interface GlobArgs extends WalkArgs {
  pattern: string
  path?: string
}

export interface GrepArgs extends WalkArgs {
  pattern: string
  path?: string
  glob?: string
  ignore_case?: boolean
}

/** Where grep keeps the matches past `grepMaxMatches`: an artifact of at most `maxBytes`, shown as head and tail. */
export interface GrepOutput {
  maxBytes: number
  shorten: Shorten
}

/**
 * Runs a search: through ripgrep when it can answer exactly as the worker would, else
 * in the search worker (see rg-engine.ts and scan.ts). When `deadline` fires the search
 * stops and answers with what it found.
 */
export interface Searcher {
  run(job: GrepJob | GlobJob, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult>
}

/** Refuses a search that starts in a path the read rules deny (a folder with an allowed path below it is walked, skipping the rest). */
function checkReadable(at: WorkspacePath, reads: ReadRules): void {
  const denied = readDenial(reads, at.path)
  if (denied && !allowedBelow(reads, at.path)) throw new ReadDeniedError(at.display, denied)
}

/** Resolves the `path` argument: a directory (or, when `file` is allowed, a file) inside the workspace, that tools may read. */
async function searchRoot(root: string, path: string | undefined, allowFile: boolean, reads: ReadRules): Promise<{ at: WorkspacePath; isFile: boolean }> {
  const at = await resolveInWorkspace(root, path === undefined || path === '' ? '.' : path)
  checkReadable(at, reads)
  let info
  try {
    info = statSync(at.path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new Error(`path not found: "${at.display}" (paths are relative to the workspace root)`)
    throw new Error(`cannot search "${at.display}": ${(error as Error).message}`)
  }
  if (info.isDirectory()) return { at, isFile: false }
  if (allowFile && info.isFile()) return { at, isFile: true }
  throw new Error(`"${at.display}" is not a directory; glob's path is the directory to search in`)
}

// Paths are looked up synchronously (see resolveInWorkspace): cheaper than a round trip through the thread pool.
function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** The walk from `start` as the tool's arguments ask for it. */
function walkJob(start: WorkspacePath, limits: SearchLimits, args: WalkArgs, maxDepth: number, reads: ReadRules): WalkJob {
  const env = process.env
  return {
    start: start.path,
    display: start.display,
    root: start.root,
    names: limits.ignore,
    hidden: args.hidden === true,
    ignoreFiles: args.no_ignore === true ? undefined : { home: env.HOME || homedir(), xdgConfigHome: env.XDG_CONFIG_HOME || undefined },
    maxDepth,
    reads: rulesFor(reads, start.path),
    targetReads: rulesFor(reads, start.root),
  }
}

/** Entries the read rules kept out of a search, said whatever it found: no argument brings them back. */
function deniedNote({ skipped }: ScanResult): string[] {
  const n = skipped.denied
  if (n === 0) return []
  return [
    `(Skipped ${n} ${n === 1 ? 'entry' : 'entries'} that tools may not read, such as credential stores; the user can let one through with allowRead on the @loom/tools row of loom.yml.)`,
  ]
}

/** For an empty answer: what the walk left out, and the arguments that include it. */
function skippedNote({ skipped }: ScanResult): string | undefined {
  const entries = (n: number, what: string) => `${n} ${what} ${n === 1 ? 'entry' : 'entries'}`
  const parts: string[] = []
  if (skipped.ignored > 0) parts.push(`${entries(skipped.ignored, 'ignored')} (no_ignore: true includes them)`)
  if (skipped.hidden > 0) parts.push(`${entries(skipped.hidden, 'hidden')} (hidden: true includes them)`)
  return parts.length === 0 ? undefined : `(Skipped ${parts.join(' and ')}.)`
}

/**
 * Files whose path (relative to `path`, default the workspace root) matches the glob,
 * newest modification first (ties by path), at most `globMaxResults`; walked by
 * ripgrep or in the search worker (where a pattern that could backtrack for long is
 * matched, so that it is stopped with the call).
 */
export async function globFiles(root: string, args: GlobArgs, limits: SearchLimits, searcher: Searcher, signal: AbortSignal, reads: ReadRules) {
  const { at } = await searchRoot(root, args.path, false, reads)
  // Literal leading directories of the pattern narrow the walk (and are confined like any path).
  const { base, rest } = splitGlob(args.pattern)
  let start = at
  if (base !== '') {
    start = await resolveInWorkspace(root, isAbsolute(base) ? base : posix.join(at.display, base))
    checkReadable(start, reads)
    if (!isDirectory(start.path)) return noFiles(args, at)
  }
  globMatcher(rest, `invalid glob pattern "${args.pattern}"`)
  const found = await searcher.run(
    { kind: 'glob', walk: walkJob(start, limits, args, globDepth(rest), reads), pattern: rest, max: limits.globMaxResults },
    signal,
  )
  const { shown, total } = found.glob!
  const denied = deniedNote(found)
  if (total === 0) return noFiles(args, at, [...denied, ...[skippedNote(found)].filter(note => note !== undefined)], found)
  const lines = [...shown]
  if (total > shown.length) {
    lines.push('', `(Showing ${shown.length} of ${total} files, newest first. Narrow the pattern or the path to see the others.)`)
  }
  if (denied.length > 0) lines.push('', ...denied)
  return {
    content: lines.join('\n'),
    meta: {
      pattern: args.pattern,
      path: at.display,
      total,
      shown: shown.length,
      engine: found.engine,
      ...(found.skipped.denied > 0 && { deniedSkipped: found.skipped.denied }),
    },
  }
}

function noFiles(args: GlobArgs, at: WorkspacePath, notes: string[] = [], found?: ScanResult) {
  const denied = found?.skipped.denied ?? 0
  return {
    content: [`No files match "${args.pattern}" in "${at.display}".`, ...notes].join('\n'),
    meta: { pattern: args.pattern, path: at.display, total: 0, shown: 0, ...(found && { engine: found.engine }), ...(denied > 0 && { deniedSkipped: denied }) },
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
 * binary, hidden and ignored files skipped, at most `grepMaxMatches` lines of at most
 * `grepMaxLineBytes`.
 *
 * ripgrep searches when it can answer exactly as the worker would (see rg-engine.ts);
 * else the walk and the matching run in a worker thread (see scan.ts), streaming: a file
 * is searched as soon as the walk meets it. The call stops itself at `timeoutMs` and
 * answers with what was found so far, with a notice.
 */
export async function grepFiles(
  root: string,
  args: GrepArgs,
  limits: SearchLimits,
  searcher: Searcher,
  signal: AbortSignal,
  reads: ReadRules,
  output?: GrepOutput,
) {
  const regex = compileRegExp(args.pattern, args.ignore_case === true)
  const { at, isFile } = await searchRoot(root, args.path, true, reads)
  const glob = args.glob === undefined || args.glob === '' ? undefined : args.glob
  if (glob !== undefined) globMatcher(glob, `invalid glob "${glob}"`)
  const job: GrepJob = {
    kind: 'grep',
    // A glob without a slash matches the file name at any depth, like ripgrep's --glob.
    files: isFile
      ? { file: { real: at.path, display: at.display } }
      : { walk: walkJob(at, limits, args, Infinity, reads), glob: glob === undefined ? undefined : { pattern: glob, basename: !glob.includes('/') } },
    source: regex.source,
    flags: regex.flags,
    // With an artifact to keep them, every match up to its size; else the first grepMaxMatches.
    maxMatches: output === undefined ? limits.grepMaxMatches : Number.MAX_SAFE_INTEGER,
    maxBytes: output?.maxBytes ?? Number.POSITIVE_INFINITY,
    maxLineBytes: limits.grepMaxLineBytes,
    blockBytes: GREP_BLOCK_BYTES,
  }
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), limits.timeoutMs)
  let found: ScanResult
  try {
    found = await searcher.run(job, signal, deadline.signal)
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
  if (found.cut && output === undefined) {
    notes.push(`(Showing the first ${limits.grepMaxMatches} matches; there are more. Narrow the pattern, the path or the glob to see the others.)`)
  } else if (found.cut) {
    notes.push(
      `(The search stopped after ${found.lines.length} matches, the most one result keeps (${output!.maxBytes} bytes); there are more. Narrow the pattern, the path or the glob to see the others.)`,
    )
  }
  const { binary, ignored, hidden, denied } = found.skipped
  notes.push(...deniedNote(found))
  if (isFile && binary > 0) notes.push(`("${at.display}" is a binary file; grep searches text files only.)`)
  const meta = {
    pattern: args.pattern,
    path: at.display,
    matches: found.lines.length,
    files: found.files,
    cut: found.cut,
    binarySkipped: binary,
    ignoredSkipped: ignored,
    hiddenSkipped: hidden,
    deniedSkipped: denied,
    truncatedLines: found.truncatedLines,
    timedOut: found.timedOut,
    engine: found.engine,
  }
  if (found.lines.length === 0) {
    const where = glob ? `"${at.display}" (glob "${glob}")` : `"${at.display}"`
    const skipped = found.timedOut ? undefined : skippedNote(found)
    return {
      content: [`No matches for /${args.pattern}/${args.ignore_case ? 'i' : ''} in ${where}.`, ...notes, ...(skipped ? [skipped] : [])].join('\n'),
      meta,
    }
  }
  // Past grepMaxMatches lines: the first and the last matches, all of them kept as an artifact.
  const listed = found.lines.join('\n')
  const shown = output === undefined ? { text: listed } : await output.shorten(listed, { maxLines: limits.grepMaxMatches })
  const text = notes.length > 0 ? `${shown.text}\n\n${notes.join('\n')}` : shown.text
  return { content: text, meta: { ...meta, ...(shown.reference !== undefined && { artifact: shown.reference }) } }
}
