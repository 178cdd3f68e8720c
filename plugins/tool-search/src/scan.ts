import { Worker } from 'node:worker_threads'

/** A file for grep to search, as the walk found it. */
export interface ScanFile {
  /** Shown to the model (relative to the workspace root). */
  display: string
  /** Read from (symlinks resolved, inside the workspace). */
  real: string
  size: number
}

/** The worker's input. */
export interface ScanJob {
  /** The regular expression, already compiled once on the main thread to report syntax errors. */
  source: string
  flags: string
  files: ScanFile[]
  maxMatches: number
  maxLineBytes: number
  maxFileBytes: number
  /** `progress[0]`: the index of the file being searched, readable while the worker is stuck in it. */
  progress: Int32Array
}

/** What the worker posts, in file order. */
export type ScanMessage =
  | { kind: 'match'; file: number; text: string; truncated: boolean }
  | { kind: 'skip'; file: number; reason: 'binary' | 'large' }
  | { kind: 'done'; cut: boolean }

export interface ScanResult {
  /** `file:line: text`, in order. */
  lines: string[]
  /** Files with at least one line in `lines`. */
  files: number
  /** The match cap was reached and another match exists. */
  cut: boolean
  binary: number
  large: number
  truncatedLines: number
  /** The deadline stopped the search: the results are what was found before it. */
  timedOut: boolean
  /** With `timedOut`: the file the search was in. */
  stoppedIn?: string
}

// Next to this module: scan-worker.ts in the sources, scan-worker.js once compiled.
const WORKER = new URL(`./scan-worker${import.meta.url.slice(import.meta.url.lastIndexOf('.'))}`, import.meta.url)

/**
 * Runs grep's line matching in worker threads. A model-chosen regular expression can
 * backtrack for minutes on one line, and a RegExp call cannot be interrupted on the
 * thread running it; in a worker it can (`worker.terminate()`), and the host's event
 * loop keeps serving timers, signals and other calls meanwhile.
 *
 * One idle worker is kept between searches (starting one costs 50 to 150 ms); a
 * worker that was stopped is never reused. `close()` (on plugin dispose) stops the
 * idle one.
 */
export class ScanWorkers {
  #idle: Worker | undefined
  #closed = false

  /**
   * Searches the files of `job`. When `deadline` fires, the worker is stopped and the
   * matches posted so far are the (partial) result; when `signal` fires, the worker is
   * stopped and the call rejects.
   */
  run(job: Omit<ScanJob, 'progress'>, signal: AbortSignal, deadline: AbortSignal): Promise<ScanResult> {
    signal.throwIfAborted()
    const worker = this.#take()
    const progress = new Int32Array(new SharedArrayBuffer(4))
    const result: ScanResult = { lines: [], files: 0, cut: false, binary: 0, large: 0, truncatedLines: 0, timedOut: false }
    let lastMatchedFile = -1

    return new Promise<ScanResult>((resolve, reject) => {
      const settle = (keepWorker: boolean, finish: () => void) => {
        signal.removeEventListener('abort', onAbort)
        deadline.removeEventListener('abort', onDeadline)
        worker.off('message', onMessage).off('error', onError).off('exit', onExit)
        if (keepWorker) this.#release(worker)
        else void worker.terminate()
        finish()
      }
      const onAbort = () => settle(false, () => reject(signal.reason))
      const onDeadline = () => settle(false, () => resolve({ ...result, timedOut: true, stoppedIn: job.files[Atomics.load(progress, 0)]?.display }))
      const onError = (error: Error) => settle(false, () => reject(error))
      const onExit = (code: number) => settle(false, () => reject(new Error(`the grep worker exited (code ${code}) before finishing`)))
      const onMessage = (message: ScanMessage) => {
        if (message.kind === 'match') {
          result.lines.push(message.text)
          if (message.truncated) result.truncatedLines++
          if (message.file !== lastMatchedFile) result.files++
          lastMatchedFile = message.file
        } else if (message.kind === 'skip') {
          result[message.reason]++
        } else {
          settle(true, () => resolve({ ...result, cut: message.cut }))
        }
      }
      signal.addEventListener('abort', onAbort, { once: true })
      deadline.addEventListener('abort', onDeadline, { once: true })
      worker.on('message', onMessage).on('error', onError).on('exit', onExit)
      if (deadline.aborted) onDeadline()
      else worker.postMessage({ ...job, progress } satisfies ScanJob)
    })
  }

  /** Stops the idle worker; later searches start their own and stop it after. */
  close(): void {
    this.#closed = true
    void this.#idle?.terminate()
    this.#idle = undefined
  }

  #take(): Worker {
    let worker = this.#idle
    this.#idle = undefined
    if (worker === undefined) {
      const fresh = new Worker(WORKER)
      // While idle nobody else listens: an unhandled 'error' event would throw in the host.
      fresh
        .on('error', () => {})
        .on('exit', () => {
          if (this.#idle === fresh) this.#idle = undefined
        })
      worker = fresh
    }
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
