// Artifacts (long tool output kept whole, `@loom/tools/artifacts`) in PostgreSQL: rows of
// `session_artifacts` keyed by session and name, written whole by one statement and fenced by
// the session's lease, readable from another host, never from another session, and deleted
// with their session's row.
import { live, shortTurn } from '@loom/session/testing'
import { createHost, type Host } from '@loom/testkit'
import * as toolFs from '@loom/tool-fs'
import * as shell from '@loom/tool-shell'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import PostgresPersistence, { type Config, SessionLeaseError } from '../src/index.ts'
import { startTestPostgres, type TestPostgres } from '../src/testing.ts'

let server: TestPostgres
let hosts: Host[] = []

beforeAll(async () => {
  server = await startTestPostgres()
}, 180_000)
afterAll(() => server?.stop())
afterEach(async () => {
  for (const host of hosts.splice(0).reverse()) await host.dispose().catch(() => {})
})

/** A host (tool runtime, sessions, the scripted model) whose sessions are stored in `schema`. */
async function host(schema: string, config: Partial<Config> = {}) {
  const kit = await createHost({ approve: () => ({ kind: 'allow' }) })
  hosts.push(kit)
  // A long write-behind window: nothing of a session is stored unless something asks for it.
  await kit.mount(PostgresPersistence, { url: server.url, schema, maxDelayMs: 10_000, leaseCommand: 'loom test', ...config })
  // The key is typed by @loom/session-jsonl (see the README): this backend is reached as what it is.
  const persistence = kit.ctx.get('sessionPersistence') as unknown as PostgresPersistence
  return { kit, persistence, artifacts: persistence.artifacts }
}

/** A call of an agent of session `sessionId`, as the tool runtime passes it. */
const call = (sessionId: string, callId = 'later') => ({ callId, agent: { id: `agent-${sessionId}`, sessionId } })

async function rows(schema: string, sessionId: string) {
  const { rows } = await server.query<{ name: string; content: Buffer; bytes: number }>(
    `SELECT name, content, bytes FROM "${schema}".session_artifacts WHERE session_id = $1 ORDER BY name`,
    [sessionId],
  )
  return rows.map(row => ({ name: row.name, content: row.content.toString('utf8'), bytes: row.bytes }))
}

const count = async (schema: string, table: string, id: string) =>
  Number(
    (await server.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".${table} WHERE ${table === 'sessions' ? 'id' : 'session_id'} = $1`, [id])).rows[0]
      .n,
  )

describe('the artifacts of a session', () => {
  it('are stored, read, listed, replaced and removed by name', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    kit.ctx.sessions.create('s', { meta: { cwd: kit.cwd } })

    await artifacts.put('s', 'call_1', 'first output\n')
    await artifacts.put('s', 'call_2', 'second\n')
    expect(await artifacts.get('s', 'call_1')).toBe('first output\n')
    expect(await artifacts.get('s', 'call_3')).toBeUndefined()
    const listed = (await artifacts.list('s')).sort((a, b) => (a.name < b.name ? -1 : 1))
    expect(listed.map(({ name, bytes }) => ({ name, bytes }))).toEqual([
      { name: 'call_1', bytes: 13 },
      { name: 'call_2', bytes: 7 },
    ])
    for (const entry of listed) expect(Number.isSafeInteger(entry.createdAt) && entry.createdAt > 0).toBe(true)
    // Stored later, never older: eviction goes by age.
    expect(listed[1].createdAt).toBeGreaterThanOrEqual(listed[0].createdAt)

    // The same name again replaces the row: content, size and age.
    await artifacts.put('s', 'call_1', 'replaced, and longer\n')
    expect(await artifacts.get('s', 'call_1')).toBe('replaced, and longer\n')
    expect(await rows(schema, 's')).toEqual([
      { name: 'call_1', content: 'replaced, and longer\n', bytes: 21 },
      { name: 'call_2', content: 'second\n', bytes: 7 },
    ])
    expect((await artifacts.list('s')).find(entry => entry.name === 'call_1')!.createdAt).toBeGreaterThanOrEqual(listed[1].createdAt)

    await artifacts.remove('s', ['call_1', 'never_stored'])
    expect(await rows(schema, 's')).toEqual([{ name: 'call_2', content: 'second\n', bytes: 7 }])
    await artifacts.remove('s', [])
    expect(await artifacts.list('s')).toHaveLength(1)
  })

  it('keep every byte of their content: NUL, any script, emoji', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    kit.ctx.sessions.create('bytes', { meta: { cwd: kit.cwd } })
    const content = 'ELF\u0000\u0001binary\u0000tail\näöü 漢字 😀\r\n'
    await artifacts.put('bytes', 'dump', content)
    expect(await artifacts.get('bytes', 'dump')).toBe(content)
    expect(await artifacts.list('bytes')).toMatchObject([{ name: 'dump', bytes: Buffer.byteLength(content) }])
  })

  it('of a session with no stored event yet store its header first, and its events follow as usual', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    const session = kit.ctx.sessions.create('fresh', { meta: { cwd: kit.cwd } })
    session.append('turn/start', { turn: 1 })
    // The event waits in the write-behind window: the artifact stores the session row.
    await artifacts.put('fresh', 'early', 'before any event was stored')
    expect(await count(schema, 'sessions', 'fresh')).toBe(1)
    expect(await count(schema, 'session_events', 'fresh')).toBe(0)

    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    await kit.ctx.sessions.flush(session)
    expect(await count(schema, 'session_events', 'fresh')).toBe(2)
    await kit.dispose()
    const later = await host(schema)
    expect((await later.persistence.load('fresh')).events.map(event => event.type)).toEqual(['turn/start', 'turn/end'])
    expect(await later.artifacts.get('fresh', 'early')).toBe('before any event was stored')
  })

  it('are not another session’s: neither its storage nor its reads reach them', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    kit.ctx.sessions.create('mine', { meta: { cwd: kit.cwd } })
    kit.ctx.sessions.create('theirs', { meta: { cwd: kit.cwd } })
    const reference = await kit.root.tools.artifacts.keep(call('theirs', 'secret'), 'theirs only')
    expect(reference).toBe('artifact://secret')
    expect(await artifacts.get('mine', 'secret')).toBeUndefined()
    expect(await artifacts.list('mine')).toEqual([])
    await expect(kit.root.tools.artifacts.read(call('mine'), reference!)).rejects.toThrow(/^artifact:\/\/secret is not an artifact of this session/)
    // The same name in two sessions: two rows.
    await kit.root.tools.artifacts.keep(call('mine', 'secret'), 'mine only')
    expect(await kit.root.tools.artifacts.read(call('mine'), 'artifact://secret')).toBe('mine only')
    expect(await kit.root.tools.artifacts.read(call('theirs'), 'artifact://secret')).toBe('theirs only')
  })

  it('go with their session’s row (ON DELETE CASCADE)', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    const session = kit.ctx.sessions.create('gone', { meta: { cwd: kit.cwd } })
    shortTurn(live(session), 1)
    await kit.ctx.sessions.flush(session)
    await artifacts.put('gone', 'a', 'kept')
    await artifacts.put('gone', 'b', 'kept too')
    kit.ctx.sessions.create('stays', { meta: { cwd: kit.cwd } })
    await artifacts.put('stays', 'a', 'other')
    await kit.dispose()

    await server.query(`DELETE FROM "${schema}".session_events WHERE session_id = $1`, ['gone'])
    await server.query(`DELETE FROM "${schema}".sessions WHERE id = $1`, ['gone'])
    expect(await rows(schema, 'gone')).toEqual([])
    expect(await rows(schema, 'stays')).toEqual([{ name: 'a', content: 'other', bytes: 5 }])
  })
})

describe('writes that are refused', () => {
  it('an artifact of a session that is neither stored nor written here names both', async () => {
    const schema = server.schema()
    const { artifacts } = await host(schema)
    await expect(artifacts.put('nobody', 'call_9', 'x')).rejects.toThrow(
      new RegExp(`^artifact "call_9" of session "nobody" was not stored: the session has no stored log in 127\\.0\\.0\\.1:\\d+/\\w+ \\(schema "${schema}"\\)$`),
    )
    expect(await rows(schema, 'nobody')).toEqual([])
  })

  it('a writer whose lease was taken over stores and removes nothing (SESSION_LEASE_LOST)', async () => {
    const schema = server.schema()
    const { kit, artifacts } = await host(schema)
    const session = kit.ctx.sessions.create('taken', { meta: { cwd: kit.cwd } })
    shortTurn(live(session), 1)
    await kit.ctx.sessions.flush(session)
    await artifacts.put('taken', 'mine', 'stored while the lease was ours')
    // Another host took the lease over (as after this one hung past leaseStaleMs).
    await server.query(
      `UPDATE "${schema}".session_leases SET token = token + 1, pid = 4242, host = 'web-2', command = 'loom serve', since = now(), heartbeat = now() WHERE session_id = $1`,
      ['taken'],
    )
    const refused = await artifacts.put('taken', 'late', 'x').catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(SessionLeaseError)
    expect(refused).toMatchObject({ code: 'SESSION_LEASE_LOST', holder: { pid: 4242, host: 'web-2' } })
    expect((refused as Error).message).toMatch(
      /^artifact "late" of session "taken" was not stored: session taken: this writer \(pid \d+\) lost its write lease/,
    )
    await expect(artifacts.remove('taken', ['mine'])).rejects.toThrow(/^artifacts "mine" of session "taken" was not removed: .*lost its write lease/)
    expect(await rows(schema, 'taken')).toEqual([{ name: 'mine', content: 'stored while the lease was ours', bytes: 31 }])
  })
})

describe('a database made before the artifacts table', () => {
  it('gets the table at the next start, and the sessions stored there keep artifacts', async () => {
    const schema = server.schema()
    const before = await host(schema)
    const session = before.kit.ctx.sessions.create('old', { meta: { cwd: before.kit.cwd } })
    shortTurn(live(session), 1)
    await before.kit.ctx.sessions.flush(session)
    await before.kit.dispose()
    await server.query(`DROP TABLE "${schema}".session_artifacts`)

    const { persistence, artifacts } = await host(schema)
    // Not written here: the session's row is enough.
    await artifacts.put('old', 'read_only', 'stored for a session this host does not write')
    await persistence.load('old')
    await artifacts.put('old', 'written', 'stored under the lease')
    expect((await rows(schema, 'old')).map(row => row.name)).toEqual(['read_only', 'written'])
  })
})

describe('through the tool runtime', () => {
  it('bash output over the limit is kept in PostgreSQL, paged with read, and read back on another host', { timeout: 60_000 }, async () => {
    const schema = server.schema()
    const { kit } = await host(schema, { maxDelayMs: 200 })
    await kit.mount(shell)
    await kit.mount(toolFs)
    kit.scriptedModel([
      { toolCalls: [{ id: 'long_1', name: 'bash', arguments: { command: 'seq 1 40000' } }] },
      { toolCalls: [{ id: 'page_1', name: 'read', arguments: { path: 'artifact://long_1', offset: 20000, limit: 3 } }] },
      'Done.',
    ])
    const run = await kit.run('count to forty thousand')
    expect(run.reason?.kind).toBe('completed')
    const results = run.events.flatMap(event =>
      event.type === 'tool/result' ? event.data.message.content[0].content.map(block => (block.type === 'text' ? block.text : '')) : [],
    )
    expect(results).toHaveLength(2)
    expect(results[0]).toMatch(/\n\[… lines \d+-\d+ not shown \(\d+ bytes\)\. The whole output is kept as artifact:\/\/long_1: read it with `read`/)
    expect(results[1]).toBe(' 20000\t20000\n 20001\t20001\n 20002\t20002\n\n(Showing lines 20000-20002 of 40000. To read more, call read with offset=20003.)')

    const sessionId = run.agent.sessionId
    const whole = Array.from({ length: 40000 }, (_, i) => i + 1).join('\n')
    expect(await rows(schema, sessionId)).toEqual([{ name: 'long_1', content: whole, bytes: Buffer.byteLength(whole) }])
    await kit.dispose()

    // Another host (or this one restarted) reads what the session kept.
    const other = await host(schema)
    expect(await other.kit.root.tools.artifacts.read(call(sessionId), 'artifact://long_1')).toBe(whole)
  })
})
