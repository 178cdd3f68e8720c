// One writer per session: an exclusive write lease, held as a lock file next to
// the log (`<session dir>/session.lock`).
//
//   * Granting is atomic: the lock's JSON ({pid, host, since, command, token}) is
//     written to a private temp file, then hard-linked to `session.lock`;
//     link(2) fails if the name exists, so at most one writer creates it, and the
//     lock is never seen half written.
//   * The holder refreshes the lock's mtime every `heartbeatMs` (an unref'd timer).
//     A lock is stale when its heartbeat is older than `staleMs`, or when it was
//     taken on this host by a pid that no longer exists.
//   * Takeover of a stale lock is race-safe: the taker renames the lock to a
//     name of its own (only one rename of that file can succeed), checks that
//     what it moved is the stale lock it judged, deletes it and then competes for
//     a fresh lock with link(2) like anyone else. If it moved a lock that another
//     taker had just created, it links it back.
//   * Fencing: before every write the holder checks that the lock still holds its
//     token; a writer whose lease was taken over cannot write. The holder keeps
//     its lock file open, so the check is a stat of the lock's name (does it
//     still name the file this lease created? held open, that file's inode
//     cannot be reused) and a read of those bytes through the open descriptor;
//     the lock is opened and parsed again only when either differs.
//
// Everything is synchronous (the files are tiny, the exit handler must be
// synchronous, and adopting a live session must veto its publication at once),
// except the creation of a new log's lock file (see `acquireNew`).

import { randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { processExists, SessionLeaseError, type SessionLeaseHolder } from '@loom/session'

/** The default command label: this process's command line, shortened. */
export { defaultLeaseCommand as defaultCommand } from '@loom/session'

export const LOCK_FILENAME = 'session.lock'

export interface LeaseOptions {
  /** How often the holder refreshes its heartbeat (the lock's mtime). */
  heartbeatMs: number
  /** A lock whose heartbeat is older than this is stale. */
  staleMs: number
  /** What the holder runs, shown to refused writers. */
  command?: string
}

interface LockContent extends SessionLeaseHolder {
  token: string
}

/** What a reader finds at a lock path. */
type Found = { content: LockContent | undefined; mtimeMs: number } | undefined

// The leases this process holds, released on exit (a crash leaves them to takeover).
const held = new Set<Lease>()
let exitHookInstalled = false

/** The lock file of the log at `logPath`. */
export function lockPathOf(logPath: string): string {
  return join(dirname(logPath), LOCK_FILENAME)
}

/** The current holder of a lock, if any; no lease is taken. */
export function readHolder(lockPath: string): SessionLeaseHolder | undefined {
  const found = read(lockPath)
  return found?.content && publicHolder(found.content)
}

export class Lease {
  readonly sessionId: string
  readonly path: string
  readonly holder: LockContent
  #timer: ReturnType<typeof setInterval> | undefined
  /** The lock file this lease created, held open until it is released. */
  readonly #lock: CreatedLock
  #released = false

  private constructor(sessionId: string, path: string, holder: LockContent, lock: CreatedLock, heartbeatMs: number) {
    this.sessionId = sessionId
    this.path = path
    this.holder = holder
    this.#lock = lock
    this.#timer = setInterval(() => this.#beat(), heartbeatMs)
    this.#timer.unref()
    held.add(this)
    if (!exitHookInstalled) {
      exitHookInstalled = true
      process.on('exit', () => {
        for (const lease of held) lease.release()
      })
    }
  }

  /**
   * Takes the lease of session `sessionId` at `lockPath`, taking over a stale
   * lock; throws `SessionLeaseError` (`SESSION_LEASE_HELD`) naming a live holder.
   */
  static acquire(sessionId: string, lockPath: string, options: LeaseOptions): Lease {
    const content = lockContent(options)
    return Lease.#take(sessionId, lockPath, options, content, writeTemp(lockPath, content))
  }

  /**
   * `acquire` for the first write of a new log, with the lock's file created through
   * the thread pool: on a host writing many sessions, creating a file can wait for the
   * disk, and that wait must not stall the event loop.
   */
  static async acquireNew(sessionId: string, lockPath: string, options: LeaseOptions): Promise<Lease> {
    const content = lockContent(options)
    return Lease.#take(sessionId, lockPath, options, content, await writeTempAsync(lockPath, content))
  }

  static #take(sessionId: string, lockPath: string, options: LeaseOptions, content: LockContent, written: Unpublished): Lease {
    // Each round either wins, meets a live holder, or removed a stale lock
    // (someone else's progress); a few rounds settle any race.
    for (let round = 0; round < 5; round++) {
      const lock = publish(lockPath, round === 0 ? written : writeTemp(lockPath, content))
      if (lock) return new Lease(sessionId, lockPath, content, lock, options.heartbeatMs)
      const found = read(lockPath)
      if (!found) continue
      if (!isStale(found, options.staleMs)) {
        throw SessionLeaseError.held(sessionId, found.content ? publicHolder(found.content) : unknownHolder(found))
      }
      breakStale(lockPath, found, content.token)
    }
    const found = read(lockPath)
    throw SessionLeaseError.held(sessionId, found?.content ? publicHolder(found.content) : unknownHolder(found))
  }

  /** Fencing: throws `SESSION_LEASE_LOST` unless the lock still holds this lease's token. */
  check(): void {
    if (this.#intact()) return
    const found = read(this.path)
    if (found?.content?.token === this.holder.token) return
    throw SessionLeaseError.lost(this.sessionId, found?.content && publicHolder(found.content))
  }

  /** Deletes the lock if it is still this lease's; idempotent. */
  release(): void {
    clearInterval(this.#timer)
    held.delete(this)
    try {
      if (!this.#released && (this.#intact() || read(this.path)?.content?.token === this.holder.token)) fs.unlinkSync(this.path)
    } catch {
      // Best effort: a lock left behind is taken over once its heartbeat is stale.
    } finally {
      if (!this.#released) fs.closeSync(this.#lock.fd)
      this.#released = true
    }
  }

  /**
   * The lock's name still leads to the file this lease created, and that file
   * still holds exactly what was written into it: two system calls, no open.
   */
  #intact(): boolean {
    if (this.#released) return false
    const { fd, ino, dev, bytes } = this.#lock
    try {
      if (!namesFile(this.path, ino, dev)) return false
      // One byte more than was written: a lock grown by a hand edit differs too.
      const buffer = Buffer.allocUnsafe(bytes.length + 1)
      const length = fs.readSync(fd, buffer, 0, buffer.length, 0)
      return length === bytes.length && buffer.subarray(0, length).equals(bytes)
    } catch {
      return false
    }
  }

  #beat() {
    try {
      if (!this.#intact() && read(this.path)?.content?.token !== this.holder.token) return
      const now = new Date()
      fs.utimesSync(this.path, now, now)
    } catch {
      // A missed heartbeat is retried at the next tick.
    }
  }
}

/**
 * Whether `path` names the file (`ino`, `dev`). Plain numbers are exact below 2^53, and a stat in numbers
 * is cheaper than one in bigints (this runs before every write): the bigint stat only for identities that large.
 */
function namesFile(path: string, ino: bigint, dev: bigint): boolean {
  if (ino < SAFE && dev < SAFE) {
    const named = fs.statSync(path, { throwIfNoEntry: false })
    return named?.ino === Number(ino) && named.dev === Number(dev)
  }
  const named = fs.statSync(path, { bigint: true, throwIfNoEntry: false })
  return named?.ino === ino && named.dev === dev
}
const SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** A lock this process created: its descriptor (kept open), which file it is, and what it holds. */
interface CreatedLock {
  fd: number
  ino: bigint
  dev: bigint
  bytes: Buffer
}

const lockContent = (options: LeaseOptions): LockContent => ({
  pid: process.pid,
  host: hostname(),
  since: Date.now(),
  ...(options.command !== undefined && { command: options.command }),
  token: randomBytes(12).toString('hex'),
})

/** A lock written to a private temp file and opened there, not yet published. */
interface Unpublished {
  tmp: string
  bytes: Buffer
  fd: number
}

const tempOf = (lockPath: string, content: LockContent) => `${lockPath}.${content.token}.tmp`
const bytesOf = (content: LockContent) => Buffer.from(JSON.stringify(content) + '\n')

/** Writes the lock's content to a temp file it keeps open: the descriptor is of the very file the link will name. */
function writeTemp(lockPath: string, content: LockContent): Unpublished {
  const tmp = tempOf(lockPath, content)
  return filled(tmp, bytesOf(content), fs.openSync(tmp, 'wx+', 0o600))
}

/** `writeTemp` with the file created through the thread pool (the write of a few bytes is not worth a round trip). */
async function writeTempAsync(lockPath: string, content: LockContent): Promise<Unpublished> {
  const tmp = tempOf(lockPath, content)
  return filled(tmp, bytesOf(content), await openFd(tmp, 'wx+', 0o600))
}

const openFd = promisify(fs.open)

/** Writes `bytes` into the new temp file `tmp`, open at `fd`; removes it if that fails. */
function filled(tmp: string, bytes: Buffer, fd: number): Unpublished {
  try {
    for (let offset = 0; offset < bytes.length; ) offset += fs.writeSync(fd, bytes, offset, bytes.length - offset)
  } catch (error) {
    fs.closeSync(fd)
    fs.rmSync(tmp, { force: true })
    throw error
  }
  return { tmp, bytes, fd }
}

/** Publishes a written lock at `lockPath` unless a lock exists there: the created lock, open, or undefined. */
function publish(lockPath: string, { tmp, bytes, fd }: Unpublished): CreatedLock | undefined {
  try {
    const { ino, dev } = fs.fstatSync(fd, { bigint: true })
    fs.linkSync(tmp, lockPath)
    return { fd, ino, dev, bytes }
  } catch (error) {
    fs.closeSync(fd)
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined
    throw error
  } finally {
    fs.rmSync(tmp, { force: true })
  }
}

/** Removes the stale lock `found` from `lockPath`, unless another taker got there first. */
function breakStale(lockPath: string, found: NonNullable<Found>, token: string) {
  const aside = `${lockPath}.${token}.stale`
  try {
    fs.renameSync(lockPath, aside)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return // another taker moved it
    throw error
  }
  const moved = read(aside)
  const same = moved !== undefined && moved.content?.token === found.content?.token && moved.mtimeMs === found.mtimeMs
  try {
    // Not the lock we judged stale: a fresh one another taker had just created. Put it back.
    if (!same) fs.linkSync(aside, lockPath)
  } catch {
    // A third writer created a lock meanwhile: theirs stands, the moved one is gone.
  } finally {
    fs.rmSync(aside, { force: true })
  }
}

function read(lockPath: string): Found {
  let text: string
  let stats: fs.Stats
  try {
    stats = fs.statSync(lockPath)
    text = fs.readFileSync(lockPath, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  try {
    const content = JSON.parse(text) as LockContent
    const valid =
      typeof content.token === 'string' && Number.isSafeInteger(content.pid) && typeof content.host === 'string' && typeof content.since === 'number'
    return { content: valid ? content : undefined, mtimeMs: stats.mtimeMs }
  } catch {
    return { content: undefined, mtimeMs: stats.mtimeMs }
  }
}

function isStale(found: NonNullable<Found>, staleMs: number): boolean {
  if (Date.now() - found.mtimeMs > staleMs) return true
  const content = found.content
  // Only on this host can a pid be checked; elsewhere the heartbeat decides.
  return content !== undefined && content.host === hostname() && !processExists(content.pid)
}

function publicHolder({ pid, host, since, command }: LockContent): SessionLeaseHolder {
  return { pid, host, since, ...(command !== undefined && { command }) }
}

// An unreadable lock (not written by this protocol) still blocks until its heartbeat is stale.
function unknownHolder(found: Found): SessionLeaseHolder {
  return { pid: 0, host: 'unknown', since: found?.mtimeMs ?? Date.now(), command: `unreadable lock file` }
}
