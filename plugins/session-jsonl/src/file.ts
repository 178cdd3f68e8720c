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

import { randomBytes } from 'node:crypto'
import { constants, type BigIntStats } from 'node:fs'
import * as fsp from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import * as path from 'node:path'

/** The primitive file operations the durable helpers are built from. */
export interface FileOps {
  /** Creates one directory (not recursive); rejects with EEXIST/ENOENT like mkdir(2). */
  mkdir(dir: string, mode: number): Promise<void>
  open(file: string, flags: string | number, mode?: number): Promise<FileHandle>
  /** Writes all of `data` at the handle's current position (the end, for append handles). */
  write(handle: FileHandle, data: Uint8Array): Promise<void>
  sync(handle: FileHandle): Promise<void>
  truncate(handle: FileHandle, size: number): Promise<void>
  fstat(handle: FileHandle): Promise<BigIntStats>
  close(handle: FileHandle): Promise<void>
  link(existing: string, target: string): Promise<void>
  unlink(file: string): Promise<void>
  stat(file: string): Promise<BigIntStats>
}

/** The real file system. */
export const nodeFileOps: FileOps = {
  async mkdir(dir, mode) {
    await fsp.mkdir(dir, { mode })
  },
  open: (file, flags, mode) => fsp.open(file, flags, mode),
  async write(handle, data) {
    // FileHandle.write may write fewer bytes than asked; loop until all are out.
    let offset = 0
    while (offset < data.byteLength) {
      const { bytesWritten } = await handle.write(data, offset, data.byteLength - offset)
      offset += bytesWritten
    }
  },
  sync: handle => handle.sync(),
  truncate: (handle, size) => handle.truncate(size),
  fstat: handle => handle.stat({ bigint: true }),
  close: handle => handle.close(),
  link: (existing, target) => fsp.link(existing, target),
  unlink: file => fsp.unlink(file),
  stat: file => fsp.stat(file, { bigint: true }),
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

async function exists(file: string, ops: FileOps): Promise<boolean> {
  try {
    await ops.stat(file)
    return true
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return false
    throw err
  }
}

/**
 * Publishes a new log holding the header line and the first batch, atomically:
 * either the whole content is visible under `file`, or nothing is.
 * Rejects if `file` already exists; an existing log is never overwritten.
 */
export async function materialize(file: string, headerLine: string, lines: readonly string[], ops: FileOps = nodeFileOps): Promise<void> {
  const dir = path.dirname(file)
  await ensureDir(dir, ops)
  // An early, readable refusal; `link` below is what actually guarantees it.
  if (await exists(file, ops)) throw new Error(`refusing to materialize session log "${file}": it already exists`)

  // A random temp name, created exclusively: two racing writers never share one.
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`
  const handle = await ops.open(tmp, 'wx', 0o600)
  try {
    try {
      await ops.write(handle, batchBytes([headerLine, ...lines]))
      await ops.sync(handle)
    } finally {
      await ops.close(handle)
    }
    // link(2) fails with EEXIST instead of replacing, unlike rename(2).
    await ops.link(tmp, file)
    await syncDir(dir, ops)
  } finally {
    // Best effort: a leftover temp file is garbage, never a second copy of the log.
    await ops.unlink(tmp).catch(() => {})
  }
}

/**
 * Appends one batch (`lines.join('\n') + '\n'`) durably. On failure the file is
 * truncated back to its size before the append, so it is left unchanged.
 */
export async function appendLines(file: string, lines: readonly string[], ops: FileOps = nodeFileOps): Promise<void> {
  if (lines.length === 0) return
  const data = batchBytes(lines)
  // Append mode, but without O_CREAT: appending to a log that was never
  // materialized is a bug, not a reason to create a header-less file.
  const handle = await ops.open(file, constants.O_WRONLY | constants.O_APPEND)
  try {
    const size = Number((await ops.fstat(handle)).size)
    try {
      await ops.write(handle, data)
      await ops.sync(handle)
    } catch (err) {
      try {
        await ops.truncate(handle, size)
        await ops.sync(handle)
      } catch (rollbackErr) {
        throw new AggregateError([err, rollbackErr], `failed to roll back append to "${file}"`)
      }
      throw err
    }
  } finally {
    // After a successful fsync the data is durable; a failing close changes nothing.
    await ops.close(handle).catch(() => {})
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
