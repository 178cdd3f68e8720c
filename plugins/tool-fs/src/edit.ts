import { readFile, writeFile } from 'node:fs/promises'
import type { WorkspacePath } from './paths.ts'
import { binaryRefusal, statRegularFile } from './read.ts'
import { looksBinary, plural, SNIFF_BYTES } from './text.ts'

export interface EditArgs {
  path: string
  old_string: string
  new_string: string
  replace_all?: boolean
}

/** Line numbers listed in an edit's report; the rest are counted. */
const MAX_LISTED_LINES = 10

/** Start offsets of the non-overlapping occurrences of `needle`, left to right. */
function occurrences(haystack: string, needle: string): number[] {
  const at: number[] = []
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + needle.length)) at.push(i)
  return at
}

/**
 * Replaces a literal `old_string` by `new_string`: exactly one occurrence, or every
 * one with `replace_all`. In a file with CRLF line endings, strings written with
 * plain `\n` match (and are written) with `\r\n`.
 */
export async function editText(file: WorkspacePath, args: EditArgs, signal: AbortSignal) {
  if (args.old_string === '') throw new Error('old_string is empty; to create a file or replace all of it, use write')
  if (args.old_string === args.new_string) throw new Error('old_string and new_string are the same; there is nothing to change')
  const info = await statRegularFile(file)
  const bytes = await readFile(file.path, { signal })
  if (looksBinary(bytes.subarray(0, SNIFF_BYTES))) throw binaryRefusal(file, info.size)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    throw new Error(`"${file.display}" is not valid UTF-8 text; edit only changes UTF-8 files (rewrite it with write if you must)`)
  }

  let oldString = args.old_string
  let newString = args.new_string
  let at = occurrences(text, oldString)
  if (at.length === 0 && text.includes('\r\n') && oldString.includes('\n') && !oldString.includes('\r')) {
    const crlf = (s: string) => s.replace(/\r?\n/g, '\r\n')
    const retry = occurrences(text, crlf(oldString))
    if (retry.length > 0) {
      oldString = crlf(oldString)
      newString = crlf(newString)
      at = retry
    }
  }
  if (at.length === 0) {
    throw new Error(`old_string was not found in "${file.display}" (0 matches); it must match the file's text exactly, including whitespace and indentation, without read's line-number prefixes; read the file again to copy the current text`)
  }
  if (at.length > 1 && args.replace_all !== true) {
    throw new Error(`old_string matches ${at.length} times in "${file.display}"; it must match exactly once: include more surrounding lines to pick one place, or set replace_all to true to replace all ${at.length}`)
  }

  const updated = at.length === 1
    ? text.slice(0, at[0]) + newString + text.slice(at[0] + oldString.length)
    : text.split(oldString).join(newString)
  await writeFile(file.path, updated, { encoding: 'utf8', signal })

  // Line numbers (1-based, in the new text) where each replacement starts.
  const lines: number[] = []
  let line = 1
  let scanned = 0
  let shift = 0
  for (const index of at) {
    const start = index + shift
    for (let i = updated.indexOf('\n', scanned); i !== -1 && i < start; i = updated.indexOf('\n', i + 1)) {
      line++
      scanned = i + 1
    }
    lines.push(line)
    shift += newString.length - oldString.length
  }
  const listed = lines.slice(0, MAX_LISTED_LINES).join(', ') + (lines.length > MAX_LISTED_LINES ? `, … (${lines.length - MAX_LISTED_LINES} more)` : '')
  return {
    content: `Edited "${file.display}": replaced ${plural(at.length, 'occurrence')} (at ${lines.length === 1 ? 'line' : 'lines'} ${listed}).`,
    meta: { path: file.display, replacements: at.length, lines },
  }
}
