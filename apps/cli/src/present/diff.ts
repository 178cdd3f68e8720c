// What a file change would do, shown under a call so a person approving it (or
// watching) sees it before it runs: an `edit` as a unified diff of its
// old_string and new_string; a `write` as the diff of the file's current
// content against the new one, or, for a new file, the head of its content and
// its size. Both draw their lines the same way (`textDiff`).
import type * as Diff from 'diff'
import { createRequire } from 'node:module'
import type { Style } from './markdown.ts'

// diff loads with the first change shown, not with every command (~12 ms a start).
const require = createRequire(import.meta.url)
let diff: typeof Diff | undefined

/** Longest diff shown under a call; the rest is counted. */
const MAX_LINES = 40
/** Lines of a new file's content shown. */
const HEAD_LINES = 12

/** The diff lines of an `edit` call's arguments, styled and indented; undefined for any other call or malformed arguments. */
export function editDiff(tool: string, args: unknown, style: Style): string[] | undefined {
  if (tool !== 'edit' || typeof args !== 'object' || args === null) return undefined
  const { old_string: before, new_string: after } = args as Record<string, unknown>
  if (typeof before !== 'string' || typeof after !== 'string') return undefined
  return textDiff(before, after, style)
}

/** What a file holds now, for a `write` preview: its text, or why it is not shown. */
export type CurrentContent = { kind: 'none' } | { kind: 'text'; text: string } | { kind: 'hidden'; why: string; bytes?: number }

/**
 * The lines of a `write` call's preview: against `current` (the file as it is)
 * the diff to the new content, or for a new file the head of its content; each
 * with the sizes. Undefined for any other call or malformed arguments.
 */
export function writePreview(tool: string, args: unknown, current: CurrentContent, style: Style): string[] | undefined {
  if (tool !== 'write' || typeof args !== 'object' || args === null) return undefined
  const { content } = args as Record<string, unknown>
  if (typeof content !== 'string') return undefined
  const size = describeText(content)
  if (current.kind === 'text') {
    if (current.text === content) return [style.dim(`    the same content as the file has now (${size})`)]
    return [style.dim(`    replaces ${describeText(current.text)} with ${size}:`), ...textDiff(current.text, content, style)]
  }
  const was =
    current.kind === 'hidden'
      ? `replaces a file${current.bytes === undefined ? '' : ` of ${describeBytes(current.bytes)}`} (${current.why}) with`
      : 'a new file,'
  const lines = content.split('\n')
  if (content.endsWith('\n')) lines.pop()
  const head = lines.slice(0, HEAD_LINES).map(line => style.green(`    + ${line}`))
  const more = lines.length > HEAD_LINES ? [style.dim(`    … ${lines.length - HEAD_LINES} more lines`)] : []
  return [style.dim(`    ${was} ${size}${lines.length ? ':' : ''}`), ...head, ...more]
}

/** The unified diff of two texts (two lines of context), styled and indented, cut at `MAX_LINES`. */
export function textDiff(before: string, after: string, style: Style): string[] {
  // Both sides end with a newline, so a last line without one is not marked as changed for that alone.
  const close = (text: string) => (text.endsWith('\n') ? text : `${text}\n`)
  const { hunks } = (diff ??= require('diff') as typeof Diff).structuredPatch('', '', close(before), close(after), undefined, undefined, { context: 2 })
  const lines: string[] = []
  for (const [index, hunk] of hunks.entries()) {
    if (index > 0) lines.push(style.dim('    ⋯'))
    for (const line of hunk.lines) {
      const text = line.slice(1)
      if (line[0] === '+') lines.push(style.green(`    + ${text}`))
      else if (line[0] === '-') lines.push(style.red(`    - ${text}`))
      else if (line[0] === ' ') lines.push(style.dim(`      ${text}`))
    }
  }
  if (lines.length <= MAX_LINES) return lines
  return [...lines.slice(0, MAX_LINES), style.dim(`    … ${lines.length - MAX_LINES} more lines`)]
}

/** `3 lines, 42 bytes` */
function describeText(text: string): string {
  const lines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
  return `${lines} ${lines === 1 ? 'line' : 'lines'}, ${describeBytes(Buffer.byteLength(text))}`
}

/** `42 bytes`, `1.5 KB`, `2.1 MB` */
export function describeBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} ${bytes === 1 ? 'byte' : 'bytes'}`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`
}
