// One writer per session, through the real `loom` command: two `loom sessions
// resume ID` at once on one stored session; `repair` while a resume writes.
// A project plugin holds every model call until the test creates the file
// `release`, so the winner keeps its lease for as long as the test needs.
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { events, loom, loomProcess, project, sessionFiles, type Run } from './helpers.ts'

const HOLD_PLUGIN = `import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
export const name = 'hold-model'
export function apply(ctx) {
  ctx.on('llm/stream', (options, next) => (async function* () {
    writeFileSync(join(process.cwd(), 'holding'), String(process.pid))
    for (let i = 0; i < 600 && !existsSync(join(process.cwd(), 'release')); i++) await new Promise(r => setTimeout(r, 100))
    yield* next()
  })(), { global: true })
}
`

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

async function until(condition: () => boolean, timeoutMs: number) {
  for (const start = Date.now(); !condition() && Date.now() - start < timeoutMs; ) await new Promise(resolve => setTimeout(resolve, 50))
}

describe('loom sessions: one writer per session', () => {
  it('two resumes at once: one exits 0, the other exits 1 naming the holder; repair is refused while it writes; the log verifies clean', {
    timeout: 180_000,
  }, async () => {
    const { cwd, home } = project({
      'README.md': '# Lease sample\n',
      'hold.mjs': HOLD_PLUGIN,
      'loom.yml': '- insert:\n    - id: hold\n      name: ./hold.mjs\n',
    })
    const at = { cwd, home }
    const release = join(cwd, 'release')
    writeFileSync(release, '')
    const first = await loomProcess(['run', '--json', 'what is in this directory?'], at)
    expect(first.code, first.stderr).toBe(0)
    const id = JSON.parse(first.stdout).sessionId as string
    rmSync(release)
    rmSync(join(cwd, 'holding'), { force: true })

    const pids: number[] = []
    const finished: (Run | undefined)[] = [undefined, undefined]
    const resumes = [0, 1].map(i =>
      loomProcess(['sessions', 'resume', id, 'and now?'], {
        ...at,
        onSpawn: child => {
          pids[i] = child.pid!
        },
      }).then(run => (finished[i] = run)),
    )
    // The loser is refused while the winner waits at its model call.
    await until(() => finished.some(Boolean), 90_000)
    await until(() => existsSync(join(cwd, 'holding')), 30_000)
    const loser = finished.findIndex(Boolean)
    const winner = 1 - loser
    expect(loser, 'one resume ended while the other held the session').toBeGreaterThanOrEqual(0)
    expect(finished[winner], 'both resumes ended: they did not overlap, or neither held the lease').toBeUndefined()
    const refusal = new RegExp(
      `loom: session ${id} is being written by pid ${pids[winner]} on host ${escape(hostname())} ` +
        `since \\d\\d:\\d\\d:\\d\\d \\(loom sessions resume\\); wait for it to finish or stop it`,
    )
    expect(finished[loser]!.code).toBe(1)
    expect(finished[loser]!.stderr).toMatch(refusal)

    // Reading works while the session is written (here, in this process); repairing it is refused, naming the writer.
    // The winner's new turn reaches the disk within one write-behind window.
    const [file] = sessionFiles(home)
    await until(() => events(file).some(event => event.type === 'user/message' && JSON.stringify(event.data).includes('and now?')), 5_000)
    const shown = await loom(['sessions', 'show', id], at)
    expect(shown.code).toBe(0)
    expect(shown.stdout).toContain('user: and now?')
    const repair = await loom(['sessions', 'repair', id], at)
    expect(repair.code).toBe(1)
    expect(repair.stderr).toMatch(refusal)

    writeFileSync(release, '')
    const [a, b] = await Promise.all(resumes)
    const done = [a, b][winner]
    expect(done.code, done.stderr).toBe(0)

    const verify = await loom(['sessions', 'verify', id], at)
    expect(verify.code, verify.stdout).toBe(0)
    expect(verify.stdout).toContain(`session ${id}: clean`)
    const logged = events(file)
    expect(logged.filter(event => event.type === 'turn/end').map(event => event.data.turn)).toEqual([1, 2])
    expect(existsSync(join(file, '..', 'session.lock'))).toBe(false)
  })
})
