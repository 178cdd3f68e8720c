import { open, stat } from 'node:fs/promises'
import { isAbsolute, posix } from 'node:path'
import { resolveInWorkspace, type WorkspacePath } from '@loom/tool-fs/paths'
import { cutBytes, looksBinary, plural, SNIFF_BYTES } from '@loom/tool-fs/text'
import { globDepth, globToRegExp, splitGlob } from './pattern.ts'
import { walkFiles, type WalkedFile } from './walk.ts'

export interface SearchLimits {
  globMaxResults: number
  grepMaxMatches: number
  grepMaxLineBytes: number
  ignore: readonly string[]
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
  let regex: RegExp
  try {
    regex = globToRegExp(rest)
  } catch (error) {
    throw new Error(`invalid glob pattern "${args.pattern}": ${(error as Error).message}`)
  }
  const found: WalkedFile[] = []
  for await (const file of walkFiles(start.path, { root: at.root, display: start.display, ignore: limits.ignore, maxDepth: globDepth(rest), signal })) {
    if (regex.test(file.rel)) found.push(file)
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
 */
export async function grepFiles(root: string, args: GrepArgs, limits: SearchLimits, signal: AbortSignal) {
  const regex = compileRegExp(args.pattern, args.ignore_case === true)
  const { at, isFile } = await searchRoot(root, args.path, true)
  let filter: ((file: WalkedFile) => boolean) | undefined
  if (args.glob !== undefined && args.glob !== '') {
    let glob: RegExp
    try {
      glob = globToRegExp(args.glob)
    } catch (error) {
      throw new Error(`invalid glob "${args.glob}": ${(error as Error).message}`)
    }
    // A glob without a slash matches the file name at any depth, like ripgrep's --glob.
    filter = args.glob.includes('/') ? file => glob.test(file.rel) : file => glob.test(posix.basename(file.rel))
  }

  const files: WalkedFile[] = []
  if (isFile) {
    const info = await stat(at.path)
    files.push({ rel: posix.basename(at.display), display: at.display, real: at.path, mtimeMs: info.mtimeMs, size: info.size })
  } else {
    for await (const file of walkFiles(at.path, { root: at.root, display: at.display, ignore: limits.ignore, maxDepth: Infinity, signal })) {
      if (filter === undefined || filter(file)) files.push(file)
    }
    files.sort((a, b) => (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
  }

  const out: string[] = []
  let cut = false
  let binary = 0
  let large = 0
  let truncatedLines = 0
  let matchedFiles = 0
  search: for (const file of files) {
    signal.throwIfAborted()
    if (file.size > GREP_MAX_FILE_BYTES) {
      large++
      continue
    }
    const bytes = await readAll(file.real, signal)
    if (bytes === undefined) continue
    if (looksBinary(bytes.subarray(0, SNIFF_BYTES))) {
      binary++
      continue
    }
    const lines = bytes.toString('utf8').split('\n')
    if (lines[lines.length - 1] === '') lines.pop()
    let hit = false
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i]
      if (line.endsWith('\r')) line = line.slice(0, -1)
      if (!regex.test(line)) continue
      if (out.length >= limits.grepMaxMatches) {
        cut = true
        break search
      }
      if (!hit) {
        hit = true
        matchedFiles++
      }
      if (Buffer.byteLength(line) > limits.grepMaxLineBytes) {
        line = `${cutBytes(line, limits.grepMaxLineBytes)}... (line truncated to ${limits.grepMaxLineBytes} bytes)`
        truncatedLines++
      }
      out.push(`${file.display}:${i + 1}: ${line}`)
    }
  }

  const notes: string[] = []
  if (cut) notes.push(`(Showing the first ${limits.grepMaxMatches} matches; there are more. Narrow the pattern, the path or the glob to see the others.)`)
  if (large > 0) notes.push(`(Skipped ${plural(large, 'file')} larger than ${GREP_MAX_FILE_BYTES / 1024 / 1024} MiB.)`)
  if (isFile && binary > 0) notes.push(`("${at.display}" is a binary file; grep searches text files only.)`)
  const meta = { pattern: args.pattern, path: at.display, matches: out.length, files: matchedFiles, cut, binarySkipped: binary, largeSkipped: large, truncatedLines }
  if (out.length === 0) {
    const where = args.glob ? `"${at.display}" (glob "${args.glob}")` : `"${at.display}"`
    return { content: [`No matches for /${args.pattern}/${args.ignore_case ? 'i' : ''} in ${where}.`, ...notes].join('\n'), meta }
  }
  return { content: notes.length > 0 ? `${out.join('\n')}\n\n${notes.join('\n')}` : out.join('\n'), meta }
}

/** The bytes of a file, or undefined when it cannot be read (it is skipped). */
async function readAll(path: string, signal: AbortSignal): Promise<Buffer | undefined> {
  let handle
  try {
    handle = await open(path, 'r')
  } catch {
    return undefined
  }
  try {
    return await handle.readFile({ signal })
  } catch (error) {
    if (signal.aborted) throw error
    return undefined
  } finally {
    await handle.close()
  }
}
