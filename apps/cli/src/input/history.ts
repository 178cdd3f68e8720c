// The lines typed in conversations, kept per project across restarts:
// `$LOOM_HOME/history/<folder>-<hash>.jsonl`, one JSON string a line (an entry
// may hold line breaks), readable by its owner only. The project is the nearest
// folder up from the working directory that holds a loom.yml or .git, else the
// working directory. The file keeps the last `limit` entries: it is rewritten
// when it has twice as many. A secret of the host's never reaches it.
import { redact } from '@loom/secrets'
import { createHash } from 'node:crypto'
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { hostSecrets } from '../present/term.ts'

export const HISTORY_LIMIT = 1000

export class InputHistory {
  readonly file: string
  private readonly limit: number
  private entries: string[]
  /** Lines in the file (it may hold more than `entries` keeps until it is rewritten). */
  private lines: number

  constructor(file: string, limit = HISTORY_LIMIT) {
    this.file = file
    this.limit = limit
    const stored = readEntries(file)
    this.lines = stored.length
    this.entries = stored.slice(-limit)
  }

  /** The entries, oldest first. */
  list(): readonly string[] {
    return this.entries
  }

  /** Adds an entry (not one equal to the last), and stores it; a failure to store leaves it in memory only. */
  add(entry: string): void {
    const text = redact(entry, hostSecrets())
    if (!text.trim() || this.entries.at(-1) === text) return
    this.entries.push(text)
    if (this.entries.length > this.limit) this.entries.shift()
    try {
      mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 })
      if (this.lines + 1 >= this.limit * 2) {
        // Bounded: rewritten with the entries kept, atomically.
        const temporary = `${this.file}.${process.pid}.tmp`
        writeFileSync(temporary, this.entries.map(line => JSON.stringify(line) + '\n').join(''), { mode: 0o600 })
        renameSync(temporary, this.file)
        this.lines = this.entries.length
      } else {
        appendFileSync(this.file, JSON.stringify(text) + '\n', { mode: 0o600 })
        this.lines++
      }
    } catch {
      // A history that cannot be written is not worth stopping a conversation for.
    }
  }
}

/** The history file of the project around `cwd`, under `home` ($LOOM_HOME). */
export function historyFile(home: string, cwd: string): string {
  const project = projectFolder(cwd)
  const hash = createHash('sha256').update(project).digest('hex').slice(0, 12)
  const name = basename(project).replace(/[^\w.-]+/g, '_') || 'root'
  return join(home, 'history', `${name}-${hash}.jsonl`)
}

/** The nearest folder up from `cwd` that holds a loom.yml or .git; `cwd` when none does. */
export function projectFolder(cwd: string): string {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'loom.yml')) || existsSync(join(dir, '.git'))) return dir
    if (dirname(dir) === dir) return resolve(cwd)
  }
}

function readEntries(file: string): string[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return []
  }
  const entries: string[] = []
  for (const line of text.split('\n')) {
    if (!line) continue
    try {
      const entry = JSON.parse(line)
      if (typeof entry === 'string') entries.push(entry)
    } catch {
      // A torn last line (a crash while appending) is skipped.
    }
  }
  return entries
}
