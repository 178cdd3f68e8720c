// `loom sessions compact ID|prefix|last`: a stored session summarized now, through the
// default bundle's @loom/compaction row and the offline demo model.
import { beforeAll, describe, expect, it } from 'vitest'
import { events, loom, project, sessionFiles } from './helpers.ts'

describe('loom sessions compact', () => {
  const { cwd, home } = project({
    'README.md': '# Compaction sample\n\nA folder whose session the test compacts.\n',
  })
  const at = { cwd, home }
  let id = ''

  beforeAll(async () => {
    const run = await loom(['run', '--json', 'what is in this directory?'], at)
    expect(run.code).toBe(0)
    id = JSON.parse(run.stdout).sessionId
  })

  it('summarizes the older history, reports the estimated tokens before and after, and logs the compaction', async () => {
    const run = await loom(['sessions', 'compact', id], at)
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const match = /^compacted session (\S+): (\d+) messages summarized; ~(\d+) → ~(\d+) estimated tokens\n$/.exec(run.stdout)
    expect(match, run.stdout).not.toBeNull()
    expect(match![1]).toBe(id)
    expect(Number(match![4])).toBeLessThan(Number(match![3]))

    const log = events(sessionFiles(home)[0])
    const start = log.findIndex(event => event.type === 'compaction/start')
    expect(log.slice(start, start + 4).map(event => event.type)).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end'])
    expect(log[start].data.turn).toBeNull()
    expect((log[start + 2] as { surfaceOp?: unknown }).surfaceOp).toMatchObject({ op: 'replace' })
    expect(log[start + 2].data.source).toMatchObject({ kind: 'plugin', plugin: '@loom/compaction', form: 'notice' })
    expect(log[start + 3].data.error).toBeUndefined()

    // Compacting again has nothing left to summarize.
    const again = await loom(['sessions', 'compact', id, '--json'], at)
    expect(again.code).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ id, status: 'skipped', summarized: 0, tokensBefore: Number(match![4]), tokensAfter: Number(match![4]) })
  })

  it('names the session as every sessions command does: last, or a unique prefix of its id', async () => {
    for (const ref of ['last', id.slice(0, 12)]) {
      const run = await loom(['sessions', 'compact', ref, '--json'], at)
      expect(run.code, `${ref}: ${run.stderr}`).toBe(0)
      expect(JSON.parse(run.stdout)).toMatchObject({ id, status: expect.stringMatching(/^(compacted|skipped)$/) })
    }
    const unknown = await loom(['sessions', 'compact', 'zz-no-such'], at)
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain('session "zz-no-such" not found: no stored session has that id or id prefix')
  })

  it('needs a compaction row', async () => {
    const bare = project({ 'loom.yml': '- id: compaction\n  disabled: true\n' })
    const run = await loom(['sessions', 'compact', id], { cwd: bare.cwd, home })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('this deployment has no compaction')
  })

  it('a missing id is a usage error', async () => {
    const run = await loom(['sessions', 'compact'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('sessions compact: missing the session: its id, a unique prefix of it, or last')
  })
})
