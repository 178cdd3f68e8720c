// The ripgrep binary: finding it (once), checking it runs, and running it with the
// call's abort signal and deadline.
import { spawn } from 'node:child_process'
import { accessSync, constants, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, isAbsolute, join } from 'node:path'
import { type LaunchOptions, type Launched, launch } from './launcher.ts'

/** The `ripgrep` config key: `auto` (rg on PATH), `never`, or the path of a binary. */
export type RipgrepSetting = string

/** ripgrep 11 brought `--no-require-git`, the oldest option the engine needs. */
const OLDEST_MAJOR = 11

export interface RunResult {
  stdout: Buffer
  /** The exit code (0: found, 1: nothing, 2: an error), null when stopped. */
  code: number | null
  /** Why it was stopped before it finished. */
  stopped?: 'deadline' | 'overflow'
  /** What it printed on stderr (its error messages), cut to a few kilobytes. */
  stderr: string
}

export interface RunOptions {
  cwd: string
  /** The call's abort signal: ripgrep is killed and the run rejects. */
  signal: AbortSignal
  /** When it fires, ripgrep is killed and the run resolves with what it printed. */
  deadline?: AbortSignal
  /** Past this many bytes of output, ripgrep is killed (`stopped: 'overflow'`). */
  maxOutputBytes: number
  /** Called with each chunk of output as it arrives, while ripgrep still runs (the chunks are collected all the same). */
  onStdout?: (chunk: Buffer) => void
}

const STDERR_KEPT = 4096

/** Runs ripgrep and collects its output; rejects when the binary cannot start or `signal` fires (ripgrep is killed first). */
export function runRipgrep(binary: string, args: string[], options: RunOptions): Promise<RunResult> {
  const { signal, deadline } = options
  signal.throwIfAborted()
  const chunks: Buffer[] = []
  let bytes = 0
  const stderr: Buffer[] = []
  let stderrBytes = 0
  let stopped: RunResult['stopped']
  const onStdout = (chunk: Buffer) => {
    bytes += chunk.length
    if (bytes > options.maxOutputBytes) stop('overflow')
    else {
      chunks.push(chunk)
      options.onStdout?.(chunk)
    }
  }
  const onStderr = (chunk: Buffer) => {
    if (stderrBytes < STDERR_KEPT) stderr.push(chunk.subarray(0, STDERR_KEPT - stderrBytes))
    stderrBytes += chunk.length
  }
  const started = launch(binary, args, { cwd: options.cwd, onStdout, onStderr }) ?? spawnDirectly(binary, args, { cwd: options.cwd, onStdout, onStderr })
  function stop(why: RunResult['stopped']) {
    stopped ??= why
    started.kill()
  }
  const onAbort = () => stop(undefined)
  const onDeadline = () => stop('deadline')
  signal.addEventListener('abort', onAbort, { once: true })
  deadline?.addEventListener('abort', onDeadline, { once: true })
  if (deadline?.aborted) onDeadline()
  const done = () => {
    signal.removeEventListener('abort', onAbort)
    deadline?.removeEventListener('abort', onDeadline)
  }
  return started.closed.then(
    code => {
      done()
      if (signal.aborted) throw signal.reason
      return { stdout: Buffer.concat(chunks), code, stopped, stderr: Buffer.concat(stderr).toString('utf8') }
    },
    error => {
      done()
      throw signal.aborted ? signal.reason : error
    },
  )
}

/** Starts the program from this process (where there is no launcher): what `launch` answers, from a spawn. */
function spawnDirectly(binary: string, args: string[], options: LaunchOptions): Launched {
  const child = spawn(binary, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  child.stdout.on('data', options.onStdout)
  child.stderr.on('data', options.onStderr)
  const closed = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  return { kill: () => child.kill('SIGKILL'), closed }
}

/** The first `rg` on PATH that is an executable file. */
function onPath(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, 'rg')
    if (isExecutableFile(candidate)) return candidate
  }
  return undefined
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}

const expandHome = (path: string) => (path.startsWith('~/') ? join(homedir(), path.slice(2)) : path)

/** Throws, naming the key, when a `ripgrep` setting is a path that is not an executable file. */
export function checkSetting(setting: RipgrepSetting): void {
  if (setting === 'auto' || setting === 'never') return
  const path = expandHome(setting)
  if (!isAbsolute(path) || !isExecutableFile(path)) {
    throw new Error(
      `ripgrep: "${setting}" is not an executable file; set "auto" (rg on PATH), "never" (the search worker only) or the absolute path of an rg binary`,
    )
  }
}

/** Whether `binary --version` says it is ripgrep 11 or later (older ones lack `--no-require-git`). */
async function runsAsRipgrep(binary: string): Promise<boolean> {
  try {
    const run = await runRipgrep(binary, ['--version'], { cwd: process.cwd(), signal: AbortSignal.timeout(10_000), maxOutputBytes: 1 << 16 })
    const major = /^ripgrep (\d+)\./.exec(run.stdout.toString())?.[1]
    return run.code === 0 && major !== undefined && Number(major) >= OLDEST_MAJOR
  } catch {
    return false
  }
}

/** Binaries already checked in this process: each runs `--version` once. */
const checked = new Map<string, Promise<boolean>>()
/** `auto`'s lookup of PATH, done once in this process. */
let onPathOnce: { binary: string | undefined } | undefined

/**
 * The ripgrep binary a setting names (`auto`: the first `rg` on PATH, looked up once;
 * undefined for `never` or when there is none), and whether it runs as ripgrep 11 or
 * later (checked once per binary, in the background: a search need not wait for it
 * before it starts).
 */
export function locateRipgrep(setting: RipgrepSetting): { binary: string; runs: Promise<boolean> } | undefined {
  if (setting === 'never') return undefined
  if (setting === 'auto') onPathOnce ??= { binary: onPath() }
  const binary = setting === 'auto' ? onPathOnce!.binary : expandHome(setting)
  if (binary === undefined) return undefined
  let runs = checked.get(binary)
  if (runs === undefined) {
    runs = runsAsRipgrep(binary)
    checked.set(binary, runs)
  }
  return { binary, runs }
}

/** The ripgrep on PATH, checked; undefined when there is none (tests and benches skip their ripgrep cases then). */
export async function installedRipgrep(): Promise<string | undefined> {
  const located = locateRipgrep('auto')
  return located !== undefined && (await located.runs) ? located.binary : undefined
}
