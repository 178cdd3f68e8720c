// A `loom serve` host owns one project. Two projects share one LOOM_HOME: `loom
// run` makes a session in each, then a real `loom serve` process starts in
// project A. It lists, reads and continues A's sessions (the one `loom run` made
// there too), and answers B's exactly as an unknown id: not listed, 404 on every
// route, and B's log is left as it was (no turn ran in B's folder under A's
// policy).
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loom, project, scriptedModel, sessionFiles } from './helpers.ts'
import { client, startHost, turnEnded, stopHosts } from './serve-client.ts'

const TOKEN = 'projects-test-token-0123456789'

/** The session `loom run` made in `cwd`: its id and its log's path (the header is the log's first line). */
function sessionIn(home: string, cwd: string): { id: string; file: string } {
  const found = sessionFiles(home)
    .map(file => ({ file, header: JSON.parse(readFileSync(file, 'utf8').split('\n')[0]) }))
    .filter(({ header }) => header.cwd === cwd)
  expect(found.length, `sessions recorded in ${cwd}`).toBe(1)
  return { id: found[0].header.id, file: found[0].file }
}

describe('loom serve in project A, sharing LOOM_HOME with project B', () => {
  const b = project({ 'loom.yml': scriptedModel('- Answered in B.') })
  const a = { ...project({ 'loom.yml': scriptedModel('- Answered in A.\n- Continued in A.\n- Created in A.') }), home: b.home }
  let api: ReturnType<typeof client>
  let inB: { id: string; file: string }
  let inA: { id: string; file: string }
  let stop: () => Promise<number | null>

  beforeAll(async () => {
    const runB = await loom(['run', 'hello from B'], b)
    expect(runB.code, runB.stderr).toBe(0)
    inB = sessionIn(b.home, b.cwd)
    const runA = await loom(['run', 'hello from A'], a)
    expect(runA.code, runA.stderr).toBe(0)
    inA = sessionIn(a.home, a.cwd)

    const host = await startHost('A', a, { LOOM_SERVE_TOKEN: TOKEN })
    stop = async () => (await stopHosts([host], 'SIGTERM'))[0]
    const url = host.url
    api = client(url, TOKEN)
  })

  afterAll(async () => {
    expect(await stop?.()).toBe(0)
  })

  it("B's session is not listed, and every route that names it is a 404 like an unknown id's; B's log is unchanged", async () => {
    const before = readFileSync(inB.file)
    const listed = (await api.request('GET', '/v1/sessions')).body.sessions.map((session: { id: string }) => session.id)
    expect(listed).toContain(inA.id)
    expect(listed).not.toContain(inB.id)

    const unknown = '20990101-000000-abcdef'
    const requests: [string, string, unknown?][] = [
      ['GET', '/v1/sessions/ID'],
      ['POST', '/v1/sessions/ID/messages', { text: 'run something in B' }],
      ['POST', '/v1/sessions/ID/messages', { text: 'now', mode: 'steer' }],
      ['POST', '/v1/sessions/ID/cancel'],
    ]
    for (const [method, path, body] of requests) {
      const reply = await api.request(method, path.replace('ID', inB.id), body)
      const control = await api.request(method, path.replace('ID', unknown), body)
      expect(reply.status, `${method} ${path}`).toBe(404)
      expect(reply.text, `${method} ${path}`).toBe(control.text.replace(unknown, inB.id))
    }
    const stream = await api.events(inB.id, { timeoutMs: 10_000 })
    expect(stream.status).toBe(404)
    expect(stream.body).toBe((await api.events(unknown)).body.replace(unknown, inB.id))
    expect(readFileSync(inB.file).equals(before)).toBe(true)
  })

  it("A's own sessions work: the one `loom run` made there continues here, and a new one runs", async () => {
    const read = await api.request('GET', `/v1/sessions/${inA.id}`)
    expect(read.status).toBe(200)
    expect(read.body.session).toMatchObject({ id: inA.id, turns: 1, header: { cwd: a.cwd } })
    const next = read.body.session.nextSeq
    const posted = await api.request('POST', `/v1/sessions/${inA.id}/messages`, { text: 'go on' })
    expect(posted.status).toBe(202)
    const turn = await api.events(inA.id, { after: next - 1, until: turnEnded(2) })
    expect(turn.frames.find(frame => frame.event.type === 'turn/end')!.event.data.reason).toEqual({ kind: 'completed' })

    const created = await api.request('POST', '/v1/sessions', { task: 'start here' })
    expect(created.status).toBe(201)
    await api.events(created.body.id, { until: turnEnded(1) })
    const listed = (await api.request('GET', '/v1/sessions')).body.sessions
    expect(listed.map((session: { id: string }) => session.id)).toEqual([inA.id, created.body.id])
    expect(listed.every((session: { cwd: string }) => session.cwd === a.cwd)).toBe(true)
  })
})
