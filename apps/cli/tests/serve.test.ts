// `loom serve` on one host with the default JSONL store, run in this process:
// auth, limits and JSON errors; a session created, streamed (SSE, seq ids),
// resumed with Last-Event-ID, continued, cancelled, listed and read; /healthz;
// and the drain a stop signal starts. The scripted model plays one answer per
// call, in the order the tests make them.
import { LoomClient } from '@loom/client'
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles, type Run } from './helpers.ts'
import { client, endsTurn, eventually, type Frame, readUntil, turnEnded } from './serve-client.ts'

const TOKEN = 'serve-test-token-0123456789'

const SCRIPT = scriptedModel(`
- Hello from the server.
- Second turn, same session.
- text: Sleeping.
  toolCalls:
    - { name: bash, arguments: { command: 'sleep 600' } }
- Noted both.
- The first answer of the guide.
- The second answer of the guide.
- Once, for the key.
- Once more, for the key.
- text: Sleeping again.
  toolCalls:
    - { name: bash, arguments: { command: 'sleep 600' } }
`)

const seqs = (frames: Frame[]) => frames.map(frame => frame.id)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe('loom serve refuses to start without a token', () => {
  it('no LOOM_SERVE_TOKEN and no --token-file: exit 2, naming both', async () => {
    const at = project()
    const run = await loom(['serve', '--port', '0'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('serve: no bearer token: set LOOM_SERVE_TOKEN or pass --token-file FILE')
  })

  it('a short token, and a token file that does not exist: exit 2, the token never printed', async () => {
    const at = project()
    const short = await loom(['serve'], { ...at, env: { LOOM_SERVE_TOKEN: 'abc123' } })
    expect(short.code).toBe(2)
    expect(short.stderr).toContain('$LOOM_SERVE_TOKEN is 6 characters long; use at least 16')
    expect(short.stderr).not.toContain('abc123')
    const missing = await loom(['serve', '--token-file', 'nope.txt'], at)
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('cannot read the token file nope.txt: ENOENT')
  })
})

describe('loom serve (JSONL, one host)', () => {
  const at = project({ 'README.md': '# served\n', 'loom.yml': SCRIPT })
  let api: ReturnType<typeof client>
  let signal: (signal: NodeJS.Signals) => void
  let stdout: () => string
  let served: Promise<Run>
  let first: string

  beforeAll(async () => {
    served = loom(['serve', '--port', '0', '--drain-ms', '1500'], {
      ...at,
      env: { LOOM_SERVE_TOKEN: TOKEN },
      onStart: running => {
        signal = running.signal
        stdout = running.stdout
      },
    })
    const url = await eventually(() => /listening on (http:\S+)/.exec(stdout?.() ?? '')?.[1], 30_000, 'the server to listen')
    api = client(url, TOKEN)
  })

  afterAll(async () => {
    // Whatever happened, the server stops (a drain the last test did is idempotent).
    signal?.('SIGTERM')
    await served
  })

  it('/healthz answers without a token', async () => {
    const health = await api.request('GET', '/healthz', undefined, {})
    expect(health.status).toBe(200)
    expect(health.body).toMatchObject({ status: 'ok', store: 'jsonl', agents: { open: 0, running: 0 } })
  })

  it('/readyz answers without a token: ready while the store answers and the server is not draining', async () => {
    const ready = await api.request('GET', '/readyz', undefined, {})
    expect(ready.status).toBe(200)
    expect(ready.body).toMatchObject({ status: 'ready', store: 'jsonl' })
  })

  it('without a valid bearer token: 401 with the error alone, and nothing happens', async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer wrong-token-0123456789' },
      { authorization: `Basic ${TOKEN}` },
      { authorization: `Bearer ${TOKEN}x` },
    ]
    for (const headers of attempts) {
      const reply = await api.request('POST', '/v1/sessions', { task: 'hi' }, headers)
      expect(reply.status).toBe(401)
      expect(reply.headers.get('www-authenticate')).toBe('Bearer realm="loom"')
      expect(reply.body).toEqual({ error: { code: 'UNAUTHORIZED', message: 'a valid bearer token is required (Authorization: Bearer <token>)' } })
    }
    // Unknown endpoints and sessions are not revealed either.
    expect((await api.request('GET', '/v1/nothing', undefined, {})).status).toBe(401)
    expect((await api.request('GET', '/v1/sessions')).body).toEqual({ sessions: [] })
  })

  it('JSON errors with a code and a message: bad JSON, a missing or unknown field, a bad mode, 404s, 405, 413', async () => {
    const badJson = await api.request('POST', '/v1/sessions', '{"task": ')
    expect(badJson.status).toBe(400)
    expect(badJson.body.error.code).toBe('INVALID_JSON')
    const noTask = await api.request('POST', '/v1/sessions', { model: 'x' })
    expect(noTask.status).toBe(400)
    expect(noTask.body.error).toEqual({ code: 'INVALID_REQUEST', message: 'field "task" is required', field: 'task' })
    const typo = await api.request('POST', '/v1/sessions', { task: 'x', taks: 'y' })
    expect(typo.body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'taks' })
    const provider = await api.request('POST', '/v1/sessions', { task: 'x', provider: 'nope' })
    expect(provider.status).toBe(400)
    expect(provider.body.error).toMatchObject({ code: 'MODEL_NOT_ALLOWED', field: 'provider' })
    const unknown = await api.request('POST', '/v1/sessions/20990101-000000-abcdef/messages', { text: 'hi' })
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.code).toBe('SESSION_NOT_FOUND')
    expect((await api.request('GET', '/v1/sessions/20990101-000000-abcdef')).status).toBe(404)
    expect((await api.request('GET', '/v1/sessions/20990101-000000-abcdef/events')).status).toBe(404)
    expect((await api.request('GET', '/v1/sessions/..%2F..%2Fetc')).body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'id' })
    expect((await api.request('GET', '/v2/sessions')).body.error.code).toBe('NOT_FOUND')
    const method = await api.request('DELETE', '/v1/sessions')
    expect(method.status).toBe(405)
    expect(method.headers.get('allow')).toBe('POST, GET')
    const large = await api.request('POST', '/v1/sessions', { task: 'x'.repeat(2 << 20) })
    expect(large.status).toBe(413)
    expect(large.body.error).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: 'the body is larger than 1048576 bytes' })
    // None of them made a session.
    expect((await api.request('GET', '/v1/sessions')).body).toEqual({ sessions: [] })
  })

  it('a new session streams its turn in order, ids = seqs; Last-Event-ID and ?after resume without a gap or a duplicate', async () => {
    const created = await api.request('POST', '/v1/sessions', { task: 'say hello' })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ provider: 'scripted', model: 'scripted-1', status: 'running' })
    first = created.body.id
    expect(created.headers.get('location')).toBe(`/v1/sessions/${first}`)

    const whole = await api.events(first, { until: turnEnded(1) })
    expect(whole.status).toBe(200)
    expect(whole.retry).toBe(1000)
    expect(seqs(whole.frames)).toEqual(range(0, whole.frames.length - 1))
    expect(whole.frames.every(frame => frame.id === frame.event.seq)).toBe(true)
    const types = whole.frames.map(frame => frame.event.type)
    expect(types.indexOf('turn/start')).toBeLessThan(types.indexOf('assistant/message'))
    const end = whole.frames.find(frame => frame.event.type === 'turn/end')!
    expect(end.event.data.reason).toEqual({ kind: 'completed' })
    const answer = whole.frames.find(frame => frame.event.type === 'assistant/message')!
    expect(JSON.stringify(answer.event.data.message.content)).toContain('Hello from the server.')

    // Reconnects after seq k get k+1 on, to the same end.
    const last = end.id
    for (const k of [-1, 0, 3, last - 1]) {
      const resumed = await api.events(first, { lastEventId: k, until: frames => frames.at(-1)?.id === last })
      expect(seqs(resumed.frames), `Last-Event-ID ${k}`).toEqual(range(k + 1, last))
      expect(resumed.frames.map(frame => frame.event)).toEqual(whole.frames.slice(k + 1, last + 1).map(frame => frame.event))
    }
    const after = await api.events(first, { after: 2, until: frames => frames.at(-1)?.id === last })
    expect(seqs(after.frames)).toEqual(range(3, last))
    // Last-Event-ID wins over ?after (a browser's EventSource keeps the URL it was given).
    expect(seqs((await api.events(first, { after: 2, lastEventId: last - 1, until: frames => frames.at(-1)?.id === last })).frames)).toEqual([last])
    const bad = await api.events(first, { lastEventId: Number.NaN })
    expect(bad.status).toBe(400)
    expect(JSON.parse(bad.body).error.field).toBe('Last-Event-ID')
  })

  it('a followup continues the same session; the stream left open sees the new turn live', async () => {
    const before = (await api.request('GET', `/v1/sessions/${first}`)).body.session
    const live = api.events(first, { lastEventId: before.nextSeq - 1, until: turnEnded(2) })
    const posted = await api.request('POST', `/v1/sessions/${first}/messages`, { text: 'and again', mode: 'followup' })
    expect(posted.status).toBe(202)
    expect(posted.body).toMatchObject({ id: first, mode: 'followup' })
    expect(posted.body.seq).toBeGreaterThanOrEqual(before.nextSeq)
    const stream = await live
    expect(seqs(stream.frames)).toEqual(range(before.nextSeq, stream.frames.at(-1)!.id))
    expect(stream.frames.find(frame => frame.event.type === 'turn/end')!.event.data).toEqual({ turn: 2, reason: { kind: 'completed' } })
    expect(JSON.stringify(stream.frames.map(frame => frame.event))).toContain('Second turn, same session.')

    const read = await api.request('GET', `/v1/sessions/${first}`)
    expect(read.body.session).toMatchObject({ id: first, turns: 2, status: 'idle', lastTurn: { turn: 2, reason: { kind: 'completed' } } })
    expect(read.body.events.length).toBe(read.body.session.nextSeq)
    const tail = await api.request('GET', `/v1/sessions/${first}?from=${read.body.session.nextSeq - 2}`)
    expect(tail.body.events.map((event: { seq: number }) => event.seq)).toEqual([read.body.session.nextSeq - 2, read.body.session.nextSeq - 1])
    const bad = await api.request('POST', `/v1/sessions/${first}/messages`, { text: 'x', mode: 'shout' })
    expect(bad.body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'mode' })
  })

  it('cancel closes the running turn as aborted; inject waits for the next turn, which sees it', async () => {
    const created = await api.request('POST', '/v1/sessions', { task: 'sleep a while' })
    const id = created.body.id
    await api.events(id, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })
    const health = await api.request('GET', '/healthz', undefined, {})
    expect(health.body.agents.running).toBeGreaterThanOrEqual(1)
    const cancel = await api.request('POST', `/v1/sessions/${id}/cancel`)
    expect(cancel.status).toBe(200)
    expect(cancel.body).toEqual({ id, cancelled: true })
    const read = (await api.request('GET', `/v1/sessions/${id}`)).body
    expect(read.session.lastTurn).toEqual({ turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })
    expect((await api.request('POST', `/v1/sessions/${id}/cancel`)).body).toEqual({ id, cancelled: false })

    const injected = await api.request('POST', `/v1/sessions/${id}/messages`, { text: 'remember: blue', mode: 'inject' })
    expect(injected.status).toBe(202)
    expect(injected.body.status).toBe('idle')
    await api.request('POST', `/v1/sessions/${id}/messages`, { text: 'what did I say?' })
    const turn = await api.events(id, { after: read.session.nextSeq - 1, until: turnEnded(2) })
    const users = turn.frames.filter(frame => frame.event.type === 'user/message').map(frame => JSON.stringify(frame.event.data.content))
    expect(users.join('\n')).toContain('remember: blue')
    expect(users.join('\n')).toContain('what did I say?')

    const list = (await api.request('GET', '/v1/sessions')).body.sessions
    expect(list.map((session: { id: string }) => session.id)).toEqual([first, id])
    expect(list[0]).toMatchObject({ id: first, cwd: at.cwd })
  })

  it("the operator guide's curl commands work as written", async () => {
    const guide = readFileSync(new URL('../../../docs/operating.md', import.meta.url), 'utf8')
    const block = [...guide.matchAll(/```sh\n([\s\S]*?)```/g)].map(match => match[1]).find(text => text.includes('curl'))!
    const commands = block.split('\n').filter(line => line.startsWith('curl '))
    expect(commands.length).toBeGreaterThanOrEqual(6)
    const example = /"id":"([^"]+)"/.exec(block)![1]
    const idle = () =>
      eventually(
        async () => ((await api.request('GET', '/v1/sessions')).body.sessions.every((s: { status: string }) => s.status !== 'running') ? true : undefined),
        10_000,
        'idle sessions',
      )
    for (const command of commands) {
      const { method, path, headers, body, stream } = curl(command.replace(/\s+#.*$/, ''), { T: `Authorization: Bearer ${TOKEN}` })
      const target = path.replace(example, first)
      const reply = stream
        ? await api.events(target.split('/')[3], {
            lastEventId: headers['last-event-id'] === undefined ? undefined : Number(headers['last-event-id']),
            until: frames => frames.length > 0,
            timeoutMs: 5000,
          })
        : await api.request(method, target, body, headers)
      expect(reply.status, command).toBeLessThan(300)
      await idle()
    }
  })

  it('Idempotency-Key, through @loom/client: a retry gets the first answer and starts nothing; the same key with another body is 422', async () => {
    const typed = new LoomClient({ url: api.base, token: TOKEN })
    const created = await typed.createSession({ task: 'count once' }, { idempotencyKey: 'create-once' })
    const id = created.id
    expect(await typed.createSession({ task: 'count once' }, { idempotencyKey: 'create-once' })).toEqual(created)
    const events = typed.events(id)
    await readUntil(events, endsTurn(1))
    const sent = await typed.sendMessage(id, 'once more', { idempotencyKey: 'message-once' })
    expect(await typed.sendMessage(id, 'once more', { idempotencyKey: 'message-once' })).toEqual({ ...sent, status: expect.any(String) })
    await readUntil(events, endsTurn(2))
    await events.return()
    const refusals = [
      typed.sendMessage(id, 'once more', { mode: 'steer', idempotencyKey: 'message-once' }),
      typed.createSession({ task: 'count twice' }, { idempotencyKey: 'create-once' }),
    ]
    for (const refused of refusals) {
      expect(await refused.catch(error => error)).toMatchObject({ status: 422, code: 'IDEMPOTENCY_MISMATCH', field: 'Idempotency-Key' })
    }
    const bad = await typed.sendMessage(id, 'x', { idempotencyKey: 'not a key' }).catch(error => error)
    expect(bad).toMatchObject({ status: 400, code: 'INVALID_REQUEST', field: 'Idempotency-Key' })
    // One session from the two creates, two turns from the three messages; the message is in the log once.
    const read = await typed.getSession(id)
    expect(read.session.turns).toBe(2)
    expect(read.events.filter(event => event.type === 'user/message' && JSON.stringify(event.data).includes('once more'))).toHaveLength(1)
    expect((await typed.listSessions()).filter(session => session.id === id)).toHaveLength(1)
  })

  it('SIGTERM drains: 503 for new work, /readyz 503 and /healthz says draining, the turn past --drain-ms is closed in its log, the stream ends after it, exit 0', async () => {
    const created = await api.request('POST', '/v1/sessions', { task: 'sleep until stopped' })
    const id = created.body.id
    await api.events(id, { until: frames => frames.some(frame => frame.event.type === 'tool/call') })
    // A client following the session sees the closed turn, then the end of the stream. It replays the log from
    // seq 0, so its first frame says it is connected before the drain starts.
    let connected!: () => void
    const connection = new Promise<void>(resolve => {
      connected = resolve
    })
    const following = api.events(id, {
      timeoutMs: 50_000,
      until: () => {
        connected()
        return false
      },
    })
    await Promise.race([connection, following])
    signal('SIGTERM')
    // Alive (a liveness probe must not restart it mid-drain), but not ready for work.
    const health = await api.request('GET', '/healthz', undefined, {})
    expect(health.status).toBe(200)
    expect(health.body.status).toBe('draining')
    const ready = await api.request('GET', '/readyz', undefined, {})
    expect(ready.status).toBe(503)
    expect(ready.body).toMatchObject({ status: 'draining', reason: 'this server is shutting down' })
    const refused = await api.request('POST', '/v1/sessions', { task: 'too late' })
    expect(refused.status).toBe(503)
    expect(refused.body.error.code).toBe('DRAINING')
    expect((await api.request('POST', `/v1/sessions/${first}/messages`, { text: 'too late' })).status).toBe(503)

    const run = await served
    // The tool sleeps ten minutes: the server could only exit within the test's timeout by cancelling it at the deadline.
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toContain('loom serve: SIGTERM: draining')
    expect(run.stderr).toContain('drained: 0 running turn(s) finished in time, 1 cancelled')
    const stream = await following
    expect(stream.ended).toBe(true)
    const end = stream.frames.at(-1)!.event
    expect(end.type).toBe('turn/end')
    expect(end.data.reason).toEqual({ kind: 'aborted', reason: { kind: 'hook', reason: 'loom serve is shutting down: the drain deadline (1500 ms) passed' } })

    // On disk: the turn closed, with the tool's result, and no lease left behind.
    const file = sessionFiles(at.home).find(path => path.includes(id))!
    const logged = events(file)
    expect(logged.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted' } } })
    expect(logged.some(event => event.type === 'tool/result')).toBe(true)
    expect(sessionFiles(at.home).length).toBe(5)
    expect((await loom(['sessions', 'verify', id], at)).code).toBe(0)
  })
})

/** The request a guide's `curl` line makes (the flags the guide uses: -s -N -H -d -X), with shell variables from `vars`. */
function curl(line: string, vars: Record<string, string>) {
  const words = [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map(
    ([, single, double, bare]) => single ?? (double ?? bare).replace(/\$(\w+)/g, (_, name: string) => vars[name] ?? ''),
  )
  let method = 'GET'
  let path = ''
  let body: string | undefined
  let stream = false
  const headers: Record<string, string> = {}
  for (let i = 1; i < words.length; i++) {
    const word = words[i]
    if (word === '-s') continue
    if (word === '-N') stream = true
    else if (word === '-X') method = words[++i]
    else if (word === '-d') {
      body = words[++i]
      if (method === 'GET') method = 'POST'
    } else if (word === '-H') {
      const [name, ...value] = words[++i].split(':')
      headers[name.trim().toLowerCase()] = value.join(':').trim()
    } else path = word.replace(/^(https?:\/\/)?localhost:8080/, '')
  }
  return { method, path, headers, body, stream }
}
