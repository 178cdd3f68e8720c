// Every way a `loom run` can be stopped closes its turn first: SIGINT, SIGTERM
// and SIGHUP (to the process, or to its whole process group through a
// launcher), and an uncaught error. The log ends with `turn/end` and `sessions
// verify` finds nothing open.
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { BIN, MAIN, SLOW_MODEL, cleanEnv, events, loom, project, scriptedModel, sessionFiles, type Run } from './helpers.ts'

/** A row whose plugin takes ten minutes to unload: the process is still shutting down after its turn closed. */
const SLOW_EXIT = `
    - id: slow-exit
      name: ./slow-exit.ts
`
const SLOW_EXIT_PLUGIN = `import type { Context } from '@deepseek-ai/cordis'
export const name = 'slow-exit'
export function apply(ctx: Context) {
  ctx.effect(() => () => new Promise<void>(resolve => setTimeout(resolve, 600_000)))
}
`

/** A row whose plugin throws from a timer once a tool starts: an uncaught exception mid-turn. */
const CRASH = `
    - id: crash
      name: ./crash.ts
`
const CRASH_PLUGIN = (how: string) => `import type { Context } from '@deepseek-ai/cordis'
export const name = 'crash'
export function apply(ctx: Context) {
  ctx.on('session/event' as any, (_session: unknown, event: { type: string }) => {
    if (event.type === 'tool/call') setTimeout(() => { ${how} }, 300)
  })
}
`

/**
 * A launcher in front of the CLI that passes the stop signals on, as tsx, npm or
 * `bin/loom.js` started by another Node do: a signal to the group reaches the CLI
 * twice. (tsx itself also SIGKILLs a child that has not confirmed the signal over
 * its IPC channel at once, which a loaded machine can delay.)
 */
const RELAY = `
const { spawn } = require('node:child_process')
const { constants } = require('node:os')
const child = spawn(process.execPath, process.argv.slice(1), { stdio: 'inherit' })
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal))
child.on('exit', (code, signal) => process.exit(code ?? 128 + constants.signals[signal]))
`

interface Started {
  pid: number
  /** Resolves once the process has exited. */
  done: Promise<Run>
  stdout: () => string
  stderr: () => string
}

/** Starts `command args` in its own process group (as a shell starts a job), with the slow model. */
function start(command: string, args: string[], cwd: string, home: string, env: NodeJS.ProcessEnv = cleanEnv(home)): Started {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (data: string) => {
    stdout += data
  })
  child.stderr.setEncoding('utf8').on('data', (data: string) => {
    stderr += data
  })
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL')
    } catch {
      /* gone */
    }
  }, 45_000)
  const done = new Promise<Run>(resolve =>
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    }),
  )
  return { pid: child.pid!, done, stdout: () => stdout, stderr: () => stderr }
}

async function until(condition: () => boolean, what: string, timeoutMs = 30_000) {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms))

/** Waits until the tool runs (the turn is open), then a moment more. */
async function toolRunning(run: Started) {
  await until(() => run.stdout().includes('→ bash: sleep 30'), 'the bash call')
  await sleep(200)
}

/** The turn was closed and written: the log ends with turn/end (cancelled for `cause`), and verify finds it clean. */
async function expectClosed(home: string, cause: object = { kind: 'user' }) {
  const [file] = sessionFiles(home)
  const log = events(file)
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted', reason: cause } } })
  const id = JSON.parse(readFileSync(file, 'utf8').split('\n')[0]).id as string
  // From a plain folder: the test project's own rows (a slow unload, a crash) are not needed to read a log.
  const verify = await loom(['sessions', 'verify', id], { cwd: project().cwd, home })
  expect(verify.stdout).toContain(`session ${id}: clean`)
  expect(verify.stdout).toContain('turns    all closed')
  expect(verify.code).toBe(0)
}

/**
 * Resolves once `signal` is no longer pending for process `pid` (in /proc/PID/status, `ShdPnd`): the kernel handed
 * it to the process, so the same signal sent next is a delivery of its own rather than merged into this one.
 */
async function delivered(pid: number, signal: NodeJS.Signals) {
  const bit = 1n << BigInt(constants.signals[signal] - 1)
  const pending = () => (BigInt(`0x${/^ShdPnd:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]}`) & bit) !== 0n
  const deadline = Date.now() + 30_000
  while (pending()) {
    if (Date.now() > deadline) throw new Error(`${signal} never reached pid ${pid}`)
    await new Promise(resolve => setImmediate(resolve)) // no timer: the next signal follows as soon as it can
  }
}

/** The pids of the processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number)
  } catch {
    return [] // ps exits 1 when there is none
  }
}

/** Whether `pid` runs: a zombie (exited, not yet reaped by whoever adopted it) does not. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/** Another Node on PATH: bin/loom.js started by it runs the CLI in a child process. */
function otherNode(): string | undefined {
  try {
    return execFileSync('which', ['-a', 'node'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .find(path => execFileSync(path, ['--version'], { encoding: 'utf8' }).trim() !== process.version)
  } catch {
    return undefined
  }
}

describe('stopping loom run closes the turn first', () => {
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
    ['SIGINT', 130],
  ] as const) {
    it(`${signal} to the process: exit ${code}, the turn closed in the log`, { timeout: 60_000 }, async () => {
      const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
      const run = start(process.execPath, [MAIN, 'run', 'sleep please'], cwd, home)
      await toolRunning(run)
      process.kill(run.pid, signal)
      const result = await run.done
      expect(result.code, result.stderr).toBe(code)
      expect(result.stderr).toContain('the turn ended: aborted (user)')
      await expectClosed(home)
    })
  }

  it('SIGTERM to the process group through bin/loom.js on another Node (the launcher passes it on too): one request, exit 143', {
    timeout: 60_000,
  }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    // Without another Node, the launcher runs the CLI in its own process: still a group kill.
    const run = start(otherNode() ?? process.execPath, [BIN, 'run', 'sleep please'], cwd, home)
    await toolRunning(run)
    process.kill(-run.pid, 'SIGTERM')
    const result = await run.done
    expect(result.code, result.stderr).toBe(143)
    await expectClosed(home)
  })

  it('SIGKILL to the pid of bin/loom.js that runs the CLI in a child: the child stops as on SIGTERM and releases the session', {
    timeout: 60_000,
  }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    // Without the source condition the launcher cannot run the sources itself: it starts the pinned Node as a child.
    const env = cleanEnv(home, { NODE_OPTIONS: (process.env.NODE_OPTIONS ?? '').replace('--conditions=loom-source', '').trim() })
    const run = start(process.execPath, [BIN, 'run', 'sleep please'], cwd, home, env)
    await toolRunning(run)
    const workers = childrenOf(run.pid)
    expect(workers, 'the launcher runs the CLI in one child process').toHaveLength(1)
    process.kill(run.pid, 'SIGKILL')
    // The child held the output pipes: they close once it has exited.
    const result = await run.done
    await until(() => !alive(workers[0]), 'the child to exit')
    expect(result.stderr).toContain('the turn ended: aborted (user)')
    await expectClosed(home)
    const [file] = sessionFiles(home)
    expect(existsSync(join(dirname(file), 'session.lock')), 'the lease was released').toBe(false)
    const id = JSON.parse(readFileSync(file, 'utf8').split('\n')[0]).id as string
    const repair = await loom(['sessions', 'repair', id], { cwd: project().cwd, home })
    expect(repair.code, repair.stderr).toBe(0)
  })

  it('SIGTERM to the process group through a launcher that relays it: exit 143, the turn closed', { timeout: 60_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    const run = start(process.execPath, ['-e', RELAY, MAIN, 'run', 'sleep please'], cwd, home)
    await toolRunning(run)
    process.kill(-run.pid, 'SIGTERM')
    const result = await run.done
    expect(result.code, result.stderr).toBe(143)
    await expectClosed(home)
  })

  it('the same signal twice at once is one request; a second one later exits at once', { timeout: 60_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL + SLOW_EXIT, 'slow-exit.ts': SLOW_EXIT_PLUGIN })
    const run = start(process.execPath, [MAIN, 'run', 'sleep please'], cwd, home)
    await toolRunning(run)
    // As a launcher relays a signal the group also got: the second one follows once the first was delivered (two
    // deliveries, not one the kernel merged), with no timer in between that load could stretch past the window.
    process.kill(run.pid, 'SIGTERM')
    await delivered(run.pid, 'SIGTERM')
    process.kill(run.pid, 'SIGTERM')
    // The turn is closed and written; the deployment is still unloading.
    await until(() => run.stderr().includes('the turn ended: aborted (user)'), 'the turn end')
    let exited = false
    void run.done.then(() => {
      exited = true
    })
    // Past the window in which the same signal counts as the same request (load only makes it later).
    await sleep(1000)
    expect(exited).toBe(false)

    // The unload takes ten minutes and the watchdog of `start` SIGKILLs the group after 45 s: only an exit
    // that does not wait for the unload ends with 143.
    process.kill(run.pid, 'SIGTERM')
    const result = await run.done
    expect(result.code, 'the second request exits at once, not after the unload').toBe(143)
    await expectClosed(home)
  })

  for (const [what, how, error] of [
    ['an uncaught exception', "throw new Error('boom from a timer')", 'Error: boom from a timer'],
    ['an unhandled rejection', "void Promise.reject(new Error('boom from a promise'))", 'Error: boom from a promise'],
  ] as const) {
    it(`${what} of a plugin mid-turn: the turn is closed as that plugin's error, exit 1`, { timeout: 60_000 }, async () => {
      const { cwd, home } = project({ 'loom.yml': SLOW_MODEL + CRASH, 'crash.ts': CRASH_PLUGIN(how) })
      const run = start(process.execPath, [MAIN, 'run', 'sleep please'], cwd, home)
      const result = await run.done
      expect(result.code, result.stderr).toBe(1)
      expect(result.stderr).toMatch(new RegExp(`loom: uncaught error in row "crash" \\(\\S*crash\\.ts\\): ${error}\n\\s+at `))
      expect(result.stderr).toContain(`the turn ended: aborted (an uncaught error of plugin "crash": ${error})`)
      await expectClosed(home, { kind: 'uncaught', plugin: 'crash', error })
    })
  }
})

describe('a closed output (loom run … | head -1)', () => {
  // The model says a line, then runs bash until the test lets it go (the file `go`), then sleeps: the turn is still
  // running when its next output finds the pipe closed.
  const GATED = scriptedModel(`
- text: First line.
  toolCalls:
    - { name: bash, arguments: { command: 'while [ ! -e go ]; do sleep 0.1; done' } }
- text: Second line.
  toolCalls:
    - { name: bash, arguments: { command: 'sleep 30' } }
- Done.
`)

  it('stops the turn quietly, closed in the log as output-closed (not a user cancel), exit 141', { timeout: 60_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': GATED })
    const child = spawn(process.execPath, [MAIN, 'run', 'say something'], { cwd, env: cleanEnv(home), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (data: string) => {
      stdout += data
    })
    child.stderr.setEncoding('utf8').on('data', (data: string) => {
      stderr += data
    })
    const exited = new Promise<number | null>(resolve => child.on('close', code => resolve(code)))
    // As `head -1`: read the first line, then close the pipe's only reading end.
    await until(() => stdout.includes('First line.\n'), 'the first line')
    child.stdout.destroy()
    writeFileSync(join(cwd, 'go'), '')
    const code = await exited
    expect(code, stderr).toBe(141)
    expect(stderr).not.toContain('aborted')
    expect(stderr).not.toMatch(/EPIPE|error/i)
    // The footer still names the session, on stderr (still open).
    expect(stderr).toMatch(/^session \S+ · scripted\/scripted-1 · /m)
    await expectClosed(home, { kind: 'output-closed' })
  })
})
