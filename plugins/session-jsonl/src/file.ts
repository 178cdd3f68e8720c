// Durable file operations for session logs.
//
// The guarantees, in order of importance:
//   * a published log is never overwritten (publication is a hard link, which
//     fails if the name exists);
//   * a log is never visible without its header and first batch (written to a
//     temp file and fsynced before publication);
//   * an append that fails leaves the file exactly as it was (rolled back to the
//     size recorded before the write), so a retry cannot leave a seq gap.
//
// All I/O goes through a `FileOps` object so tests can inject failures (an
// fsync that fails once, a rollback that fails) without touching a real disk's
// failure modes.
//
// What can wait for the disk goes through the thread pool: fsync (gathered over a
// turn of the event loop, see fsync-batch.ts), and the calls
// that look up, create or remove a name (mkdir, open, link, unlink), which on a
// host writing many sessions wait behind their fsyncs (about a millisecond each,
// measured with 200 sessions starting at once) and would stall every session's
// event loop. The rest (write, fstat, truncate, close, stat) touches the page
// cache of a file already open and returns in microseconds, so it is made
// synchronously: a round trip through the thread pool costs the event loop many
// times that, and a host makes several of them per batch.

import { randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, ftruncateSync, open, statSync, writeSync, type BigIntStats } from 'node:fs'
import { link, mkdir, unlink } from 'node:fs/promises'
import * as path from 'node:path'
import { promisify } from 'node:util'
import { batchedFsync } from './fsync-batch.ts'

/** An open file: its descriptor. */
export interface OpenFile {
  readonly fd: number
}

/** The primitive file operations the durable helpers are built from. */
export interface FileOps {
  /** Creates one directory (not recursive); rejects with EEXIST/ENOENT like mkdir(2). */
  mkdir(dir: string, mode: number): Promise<void>
  open(file: string, flags: string | number, mode?: number): Promise<OpenFile>
  /** Writes all of `data` at the file's current position (the end, for append handles). */
  write(handle: OpenFile, data: Uint8Array): Promise<void>
  sync(handle: OpenFile): Promise<void>
  truncate(handle: OpenFile, size: number): Promise<void>
  fstat(handle: OpenFile): Promise<BigIntStats>
  close(handle: OpenFile): Promise<void>
  link(existing: string, target: string): Promise<void>
  unlink(file: string): Promise<void>
  stat(file: string): Promise<BigIntStats>
}

/** A descriptor, not a FileHandle: the appender keeps it for the log's lifetime. */
const openFd = promisify(open)

/** The real file system: what can wait for the disk through the thread pool, the rest synchronously (see above). */
export const nodeFileOps: FileOps = {
  async mkdir(dir, mode) {
    await mkdir(dir, { mode })
  },
  async open(file, flags, mode) {
    return { fd: await openFd(file, flags, mode) }
  },
  async write(handle, data) {
    // write(2) may write fewer bytes than asked; loop until all are out.
    let offset = 0
    while (offset < data.byteLength) offset += writeSync(handle.fd, data, offset, data.byteLength - offset)
  },
  sync: handle => batchedFsync(handle.fd),
  async truncate(handle, size) {
    ftruncateSync(handle.fd, size)
  },
  async fstat(handle) {
    return fstatSync(handle.fd, { bigint: true })
  },
  async close(handle) {
    closeSync(handle.fd)
  },
  link,
  unlink,
  async stat(file) {
    return statSync(file, { bigint: true })
  },
}

function errorCode(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code
}

function batchBytes(lines: readonly string[]): Buffer {
  return Buffer.from(lines.join('\n') + '\n', 'utf8')
}

// A directory entry (create, link) is durable only once its directory is fsynced.
async function syncDir(dir: string, ops: FileOps): Promise<void> {
  const handle = await ops.open(dir, 'r')
  try {
    await ops.sync(handle)
  } finally {
    await ops.close(handle)
  }
}

/** mkdir -p with mode 0700, fsyncing the parent of every directory it creates. */
export async function ensureDir(dir: string, ops: FileOps): Promise<void> {
  try {
    await ops.mkdir(dir, 0o700)
  } catch (err) {
    if (errorCode(err) === 'EEXIST') return
    if (errorCode(err) !== 'ENOENT') throw err
    await ensureDir(path.dirname(dir), ops)
    try {
      await ops.mkdir(dir, 0o700)
    } catch (retryErr) {
      // Someone else created it in between: theirs is as good as ours.
      if (errorCode(retryErr) === 'EEXIST') return
      throw retryErr
    }
  }
  await syncDir(path.dirname(dir), ops)
}

/**
 * Publishes a new log holding the header line and the first batch, atomically:
 * either the whole content is visible under `file`, or nothing is.
 * Rejects if `file` already exists; an existing log is never overwritten.
 */
export async function materialize(file: string, headerLine: string, lines: readonly string[], ops: FileOps = nodeFileOps): Promise<void> {
  const dir = path.dirname(file)
  // A random temp name, created exclusively: two racing writers never share one.
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`
  // The folder is made first for a new session (beside its lease): made here only when it is missing.
  const handle = await ops.open(tmp, 'wx', 0o600).catch(async (error: unknown) => {
    if (errorCode(error) !== 'ENOENT') throw error
    await ensureDir(dir, ops)
    return ops.open(tmp, 'wx', 0o600)
  })
  try {
    try {
      await ops.write(handle, batchBytes([headerLine, ...lines]))
      await ops.sync(handle)
    } finally {
      await ops.close(handle)
    }
    // link(2) fails with EEXIST instead of replacing, unlike rename(2).
    await ops.link(tmp, file).catch((error: unknown) => {
      if (errorCode(error) !== 'EEXIST') throw error
      throw Object.assign(new Error(`refusing to materialize session log "${file}": it already exists`, { cause: error }), { code: 'EEXIST' })
    })
    await syncDir(dir, ops)
  } finally {
    // Best effort: a leftover temp file is garbage, never a second copy of the log.
    await ops.unlink(tmp).catch(() => {})
  }
}

/**
 * A log held open by its writer. Under the session's lease nobody else appends,
 * so the log is opened once, and each batch is one write and one fsync through
 * the same descriptor (an open, a stat and a close per batch were most of what
 * an append cost). The size is kept as the batches land: a batch that fails is
 * cut back to it, so the file is left exactly as it was.
 */
export class LogAppender {
  readonly file: string
  readonly #handle: OpenFile
  readonly #ops: FileOps
  /** The file's size after the last batch that landed. */
  #size: number

  private constructor(file: string, handle: OpenFile, size: number, ops: FileOps) {
    this.file = file
    this.#handle = handle
    this.#size = size
    this.#ops = ops
  }

  /** Opens an existing log for appends (never creates one: a log without its header is a bug). */
  static async open(file: string, ops: FileOps = nodeFileOps): Promise<LogAppender> {
    const handle = await ops.open(file, constants.O_WRONLY | constants.O_APPEND)
    try {
      return new LogAppender(file, handle, Number((await ops.fstat(handle)).size), ops)
    } catch (error) {
      await ops.close(handle).catch(() => {})
      throw error
    }
  }

  /**
   * Appends one batch (`lines.join('\n') + '\n'`) durably. On failure the file
   * is truncated back to its size before the batch; if even that fails, the
   * error is an AggregateError of both, and the appender should be dropped (the
   * next one reads the size the file really has).
   */
  async append(lines: readonly string[]): Promise<void> {
    if (lines.length === 0) return
    const data = batchBytes(lines)
    try {
      await this.#ops.write(this.#handle, data)
      await this.#ops.sync(this.#handle)
    } catch (err) {
      try {
        await this.#ops.truncate(this.#handle, this.#size)
        await this.#ops.sync(this.#handle)
      } catch (rollbackErr) {
        throw new AggregateError([err, rollbackErr], `failed to roll back append to "${this.file}"`)
      }
      throw err
    }
    this.#size += data.byteLength
  }

  /** After the last fsync the data is durable: a failing close changes nothing. */
  async close(): Promise<void> {
    await this.#ops.close(this.#handle).catch(() => {})
  }
}

/**
 * Appends one batch durably, opening and closing the log around it. On failure
 * the file is truncated back to its size before the append, so it is left
 * unchanged.
 */
export async function appendLines(file: string, lines: readonly string[], ops: FileOps = nodeFileOps): Promise<void> {
  if (lines.length === 0) return
  const appender = await LogAppender.open(file, ops)
  try {
    await appender.append(lines)
  } finally {
    await appender.close()
  }
}

/** Cuts a log back to its first `bytes` bytes (a torn tail) durably. Never extends a file. */
export async function truncateTo(file: string, bytes: number, ops: FileOps = nodeFileOps): Promise<void> {
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new TypeError(`truncate length must be a non-negative safe integer, got ${bytes}`)
  const handle = await ops.open(file, 'r+')
  try {
    const size = Number((await ops.fstat(handle)).size)
    // Truncating past the end would pad the log with NUL bytes.
    if (bytes > size) throw new Error(`refusing to truncate session log "${file}" to ${bytes} bytes: it has only ${size}`)
    await ops.truncate(handle, bytes)
    await ops.sync(handle)
  } finally {
    await ops.close(handle).catch(() => {})
  }
}

/** The revision of a file: changes whenever it is appended to, truncated or replaced. */
export function revisionOf(stats: BigIntStats): string {
  return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`
}

/** The current revision of a log, without reading it. */
export async function statRevision(file: string, ops: FileOps = nodeFileOps): Promise<string> {
  return revisionOf(await ops.stat(file))
}
