import {
  appendToBlocks,
  type EventBlocks,
  interruptedTurnClosers,
  isKnownEventType,
  openTail,
  Session,
  type SessionEvent,
  type SessionHeader,
} from '@loom/session'
import { isAscii } from 'node:buffer'
import { readSync } from 'node:fs'
import { open, readdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { SessionPersistenceCorruptionError } from './errors.ts'
import { appendLines, ensureDir, LogAppender, materialize, nodeFileOps, revisionOf, truncateTo, type FileOps, type OpenFile } from './file.ts'
import { encodeEvents, encodeHeaderLine } from './format.ts'
import { encodeSegment, LOG_FILENAME, logPath } from './paths.ts'
import { LogScanner, type ScanResult, scanLog } from './scanner.ts'

// A writer that never stops would keep a reader retrying forever; give up instead.
const MAX_READ_ATTEMPTS = 100

// A long log is read a block at a time into one buffer, and handed to the
// scanner as text in pieces below the size V8 keeps apart as a large object, so
// every piece is allocated in memory the process has touched already. Reading a
// log whole took two fresh buffers of its size, and fresh memory is slow to touch
// (page faults): that was most of a slow load.
const READ_BYTES = 256 * 1024
const PIECE_BYTES = 64 * 1024

/**
 * Feeds `scanner` the whole lines of a file; returns the file's size. The reads
 * are synchronous: the scan between them holds the event loop anyway, and a
 * wait for the thread pool after every block only made a load slower on a busy
 * machine.
 */
function scanLines(handle: OpenFile, scanner: LogScanner): number {
  let buffer = Buffer.allocUnsafe(READ_BYTES)
  // Bytes at the start of `buffer` that are read but not yet scanned (a line in part).
  let pending = 0
  let position = 0
  for (;;) {
    // A line longer than the buffer: a larger one.
    if (pending === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)])
    const bytesRead = readSync(handle.fd, buffer, pending, buffer.length - pending, position)
    if (bytesRead === 0) return position
    position += bytesRead
    const filled = buffer.subarray(0, pending + bytesRead)
    let start = 0
    for (;;) {
      // The next piece: whole lines, PIECE_BYTES at most unless one line is longer.
      // (A newline byte never occurs inside a multi-byte UTF-8 character: whole lines decode alone.)
      let end = filled.lastIndexOf(0x0a, Math.min(start + PIECE_BYTES, filled.length) - 1) + 1
      if (end <= start) end = filled.indexOf(0x0a, start + PIECE_BYTES) + 1
      if (end <= start) break
      const piece = filled.subarray(start, end)
      // Most logs are ASCII (JSON escapes nothing else, but text a model writes
      // often is): checking that is nearly free, and an ASCII string is built
      // several times faster than a UTF-8 decode of the same bytes.
      scanner.scan(piece.toString(isAscii(piece) ? 'latin1' : 'utf8'), end - start)
      start = end
    }
    buffer.copyWithin(0, start, filled.length)
    pending = filled.length - start
  }
}

/** What a cold read of a stored log found, before anything is written. */
export interface StoredLog {
  path: string
  header: SessionHeader
  /** The committed prefix, in blocks (what a load hands on). */
  blocks: EventBlocks
  /** The same events as one array, joined at first use. */
  readonly events: SessionEvent[]
  /** How many events the prefix holds. */
  count: number
  /** Bytes of the committed prefix; less than the file size when the tail is torn. */
  committedBytes: number
  fileBytes: number
  revision: string
  /** Events that close a turn the crash left open (explicit error results, step/end, turn/end). */
  closers: SessionEvent[]
}

export interface JsonlFilesOptions {
  root: string
  packChunks: boolean
  ops?: FileOps
}

/**
 * The files of one JSONL root: where each log lives, how it is read, repaired and
 * appended. Stateless; the coordinator decides when.
 */
export class JsonlFiles {
  readonly root: string
  readonly #packChunks: boolean
  readonly #ops: FileOps

  constructor(options: JsonlFilesOptions) {
    this.root = options.root
    this.#packChunks = options.packChunks
    this.#ops = options.ops ?? nodeFileOps
  }

  pathOf(header: Pick<SessionHeader, 'cwd' | 'id'>): string {
    return logPath(this.root, header.cwd, header.id)
  }

  /** Finds a log by id alone: the project directory is not known without the header. */
  async find(id: string): Promise<string | undefined> {
    const segment = encodeSegment(id)
    const hits: string[] = []
    for (const project of await this.#dirs(this.root)) {
      const candidate = join(this.root, project, segment, LOG_FILENAME)
      if (await this.#exists(candidate)) hits.push(candidate)
    }
    if (hits.length > 1)
      throw new SessionPersistenceCorruptionError(`duplicate JSONL session id "${id}" appears in multiple project directories: ${hits.join(', ')}`)
    return hits[0]
  }

  /** Every log under the root. */
  async all(): Promise<string[]> {
    const logs: string[] = []
    for (const project of await this.#dirs(this.root)) {
      for (const session of await this.#dirs(join(this.root, project))) {
        const candidate = join(this.root, project, session, LOG_FILENAME)
        if (await this.#exists(candidate)) logs.push(candidate)
      }
    }
    return logs
  }

  /** Reads and checks a log; writes nothing. */
  async read(path: string, expectedId?: string): Promise<StoredLog> {
    const { scan, bytes, revision } = await this.#scan(path)
    const { header, blocks, committedBytes, unknown } = scan
    if (expectedId !== undefined && header.id !== expectedId) {
      throw new SessionPersistenceCorruptionError(`session log ${path} holds session "${header.id}", not "${expectedId}"`)
    }
    if (unknown) {
      throw new SessionPersistenceCorruptionError(
        `stored session "${header.id}" has event type "${unknown.type}" at seq ${unknown.seq}, which this build does not know (raw log: ${path})`,
      )
    }
    return {
      path,
      header,
      blocks,
      get events() {
        return scan.events
      },
      count: scan.count,
      committedBytes,
      fileBytes: bytes,
      revision,
      closers: interruptedTurnClosers(openTail(blocks)),
    }
  }

  /** Scans a log at one revision, retrying while it changes. */
  async #scan(path: string): Promise<{ scan: ScanResult; bytes: number; revision: string }> {
    for (let attempt = 0; attempt < MAX_READ_ATTEMPTS; attempt++) {
      const before = revisionOf(await this.#ops.stat(path))
      try {
        const scanner = new LogScanner(path, isKnownEventType)
        const handle = await this.#ops.open(path, 'r')
        let bytes: number
        try {
          bytes = scanLines(handle, scanner)
        } finally {
          await this.#ops.close(handle)
        }
        const scan = scanner.result()
        // Identical stats on both sides mean no write landed during the read.
        const after = revisionOf(await this.#ops.stat(path))
        if (before === after) return { scan, bytes, revision: after }
      } catch (error) {
        // Damage seen while a write landed may be that write half done: read again.
        if (revisionOf(await this.#ops.stat(path)) === before) throw error
      }
    }
    throw new Error(`session log "${path}" kept changing while being read (${MAX_READ_ATTEMPTS} attempts)`)
  }

  /** The header line alone: listing never reads whole logs. */
  async readHeader(path: string): Promise<SessionHeader> {
    const handle = await open(path, 'r')
    try {
      // Bytes, not text: a chunk boundary may split a multi-byte character.
      let bytes = Buffer.alloc(0)
      let end = -1
      while (end === -1) {
        const { bytesRead, buffer } = await handle.read(Buffer.alloc(4096), 0, 4096, bytes.length)
        if (bytesRead === 0) break
        bytes = Buffer.concat([bytes, buffer.subarray(0, bytesRead)])
        end = bytes.indexOf(0x0a)
      }
      return scanLog(bytes.toString('utf8', 0, end === -1 ? bytes.length : end + 1), path).header
    } finally {
      await handle.close()
    }
  }

  /**
   * Validates the stored events and their closers as one session would hold them.
   * A log that cannot become a Session is corrupt, whatever its bytes look like.
   */
  restore(log: StoredLog): Session {
    try {
      return Session.fromRestore(log.header.id, appendToBlocks(log.blocks, log.closers), log.header)
    } catch (error) {
      throw new SessionPersistenceCorruptionError(`stored session "${log.header.id}" failed validation: ${(error as Error).message} (raw log: ${log.path})`, {
        cause: error,
      })
    }
  }

  /** Cuts a torn tail and appends the closers: afterwards the log is balanced. */
  async repair(log: StoredLog): Promise<void> {
    if (log.committedBytes < log.fileBytes) await truncateTo(log.path, log.committedBytes, this.#ops)
    if (log.closers.length) await this.append(log.path, log.closers)
  }

  /** Creates the directory of a session's log (durably), before its lease is taken there. */
  async ensureDirOf(header: Pick<SessionHeader, 'cwd' | 'id'>): Promise<void> {
    await ensureDir(dirname(this.pathOf(header)), this.#ops)
  }

  /** Writes the first batch together with the header; never overwrites an existing log. */
  async materialize(header: SessionHeader, events: readonly SessionEvent[]): Promise<void> {
    await materialize(this.pathOf(header), encodeHeaderLine(header), this.#encode(events), this.#ops)
  }

  /** The log at `path` held open for its writer's appends (see LogAppender). */
  open(path: string): Promise<LogAppender> {
    return LogAppender.open(path, this.#ops)
  }

  /** Appends events durably, through a log held open or by path (opened and closed around the batch). */
  async append(log: string | LogAppender, events: readonly SessionEvent[]): Promise<void> {
    const lines = this.#encode(events)
    if (typeof log === 'string') await appendLines(log, lines, this.#ops)
    else await log.append(lines)
  }

  #encode(events: readonly SessionEvent[]) {
    return encodeEvents(events, { packChunks: this.#packChunks })
  }

  async #dirs(path: string): Promise<string[]> {
    try {
      return (await readdir(path, { withFileTypes: true }))
        .filter(entry => entry.isDirectory())
        .map(entry => entry.name)
        .sort()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
      throw error
    }
  }

  async #exists(path: string): Promise<boolean> {
    try {
      await this.#ops.stat(path)
      return true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
      throw error
    }
  }
}
