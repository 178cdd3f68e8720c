// Entry point of the `loom` command (bin/loom.js and `pnpm loom` run this file).
import { enableCompileCache } from 'node:module'
import { Socket } from 'node:net'
import type { Interrupt } from './context.ts'

// Node keeps the compiled (and type-stripped) modules between runs: a warm
// start boots about a third faster. Before the first import of the command.
enableCompileCache?.()
const { main } = await import('./cli.ts')

/** The signals that stop a command, and its exit code after each (128 + the signal's number). */
const STOP_SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const
type StopSignal = keyof typeof STOP_SIGNALS

/**
 * A process-group kill through a launcher (bin/loom.js, tsx under `pnpm loom`,
 * `loom dev`'s restart) reaches this process twice: once from the group and
 * once passed on by the launcher. The same signal again within this window is
 * that one request, not a second one.
 */
const DUPLICATE_MS = 500

/** How long an uncaught error waits for the running turn to be closed and written. */
const CRASH_DEADLINE_MS = 2000

/** What a stop signal does to the command running now; unset before its deployment is up. */
let interrupt: Interrupt | undefined
/** The exit code once the command has closed its work after a signal or a crash. */
let stopping: number | undefined
let previous: { signal: StopSignal; at: number } | undefined

// The first signal lets the command close what runs (the turn is cancelled,
// closed and written), then exits with the signal's code. A second one while it
// does, or one with nothing to close, exits at once.
function onSignal(signal: StopSignal) {
  const now = Date.now()
  if (previous?.signal === signal && now - previous.at < DUPLICATE_MS) return
  previous = { signal, at: now }
  const outcome = stopping === undefined && interrupt ? interrupt(signal) : 'exit'
  if (outcome === 'exit') process.exit(STOP_SIGNALS[signal])
  if (outcome === 'stopping') stopping = STOP_SIGNALS[signal]
}
for (const signal of Object.keys(STOP_SIGNALS) as StopSignal[]) process.on(signal, () => onSignal(signal))

// Started by a launcher (bin/loom.js, `loom dev`), this process holds one end of
// a pipe whose other end closes when the launcher dies, a SIGKILL included: the
// pid that was started is then gone, and this one stops as on its SIGTERM.
// The variable goes, so a `loom` that a tool starts does not take fd 3 for a pipe.
const launcherFd = Number(process.env.LOOM_LAUNCHER_FD)
delete process.env.LOOM_LAUNCHER_FD
if (Number.isInteger(launcherFd) && launcherFd > 2) watchLauncher(launcherFd)

function watchLauncher(fd: number) {
  let pipe: Socket
  try {
    pipe = new Socket({ fd, readable: true, writable: false })
  } catch {
    return // not a pipe: no launcher to watch
  }
  pipe.on('error', () => {}) // followed by 'close'
  pipe.on('close', () => onSignal('SIGTERM'))
  // Read (the launcher writes nothing) to see the end; the pipe alone keeps nothing running.
  pipe.resume().unref()
}

// A closed pipe (`loom run ... | head`) or a terminal that went away: nothing
// more can be shown. Not an error, nor a user's cancel: the running turn is
// cancelled and closed with the cause `output-closed` (cli.ts), quietly, and the
// command ends with its own exit code (a turn's: 141, as a writer SIGPIPE stops).
let outputClosed = false
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE' && error.code !== 'EIO') throw error
    if (outputClosed) return
    outputClosed = true
    if (!interrupt) process.exit(process.exitCode ?? 0)
    if (stopping === undefined) interrupt('SIGPIPE')
  })
}

// A bug must not leave the turn open either: cancel it, give the log a moment
// to be written, then exit 1. The running command shows the error, naming the
// plugin it came from, and the turn's end records it (cli.ts).
let crashed = false
function onCrash(error: unknown) {
  if (crashed) return
  crashed = true
  if (interrupt && stopping === undefined) {
    interrupt('SIGTERM', error)
  } else {
    if (!outputClosed) process.stderr.write(`loom: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    if (!interrupt) process.exit(1)
  }
  stopping = 1
  process.exitCode = 1
  setTimeout(() => process.exit(1), CRASH_DEADLINE_MS).unref()
}
process.on('uncaughtException', onCrash)
process.on('unhandledRejection', onCrash)

const code = await main(process.argv.slice(2), {
  onInterrupt: value => {
    interrupt = value
  },
})
const exitCode = stopping ?? code
process.exitCode = exitCode
// Plugins should leave nothing running; if one does, do not hang the shell.
setTimeout(() => process.exit(exitCode), 2000).unref()
