// A PostgreSQL outage under a running turn, with no message to notice it. Host
// A runs a session whose first tool waits for the test (the database goes down
// meanwhile); when it ends, its result is the first write the store refuses,
// and that is where A stops the agent: the next tool it had started (a sleep,
// then a marker file) is stopped before it leaves its mark, no model is called
// again, and the agent is gone from A. Once the database is back, host B takes
// the session within A's idle release plus a few seconds (A let its lease go),
// closes the cut turn as interrupted, and nothing of what A could not store is
// in the log.
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { project } from './helpers.ts'
import { client, eventually, type Frame, hostsLayer, messageOnceTaken, postgresHosts, turnEnded } from './serve-client.ts'

const TOKEN = 'outage-turn-test-token-0123456789'
/** `loom serve`'s default `idleReleaseMs`. */
const IDLE_RELEASE_MS = 5000

describe('loom serve stops a running turn at the first write the store refuses', () => {
  const cluster = postgresHosts(TOKEN)

  it('no further tool or model call, the agent let go, and the session continues on another host', { timeout: 120_000 }, async () => {
    const { pg } = cluster
    const schema = pg.schema()
    const at = project({ 'README.md': '# outage under a turn\n', 'loom.yml': hostsLayer(schema, 60_000) })
    const go = join(at.cwd, 'go')
    const marker = join(at.cwd, 'marker')
    const onA = [
      { text: 'Waiting.', toolCalls: [{ name: 'bash', arguments: { command: `while [ ! -e ${go} ]; do sleep 0.05; done` } }] },
      { text: 'Next.', toolCalls: [{ name: 'bash', arguments: { command: `sleep 3 && touch ${marker}` } }] },
      'Done on A.',
    ]
    const [a, b] = await Promise.all([cluster.start('host-a', at, onA), cluster.start('host-b', at, ['Answered on B.'])])
    const [apiA, apiB] = [a, b].map(host => client(host.url, TOKEN))

    const id = (await apiA.request('POST', '/v1/sessions', { task: 'a long task' })).body.id as string
    await apiA.events(id, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })
    await pg.halt()
    // The waiting tool ends: its result is the first write that fails.
    writeFileSync(go, '')
    await eventually(
      async () => {
        const health = (await apiA.request('GET', '/healthz', undefined, {})).body
        return health.agents.open === 0 ? health : undefined
      },
      30_000,
      `host A to give up the session\n${a.stderr()}`,
    )
    expect(a.stderr()).toContain(`session ${id}: the store could not take its events`)
    // Given up while the next tool slept: it never got to leave its mark.
    expect(existsSync(marker)).toBe(false)

    await pg.restart()
    // Until B's pool reconnects, or while A's lease is still being let go: 409 and 503 only.
    const accepted = await messageOnceTaken(b, apiB, id, 'after the outage', IDLE_RELEASE_MS + 5000)
    expect(accepted.body).toMatchObject({ id, mode: 'followup' })
    await apiB.events(id, { until: turnEnded(2) })

    const { events } = (await apiB.request('GET', `/v1/sessions/${id}`)).body as { events: Frame['event'][] }
    expect(events.filter(event => event.type === 'turn/end').map(event => event.data.reason.kind)).toEqual(['interrupted', 'completed'])
    // Nothing A could not store: not the waiting tool's result, not the step after it.
    const calls = events.filter(event => event.type === 'tool/call').map(event => event.data.arguments as string)
    expect(calls).toHaveLength(1)
    expect(calls[0]).toContain('while')
    expect(JSON.stringify(events)).not.toContain('Next.')
    expect(existsSync(marker)).toBe(false)
  })
})
