import { readFileSync, statSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'

/** What reading one candidate instruction file gave. */
export type FileRead =
  | { kind: 'missing' }
  | { kind: 'text'; text: string; bytes: number }
  /** The file exists but is not included; `reason` is shown to the model. */
  | { kind: 'unusable'; reason: string }

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Decodes UTF-8 text; `undefined` for binary content (a NUL byte or invalid UTF-8). */
export function decodeText(buffer: Uint8Array): string | undefined {
  if (buffer.includes(0)) return undefined
  try {
    const text = utf8.decode(buffer)
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  } catch {
    return undefined
  }
}

function errorCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? code : error instanceof Error ? error.message : String(error)
}

interface CacheEntry {
  stamp: string
  read: FileRead
  modifiedAt?: number
}

/**
 * Reads instruction files, keeping each result under its path until the file's
 * mtime or size changes, so an assembly costs one `stat` per candidate file.
 */
export class FileCache {
  private readonly maxSourceBytes: number
  private readonly entries = new Map<string, CacheEntry>()
  /** Files actually read from disk (for tests and diagnostics). */
  reads = 0

  constructor(maxSourceBytes: number) {
    this.maxSourceBytes = maxSourceBytes
  }

  /** The file's content, or why it is not usable; `stamp` identifies the version read, `modifiedAt` is its mtime in ms. */
  read(path: string): { read: FileRead; stamp: string; modifiedAt?: number } {
    let stats
    try {
      stats = statSync(path, { bigint: true, throwIfNoEntry: false })
    } catch (error) {
      return { read: { kind: 'unusable', reason: `could not be read (${errorCode(error)})` }, stamp: 'error' }
    }
    if (!stats) {
      this.entries.delete(path)
      return { read: { kind: 'missing' }, stamp: 'missing' }
    }
    if (!stats.isFile()) return { read: { kind: 'missing' }, stamp: 'not-a-file' }
    const stamp = `${stats.mtimeNs}:${stats.size}:${stats.ino}`
    const cached = this.entries.get(path)
    if (cached?.stamp === stamp) return cached
    const read = this.load(path, Number(stats.size))
    if (this.entries.size >= 512) this.entries.clear()
    const entry = { stamp, read, modifiedAt: Number(stats.mtimeMs) }
    this.entries.set(path, entry)
    return entry
  }

  clear(): void {
    this.entries.clear()
  }

  private load(path: string, size: number): FileRead {
    if (size > this.maxSourceBytes) {
      return { kind: 'unusable', reason: `is ${size} bytes, more than the ${this.maxSourceBytes}-byte limit for instruction files` }
    }
    let buffer: Buffer
    try {
      this.reads++
      buffer = readFileSync(path)
    } catch (error) {
      return { kind: 'unusable', reason: `could not be read (${errorCode(error)})` }
    }
    const text = decodeText(buffer)
    if (text === undefined) return { kind: 'unusable', reason: 'is not UTF-8 text (binary content)' }
    return { kind: 'text', text, bytes: buffer.byteLength }
  }
}

/** The nearest directory at or above `from` that has a `.git` entry (directory or file), if any. */
export function findGitRoot(from: string): string | undefined {
  let dir = resolve(from)
  for (;;) {
    try {
      if (statSync(join(dir, '.git'), { throwIfNoEntry: false })) return dir
    } catch {
      // An unreadable parent: keep walking up.
    }
    const parent = dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/** True when `path` is `root` or inside it. */
export function isWithin(root: string, path: string): boolean {
  const rel = relative(root, path)
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))
}

/** The directories from `root` down to `cwd`, outermost first (only `root` when `cwd` is outside it). */
export function directoryChain(root: string, cwd: string): string[] {
  if (!isWithin(root, cwd)) return [root]
  const chain = [root]
  const rel = relative(root, cwd)
  if (rel === '') return chain
  let dir = root
  for (const part of rel.split(sep)) {
    dir = join(dir, part)
    chain.push(dir)
  }
  return chain
}
