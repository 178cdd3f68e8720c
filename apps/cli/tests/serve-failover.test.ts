// Three `loom serve` processes on loopback sharing one PostgreSQL. A session's
// turn runs on host A (its model called `bash sleep 30`); an SSE client follows
// it there. Host B is refused with 409 naming A. A is killed with SIGKILL
// mid-turn; B keeps answering 409 until A's lease is stale (each host writes its
// own lease host name, as separate machines would, so the dead pid cannot be
// checked and only the heartbeat decides), then takes the session: the
// interrupted turn is closed in the log, every event the client received from A
// is still stored, the new message is answered on B, and the client, reconnected
// to host C with Last-Event-ID, goes on from its last seq with no gap and no
// duplicate.
import { describe, expect, it } from 'vitest'
import { project } from './helpers.ts'
import { client, eventually, type Frame, hostsLayer, postgresHosts, turnEnded } from './serve-client.ts'

const TOKEN = 'failover-test-token-0123456789'
const STALE_MS = 1500

/** Host A's model starts a long tool call; the survivors' model answers. */
const SLOW = [{ text: 'Working on it.', toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }]
const ANSWER = ['Continued on a survivor.']

describe('loom serve on three hosts sharing PostgreSQL', () => {
  const cluster = postgresHosts(TOKEN)

  it('a host killed mid-turn: 409 naming it until its lease is stale, then a survivor closes the turn and continues; no acknowledged event is lost; SSE resumes on another host', {
    timeout: 90_000,
  }, async () => {
    const { pg } = cluster
    const schema = pg.schema()
    const at = project({ 'README.md': '# failover\n', 'loom.yml': hostsLayer(schema, STALE_MS) })
    const [a, b, c] = await Promise.all([cluster.start('host-a', at, SLOW), cluster.start('host-b', at, ANSWER), cluster.start('host-c', at, ANSWER)])
    const [apiA, apiB, apiC] = [a, b, c].map(host => client(host.url, TOKEN))
    for (const api of [apiA, apiB, apiC]) expect((await api.request('GET', '/healthz', undefined, {})).body).toMatchObject({ status: 'ok', store: 'postgres' })

    // The turn runs on A; the client has seen it up to the tool call.
    const created = await apiA.request('POST', '/v1/sessions', { task: 'take your time' })
    expect(created.status).toBe(201)
    const id = created.body.id as string
    const onA = await apiA.events(id, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })
    const acknowledged: Frame[] = onA.frames
    expect(acknowledged.map(frame => frame.id)).toEqual(acknowledged.map((_, i) => i))

    // Any host reads it, and streams it from the store; B may not write it while A lives.
    expect((await apiC.request('GET', `/v1/sessions/${id}`)).body.session).toMatchObject({ status: 'running', here: false, holder: { host: 'host-a' } })
    const tailed = await apiB.events(id, { until: frames => frames.length >= acknowledged.length })
    expect(tailed.frames.slice(0, acknowledged.length).map(frame => frame.event)).toEqual(acknowledged.map(frame => frame.event))
    const refused = await apiB.request('POST', `/v1/sessions/${id}/messages`, { text: 'still there?' })
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ code: 'SESSION_LEASE_HELD', holder: { host: 'host-a', pid: a.child.pid, command: `loom serve ${a.url}` } })
    expect(refused.body.error.message).toContain(`session ${id} is being written by pid ${a.child.pid} on host host-a (loom serve ${a.url})`)

    a.child.kill('SIGKILL')
    await a.exited
    const killedAt = Date.now()

    // 409 until the lease is stale, then B takes the session.
    const replies: number[] = []
    const accepted = await eventually(
      async () => {
        const reply = await apiB.request('POST', `/v1/sessions/${id}/messages`, { text: 'are you there?' })
        replies.push(reply.status)
        if (reply.status === 202) return reply
        expect(reply.status).toBe(409)
        await new Promise(resolve => setTimeout(resolve, 150))
        return undefined
      },
      15_000,
      'a survivor to take the session',
    )
    expect(replies[0]).toBe(409)
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(STALE_MS - 500)
    expect(accepted.body).toMatchObject({ id, mode: 'followup' })

    // The client reconnects to C with its last seq: the rest, with no gap and no duplicate, through the new turn.
    const last = acknowledged.at(-1)!.id
    const onC = await apiC.events(id, { lastEventId: last, until: turnEnded(2) })
    expect(onC.frames.map(frame => frame.id)).toEqual(onC.frames.map((_, i) => last + 1 + i))
    const seen = [...acknowledged, ...onC.frames].map(frame => frame.event)

    // The store: every acknowledged event as it was; turn 1 closed as interrupted; turn 2 answered on B.
    const stored = (await apiC.request('GET', `/v1/sessions/${id}`)).body
    expect(stored.events.slice(0, acknowledged.length)).toEqual(acknowledged.map(frame => frame.event))
    expect(stored.events.slice(0, seen.length)).toEqual(seen)
    const ends = stored.events.filter((event: Frame['event']) => event.type === 'turn/end').map((event: Frame['event']) => event.data)
    expect(ends).toEqual([
      { turn: 1, reason: { kind: 'interrupted' } },
      { turn: 2, reason: { kind: 'completed' } },
    ])
    const result = stored.events.find((event: Frame['event']) => event.type === 'tool/result')
    expect(result.data.error.code).toBe('TOOL_OUTCOME_UNKNOWN')
    expect(JSON.stringify(stored.events)).toContain('Continued on a survivor.')
    expect(stored.session).toMatchObject({ turns: 2, status: 'idle', holder: { host: 'host-b' } })

    // The survivors drain and exit 0 on SIGTERM; B lets go of the session's lease.
    for (const host of [b, c]) host.child.kill('SIGTERM')
    expect(await b.exited, b.stderr()).toBe(0)
    expect(await c.exited, c.stderr()).toBe(0)
    const { rows } = await pg.query(`SELECT pid FROM "${schema}".session_leases WHERE session_id = $1`, [id])
    expect(rows).toEqual([{ pid: null }])
  })
})
