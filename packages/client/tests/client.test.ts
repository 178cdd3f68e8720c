// `@loom/client` against a real `loom serve --approve api` whose scripted model
// plays one answer per call, in the order the tests make them. Faults are
// injected between the client and the server: a fetch that loses the answer
// of a write the server carried out (a dropped connection, a 503), and a TCP
// proxy whose connections are cut in the middle of an event stream. Every
// JSON answer the client gets is checked against the server's own OpenAPI
// document.
import { createServer, type Socket, connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { project, scriptedModel } from '../../../apps/cli/tests/helpers.ts'
import { endsTurn, type Host, readUntil, startHost } from '../../../apps/cli/tests/serve-client.ts'
import { openApiSchemas } from '../../../plugins/serve/tests/openapi-schemas.ts'
import { is, LoomApiError, LoomClient, type SessionEvent } from '../src/index.ts'

const TOKEN = 'client-test-token-0123456789'

const bash = (command: string) => `- toolCalls:\n    - { id: c1, name: bash, arguments: { command: '${command}' } }`

const SCRIPT = [
  '- Hello from the server.',
  '- Once, for the key.',
  bash('echo approved-by-the-client'),
  '- It ran.',
  bash('ls -a'),
  '- I will not list the folder.',
  bash('echo after-the-cut'),
  '- Done after the cut.',
].join('\n')

/** The default bundle's policy patched: bash asks (no unattended answer: deny). */
const POLICY = `
- id: permissions
  config:
    default: allow
    rules:
      - { tool: bash, action: ask }
`

const seqs = (events: SessionEvent[]) => events.map(event => event.seq)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const resultText = (event: SessionEvent) => (event.data as any).message.content[0].content.map((block: { text: string }) => block.text).join('') as string

describe('@loom/client against loom serve --approve api', () => {
  const at = project({ 'loom.yml': scriptedModel(SCRIPT) + POLICY })
  let host: Host
  /** Every JSON answer that does not fit the OpenAPI document, with the request. */
  const misfits: string[] = []
  let checked = 0
  let checkedFetch: typeof fetch

  beforeAll(async () => {
    host = await startHost('client', at, { LOOM_SERVE_TOKEN: TOKEN }, ['--approve', 'api'])
    const doc = await (await fetch(`${host.url}/v1/openapi.json`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()
    const schemas = openApiSchemas(doc)
    checkedFetch = async (input, init) => {
      const response = await fetch(input, init)
      if (!response.headers.get('content-type')?.startsWith('application/json')) return response
      const url = new URL(String(input))
      const method = init?.method ?? 'GET'
      const template = schemas.templateOf(url.pathname)
      const problems = template ? schemas.check(method, template, response.status, await response.clone().json()) : ['no path of the document']
      checked++
      for (const problem of problems) misfits.push(`${method} ${url.pathname} ${response.status}: ${problem}`)
      return response
    }
  })

  afterAll(async () => {
    host?.child.kill('SIGTERM')
    expect(await host?.exited).toBe(0)
    // Checked last: every test's answers are in.
    expect(checked).toBeGreaterThan(10)
    expect(misfits).toEqual([])
  })

  it('creates a session and follows it; a write whose answer was lost is retried with its key and done once', async () => {
    const sent: { method: string; path: string; key: string | null }[] = []
    const lost = new Set<string>()
    // The server carries the first attempt of each write out; its answer never reaches the client.
    const faulty: typeof fetch = async (input, init) => {
      const path = new URL(String(input)).pathname
      const method = init?.method ?? 'GET'
      const key = new Headers(init?.headers).get('idempotency-key')
      if (method === 'POST') sent.push({ method, path, key })
      const response = await checkedFetch(input, init)
      if (method !== 'POST' || lost.has(path)) return response
      lost.add(path)
      await response.text()
      if (path === '/v1/sessions') throw new TypeError('fetch failed', { cause: new Error('socket hang up') })
      return Response.json(
        { error: { code: 'STORE_UNAVAILABLE', message: 'the session store cannot be reached' } },
        { status: 503, headers: { 'retry-after': '1' } },
      )
    }
    const client = new LoomClient({ url: host.url, token: TOKEN, fetch: faulty, retryDelayMs: 10 })

    const created = await client.createSession({ task: 'say hello' })
    expect(created).toMatchObject({ provider: 'scripted', model: 'scripted-1', status: 'running', events: `/v1/sessions/${created.id}/events` })
    // The iterator ends by itself once its signal aborts.
    const stop = new AbortController()
    const first: SessionEvent[] = []
    for await (const event of client.events(created.id, { signal: stop.signal })) {
      first.push(event)
      if (endsTurn(1)(event)) stop.abort()
    }
    expect(seqs(first)).toEqual(range(0, first.length - 1))

    const delivered = await client.sendMessage(created.id, 'once more')
    expect(delivered).toMatchObject({ id: created.id, mode: 'followup', seq: first.length })
    const following = client.events(created.id, { from: first.length })
    const second = await readUntil(following, endsTurn(2))
    await following.return()
    expect(seqs(second)).toEqual(range(first.length, first.length + second.length - 1))

    // Two attempts of each write, under one key each: a UUID the client made.
    expect(sent.map(({ path }) => path)).toEqual(['/v1/sessions', '/v1/sessions', `/v1/sessions/${created.id}/messages`, `/v1/sessions/${created.id}/messages`])
    expect(sent[0].key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(sent[1].key).toBe(sent[0].key)
    expect(sent[3].key).toBe(sent[2].key)
    expect(sent[2].key).not.toBe(sent[0].key)
    // One session, two turns, the message once.
    expect((await client.listSessions()).map(session => session.id)).toEqual([created.id])
    const read = await client.getSession(created.id)
    expect(read.session).toMatchObject({ turns: 2, status: 'idle', lastTurn: { turn: 2, reason: { kind: 'completed' } } })
    const users = read.events.filter(event => event.type === 'user/message' && JSON.stringify(event.data).includes('once more'))
    expect(users).toHaveLength(1)
    expect(JSON.stringify(read.events)).toContain('Once, for the key.')
  })

  it('answers approvals: allow runs the call, deny passes its note to the model, a second answer is 404 and not retried', async () => {
    let requests = 0
    const client = new LoomClient({
      url: host.url,
      token: TOKEN,
      fetch: (input, init) => {
        requests++
        return checkedFetch(input, init)
      },
    })
    const allowed = await client.createSession({ task: 'run it' })
    const events = client.events(allowed.id)
    const asked = (await readUntil(events, event => is(event, 'approval/requested'))).at(-1)!
    if (!is(asked, 'approval/requested')) throw new Error('unreachable')
    expect(asked.data).toMatchObject({ callId: 'c1', tool: 'bash', preview: 'echo approved-by-the-client', unattended: 'deny' })
    expect(await client.answerApproval(allowed.id, 'c1', 'allow', { by: 'ana' })).toEqual({ id: allowed.id, callId: 'c1', decision: 'allow' })
    // The same iterator goes on with the rest of the turn.
    const rest = await readUntil(events, endsTurn(1))
    expect(rest[0].seq).toBe(asked.seq + 1)
    const answered = rest.find(event => is(event, 'approval/answered'))!
    expect(answered.data).toEqual({ callId: 'c1', decision: 'allow', source: 'client', by: 'ana', host: expect.any(String) })
    expect(resultText(rest.find(event => event.type === 'tool/result')!)).toContain('approved-by-the-client')
    await events.return()

    const before = requests
    const again = await client.answerApproval(allowed.id, 'c1', 'deny').catch(error => error)
    expect(again).toBeInstanceOf(LoomApiError)
    expect(again).toMatchObject({ status: 404, code: 'APPROVAL_NOT_FOUND', retryAfter: undefined })
    expect(requests - before).toBe(1)

    const denied = await client.createSession({ task: 'list the folder' })
    const stream = client.events(denied.id)
    await readUntil(stream, event => is(event, 'approval/requested'))
    const answer = await client.answerApproval(denied.id, 'c1', 'deny', { note: 'read the README instead' })
    expect(answer).toEqual({ id: denied.id, callId: 'c1', decision: 'deny', note: 'read the README instead' })
    const result = (await readUntil(stream, endsTurn(1))).find(event => event.type === 'tool/result')!
    await stream.return()
    expect(resultText(result)).toMatch(/tool "bash" was not approved .*: read the README instead/)
    expect((result.data as any).meta.decision).toMatchObject({ policy: 'ask', answer: 'deny', note: 'read the README instead' })
  })

  it('the event iterator resumes through a cut connection with Last-Event-ID: no gap, no duplicate', async () => {
    const proxy = await tcpProxy(new URL(host.url).port)
    try {
      const client = new LoomClient({ url: proxy.url, token: TOKEN, fetch: checkedFetch })
      const created = await client.createSession({ task: 'run it after the cut' })
      const seen: SessionEvent[] = []
      for await (const event of client.events(created.id)) {
        seen.push(event)
        // The call waits for its answer, so nothing more is on the wire: every later event comes over a new connection.
        if (is(event, 'approval/requested')) {
          proxy.cut()
          await client.answerApproval(created.id, event.data.callId, 'allow')
        }
        if (endsTurn(1)(event)) break
      }
      expect(seqs(seen)).toEqual(range(0, seen.length - 1))
      const asked = seen.find(event => is(event, 'approval/requested'))!
      expect(resultText(seen.find(event => event.type === 'tool/result')!)).toContain('after-the-cut')
      const streams = proxy.heads.filter(head => head.startsWith(`GET /v1/sessions/${created.id}/events`))
      expect(streams).toHaveLength(2)
      expect(streams[0].toLowerCase()).toContain('last-event-id: -1')
      expect(streams[1].toLowerCase()).toContain(`last-event-id: ${asked.seq}`)
    } finally {
      await proxy.close()
    }
  })

  it('a refusal is a LoomApiError with the code, the field and no retry', async () => {
    const client = new LoomClient({ url: host.url, token: TOKEN, fetch: checkedFetch })
    const error = await client.sendMessage('20990101-000000-abcdef', 'hi', { mode: 'steer', idempotencyKey: 'not a key' }).catch(error => error)
    expect(error).toMatchObject({ name: 'LoomApiError', status: 400, code: 'INVALID_REQUEST', field: 'Idempotency-Key' })
    const missing = await readUntil(client.events('20990101-000000-abcdef'), () => true).catch(error => error)
    expect(missing).toMatchObject({ status: 404, code: 'SESSION_NOT_FOUND' })
    const unauthorized = await new LoomClient({ url: host.url, token: 'wrong-token-0123456789' }).listSessions().catch(error => error)
    expect(unauthorized).toMatchObject({ status: 401, code: 'UNAUTHORIZED' })
  })
})

/** A TCP proxy to `port` on this machine: the requests' heads are kept; `cut()` destroys every open connection. */
async function tcpProxy(port: string) {
  const sockets = new Set<Socket>()
  const heads: string[] = []
  const server = createServer(client => {
    const upstream = connect(Number(port), '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
    }
    // Kept-alive connections carry several requests: each head is kept.
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1')
      if (/^[A-Z]+ \/\S* HTTP\/1\.1\r\n/.test(text)) heads.push(text)
    })
    client.pipe(upstream).on('close', () => client.destroy())
    upstream.pipe(client).on('close', () => upstream.destroy())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${address.port}`,
    heads,
    cut: () => {
      for (const socket of sockets) socket.destroy()
    },
    close: () => {
      for (const socket of sockets) socket.destroy()
      return new Promise(resolve => server.close(resolve))
    },
  }
}
