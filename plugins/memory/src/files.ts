import { readFileSync, statSync } from 'node:fs'

/** What reading a file gave. */
export type FileRead =
  | { kind: 'missing' }
  | { kind: 'text'; text: string; bytes: number /** When the file was last written (ms since the epoch). */; modifiedAt: number }
  /** The file exists but cannot be used; `reason` completes "the file …"; `size` is set when it is only too large. */
  | { kind: 'unusable'; reason: string; size?: number }

const utf8 = new TextDecoder('utf-8', { fatal: true })

function errorCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? code : error instanceof Error ? error.message : String(error)
}

/** Text files cached by path until their mtime, size or inode changes: one `stat` per use. */
export class FileCache {
  private readonly entries = new Map<string, { stamp: string; read: FileRead }>()

  read(path: string, maxBytes: number): FileRead {
    let stats
    try {
      stats = statSync(path, { bigint: true, throwIfNoEntry: false })
    } catch (error) {
      const code = errorCode(error)
      return code === 'ENOTDIR' ? { kind: 'missing' } : { kind: 'unusable', reason: `could not be read (${code})` }
    }
    if (!stats) return { kind: 'missing' }
    if (!stats.isFile()) return { kind: 'unusable', reason: 'is not a regular file' }
    const stamp = `${stats.mtimeNs}:${stats.size}:${stats.ino}:${maxBytes}`
    const cached = this.entries.get(path)
    if (cached?.stamp === stamp) return cached.read
    const read = load(path, Number(stats.size), maxBytes, Number(stats.mtimeMs))
    if (this.entries.size >= 1024) this.entries.clear()
    this.entries.set(path, { stamp, read })
    return read
  }

  clear(): void {
    this.entries.clear()
  }
}

function load(path: string, size: number, maxBytes: number, modifiedAt: number): FileRead {
  if (size > maxBytes) return { kind: 'unusable', reason: `is ${size} bytes, more than the ${maxBytes}-byte limit`, size }
  let buffer: Buffer
  try {
    buffer = readFileSync(path)
  } catch (error) {
    return { kind: 'unusable', reason: `could not be read (${errorCode(error)})` }
  }
  if (buffer.includes(0)) return { kind: 'unusable', reason: 'is not UTF-8 text (binary content)' }
  try {
    const text = utf8.decode(buffer)
    return { kind: 'text', text: text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, bytes: buffer.byteLength, modifiedAt }
  } catch {
    return { kind: 'unusable', reason: 'is not UTF-8 text (binary content)' }
  }
}
