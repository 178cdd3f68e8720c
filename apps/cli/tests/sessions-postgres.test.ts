// `loom sessions list|show|verify|repair|stats|manifest|compact` on a deployment
// whose sessions live in PostgreSQL (a real server from
// @loom/session-postgres/testing): a session written by `loom run`, then left
// mid-turn and corrupted in its rows by hand. Every command goes through the
// deployment's SessionPersistence, as it does on JSONL files.
import { startTestPostgres, type TestPostgres } from '@loom/session-postgres/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loom, postgresStore, project, sessionFiles } from './helpers.ts'

let pg: TestPostgres
let schema = ''

/** The stored event rows of a session, in seq order. */
async function rows(id: string): Promise<{ seq: number; event: string }[]> {
  return (await pg.query<{ seq: number; event: string }>(`SELECT seq, event FROM "${schema}".session_events WHERE session_id = $1 ORDER BY seq`, [id])).rows
}

describe('loom sessions on PostgreSQL', () => {
  let at: { cwd: string; home: string; env: Record<string, string> }
  let id = ''

  beforeAll(async () => {
    pg = await startTestPostgres()
    schema = pg.schema()
    const { cwd, home } = project({ 'README.md': '# Sessions in PostgreSQL\n', 'loom.yml': postgresStore(schema) })
    at = { cwd, home, env: { LOOM_PG_URL: pg.url } }
    const run = await loom(['run', '--json', 'what is in this directory?'], at)
    expect(run.code, run.stderr).toBe(0)
    id = JSON.parse(run.stdout).sessionId
    // The session is in the database, not in files.
    expect(sessionFiles(home)).toEqual([])
    expect((await rows(id)).length).toBeGreaterThan(0)
  }, 180_000)

  it('loom run gives back the lease of its session as it exits', async () => {
    const lease = await pg.query(`SELECT pid, host, command FROM "${schema}".session_leases WHERE session_id = $1`, [id])
    expect(lease.rows).toEqual([{ pid: null, host: null, command: null }])
  })

  afterAll(() => pg?.stop())

  it('list, show, stats and manifest read the session from the database', async () => {
    const list = await loom(['sessions', 'list', '--json'], at)
    expect(list.code, list.stderr).toBe(0)
    expect(JSON.parse(list.stdout)).toEqual([
      { id, createdAt: expect.any(Number), cwd: at.cwd, turns: 1, events: (await rows(id)).length, lastStatus: 'completed' },
    ])
    expect((await loom(['sessions', 'list'], at)).stdout).toMatch(new RegExp(`^${id}\\s+\\S+ \\S+ UTC\\s+1\\s+completed\\s+${at.cwd}$`, 'm'))

    const show = await loom(['sessions', 'show', 'last'], at)
    expect(show.code, show.stderr).toBe(0)
    for (const piece of [`session ${id}`, 'user: what is in this directory?', '→ bash: ls -la', 'turn 1 ended: completed']) expect(show.stdout).toContain(piece)

    const stats = await loom(['sessions', 'stats', id, '--json'], at)
    expect(stats.code, stats.stderr).toBe(0)
    const report = JSON.parse(stats.stdout)
    expect(report.id).toBe(id)
    expect(report.totals.requests).toBeGreaterThan(1)
    expect(report.requests).toHaveLength(report.totals.requests)

    const manifest = await loom(['sessions', 'manifest', id.slice(0, -2), '--step', '1', '--json'], at)
    expect(manifest.code, manifest.stderr).toBe(0)
    expect(JSON.parse(manifest.stdout)).toMatchObject({ id, step: 1, steps: report.totals.requests, turn: 1 })
  })

  it('verify: clean exits 0 and names the row; a turn a crash left open exits 1 and writes nothing; repair closes it and releases its lease', async () => {
    const clean = await loom(['sessions', 'verify', id], at)
    expect(clean.code, clean.stderr).toBe(0)
    expect(clean.stdout).toContain(`session ${id}: clean`)
    expect(clean.stdout).toContain(`  log      ${new URL(pg.url).hostname}:${new URL(pg.url).port}`)
    expect(clean.stdout).toContain(`${schema}.sessions id="${id}"`)

    // What a host killed mid tool call leaves: turn 2 started, a tool call recorded, no result.
    const last = (await rows(id)).at(-1)!.seq
    const now = Date.now()
    const crashed = [
      { type: 'turn/start', seq: last + 1, time: now, data: { turn: 2 } },
      { type: 'step/start', seq: last + 2, time: now, data: { turn: 2, step: 1 } },
      {
        type: 'assistant/message',
        seq: last + 3,
        time: now,
        surfaceOp: 'append',
        data: {
          turn: 2,
          step: 1,
          message: {
            id: 'm-crash',
            role: 'assistant',
            source: { kind: 'model', provider: 'scripted', model: 'loom-demo' },
            content: [{ type: 'tool-call', id: 'c-crash', name: 'bash', arguments: '{"command":"make"}' }],
          },
        },
      },
      { type: 'tool/call', seq: last + 4, time: now, data: { turn: 2, step: 1, callId: 'c-crash', name: 'bash', arguments: '{"command":"make"}' } },
    ]
    for (const event of crashed) {
      await pg.query(`INSERT INTO "${schema}".session_events (session_id, seq, event) VALUES ($1, $2, $3)`, [id, event.seq, JSON.stringify(event)])
    }
    const before = await rows(id)

    const open = await loom(['sessions', 'verify', id], at)
    expect(open.code).toBe(1)
    expect(open.stdout).toContain(`session ${id}: NOT clean`)
    expect(open.stdout).toContain('  tail     intact')
    expect(open.stdout).toContain('turn 2 is open; repair appends error result for tool call c-crash (TOOL_OUTCOME_UNKNOWN), step/end, turn/end (interrupted)')
    expect(await rows(id)).toEqual(before)
    expect(JSON.parse((await loom(['sessions', 'list', '--json'], at)).stdout)[0]).toMatchObject({ turns: 2, lastStatus: 'interrupted' })

    const repaired = await loom(['sessions', 'repair', id], at)
    expect(repaired.code, repaired.stderr).toBe(0)
    expect(repaired.stdout).toContain(
      `repaired session ${id}: closed the open turn 2: appended error result for tool call c-crash (TOOL_OUTCOME_UNKNOWN), step/end, turn/end (interrupted)`,
    )
    expect(repaired.stdout).toContain(`the log is clean now (${before.length + 3} events)`)
    expect((await rows(id)).map(row => JSON.parse(row.event).type).slice(-3)).toEqual(['tool/result', 'step/end', 'turn/end'])
    // Repair took the session's lease to write, and gave it back.
    const lease = await pg.query(`SELECT pid, command FROM "${schema}".session_leases WHERE session_id = $1`, [id])
    expect(lease.rows).toEqual([{ pid: null, command: null }])

    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)
    expect((await loom(['sessions', 'show', id], at)).stdout).toContain('  ✗ bash (TOOL_OUTCOME_UNKNOWN)')
    const again = await loom(['sessions', 'repair', id], at)
    expect(again.stdout).toContain(`session ${id} is clean: nothing to repair`)
  })

  it('compact summarizes the session in the database; verify finds it clean', async () => {
    const run = await loom(['sessions', 'compact', id, '--json'], at)
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report).toMatchObject({ id, status: 'compacted' })
    expect(report.tokensAfter).toBeLessThan(report.tokensBefore)
    const types = (await rows(id)).map(row => JSON.parse(row.event).type)
    const start = types.indexOf('compaction/start')
    expect(types.slice(start, start + 4)).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end'])
    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)
  })

  it('verify reports a damaged row as corruption; repair refuses it and writes nothing', async () => {
    const run = await loom(['run', '--json', 'list it'], at)
    expect(run.code, run.stderr).toBe(0)
    const broken = JSON.parse(run.stdout).sessionId
    await pg.query(`UPDATE "${schema}".session_events SET event = '{"this is": not json' WHERE session_id = $1 AND seq = 3`, [broken])
    const damaged = await rows(broken)

    const verify = await loom(['sessions', 'verify', broken, '--json'], at)
    expect(verify.code).toBe(1)
    expect(JSON.parse(verify.stdout)).toMatchObject({
      id: broken,
      clean: false,
      corruption: `stored session "${broken}" has an unparsable event (raw log: ${new URL(pg.url).hostname}:${new URL(pg.url).port}${new URL(pg.url).pathname} ${schema}.sessions id="${broken}" seq 3)`,
    })
    const repair = await loom(['sessions', 'repair', broken], at)
    expect(repair.code).toBe(1)
    expect(repair.stdout).toContain(`session ${broken} cannot be repaired: stored session "${broken}" has an unparsable event`)
    expect(await rows(broken)).toEqual(damaged)

    // The other sessions stay readable: list marks the damaged one, and goes on.
    const list = JSON.parse((await loom(['sessions', 'list', '--json'], at)).stdout)
    expect(list.map((row: { id: string }) => row.id)).toEqual([id, broken])
    expect(list[1].lastStatus).toMatch(/^unreadable: stored session ".*" has an unparsable event/)
  })

  it('an unknown id fails naming the database it looked in', async () => {
    const run = await loom(['sessions', 'verify', 'no-such-session'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toContain(`session "no-such-session" not found in ${new URL(pg.url).hostname}:${new URL(pg.url).port}`)
  })
})
