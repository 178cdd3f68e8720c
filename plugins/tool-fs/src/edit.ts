import { isUtf8 } from 'node:buffer'
import { readFile } from 'node:fs/promises'
import type { WorkspacePath } from '@loom/tools/workspace'
import { binaryRefusal, statRegularFile } from './read.ts'
import { replaceFile } from './replace.ts'
import { looksBinary, plural, SNIFF_BYTES } from '@loom/tools/workspace'

export interface EditArgs {
  path: string
  old_string: string
  new_string: string
  replace_all?: boolean
}

/** Line numbers listed in an edit's report; the rest are counted. */
const MAX_LISTED_LINES = 10
const NEWLINE = 0x0a

/** Start offsets of the non-overlapping occurrences of `needle`, left to right. */
function occurrences(haystack: Buffer, needle: Buffer): number[] {
  const at: number[] = []
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + needle.length)) at.push(i)
  return at
}

/** Newlines in `bytes` from `start` up to (not including) `end`. */
function newlines(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let n = 0
  for (let i = bytes.indexOf(NEWLINE, start); i !== -1 && i < end; i = bytes.indexOf(NEWLINE, i + 1)) n++
  return n
}

/**
 * Replaces a literal `old_string` by `new_string`: exactly one occurrence, or every
 * one with `replace_all`. In a file with CRLF line endings, strings written with
 * plain `\n` match (and are written) with `\r\n`.
 *
 * The file is held once, as bytes: it is searched as UTF-8 bytes (a valid UTF-8
 * needle matches only at character boundaries of valid UTF-8 text, so this finds
 * what a string search would), and the result is written as slices of those bytes
 * through `replaceFile` (a temporary file and a rename, which also breaks hard links).
 * No decoded copy, no joined copy.
 */
export async function editText(file: WorkspacePath, args: EditArgs, signal: AbortSignal) {
  if (args.old_string === '') throw new Error('old_string is empty; to create a file or replace all of it, use write')
  if (args.old_string === args.new_string) throw new Error('old_string and new_string are the same; there is nothing to change')
  const info = await statRegularFile(file)
  const bytes = await readFile(file.path, { signal })
  if (looksBinary(bytes.subarray(0, SNIFF_BYTES))) throw binaryRefusal(file, info.size)
  if (!isUtf8(bytes)) {
    throw new Error(`"${file.display}" is not valid UTF-8 text; edit only changes UTF-8 files (rewrite it with write if you must)`)
  }

  // A lone surrogate has no UTF-8 form (it would be encoded as U+FFFD), so it matches nothing.
  let oldBytes = Buffer.from(args.old_string, 'utf8')
  let newBytes = Buffer.from(args.new_string, 'utf8')
  let at = args.old_string.isWellFormed() ? occurrences(bytes, oldBytes) : []
  if (at.length === 0 && args.old_string.includes('\n') && !args.old_string.includes('\r') && bytes.includes('\r\n')) {
    const crlf = (s: string) => Buffer.from(s.replace(/\r?\n/g, '\r\n'), 'utf8')
    const retry = occurrences(bytes, crlf(args.old_string))
    if (retry.length > 0) {
      oldBytes = crlf(args.old_string)
      newBytes = crlf(args.new_string)
      at = retry
    }
  }
  if (at.length === 0) {
    throw new Error(
      `old_string was not found in "${file.display}" (0 matches); it must match the file's text exactly, including whitespace and indentation, without read's line-number prefixes; read the file again to copy the current text`,
    )
  }
  if (at.length > 1 && args.replace_all !== true) {
    throw new Error(
      `old_string matches ${at.length} times in "${file.display}"; it must match exactly once: include more surrounding lines to pick one place, or set replace_all to true to replace all ${at.length}`,
    )
  }

  // The new content: the unchanged slices of the file (views, not copies) with new_string between them.
  const parts: Uint8Array[] = []
  let from = 0
  for (const index of at) {
    parts.push(bytes.subarray(from, index), newBytes)
    from = index + oldBytes.length
  }
  parts.push(bytes.subarray(from))
  try {
    await replaceFile(file.path, parts, signal)
  } catch (error) {
    throw new Error(`cannot write "${file.display}": ${(error as Error).message}`)
  }

  // Line numbers (1-based, in the new text) where each replacement starts: the old
  // text's newlines before it, corrected by what each earlier replacement added.
  const added = newlines(newBytes) - newlines(oldBytes)
  const lines: number[] = []
  let before = 0
  from = 0
  for (const [n, index] of at.entries()) {
    before += newlines(bytes, from, index)
    from = index
    lines.push(1 + before + n * added)
  }
  const listed = lines.slice(0, MAX_LISTED_LINES).join(', ') + (lines.length > MAX_LISTED_LINES ? `, … (${lines.length - MAX_LISTED_LINES} more)` : '')
  return {
    content: `Edited "${file.display}": replaced ${plural(at.length, 'occurrence')} (at ${lines.length === 1 ? 'line' : 'lines'} ${listed}).`,
    meta: { path: file.display, replacements: at.length, lines },
  }
}
