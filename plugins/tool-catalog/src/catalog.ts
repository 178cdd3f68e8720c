// Pure helpers: which tools are on demand, the catalogue text, close matches.
import type { ToolSchema } from '@loom/system-prompt'

/** A tool name pattern: the characters of a tool name, `*` (any run) and `?` (one character). */
export const PATTERN = /^[A-Za-z0-9_*?-]{1,64}$/

/** Compiles name globs into one predicate; an empty list matches nothing. */
export function matcher(patterns: readonly string[]): (name: string) => boolean {
  if (patterns.length === 0) return () => false
  // Names hold no regex metacharacters except `-`, which is literal outside a class.
  const source = patterns.map(pattern => pattern.replaceAll('*', '.*').replaceAll('?', '.')).join('|')
  const regex = new RegExp(`^(?:${source})$`)
  return name => regex.test(name)
}

/**
 * The first sentence of a description, on one line: up to the first `.`, `!` or
 * `?` followed by white space (or the end), at most `max` characters (cut with `…`).
 */
export function firstSentence(description: string, max: number): string {
  const text = description.replace(/\s+/g, ' ').trim()
  const end = /[.!?](?=\s|$)/.exec(text)
  const sentence = end ? text.slice(0, end.index + 1) : text
  return sentence.length > max ? `${sentence.slice(0, max - 1).trimEnd()}…` : sentence
}

export const SCHEMA_TOOL = 'tool_schema'
export const CALL_TOOL = 'call_tool'

/** The system section: how to use the catalogue, then one line per tool (`tools` already sorted by name). */
export function catalogText(tools: readonly Pick<ToolSchema, 'name' | 'description'>[], maxChars: number): string {
  if (tools.length === 0) return ''
  const lines = tools.map(tool => `- ${tool.name} — ${firstSentence(tool.description, maxChars)}`)
  return [
    `Tools on demand. Besides the tools you were given, you can use the tools listed below. Their parameter schemas are not loaded: before the first use of one, call \`${SCHEMA_TOOL}\` with its name (several names in one call are fine) to read its full schema, then run it with \`${CALL_TOOL}\`, passing \`name\` and the \`arguments\` the schema describes. A schema you loaded stays valid for the whole conversation: do not load it again.`,
    ...lines,
  ].join('\n')
}

/** Levenshtein distance, for suggestions. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const next = [i]
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    row = next
  }
  return row[b.length]
}

/** Up to `limit` known names close to `name`: case-insensitive substring either way, or a small edit distance; nearest first. */
export function closeMatches(name: string, known: readonly string[], limit = 5): string[] {
  const wanted = name.toLowerCase()
  const scored: [string, number][] = []
  for (const candidate of known) {
    const lower = candidate.toLowerCase()
    const d = distance(wanted, lower)
    const contains = wanted.length >= 3 && (lower.includes(wanted) || wanted.includes(lower))
    if (contains || d <= Math.max(2, Math.floor(wanted.length / 3))) scored.push([candidate, contains ? Math.min(d, 1) : d])
  }
  return scored
    .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .slice(0, limit)
    .map(([candidate]) => candidate)
}

/** `unknown tool "x" (did you mean "y", "z"?)`, or `unknown tool "x"` when nothing is close. */
export function unknownTool(name: string, known: readonly string[]): string {
  const close = closeMatches(name, known)
  return `unknown tool ${JSON.stringify(name)}${close.length ? ` (did you mean ${close.map(c => JSON.stringify(c)).join(', ')}?)` : ''}`
}
