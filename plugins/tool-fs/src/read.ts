import { open, stat, type FileHandle } from 'node:fs/promises'
import type { WorkspacePath } from '@loom/tools/workspace'
import { cutChars, looksBinary, plural, SNIFF_BYTES } from '@loom/tools/workspace'

export interface ReadLimits {
  /** Lines shown per call (default and maximum of `limit`). */
  readLimit: number
  /** Characters kept of one line. */
  maxLineLength: number
  /** Bytes of output at most (numbered lines included, footer excluded). */
  maxBytes: number
}

export interface ReadArgs {
  path: string
  offset?: number
  limit?: number
}

export interface ReadMeta {
  [key: string]: string | number | boolean | null
  path: string
  startLine: number
  endLine: number
  /** Lines in the file; null when the file is too large to count past what was shown. */
  totalLines: number | null
  /** Why the output stopped: end of file, the line limit, or the byte cap. */
  stop: 'eof' | 'limit' | 'bytes'
  truncatedLines: number
}

/** Files larger than this are not scanned to the end just to count their lines. */
export const COUNT_LINES_MAX_BYTES = 10 * 1024 * 1024
const CHUNK_BYTES = 64 * 1024

/** The error text of a path that names nothing. */
export function notFound(file: WorkspacePath): Error {
  return new Error(`file not found: "${file.display}" (paths are relative to the workspace root)`)
}

/** Stats a file the tools may read as text, refusing missing files, directories and special files by name. */
export async function statRegularFile(file: WorkspacePath) {
  let info
  try {
    info = await stat(file.path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw notFound(file)
    throw new Error(`cannot read "${file.display}": ${(error as Error).message}`)
  }
  if (info.isDirectory()) {
    throw new Error(
      `"${file.display}" is a directory, not a file; use glob to list its files (e.g. pattern "${file.display === '.' ? '' : `${file.display}/`}*")`,
    )
  }
  if (!info.isFile()) throw new Error(`"${file.display}" is not a regular file (a device, socket or pipe); only regular files can be read`)
  return info
}

export function binaryRefusal(file: WorkspacePath, size: number): Error {
  return new Error(`"${file.display}" is a binary file (${plural(size, 'byte')}); only text files can be read or edited`)
}

interface Line {
  /** The line without its newline (and without a final `\r`), at most `cap + 1` characters. */
  text: string
  /** The line had more than `cap + 1` characters. */
  overlong: boolean
}

/**
 * The lines of an open text file, read in chunks (a line is held only up to
 * `cap + 1` characters, so a file without newlines costs no memory). Throws the
 * binary refusal when the first chunk looks binary.
 */
async function* linesOf(handle: FileHandle, file: WorkspacePath, size: number, cap: number, signal: AbortSignal): AsyncGenerator<Line> {
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES)
  const decoder = new TextDecoder('utf-8')
  let position = 0
  let current = ''
  let overlong = false
  const add = (piece: string) => {
    if (overlong) return
    current += piece
    if (current.length > cap + 1) {
      current = current.slice(0, cap + 1)
      overlong = true
    }
  }
  const take = (): Line => {
    const line = { text: !overlong && current.endsWith('\r') ? current.slice(0, -1) : current, overlong }
    current = ''
    overlong = false
    return line
  }
  for (;;) {
    signal.throwIfAborted()
    const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, position)
    if (position === 0 && looksBinary(buffer.subarray(0, Math.min(bytesRead, SNIFF_BYTES)))) throw binaryRefusal(file, size)
    const text = bytesRead === 0 ? decoder.decode() : decoder.decode(buffer.subarray(0, bytesRead), { stream: true })
    position += bytesRead
    let start = 0
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      add(text.slice(start, nl))
      start = nl + 1
      yield take()
    }
    add(text.slice(start))
    if (bytesRead === 0) break
  }
  if (current !== '' || overlong) yield take()
}

/**
 * Reads numbered lines (`cat -n` style) of a text file from `offset` (1-based):
 * at most `limit` lines, each cut to `maxLineLength` characters, at most `maxBytes`
 * of output, followed by a footer saying where the output stopped and how to go on.
 */
export async function readLines(file: WorkspacePath, args: ReadArgs, limits: ReadLimits, signal: AbortSignal) {
  const info = await statRegularFile(file)
  const handle = await open(file.path, 'r')
  try {
    return await numberLines(file.display, linesOf(handle, file, info.size, limits.maxLineLength, signal), info.size, args, limits)
  } finally {
    await handle.close()
  }
}

/** The numbered lines of text held in memory (an artifact), paged like a file's: `display` names it in the footer and errors. */
export function readTextLines(display: string, text: string, args: ReadArgs, limits: ReadLimits) {
  return numberLines(display, textLines(text, limits.maxLineLength), Buffer.byteLength(text), args, limits)
}

async function* textLines(text: string, cap: number): AsyncGenerator<Line> {
  if (text === '') return
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  for (const line of lines) {
    const trimmed = line.endsWith('\r') ? line.slice(0, -1) : line
    yield trimmed.length > cap + 1 ? { text: trimmed.slice(0, cap + 1), overlong: true } : { text: trimmed, overlong: false }
  }
}

async function numberLines(display: string, lines: AsyncIterable<Line>, size: number, args: ReadArgs, limits: ReadLimits) {
  const offset = args.offset ?? 1
  const limit = Math.min(args.limit ?? limits.readLimit, limits.readLimit)
  const out: string[] = []
  let outBytes = 0
  let lineNo = 0
  let stop: ReadMeta['stop'] | undefined // set once the output is complete
  let counted = true // lineNo ends as the file's line count
  let truncatedLines = 0
  for await (const line of lines) {
    lineNo++
    if (lineNo < offset) continue
    if (stop !== undefined) {
      // Only counting now; a large file is not scanned to its end for that.
      if (size > COUNT_LINES_MAX_BYTES) {
        counted = false
        break
      }
      continue
    }
    let text = line.text
    if (line.overlong || text.length > limits.maxLineLength) {
      text = `${cutChars(text, limits.maxLineLength)}... (line truncated to ${limits.maxLineLength} chars)`
      truncatedLines++
    }
    const formatted = `${String(lineNo).padStart(6)}\t${text}\n`
    const bytes = Buffer.byteLength(formatted)
    if (out.length > 0 && outBytes + bytes > limits.maxBytes) {
      stop = 'bytes'
      continue
    }
    out.push(formatted)
    outBytes += bytes
    if (out.length >= limit) stop = 'limit'
  }

  const total = counted ? lineNo : null
  if (out.length === 0) {
    if (lineNo === 0) {
      return { content: `(File is empty: "${display}" has 0 lines.)`, meta: meta(display, 0, 0, 0, 'eof', 0) }
    }
    throw new Error(`offset ${offset} is past the end of "${display}" (${plural(lineNo, 'line')}); use an offset from 1 to ${lineNo}`)
  }
  const first = offset
  const last = offset + out.length - 1
  if (stop === undefined || (stop === 'limit' && total === last)) stop = 'eof'
  const of = total === null ? `of more than ${last}` : `of ${total}`
  const footer =
    stop === 'eof'
      ? `(End of file: showed lines ${first}-${last} of ${last}.)`
      : stop === 'limit'
        ? `(Showing lines ${first}-${last} ${of}. To read more, call read with offset=${last + 1}.)`
        : `(Output capped at ${limits.maxBytes} bytes: showing lines ${first}-${last} ${of}. To read more, call read with offset=${last + 1}.)`
  return {
    content: `${out.join('')}\n${footer}`,
    meta: meta(display, first, last, total, stop, truncatedLines),
  }
}

function meta(path: string, startLine: number, endLine: number, totalLines: number | null, stop: ReadMeta['stop'], truncatedLines: number): ReadMeta {
  return { path, startLine, endLine, totalLines, stop, truncatedLines }
}
