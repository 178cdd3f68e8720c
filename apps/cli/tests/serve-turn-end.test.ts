// A serving host writes a turn's end as soon as the agent is idle, rather than
// when the store's write-behind window closes or the idle agent is released: a
// client waiting on the event stream for `turn/end` (shown only once it is on
// disk) gets it at once. In process, on the default bundle, with a window and
// an idle release of ten minutes each, so only that write can bring it.
import Serve from '@loom/serve'
import { afterAll, describe, expect, it } from 'vitest'
import { boot, type Deployment } from '../src/boot.ts'
import { project, scriptedModel } from './helpers.ts'
import { client, turnEnded } from './serve-client.ts'

const TOKEN = 'turn-end-test-token-0123456789'
const TEN_MINUTES = 600_000

const LONG_WINDOW = `
- id: session-jsonl
  config:
    root: !!js "process.env.LOOM_HOME + '/sessions'"
    maxDelayMs: ${TEN_MINUTES}
`

describe("a serving host and a turn's end", () => {
  let deployment: Deployment | undefined

  afterAll(async () => {
    await deployment?.dispose()
  })

  it('is on the stream as soon as the turn ended, not a write-behind window later', { timeout: 60_000 }, async () => {
    const at = project({ 'loom.yml': scriptedModel('- First answer.\n- Second answer.') + LONG_WINDOW })
    process.env.LOOM_HOME = at.home
    deployment = await boot({ cwd: at.cwd, log: () => {} })
    await deployment.root.plugin(Serve, Serve.Config({ token: TOKEN, port: 0, cwd: at.cwd, idleReleaseMs: TEN_MINUTES }))
    const api = client((deployment.root.get('serve') as Serve).url, TOKEN)

    const { id } = (await api.request('POST', '/v1/sessions', { task: 'one' })).body as { id: string }
    const first = await api.events(id, { until: turnEnded(1), timeoutMs: 30_000 })
    expect(first.frames.at(-1)?.event).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } })
    expect((await api.request('POST', `/v1/sessions/${id}/messages`, { text: 'two' })).status).toBe(202)
    const second = await api.events(id, { after: first.frames.at(-1)!.id, until: turnEnded(2), timeoutMs: 30_000 })
    expect(second.frames.at(-1)?.event).toMatchObject({ type: 'turn/end', data: { turn: 2 } })
    // The store holds it: the stream showed only what is durable, and the agent still runs here.
    const read = (await api.request('GET', `/v1/sessions/${id}`)).body
    expect(read.session).toMatchObject({ turns: 2, status: 'idle', here: true, lastTurn: { turn: 2, reason: { kind: 'completed' } } })
  })
})
