// Real subprocesses, in both sandbox modes: what is killed when. A test's processes
// are found in /proc by a unique `sleep` duration in their command lines, which works
// from outside a PID namespace as well as without one.
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as shell from '../src/index.ts'
import { tempDir, textOf, uniqueSleep, waitGone, waitStarted, withArg } from './helpers.ts'

const bwrap = shell.probeBwrap()

let host: Host
let work: ReturnType<typeof tempDir>

beforeEach(async () => {
  work = tempDir()
  host = await createHost({ cwd: work.dir, approve: () => ({ kind: 'allow' }) })
})

afterEach(async () => {
  await host.dispose()
  work.remove()
})

const bash = (command: string, extra: Record<string, unknown> = {}, signal?: AbortSignal) =>
  host.callTool('bash', { command, ...extra }, signal ? { signal } : {})

// Processes that leave the process group in every way a shell can: `setsid` of a
// command, `setsid` of a shell, and a plain background child.
const escapers = (t: string) => `setsid sleep ${t} & (setsid bash -c 'sleep ${t}; true' &); sleep ${t} &`

describe.each([
  { sandbox: 'bwrap' as const, skip: !bwrap.ok },
  { sandbox: 'none' as const, skip: false },
])('sandbox $sandbox', ({ sandbox, skip }) => {
  // Without bubblewrap the bwrap variant cannot run; the reason is in the test name.
  const test = it.skipIf(skip)
  // The four processes of `escapers(t)` and the shell (which execs its last `sleep`); with bwrap, its two too.
  const all = sandbox === 'bwrap' ? 7 : 5
  if (skip) it.skip(`bubblewrap does not work here: ${bwrap.reason}`, () => {})

  test('a timeout kills the whole tree, setsid children included, before the call returns', async () => {
    await host.mount(shell, { sandbox, graceMs: 300 })
    const t = uniqueSleep()
    // Long enough for a loaded machine to start the whole tree (seen below) before the timeout kills it.
    const call = bash(`${escapers(t)} echo started; sleep ${t}`, { timeout: 3_000 })
    await waitStarted(t, all)
    const result = await call
    expect(textOf(result)).toBe('started\n[timed out after 3 s]\n[killed by signal SIGTERM]')
    expect(result.meta).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGTERM' })
    // SIGKILL was sent before the call returned; only its delivery may take a moment on a busy machine.
    expect(await waitGone(t)).toEqual([])
  })

  test('a command that ignores SIGTERM is killed after the grace period', async () => {
    await host.mount(shell, { sandbox, graceMs: 200 })
    const t = uniqueSleep()
    // The loop never ends and ignores SIGTERM: only the SIGKILL after the grace period lets the call return.
    const result = await bash(`trap '' TERM; setsid sleep ${t} & while :; do sleep ${t}; done`, { timeout: 300 })
    expect(textOf(result)).toBe('(no output)\n[timed out after 0.3 s]\n[killed by signal SIGKILL]')
    expect(await waitGone(t)).toEqual([])
  })

  test('an abort through the signal kills the tree', async () => {
    await host.mount(shell, { sandbox, graceMs: 300 })
    const t = uniqueSleep()
    const controller = new AbortController()
    const call = bash(`${escapers(t)} sleep ${t}`, {}, controller.signal)
    await waitStarted(t, all)
    controller.abort()
    const result = await call
    expect(result.isError && result.error.info?.code).toBe('ABORTED')
    expect(await waitGone(t)).toEqual([])
  })

  test('unloading the plugin kills a running tree, and the call settles', async () => {
    const mounted = await host.mount(shell, { sandbox })
    const t = uniqueSleep()
    const call = bash(`${escapers(t)} sleep ${t}`)
    await waitStarted(t, all)
    await mounted.dispose()
    expect(await waitGone(t)).toEqual([])
    await call
    await host.assertZeroResidue(mounted)
  })

  test('processes left in the background end with the call, with their output redirected or not', async () => {
    await host.mount(shell, { sandbox })
    const held = uniqueSleep()
    const result = await bash(`sleep ${held} & setsid sleep ${held} & echo done`)
    expect(await waitGone(held)).toEqual([])
    const redirected = uniqueSleep()
    const quiet = await bash(`(setsid sleep ${redirected} > /dev/null 2>&1 &); sleep ${redirected} > /dev/null 2>&1 & echo done`)
    expect(await waitGone(redirected)).toEqual([])
    if (sandbox === 'none') {
      // Seen and said: the shell exited while they were still running.
      expect(textOf(result)).toBe('done\n[background processes still running when the shell exited were stopped]\n[exit code: 0]')
      expect(textOf(quiet)).toBe('done\n[background processes still running when the shell exited were stopped]\n[exit code: 0]')
    } else {
      // The namespace ends with the shell: the kernel killed them before the host could look.
      expect(textOf(result)).toBe('done\n[exit code: 0]')
      expect(textOf(quiet)).toBe('done\n[exit code: 0]')
    }
  })

  test('the default timeout applies, and a larger requested one is clamped', async () => {
    await host.mount(shell, { sandbox, timeoutMs: 300, maxTimeoutMs: 500, graceMs: 200 })
    expect(textOf(await bash('sleep 100'))).toBe('(no output)\n[timed out after 0.3 s]\n[killed by signal SIGTERM]')
    const result = await bash('sleep 100', { timeout: 60_000 })
    expect(textOf(result)).toBe(
      '(no output)\n[requested timeout 60 s exceeds the maximum; clamped to 0.5 s]\n[timed out after 0.5 s]\n[killed by signal SIGTERM]',
    )
  })

  test('a shell that kills itself: a signal without bwrap, 128 + n with it', async () => {
    await host.mount(shell, { sandbox })
    const expected = sandbox === 'none' ? '[killed by signal SIGKILL]' : '[exit code: 137]'
    expect(textOf(await bash('kill -KILL $$'))).toBe(`(no output)\n${expected}`)
  })

  test('the workspace and /tmp stay writable, and the command starts in the cwd', async () => {
    await host.mount(shell, { sandbox })
    // /tmp itself, not the host's TMPDIR (the sandbox's TMPDIR is its private /tmp).
    const outside = `/tmp/loom-tool-shell-${uniqueSleep()}`
    const result = await bash(`pwd; echo hi > here.txt && echo ok > ${outside} && cat here.txt ${outside}`)
    rmSync(outside, { force: true })
    expect(textOf(result)).toBe(`${work.dir}\nhi\nok\n[exit code: 0]`)
    writeFileSync(join(work.dir, 'from-host.txt'), 'host\n')
    expect(textOf(await bash('cat from-host.txt'))).toBe('host\n[exit code: 0]')
  })

  test('the call marker is set, and with bwrap the shell sees only its own processes', async () => {
    await host.mount(shell, { sandbox })
    const result = textOf(await bash('echo "marker=${LOOM_TOOL_CALL:+set}"; echo "pid=$$"'))
    if (sandbox === 'bwrap') expect(result).toBe('marker=set\npid=2\n[exit code: 0]')
    else expect(result).toMatch(/^marker=set\npid=\d+\n\[exit code: 0\]$/)
  })
})

// Runs where bubblewrap does not work (try: PATH=<dir with a failing bwrap>:$PATH).
it.skipIf(bwrap.ok)('sandbox bwrap fails the start where bubblewrap does not work, with its reason', async () => {
  await expect(host.mount(shell, { sandbox: 'bwrap' })).rejects.toThrow(/config sandbox is 'bwrap' but bubblewrap does not work here \(.+\)/)
})

describe('reapOrphans', () => {
  it('kills processes whose host is gone, and only those', async () => {
    const { spawn } = await import('node:child_process')
    const { newMarker } = await import('../src/procs.ts')
    const live = newMarker() // this process: alive
    const [ns] = live.split('.')
    const dead = `${ns}.999999999.1.dead` // no such pid
    const orphan = uniqueSleep()
    const kept = uniqueSleep()
    const start = (t: string, marker: string) => spawn('sleep', [t], { env: { ...process.env, [shell.MARKER_VAR]: marker }, stdio: 'ignore', detached: true })
    const children = [start(orphan, dead), start(kept, live)]
    await waitStarted(orphan, 1)
    await waitStarted(kept, 1)
    shell.reapOrphans()
    expect(await waitGone(orphan)).toEqual([])
    expect(withArg(kept)).toHaveLength(1)
    for (const child of children) child.kill('SIGKILL')
    expect(await waitGone(kept)).toEqual([])
  })
})
