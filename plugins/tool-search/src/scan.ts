import { Worker } from 'node:worker_threads'
import type { ReadRules } from '@loom/tools/workspace'
import type { GitEnv } from './ignore-files.ts'
import { type Counter, COUNTERS, Progress } from './progress.ts'

/** A directory to walk, as the host resolved it. */
export interface WalkJob {
  /** The directory (symlinks resolved, inside the workspace). */
  start: string
  /** How `start` is shown (relative to the workspace root). */
  display: string
  /** The workspace root, symlinks resolved. */
  root: string
  /** Names always skipped (the `ignore` config). */
  names: readonly string[]
  hidden: boolean
  /** Where git's configuration is, to honour ignore files; undefined: ignore files are not read (`no_ignore`). */
  ignoreFiles: GitEnv | undefined
  maxDepth: number
  /** The read rules that can decide something at or below `start`: what they deny is skipped. */
  reads: ReadRules
  /**
   * The read rules that can decide something in the workspace, for a symlinked file's
   * target: it may lie anywhere inside, under a rule `reads` leaves out.
   */
  targetReads: ReadRules
}

/** grep: lines of the files of a walk (or of one file) that match a regular expression. */
export interface GrepJob {
  kind: 'grep'
  /** The files to search: a walk, filtered by a glob (`basename`: matched against the file name only); or one file. */
  files: { walk: WalkJob; glob?: { pattern: string; basename: boolean } } | { file: { real: string; display: string } }
  /** The regular expression, already compiled once on the host to report syntax errors. */
  source: string
  flags: string
  maxMatches: number
  /** Bytes of matching lines (`file:line: text` and a newline each) at most: with an artifact to keep them, the real bound. */
  maxBytes: number
  maxLineBytes: number
  /** Files up to this size are read at once, larger ones in blocks of it (GREP_BLOCK_BYTES). */
  blockBytes: number
}

/** glob: the files of a walk matching a pattern, newest first, at most `max`. */
export interface GlobJob {
  kind: 'glob'
  walk: WalkJob
  pattern: string
  max: number
}

/** Which lines a JavaScript regular expression matches (lines ripgrep found, checked again: see rg-engine.ts). */
export interface TestJob {
  kind: 'test'
  source: string
  flags: string
  lines: { display: string; text: string }[]
}

/** A walk that only counts what it skips: the notes of an empty answer the ripgrep engine found. */
export interface CountJob {
  kind: 'count'
  walk: WalkJob
}

export type ScanJob = (GrepJob | GlobJob | TestJob | CountJob) & { progress: SharedArrayBuffer }

/** What the worker posts: grep's matches as it finds them (in path order), then the end. */
export type ScanMessage =
  | { kind: 'match'; file: number; text: string; truncated: boolean }
  | { kind: 'done'; cut: boolean; glob?: { shown: string[]; total: number }; verdicts?: boolean[] }

export interface ScanResult {
  /** Which engine searched: ripgrep, or the worker's own walk and JavaScript matching. */
  engine: 'ripgrep' | 'worker'
  /** grep's `file:line: text`, in order. */
  lines: string[]
  /** Files with at least one line in `lines`. */
  files: number
  /** The match cap (or `maxBytes`) was reached and another match exists. */
  cut: boolean
  truncatedLines: number
  /** glob's answer: the newest files (relative to the workspace root) and how many matched. */
  glob?: { shown: string[]; total: number }
  /** What was skipped: binary files (grep), ignored, hidden and denied entries. */
  skipped: Record<Counter, number>
  /** The deadline stopped the search: the results are what was found before it. */
  timedOut: boolean
  /** With `timedOut`: the file the search was in. */
  stoppedIn?: string
  /** A test job's answer: whether each line matched. */
  verdicts?: boolean[]
}

// Next to this module: scan-worker.ts in the sources, scan-worker.js once compiled.
const WORKER = new URL(`./scan-worker${import.meta.url.slice(import.meta.url.lastIndexOf('.'))}`, import.meta.url)

/** Workers started in this process, for tests. */
export const workerCounts = { started: 0 }

/**
 * Runs the searches (the walk, glob's matching and grep's line matching) in worker
 * threads. A model-chosen regular expression or glob can backtrack for minutes, and a
 * RegExp call cannot be interrupted on the thread running it; in a worker it can
 * (`worker.terminate()`), and the host's event loop keeps serving timers, signals
 * and other calls meanwhile. The worker also does its file I/O synchronously, which
 * is several times faster than a promise per file.
 *
 * One idle worker is kept between searches (starting one costs 50 to 150 ms): the
 * first is started in the background when the plugin starts. A worker that was
 * stopped is never reused. `close()` (on plugin dispose) stops the idle one.
 */
export class ScanWorkers {
  #idle: Worker | undefined
  #closed = false

  /** Starts the idle worker ahead of the first search. */
  warm(): void {
    if (!this.#closed && this.#idle === undefined) this.#release(this.#spawn())
  }

  /**
   * Runs `job`. When `deadline` fires, the worker is stopped and what was posted so
   * far is the (partial) result; when `signal` fires, the worker is stopped and the
   * call rejects.
   */
  run(job: GrepJob | GlobJob | TestJob | CountJob, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult> {
    signal.throwIfAborted()
    const worker = this.#take()
    const progress = new Progress()
    const lines: string[] = []
    let files = 0
    let truncatedLines = 0
    let lastMatchedFile = -1
    const skipped = () => Object.fromEntries(COUNTERS.map(counter => [counter, progress.get(counter)])) as Record<Counter, number>

    return new Promise<ScanResult>((resolve, reject) => {
      const settle = (keepWorker: boolean, finish: () => void) => {
        signal.removeEventListener('abort', onAbort)
        deadline?.removeEventListener('abort', onDeadline)
        worker.off('message', onMessage).off('error', onError).off('exit', onExit)
        if (keepWorker) {
          this.#release(worker)
          finish()
        } else {
          // Once it is stopped, what it shared can no longer change under the reader.
          worker.terminate().then(finish, finish)
        }
      }
      const onAbort = () => settle(false, () => reject(signal.reason))
      const onDeadline = () =>
        settle(false, () =>
          resolve({ engine: 'worker', lines, files, cut: false, truncatedLines, skipped: skipped(), timedOut: true, stoppedIn: progress.current() }),
        )
      const onError = (error: Error) => settle(false, () => reject(error))
      const onExit = (code: number) => settle(false, () => reject(new Error(`the search worker exited (code ${code}) before finishing`)))
      const onMessage = (message: ScanMessage) => {
        if (message.kind === 'match') {
          lines.push(message.text)
          if (message.truncated) truncatedLines++
          if (message.file !== lastMatchedFile) files++
          lastMatchedFile = message.file
        } else {
          const { cut, glob, verdicts } = message
          settle(true, () => resolve({ engine: 'worker', lines, files, cut, truncatedLines, glob, verdicts, skipped: skipped(), timedOut: false }))
        }
      }
      signal.addEventListener('abort', onAbort, { once: true })
      deadline?.addEventListener('abort', onDeadline, { once: true })
      worker.on('message', onMessage).on('error', onError).on('exit', onExit)
      if (deadline?.aborted) onDeadline()
      else worker.postMessage({ ...job, progress: progress.buffer } satisfies ScanJob)
    })
  }

  /** Stops the idle worker; later searches start their own and stop it after. */
  close(): void {
    this.#closed = true
    void this.#idle?.terminate()
    this.#idle = undefined
  }

  #spawn(): Worker {
    workerCounts.started++
    const fresh = new Worker(WORKER)
    // While idle nobody else listens: an unhandled 'error' event would throw in the host.
    return fresh
      .on('error', () => {})
      .on('exit', () => {
        if (this.#idle === fresh) this.#idle = undefined
      })
  }

  #take(): Worker {
    const worker = this.#idle ?? this.#spawn()
    this.#idle = undefined
    worker.ref()
    return worker
  }

  #release(worker: Worker): void {
    if (this.#closed || this.#idle !== undefined) {
      void worker.terminate()
      return
    }
    worker.unref() // an idle worker does not keep the process alive
    this.#idle = worker
  }
}
