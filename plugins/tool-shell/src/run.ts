import { spawn, type ChildProcess } from 'node:child_process'
import { constants } from 'node:os'
import type { Readable } from 'node:stream'
import { MARKER_VAR, callProcesses, killCall, newMarker, startTimeOf, type CallTree } from './procs.ts'
import { bwrapArgs, findExecutable, type Confinement } from './sandbox.ts'
import { StreamBuffer } from './tail.ts'

/**
 * How long the call waits, after the shell exited, for stdout/stderr to close.
 * Output still buffered in the pipes arrives within a few ms; a pipe held open
 * longer belongs to a process the command left behind, which is then killed.
 */
export const DRAIN_MS = 200

export interface RunOptions {
  shell: string
  command: string
  cwd: string
  /** The command's environment; the run adds its marker (`LOOM_TOOL_CALL`). */
  env: NodeJS.ProcessEnv
  /** A confinement: through bubblewrap, in its own PID namespace; `none`: a plain subprocess. */
  sandbox: Confinement | 'none'
  timeoutMs: number
  graceMs: number
  /** Bytes kept of each stream (stdout, stderr): all of it up to this, else its head and tail halves. */
  keepBytes: number
  signal?: AbortSignal
}

export interface StreamOutput {
  /** The stream, or its head when it was longer than what a run keeps (`truncated` > 0). */
  text: string
  /** The tail of the stream when bytes were dropped between it and `text`; '' otherwise. */
  tail: string
  /** Bytes dropped between `text` and `tail`. */
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
  /** Processes the command left running when the shell exited were killed (only seen without bwrap). */
  stoppedBackground: boolean
  durationMs: number
}

type Reason = 'timeout' | 'abort' | 'dispose'

function signalName(number: number): NodeJS.Signals | undefined {
  return (Object.keys(constants.signals) as NodeJS.Signals[]).find(name => constants.signals[name] === number)
}

/**
 * One `<shell> -c <command>` subprocess and everything it starts. It leads its
 * own process group (`detached`), so a SIGTERM reaches the whole ordinary tree;
 * whatever is left when the call ends (a timeout, an abort, an unload, or simply
 * the shell exiting) is killed with SIGKILL: the group, every process carrying
 * the call's marker, and with bwrap the whole PID namespace.
 */
export class ShellRun {
  private readonly options: RunOptions
  private readonly onRelease: (run: ShellRun) => void
  readonly done: Promise<RunResult>
  /** The value of `LOOM_TOOL_CALL` in the command's environment. */
  readonly marker = newMarker()
  private readonly child: ChildProcess
  /** With bwrap: the shell's pid (as this host sees it), reported by bwrap on fd 3. */
  private shellPid: number | undefined
  /** The start time of the spawned process: no process of this call is older. */
  private since: number | undefined
  private readonly stdout: StreamBuffer
  private readonly stderr: StreamBuffer
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

  /** `onRelease` runs once the run is over: settled, its processes killed, no timer left. */
  constructor(options: RunOptions, onRelease: (run: ShellRun) => void) {
    this.options = options
    this.onRelease = onRelease
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
    this.stdout = new StreamBuffer(options.keepBytes)
    this.stderr = new StreamBuffer(options.keepBytes)
    const env: NodeJS.ProcessEnv = { ...options.env, [MARKER_VAR]: this.marker }
    const common = { cwd: options.cwd, env, detached: true, windowsHide: true } as const
    if (options.sandbox !== 'none') {
      const shell = findExecutable(options.shell, options.cwd, env.PATH)
      // The host's TMPDIR may be read-only inside; the private /tmp is not.
      env.TMPDIR = '/tmp'
      const args = [...bwrapArgs(options.sandbox), '--chdir', options.cwd, '--json-status-fd', '3', '--', shell, '-c', options.command]
      this.child = spawn('bwrap', args, { ...common, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] })
      this.readBwrapStatus(this.child.stdio[3] as Readable)
    } else {
      this.child = spawn(options.shell, ['-c', options.command], { ...common, stdio: ['ignore', 'pipe', 'pipe'] })
    }
    this.child.stdout!.on('data', (chunk: Buffer) => this.stdout.write(chunk))
    this.child.stderr!.on('data', (chunk: Buffer) => this.stderr.write(chunk))
    this.child.on('error', error => this.fail(error))
    this.child.on('exit', (code, signal) => this.onExit(code, signal))
    this.child.on('close', () => this.finish())
    if (this.child.pid === undefined) return // spawn failed; 'error' follows
    this.since = startTimeOf(this.child.pid)
    this.timeoutTimer = setTimeout(() => this.terminate('timeout'), options.timeoutMs)
    options.signal?.addEventListener('abort', this.onAbort, { once: true })
    if (options.signal?.aborted) this.terminate('abort')
  }

  /** SIGTERM to the command's processes now, SIGKILL to everything after `graceMs`. */
  terminate(reason: Reason): void {
    if (this.reason !== undefined || this.settled) return
    this.reason = reason
    clearTimeout(this.timeoutTimer)
    const pid = this.child.pid!
    if (this.options.sandbox !== 'none') {
      // The shell's group inside the namespace, not bwrap: bwrap would end the
      // namespace at once. Before the shell's pid is known, that is what happens.
      this.signal(-(this.shellPid ?? pid), 'SIGTERM')
    } else {
      // The group, and the processes that left it (`setsid`) while the shell still
      // links them, so that they too get a chance to stop cleanly.
      this.signal(-pid, 'SIGTERM')
      for (const member of callProcesses(this.tree())) this.signal(member, 'SIGTERM')
    }
    this.killTimer = setTimeout(() => {
      this.killTimer = undefined
      this.killTree()
    }, this.options.graceMs)
  }

  /** Immediate SIGKILL of everything and no timers left: the plugin is being unloaded. */
  dispose(): void {
    this.reason ??= 'dispose'
    this.killTree()
    this.finish()
  }

  /**
   * SIGKILL, synchronously, to the process group(s), to every process carrying the
   * marker, and to the descendants of the shell while it runs. With bwrap, killing
   * bwrap ends the namespace. Returns whether anything was still alive.
   */
  killTree(): boolean {
    return this.child.pid !== undefined && killCall(this.tree())
  }

  private tree(): CallTree {
    const pid = this.child.pid!
    return {
      marker: this.marker,
      groups: this.shellPid === undefined ? [pid] : [pid, this.shellPid],
      // Once the child exited its pid may be reused: then only the marker and the groups identify the rest.
      roots: this.exit ? [] : [pid],
      since: this.since,
    }
  }

  private signal(target: number, signal: NodeJS.Signals): void {
    try {
      process.kill(target, signal)
    } catch {} // ESRCH: already gone
  }

  /** bwrap writes JSON lines on fd 3; the first has `child-pid`, the shell's pid. */
  private readBwrapStatus(stream: Readable): void {
    let pending = ''
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => {
      pending += chunk
      for (let end = pending.indexOf('\n'); end !== -1; end = pending.indexOf('\n')) {
        const line = pending.slice(0, end)
        pending = pending.slice(end + 1)
        try {
          const status = JSON.parse(line)
          if (typeof status['child-pid'] === 'number') this.shellPid = status['child-pid']
        } catch {}
      }
    })
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    // bwrap exits with 128 + n when the shell died of signal n. Only when this run
    // sent a signal is that read as the signal; otherwise it stays an exit code.
    if (this.options.sandbox !== 'none' && this.reason !== undefined && code !== null && code > 128) {
      const name = signalName(code - 128)
      if (name) [code, signal] = [null, name]
    }
    this.exit = { code, signal }
    if (this.settled) return
    this.drainTimer = setTimeout(() => {
      this.drainTimer = undefined
      this.finish()
    }, DRAIN_MS)
  }

  private fail(error: Error): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.options.signal?.removeEventListener('abort', this.onAbort)
    this.reject(error)
    this.onRelease(this)
  }

  private finish(): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.options.signal?.removeEventListener('abort', this.onAbort)
    // Nothing of a call outlives it: whatever the shell left running is killed now.
    const leftovers = this.killTree()
    for (const stream of this.child.stdio) stream?.destroy()
    const out = (buffer: StreamBuffer): StreamOutput => ({ ...buffer.read(), total: buffer.total })
    this.resolve({
      stdout: out(this.stdout),
      stderr: out(this.stderr),
      exitCode: this.exit?.code ?? null,
      signal: this.exit?.signal ?? (this.exit ? null : 'SIGKILL'),
      timedOut: this.reason === 'timeout',
      aborted: this.reason === 'abort' || this.reason === 'dispose',
      // With bwrap the namespace is already gone (or going): nothing to tell.
      stoppedBackground: leftovers && this.reason === undefined && this.options.sandbox === 'none',
      durationMs: Date.now() - this.started,
    })
    this.onRelease(this)
  }

  private clearTimers(): void {
    clearTimeout(this.timeoutTimer)
    clearTimeout(this.drainTimer)
    clearTimeout(this.killTimer)
    this.timeoutTimer = this.drainTimer = this.killTimer = undefined
  }
}
