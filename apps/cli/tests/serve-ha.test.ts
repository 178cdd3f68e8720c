// `loom serve` on a real high-availability PostgreSQL: a pg_auto_failover
// cluster (a monitor, a primary and a synchronous secondary; see
// @loom/session-postgres/testing-cluster), named to the host by the multi-host
// URL `pg_autoctl show uri` prints. A session's turn runs (its model called
// `bash sleep 30`) and a client has seen it up to the tool call. The primary is
// killed with SIGKILL, keeper and all, as a machine that dies. The client sends
// a message with an Idempotency-Key and retries it as @loom/client would, on
// 503 and 409, until it is accepted: the monitor promotes the secondary and the
// host finds the new writable primary by itself. Then: no answer was a 500,
// every event the client saw before the kill is stored (synchronous
// replication), the interrupted turn is closed, the message runs as the next
// turn, and the time from the kill to the accepted message is printed as
// {"bench":"postgres/failover",...}. Skipped, saying why, where pg_autoctl is
// not installed (CI installs it).
import { clusterTools, startTestCluster, type TestCluster } from '@loom/session-postgres/testing-cluster'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { project } from './helpers.ts'
import { client, eventually, type Frame, type Host, hostsLayer, startHost, turnEnded, stopHosts } from './serve-client.ts'

const TOKEN = 'ha-test-token-0123456789abcdef'
const SCHEMA = 'loom_ha'
/** Turn 1 runs a tool that outlasts the failover; the next turn answers. */
const SCRIPT = [{ text: 'Working on it.', toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }, 'Answered after the failover.']

const tools = clusterTools()
let cluster: TestCluster | undefined
let host: Host | undefined

describe('loom serve through a PostgreSQL failover (pg_auto_failover)', () => {
  beforeAll(async () => {
    if (!('missing' in tools)) cluster = await startTestCluster()
  }, 180_000)

  afterAll(async () => {
    await stopHosts([host])
    await cluster?.stop()
  }, 60_000)

  it('the primary killed mid-turn: 503 (or 409) while the secondary is promoted, then 2xx; nothing acknowledged is lost and the session goes on', {
    timeout: 120_000,
  }, async ({ skip }) => {
    if ('missing' in tools) return skip(`no pg_auto_failover here: ${tools.missing}`)
    const ha = cluster!
    const [node1, node2] = ha.nodes
    expect(ha.url).toBe(
      `postgres://${new URL(node1.url).username}@127.0.0.1:${node1.port},127.0.0.1:${node2.port}/postgres?target_session_attrs=read-write&sslmode=disable`,
    )
    // Synchronous: the primary waits for node2 at every commit.
    expect((await ha.query('node1', "SELECT current_setting('synchronous_standby_names') AS names"))[0].names).toMatch(/^ANY 1 \(/)

    const at = project({ 'README.md': '# ha\n', 'loom.yml': hostsLayer(SCHEMA, 60_000) })
    host = await startHost('host-a', at, { LOOM_SERVE_TOKEN: TOKEN, LOOM_PG_URL: ha.url, LOOM_TEST_HOST: 'host-a', LOOM_TEST_SCRIPT: JSON.stringify(SCRIPT) })
    const raw = client(host.url, TOKEN)
    // A request the host cannot answer (it died) says why.
    const api = {
      ...raw,
      request: (...args: Parameters<typeof raw.request>) =>
        raw.request(...args).catch(error => {
          throw new Error(`${args[0]} ${args[1]}: ${error.cause?.message ?? error.message}; host exit code ${host?.child.exitCode}\n${host?.stderr()}`)
        }),
    }
    expect((await api.request('GET', '/readyz', undefined, {})).body).toMatchObject({ status: 'ready', store: 'postgres' })

    // The turn runs; the client has seen it up to the tool call, every event of it durable.
    const created = await api.request('POST', '/v1/sessions', { task: 'take your time' })
    expect(created.status, created.text).toBe(201)
    const id = created.body.id as string
    const seen = await api.events(id, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })
    const acknowledged: Frame[] = seen.frames
    expect(acknowledged.length).toBeGreaterThan(3)

    // The machine of the primary dies.
    const killedAt = Date.now()
    await ha.kill('node1')

    // The client's retries, as @loom/client makes them: the same key, after Retry-After (here a quarter second).
    const answers: { status: number; code: string | undefined; retryAfter: string | null }[] = []
    const accepted = await eventually(
      async () => {
        const reply = await api.request(
          'POST',
          `/v1/sessions/${id}/messages`,
          { text: 'after the failover' },
          { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'ha-1' },
        )
        answers.push({ status: reply.status, code: reply.body?.error?.code, retryAfter: reply.headers.get('retry-after') })
        if (reply.status === 202) return { reply, at: Date.now() }
        expect([503, 409], `${reply.status} ${reply.text}\n${host!.stderr()}`).toContain(reply.status)
        await new Promise(resolve => setTimeout(resolve, 250))
        return undefined
      },
      90_000,
      `the message to be accepted after the failover\n${ha.logs()}`,
    )
    // When the monitor made node2 the primary, by its log (same machine, same clock): the cluster's share of the time.
    const [promoted] = await ha.query<{ at: number }>(
      'monitor',
      "SELECT (extract(epoch FROM min(eventtime)) * 1000)::float8 AS at FROM pgautofailover.event WHERE nodename = 'node2' AND goalstate IN ('wait_primary', 'primary')",
    )
    console.log(
      JSON.stringify({
        bench: 'postgres/failover',
        recovery_ms: accepted.at - killedAt,
        promoted_ms: Math.round(promoted.at - killedAt),
        attempts: answers.length,
        statuses: [...new Set(answers.map(answer => answer.status))],
      }),
    )

    // Never a 500: the store was unavailable (503, Retry-After), then the session's lease was still being let go (409).
    for (const answer of answers.slice(0, -1)) {
      expect(answer.retryAfter).toBe('1')
      expect(answer.code).toBe(answer.status === 503 ? 'STORE_UNAVAILABLE' : 'SESSION_LEASE_HELD')
    }
    expect(answers[0]).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' })
    expect(accepted.reply.body).toMatchObject({ id, mode: 'followup' })
    // The monitor promoted node2 (its keeper may not have reported it yet); the host writes there.
    const states = await ha.states()
    expect(states.find(state => state.name === 'node2')?.assigned).toMatch(/^(wait_primary|primary)$/)

    // The rest of the session, from the client's last seq: the closers of turn 1, then turn 2.
    const last = acknowledged.at(-1)!.id
    const rest = await api.events(id, { lastEventId: last, until: turnEnded(2), timeoutMs: 60_000 })
    expect(rest.frames.map(frame => frame.id)).toEqual(rest.frames.map((_, i) => last + 1 + i))
    const stored = (await api.request('GET', `/v1/sessions/${id}`)).body
    // Every event the client saw before the kill, as it saw it: it was on node2 before it was shown.
    expect(stored.events.slice(0, acknowledged.length)).toEqual(acknowledged.map(frame => frame.event))
    expect(stored.events.slice(0, last + 1 + rest.frames.length)).toEqual([...acknowledged, ...rest.frames].map(frame => frame.event))
    const ends = stored.events.filter((event: Frame['event']) => event.type === 'turn/end').map((event: Frame['event']) => event.data)
    expect(ends).toEqual([
      { turn: 1, reason: { kind: 'interrupted' } },
      { turn: 2, reason: { kind: 'completed' } },
    ])
    expect(JSON.stringify(stored.events)).toContain('Answered after the failover.')
    const rows = await ha.query('node2', `SELECT count(*)::integer AS events FROM ${SCHEMA}.session_events WHERE session_id = $1`, [id])
    expect(rows[0].events).toBe(stored.events.length)

    // The retry of the accepted key is its first answer, and starts nothing.
    const again = await api.request(
      'POST',
      `/v1/sessions/${id}/messages`,
      { text: 'after the failover' },
      { authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'ha-1' },
    )
    expect(again.body).toMatchObject({ id, seq: accepted.reply.body.seq })
    expect((await api.request('GET', '/readyz', undefined, {})).status).toBe(200)

    host.child.kill('SIGTERM')
    expect(await host.exited, host.stderr()).toBe(0)
  })
})
