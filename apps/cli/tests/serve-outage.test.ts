// A PostgreSQL outage under two `loom serve` hosts. Host A runs two sessions:
// S1 idle after its first turn, S2 in a turn (a long tool call). The database
// is shut down; a client posts to A: followups for S1 and S2, a new session,
// each with an Idempotency-Key. Every one is answered 503 STORE_UNAVAILABLE
// with Retry-After, and /readyz says 503 on both hosts. The database comes
// back: host B takes both sessions (A let their leases go; the lease lifetime
// is a minute, so only a release frees them in time), S2's open turn is closed
// as interrupted, a retried key runs once, and no refused request left a trace
// in any session: not its text, not a session.
import { describe, expect, it } from 'vitest'
import { project } from './helpers.ts'
import { client, type Frame, hostsLayer, messageOnceTaken, postgresHosts, turnEnded } from './serve-client.ts'

const TOKEN = 'outage-test-token-0123456789'
/** `loom serve`'s default `idleReleaseMs`. */
const IDLE_RELEASE_MS = 5000

/** Host A: S1's turn answers; S2's calls a tool that outlasts the outage. */
const ON_A = ['Done on A.', { text: 'Working on it.', toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }]
const ON_B = ['Answered on B.']

describe('loom serve through a PostgreSQL outage', () => {
  const cluster = postgresHosts(TOKEN)

  it('refused requests leave no trace, /readyz says 503, and the other host takes the sessions once the database is back', { timeout: 120_000 }, async () => {
    const { pg } = cluster
    const schema = pg.schema()
    const at = project({ 'README.md': '# outage\n', 'loom.yml': hostsLayer(schema, 60_000) })
    const [a, b] = await Promise.all([cluster.start('host-a', at, ON_A), cluster.start('host-b', at, ON_B)])
    const [apiA, apiB] = [a, b].map(host => client(host.url, TOKEN))
    const keyed = (key: string) => ({ authorization: `Bearer ${TOKEN}`, 'idempotency-key': key })
    for (const api of [apiA, apiB]) expect((await api.request('GET', '/readyz', undefined, {})).body).toMatchObject({ status: 'ready', store: 'postgres' })

    // S1: created with a key (its retry is the same session), idle after its turn. S2: in a tool call.
    const created = await apiA.request('POST', '/v1/sessions', { task: 'first task' }, keyed('create-s1'))
    expect(created.status).toBe(201)
    const s1 = created.body.id as string
    await apiA.events(s1, { until: turnEnded(1) })
    expect(await apiA.request('POST', '/v1/sessions', { task: 'first task' }, keyed('create-s1'))).toMatchObject({ status: 201, body: created.body })
    const s2 = (await apiA.request('POST', '/v1/sessions', { task: 'second task' })).body.id as string
    await apiA.events(s2, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })

    await pg.halt()
    const refused: { text: string; status: number; code: string; retryAfter: string | null }[] = []
    const refuse = async (path: string, body: Record<string, string>, key: string) => {
      const reply = await apiA.request('POST', path, body, keyed(key))
      refused.push({ text: body.text ?? body.task, status: reply.status, code: reply.body?.error?.code, retryAfter: reply.headers.get('retry-after') })
    }
    await refuse(`/v1/sessions/${s1}/messages`, { text: 'lost followup one' }, 'm1')
    await refuse(`/v1/sessions/${s2}/messages`, { text: 'lost steer two', mode: 'steer' }, 'm2')
    await refuse('/v1/sessions', { task: 'lost new session' }, 'c1')
    await refuse(`/v1/sessions/${s1}/messages`, { text: 'lost followup three' }, 'm3')
    expect(refused).toEqual(refused.map(({ text }) => ({ text, status: 503, code: 'STORE_UNAVAILABLE', retryAfter: '1' })))
    for (const api of [apiA, apiB]) {
      const ready = await api.request('GET', '/readyz', undefined, {})
      expect(ready.status).toBe(503)
      expect(ready.body).toMatchObject({ status: 'store-unavailable' })
      expect(ready.body.reason).toContain('unreachable')
      // Liveness stays: the process is fine.
      expect((await api.request('GET', '/healthz', undefined, {})).status).toBe(200)
    }

    await pg.restart()
    // B takes both sessions within the idle release plus a few seconds: A let go of them.
    const accept = (id: string, text: string, key: string) => messageOnceTaken(b, apiB, id, text, IDLE_RELEASE_MS + 5000, keyed(key))
    // m1 again, as the client's retry: not accepted before, so it runs now, once.
    const retried = await accept(s1, 'lost followup one', 'm1')
    const onS2 = await accept(s2, 'after the outage', 'm4')
    await apiB.events(s1, { until: turnEnded(2) })
    await apiB.events(s2, { until: turnEnded(2) })
    // A retry of the accepted key, to either host, is the first answer; the same key with another text is refused.
    expect((await apiB.request('POST', `/v1/sessions/${s1}/messages`, { text: 'lost followup one' }, keyed('m1'))).body).toEqual(retried.body)
    expect((await apiA.request('POST', `/v1/sessions/${s1}/messages`, { text: 'lost followup one' }, keyed('m1'))).body).toEqual({
      ...retried.body,
      status: expect.any(String),
    })
    const mismatch = await apiB.request('POST', `/v1/sessions/${s1}/messages`, { text: 'something else' }, keyed('m1'))
    expect(mismatch.status).toBe(422)
    expect(mismatch.body.error.code).toBe('IDEMPOTENCY_MISMATCH')

    // The store: two sessions; no refused text anywhere but m1's, which ran once, as its retry.
    const { rows: sessions } = await pg.query<{ id: string }>(`SELECT id FROM "${schema}".sessions ORDER BY created_at`)
    expect(sessions.map(row => row.id).sort()).toEqual([s1, s2].sort())
    for (const { text } of refused.slice(1)) {
      const { rows } = await pg.query(`SELECT seq FROM "${schema}".session_events WHERE event LIKE $1`, [`%${text}%`])
      expect(rows, text).toEqual([])
    }
    const read = async (id: string) => (await apiB.request('GET', `/v1/sessions/${id}`)).body
    const one = await read(s1)
    const inserted = one.events.filter(
      (event: Frame['event']) => event.type === 'agent/inbox/spliced' && JSON.stringify(event.data.inserted).includes('lost followup one'),
    )
    expect(inserted.map((event: Frame['event']) => event.seq)).toEqual([retried.body.seq])
    const ends = (events: Frame['event'][]) => events.filter(event => event.type === 'turn/end').map(event => event.data.reason.kind)
    expect(ends(one.events)).toEqual(['completed', 'completed'])
    // S2's turn, cut off by the outage, is closed as interrupted by B; the message sent after it ran.
    const two = await read(s2)
    expect(ends(two.events)).toEqual(['interrupted', 'completed'])
    expect(onS2.body).toMatchObject({ id: s2, mode: 'followup' })
    for (const api of [apiA, apiB]) expect((await api.request('GET', '/readyz', undefined, {})).status).toBe(200)
  })
})
