// The change an edit call makes, as a unified diff of its old_string and
// new_string: shown under the call's line, so a person approving it (or
// watching) sees what changes before it runs.
import type * as Diff from 'diff'
import { createRequire } from 'node:module'
import type { Style } from './markdown.ts'

// diff loads with the first edit shown, not with every command (~12 ms a start).
const require = createRequire(import.meta.url)
let diff: typeof Diff | undefined

/** Longest diff shown under a call; the rest is counted. */
const MAX_LINES = 40

/** The diff lines of an `edit` call's arguments, styled and indented; undefined for any other call or malformed arguments. */
export function editDiff(tool: string, args: unknown, style: Style): string[] | undefined {
  if (tool !== 'edit' || typeof args !== 'object' || args === null) return undefined
  const { old_string: before, new_string: after } = args as Record<string, unknown>
  if (typeof before !== 'string' || typeof after !== 'string') return undefined
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
