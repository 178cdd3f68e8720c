// A host that dies while a command runs: with bwrap nothing of the command
// survives even a SIGKILL of the host (--die-with-parent); without it, a host that
// exits (even through an uncaught error) kills its trees in 'exit', and what a
// SIGKILLed host left behind is reaped when the plugin next starts (reapOrphans).
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import * as shell from '../src/index.ts'
import { uniqueSleep, waitGone, waitStarted } from './helpers.ts'

const fixture = fileURLToPath(new URL('./fixtures/host.ts', import.meta.url))
const bwrap = shell.probeBwrap()

/** Starts the fixture host with a command that leaves setsid children; resolves once they run. */
async function startHost(sandbox: string, ending: 'wait' | 'throw', t: string) {
  const command = `setsid sleep ${t} & (setsid bash -c 'sleep ${t}; true' &); sleep ${t}`
  const child = spawn(process.execPath, [fixture, sandbox, ending, command], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', chunk => {
    stderr += chunk
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(resolve => child.on('exit', (code, signal) => resolve({ code, signal })))
  // The shell (exec'd into its last sleep), the setsid sleep, and the setsid bash with its sleep.
  await waitStarted(t, 4, 10_000).catch(error => {
    child.kill('SIGKILL')
    throw new Error(`${error.message}; host stderr: ${stderr}`)
  })
  return { child, exited, stderr: () => stderr }
}

describe('host exit', () => {
  it.skipIf(!bwrap.ok)('with bwrap, a SIGKILL of the host leaves no process of its commands', { timeout: 20_000 }, async () => {
    const t = uniqueSleep()
    const { child, exited } = await startHost('bwrap', 'wait', t)
    child.kill('SIGKILL')
    expect((await exited).signal).toBe('SIGKILL')
    expect(await waitGone(t)).toEqual([])
  })

  it('without bwrap, a SIGKILL of the host leaves its commands running until the next start reaps them', { timeout: 20_000 }, async () => {
    const t = uniqueSleep()
    const { child, exited } = await startHost('none', 'wait', t)
    child.kill('SIGKILL')
    await exited
    // Nothing in the host could run: its commands outlive it (another test worker
    // starting the plugin meanwhile may already have reaped them).
    shell.reapOrphans()
    expect(await waitGone(t)).toEqual([])
  })

  for (const sandbox of ['bwrap', 'none'] as const) {
    it.skipIf(sandbox === 'bwrap' && !bwrap.ok)(
      `${sandbox}: a host that dies of an uncaught error kills its commands on exit`,
      { timeout: 20_000 },
      async () => {
        const t = uniqueSleep()
        const { child, exited, stderr } = await startHost(sandbox, 'throw', t)
        child.stdin!.write('crash\n')
        expect((await exited).code).toBe(1)
        expect(stderr()).toContain('host crashed')
        expect(await waitGone(t)).toEqual([])
      },
    )
  }
})
