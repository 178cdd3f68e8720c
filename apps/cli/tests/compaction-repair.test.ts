// A crash inside `loom sessions compact` leaves a `compaction/start` without its
// end: verify says so, repair closes it, and the session still resumes.
import { appendFileSync } from 'node:fs'
import { beforeAll, describe, expect, it } from 'vitest'
import { events, loom, project, sessionFiles } from './helpers.ts'

describe('an unfinished compaction', () => {
  const { cwd, home } = project({ 'README.md': '# Compaction crash\n\nA folder whose session crashes in a compaction.\n' })
  const at = { cwd, home }
  let id = ''
  let file = ''

  beforeAll(async () => {
    const run = await loom(['run', '--json', 'what is in this directory?'], at)
    expect(run.code).toBe(0)
    id = JSON.parse(run.stdout).sessionId
    file = sessionFiles(home)[0]
  })

  it('is not clean for verify; repair appends its compaction/end; the session resumes and compacts again', async () => {
    // What a crash between `compaction/start` and the summary leaves on disk.
    const last = events(file).at(-1)!.seq
    appendFileSync(file, JSON.stringify({ type: 'compaction/start', seq: last + 1, time: Date.now(), data: { compactionId: 'c-crash', turn: null } }) + '\n')

    const verify = await loom(['sessions', 'verify', id], at)
    expect(verify.code).toBe(1)
    expect(verify.stdout).toContain(`session ${id}: NOT clean`)
    expect(verify.stdout).toContain('unfinished compaction c-crash (between turns); repair appends compaction/end')
    expect(verify.stdout).toContain('turns    all closed')
    const json = JSON.parse((await loom(['sessions', 'verify', id, '--json'], at)).stdout)
    expect(json).toMatchObject({ clean: false, openTurn: null, unfinishedCompactions: [{ compactionId: 'c-crash', turn: null }] })
    // verify writes nothing.
    expect(events(file).at(-1)!.type).toBe('compaction/start')

    const repair = await loom(['sessions', 'repair', id], at)
    expect(repair.code).toBe(0)
    expect(repair.stdout).toContain(`repaired session ${id}: closed the unfinished compaction c-crash: appended compaction/end`)
    expect(repair.stdout).toContain('the log is clean now')
    expect(events(file).at(-1)).toMatchObject({
      type: 'compaction/end',
      seq: last + 2,
      data: { compactionId: 'c-crash', turn: null, error: expect.stringMatching(/^interrupted/) },
    })
    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)

    const resumed = await loom(['sessions', 'resume', id, 'and now?'], at)
    expect(resumed.code).toBe(0)
    const compacted = await loom(['sessions', 'compact', id], at)
    expect(compacted.code).toBe(0)
    expect(compacted.stdout).toMatch(/^compacted session /)
    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)
  })

  it('a crash inside a compaction in an open turn: repair closes the compaction, then the turn', async () => {
    const last = events(file).at(-1)!.seq
    const now = Date.now()
    const turn =
      1 +
      Math.max(
        ...events(file)
          .filter(event => event.type === 'turn/start')
          .map(event => event.data.turn),
      )
    const lines = [
      { type: 'turn/start', seq: last + 1, time: now, data: { turn } },
      { type: 'step/start', seq: last + 2, time: now, data: { turn, step: 1 } },
      { type: 'compaction/start', seq: last + 3, time: now, data: { compactionId: 'c-step', turn } },
    ]
    appendFileSync(file, lines.map(line => JSON.stringify(line) + '\n').join(''))
    const verify = await loom(['sessions', 'verify', id], at)
    expect(verify.code).toBe(1)
    expect(verify.stdout).toContain(`unfinished compaction c-step (in turn ${turn})`)
    expect(verify.stdout).toContain(`turn ${turn} is open; repair appends step/end, turn/end (interrupted)`)

    expect((await loom(['sessions', 'repair', id], at)).code).toBe(0)
    expect(
      events(file)
        .slice(-3)
        .map(event => event.type),
    ).toEqual(['compaction/end', 'step/end', 'turn/end'])
    expect((await loom(['sessions', 'resume', id, 'and after the crash?'], at)).code).toBe(0)
  })
})
