// Tab completion at the prompt: a slash command at the start of the line, else
// the path under the cursor (after an `@`, the file to attach). The candidates
// are computed here; the prompt inserts what they share, and lists them when
// that adds nothing.
import { readdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { resolve } from 'node:path'

export interface Completion {
  /** The span of the text the candidates replace. */
  start: number
  end: number
  /** Full replacements of that span, sorted; a folder ends with `/`. */
  candidates: string[]
}

export interface CompletionSources {
  /** The slash commands (`/help`, ...). */
  commands: readonly string[]
  /** The folder relative paths start from. */
  cwd: string
  /** The entries of a folder (default: read from disk); a folder's name ends with `/`. */
  list?: (dir: string) => string[]
}

/** What Tab offers at `cursor` in `text`; undefined when nothing can be completed there. */
export function complete(text: string, cursor: number, sources: CompletionSources): Completion | undefined {
  const before = text.slice(0, cursor)
  const start = before.search(/\S*$/)
  const word = before.slice(start)
  if (start === 0 && word.startsWith('/') && !text.slice(cursor).trim()) {
    const candidates = sources.commands.filter(command => command.startsWith(word)).sort()
    return candidates.length ? { start, end: cursor, candidates } : undefined
  }
  const mention = word.startsWith('@') ? '@' : ''
  const path = word.slice(mention.length)
  if (!path && !mention) return undefined
  const slash = path.lastIndexOf('/')
  const folder = path.slice(0, slash + 1)
  const prefix = path.slice(slash + 1)
  const list = sources.list ?? listFolder
  const entries = list(resolve(sources.cwd, expandHome(folder || '.')))
  // Hidden entries only when asked for by a leading dot.
  const candidates = entries
    .filter(entry => entry.startsWith(prefix) && (prefix.startsWith('.') || !entry.startsWith('.')))
    .sort()
    .map(entry => mention + folder + entry)
  return candidates.length ? { start, end: cursor, candidates } : undefined
}

/** The longest start every candidate shares. */
export function sharedPrefix(candidates: readonly string[]): string {
  if (!candidates.length) return ''
  let prefix = candidates[0]
  for (const candidate of candidates) {
    let length = 0
    while (length < prefix.length && length < candidate.length && prefix[length] === candidate[length]) length++
    prefix = prefix.slice(0, length)
  }
  return prefix
}

function listFolder(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true }).map(entry => (entry.isDirectory() ? `${entry.name}/` : entry.name))
  } catch {
    return []
  }
}

/** `~/x` is in the home folder. */
export function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? homedir() + path.slice(1) : path
}
