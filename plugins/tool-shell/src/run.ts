import { spawn, type ChildProcess } from 'node:child_process'
import { TailBuffer } from './tail.ts'

/**
 * How long the call waits, after the shell exited, for stdout/stderr to close.
 * A process the command left in the background that still holds them open is
 * stopped (its process group gets SIGTERM, then SIGKILL after the grace period).
 */
export const DRAIN_MS = 200

export interface RunOptions {
  shell: string
  command: string
  cwd: string
  env: NodeJS.ProcessEnv
  timeoutMs: number
  graceMs: number
  maxOutputBytes: number
  signal?: AbortSignal
}

export interface StreamOutput {
  text: string
  /** Bytes cut from the head of the stream (only the tail is kept). */
  truncated: number
  /** Bytes the command wrote to the stream in total. */
  total: number
}

export interface RunResult {
  stdout: StreamOutput
  stderr: StreamOutput
  /** The shell's exit code; `null` when it was ended by a signal. */
  exitCode: number | null
  signal: NodeJS.Signals | null
  timedOut: boolean
  aborted: boolean
  /** The shell exited but processes it left behind held the output open; they were stopped. */
  stoppedBackground: boolean
  durationMs: number
}

type Reason = 'timeout' | 'abort' | 'background' | 'dispose'

/**
 * One `<shell> -c <command>` subprocess in its own process group (`detached`), so
 * that a timeout, an abort or an unload signals the whole tree: the shell, its
 * children and anything they started in the background.
 */
export class ShellRun {
  readonly done: Promise<RunResult>
  private readonly child: ChildProcess
  private readonly stdout: TailBuffer
  private readonly stderr: TailBuffer
  private readonly started = Date.now()
  private reason: Reason | undefined
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined
  private settled = false
  private timeoutTimer: NodeJS.Timeout | undefined
  private drainTimer: NodeJS.Timeout | undefined
  private killTimer: NodeJS.Timeout | undefined
  private resolve!: (result: RunResult) => void
  private reject!: (error: Error) => void
  private readonly onAbort = () => this.terminate('abort')

  /** `onRelease` runs once nothing of this run is left: no timer, no live process group known to it. */
  constructor(private readonly options: RunOptions, private readonly onRelease: (run: ShellRun) => void) {
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.stdout = new TailBuffer(options.maxOutputBytes)
    this.stderr = new TailBuffer(options.maxOutputBytes)
    this.child = spawn(options.shell, ['-c', options.command], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    })
    this.child.stdout!.on('data', (chunk: Buffer) => this.stdout.write(chunk))
    this.child.stderr!.on('data', (chunk: Buffer) => this.stderr.write(chunk))
    this.child.on('error', error => this.fail(error))
    this.child.on('exit', (code, signal) => this.onExit(code, signal))
    this.child.on('close', () => this.finish())
    if (this.child.pid === undefined) return // spawn failed; 'error' follows
    this.timeoutTimer = setTimeout(() => this.terminate('timeout'), options.timeoutMs)
    options.signal?.addEventListener('abort', this.onAbort, { once: true })
    if (options.signal?.aborted) this.terminate('abort')
  }

  /** SIGTERM to the process group now, SIGKILL after `graceMs` if anything is left. */
  terminate(reason: Reason): void {
    if (this.reason !== undefined || this.settled) return
    this.reason = reason
    clearTimeout(this.timeoutTimer)
    this.signalGroup('SIGTERM')
    this.killTimer = setTimeout(() => {
      this.killTimer = undefined
      this.signalGroup('SIGKILL')
      if (this.settled) this.onRelease(this)
    }, this.options.graceMs)
  }

  /** Immediate SIGKILL of the group and no timers left: the plugin is being unloaded. */
  dispose(): void {
    this.reason ??= 'dispose'
    this.signalGroup('SIGKILL')
    clearTimeout(this.killTimer)
    this.killTimer = undefined
    this.finish()
  }

  private signalGroup(signal: NodeJS.Signals | 0): boolean {
    const pid = this.child.pid
    if (pid === undefined) return false
    try {
      process.kill(-pid, signal)
      return true
    } catch {
      return false // ESRCH: the group is gone
    }
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exit = { code, signal }
    if (this.settled) return
    // Output still buffered in the pipes arrives within a few ms; a pipe held open
    // longer belongs to a process the command left behind.
    this.drainTimer = setTimeout(() => {
      this.drainTimer = undefined
      if (this.reason === undefined) this.terminate('background')
      this.finish()
    }, DRAIN_MS)
  }

  private fail(error: Error): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.options.signal?.removeEventListener('abort', this.onAbort)
    this.reject(error)
    this.release()
  }

  private finish(): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.options.signal?.removeEventListener('abort', this.onAbort)
    this.child.stdout?.destroy()
    this.child.stderr?.destroy()
    const out = (buffer: TailBuffer): StreamOutput => ({ ...buffer.read(), total: buffer.total })
    this.resolve({
      stdout: out(this.stdout),
      stderr: out(this.stderr),
      exitCode: this.exit?.code ?? null,
      signal: this.exit?.signal ?? (this.exit ? null : 'SIGKILL'),
      timedOut: this.reason === 'timeout',
      aborted: this.reason === 'abort' || this.reason === 'dispose',
      stoppedBackground: this.reason === 'background',
      durationMs: Date.now() - this.started,
    })
    this.release()
  }

  private clearTimers(): void {
    clearTimeout(this.timeoutTimer)
    clearTimeout(this.drainTimer)
    this.timeoutTimer = this.drainTimer = undefined
  }

  /** Released once settled, unless a SIGKILL is still due to a group that is alive. */
  private release(): void {
    if (this.killTimer !== undefined) {
      if (this.signalGroup(0)) return // still alive: the timer releases
      clearTimeout(this.killTimer)
      this.killTimer = undefined
    }
    this.onRelease(this)
  }
}
