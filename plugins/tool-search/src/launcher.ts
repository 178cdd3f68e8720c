// Starting ripgrep from a small shell kept for it, instead of from the host.
//
// Node starts a process by forking the host first, and a fork copies the host's page
// tables, blocking the event loop meanwhile: the more memory the host holds, the longer
// (on a 2-core VM, a spawn of /bin/true takes 7 ms from a 90 MB host, 16 ms from a
// 390 MB one). A launcher is `/bin/sh` reading commands on its stdin; it forks the
// program from its own few megabytes (4.5 ms for /bin/true there, whatever the host's
// size). For each run it starts the program in the background (its arguments
// single-quoted, so the shell reads them as data, never as code), says its pid and then
// its exit status on a control pipe (fd 3), and writes an end mark, random for each run,
// to its stdout and stderr: the run's output is what the program wrote before the mark.
//
// A launcher runs one program at a time; overlapping runs take another (at most
// IDLE_KEPT wait between runs). The program gets the environment the host had when the
// launcher started (ripgrep is told everything it needs by its arguments). A program
// must not leave a process writing to its output (ripgrep does not): what that wrote
// during the next run would be read as the next run's. Output that arrives while a
// launcher waits can only come from such a process, so that launcher is retired. A
// waiting launcher does not keep the host alive, and ends with it (its stdin closes).
// Without `/bin/sh` (Windows) `launch` answers undefined and the caller spawns the
// program itself.
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import type { Readable } from 'node:stream'

/** A program started through a launcher. */
export interface Launched {
  /** Stops the program (SIGKILL); its run then ends with what it wrote. */
  kill(): void
  /**
   * The exit code, null when a signal stopped it. Rejects with code ENOENT or EACCES
   * when the program or the folder cannot be used (as a spawn would), and ECHILD when
   * the launcher itself went away.
   */
  closed: Promise<number | null>
}

export interface LaunchOptions {
  cwd: string
  onStdout(chunk: Buffer): void
  onStderr(chunk: Buffer): void
}

/** Launchers kept waiting between runs. */
const IDLE_KEPT = 2
const SHELL = '/bin/sh'

/** The exit statuses the launcher's shell gives when the program did not start. */
const NOT_STARTED: Record<number, string> = { 125: 'ENOENT', 126: 'EACCES', 127: 'ENOENT' }

/** Single-quoted for the shell: nothing inside is special but the quote, which is closed, escaped and reopened. */
export const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`

const idle: Launcher[] = []
let available: boolean | undefined

/** Starts `binary` with `args` through a launcher; undefined when there is no shell to launch from (spawn it then). */
export function launch(binary: string, args: readonly string[], options: LaunchOptions): Launched | undefined {
  available ??= process.platform !== 'win32' && existsSync(SHELL)
  // A NUL cannot be passed to a program; spawn refuses it, with its own error.
  if (!available || [binary, options.cwd, ...args].some(word => word.includes('\0'))) return undefined
  return (idle.pop() ?? new Launcher()).run(binary, args, options)
}

/** Launchers started in this process, for tests. */
export const launcherCounts = { started: 0 }

/** The data before a mark that ends a stream, passed on as it arrives (bytes that could begin the mark wait for the next chunk). */
class MarkedStream {
  #held: Buffer = Buffer.alloc(0)
  #ended = false

  readonly #mark: Buffer
  readonly #onData: (chunk: Buffer) => void

  constructor(mark: Buffer, onData: (chunk: Buffer) => void) {
    this.#mark = mark
    this.#onData = onData
  }

  get ended(): boolean {
    return this.#ended
  }

  push(chunk: Buffer): void {
    if (this.#ended) return
    const bytes = this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk])
    const at = bytes.indexOf(this.#mark)
    if (at !== -1) {
      this.#ended = true
      this.#held = Buffer.alloc(0)
      if (at > 0) this.#onData(bytes.subarray(0, at))
      return
    }
    const keep = this.#markStartAtEnd(bytes)
    this.#held = Buffer.from(bytes.subarray(bytes.length - keep))
    if (bytes.length > keep) this.#onData(bytes.subarray(0, bytes.length - keep))
  }

  /** How many bytes at the end of `bytes` could begin the mark (held back until the next chunk says). */
  #markStartAtEnd(bytes: Buffer): number {
    for (let length = Math.min(bytes.length, this.#mark.length - 1); length > 0; length--) {
      if (bytes.compare(this.#mark, 0, length, bytes.length - length) === 0) return length
    }
    return 0
  }
}

/** One run: its output streams, and what its control messages and the launcher's end do. */
interface Run {
  stdout: MarkedStream
  stderr: MarkedStream
  control(line: string): void
  /** Called after output arrives: the run may be complete. */
  check(): void
  lost(): void
}

class Launcher {
  readonly #shell: ChildProcess
  #run: Run | undefined
  #controlText = ''
  #gone = false

  constructor() {
    launcherCounts.started++
    // Its own session: a Ctrl-C meant for the host's terminal does not end it (the host stops what it runs).
    this.#shell = spawn(SHELL, [], { stdio: ['pipe', 'pipe', 'pipe', 'pipe'], detached: true })
    const control = this.#shell.stdio[3] as Readable
    this.#hold(false)
    this.#shell.stdout!.on('data', (chunk: Buffer) => this.#output('stdout', chunk))
    this.#shell.stderr!.on('data', (chunk: Buffer) => this.#output('stderr', chunk))
    control.setEncoding('latin1').on('data', (text: string) => {
      this.#controlText += text
      for (let newline = this.#controlText.indexOf('\n'); newline !== -1; newline = this.#controlText.indexOf('\n')) {
        const line = this.#controlText.slice(0, newline)
        this.#controlText = this.#controlText.slice(newline + 1)
        this.#run?.control(line)
      }
    })
    const lost = () => {
      if (this.#gone && this.#run === undefined) return
      this.#retire()
      const run = this.#run
      this.#run = undefined
      this.#hold(false)
      run?.lost()
    }
    this.#shell.on('error', lost).on('exit', lost)
    this.#shell.stdin!.on('error', lost)
  }

  run(binary: string, args: readonly string[], options: LaunchOptions): Launched {
    const mark = Buffer.from(randomBytes(12).toString('hex'))
    let pid: number | undefined
    let killed = false
    let status: number | undefined
    let settle!: { resolve(code: number | null): void; reject(error: Error): void }
    const closed = new Promise<number | null>((resolve, reject) => {
      settle = { resolve, reject }
    })
    const kill = () => {
      killed = true
      if (pid === undefined) return // killed once its pid is known
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    const run: Run = {
      stdout: new MarkedStream(mark, options.onStdout),
      stderr: new MarkedStream(mark, options.onStderr),
      control: line => {
        const [kind, value] = line.split(' ')
        if (kind === 'p') {
          pid = Number(value)
          if (killed) kill()
        } else if (kind === 'x') status = Number(value)
        run.check()
      },
      check: () => {
        if (status === undefined || !run.stdout.ended || !run.stderr.ended) return
        this.#run = undefined
        this.#hold(false)
        this.#release()
        const code = killed ? undefined : NOT_STARTED[status]
        if (code !== undefined) settle.reject(Object.assign(new Error(`launch ${binary}: ${code}`), { code }))
        else settle.resolve(status > 128 ? null : status)
      },
      lost: () => {
        if (pid !== undefined && status === undefined) kill()
        settle.reject(Object.assign(new Error(`launch ${binary}: the launcher exited`), { code: 'ECHILD' }))
      },
    }
    this.#run = run
    this.#hold(true)
    const program = [binary, ...args].map(quote).join(' ')
    this.#shell.stdin!.write(
      `(cd -P -- ${quote(options.cwd)} || exit 125; exec ${program} </dev/null 3>&-) & echo "p $!" >&3; { wait $!; } 2>/dev/null; echo "x $?" >&3; printf %s ${mark}; printf %s ${mark} >&2\n`,
    )
    return { kill, closed }
  }

  /** A run in progress keeps the host alive, as a child process would; a launcher waiting for commands does not. */
  #hold(running: boolean): void {
    for (const handle of [this.#shell, ...this.#shell.stdio] as ({ ref?(): void; unref?(): void } | null)[]) {
      if (running) handle?.ref?.()
      else handle?.unref?.()
    }
  }

  #output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const run = this.#run
    if (run !== undefined) {
      run[stream].push(chunk)
      run.check()
    } else if (!this.#gone) this.#retire()
  }

  /** Waits for the next run, or retires when enough wait. */
  #release(): void {
    if (this.#gone) return
    if (idle.length < IDLE_KEPT) idle.push(this)
    else this.#retire()
  }

  /** Leaves the launchers that wait, and ends: its shell reads the end of its input and exits. */
  #retire(): void {
    this.#gone = true
    const at = idle.indexOf(this)
    if (at !== -1) idle.splice(at, 1)
    this.#shell.stdin!.end()
  }
}
