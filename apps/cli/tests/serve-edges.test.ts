// The edges of a real `loom serve` (JSONL store, scripted model): a session
// whose log was damaged by hand answers 500 SESSION_CORRUPT on every route,
// naming the command to run and not the log's path; an unknown session's 404
// names no path either; a client-chosen model outside what the deployment's
// providers declare is 400 MODEL_NOT_ALLOWED. Deadlines and the connection
// cap on real sockets: plugins/serve/tests/edges.test.ts.
import { readFileSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { dirname } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { project, scriptedModel, sessionFiles } from './helpers.ts'
import { client, eventually, type Host, startHost, turnEnded } from './serve-client.ts'

const TOKEN = 'edges-test-token-0123456789'

describe('loom serve: store errors without paths, and the model allowlist', () => {
  const at = project({ 'loom.yml': scriptedModel('- First answer.\n- Second answer.') })
  let host: Host
  let api: ReturnType<typeof client>

  beforeAll(async () => {
    host = await startHost('edges', at, { LOOM_SERVE_TOKEN: TOKEN })
    api = client(host.url, TOKEN)
  })

  afterAll(async () => {
    host?.child.kill('SIGTERM')
    await host?.exited
  })

  it('a model the providers do not declare is 400 MODEL_NOT_ALLOWED naming the allowed routes; a declared one is served; nothing else was created', async () => {
    const refused = await api.request('POST', '/v1/sessions', { task: 'x', model: 'gpt-9-ultra' })
    expect(refused.status).toBe(400)
    expect(refused.body.error).toMatchObject({ code: 'MODEL_NOT_ALLOWED', field: 'model' })
    expect(refused.body.error.message).toMatch(/^model "scripted\/gpt-9-ultra" is not allowed on this server \(allowed: .*scripted\/scripted-1/)
    expect(refused.body.error.allowed).toContain('scripted/scripted-1')
    const provider = await api.request('POST', '/v1/sessions', { task: 'x', provider: 'nope' })
    expect(provider.body.error).toMatchObject({ code: 'MODEL_NOT_ALLOWED', field: 'provider' })
    expect((await api.request('GET', '/v1/sessions')).body).toEqual({ sessions: [] })

    const created = await api.request('POST', '/v1/sessions', { task: 'say hello', model: 'scripted-1' })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ provider: 'scripted', model: 'scripted-1' })
    expect((await api.events(created.body.id, { until: turnEnded(1) })).frames.some(frame => frame.event.type === 'turn/end')).toBe(true)
  })

  it('an unknown session is 404 with no path of the server in the body', async () => {
    const unknown = await api.request('GET', '/v1/sessions/20990101-000000-abcdef')
    expect(unknown.status).toBe(404)
    expect(unknown.text).not.toContain(at.home)
    expect(unknown.text).not.toContain(dirname(at.cwd))
  })

  it('a damaged log: 500 SESSION_CORRUPT on read, stream and message, naming `loom sessions verify ID`, never the file; the server logs where', async () => {
    // The agent of the first test's session lets its lease go when idle: then every route reads the log.
    await eventually(async () => ((await api.request('GET', '/healthz', undefined, {})).body.agents.open === 0 ? true : undefined), 30_000, 'the idle release')
    const [path] = sessionFiles(at.home)
    const id = JSON.parse(readFileSync(path, 'utf8').split('\n')[0]).id
    const lines = readFileSync(path, 'utf8').split('\n')
    lines[3] = '{"this is": not json'
    writeFileSync(path, lines.join('\n'))
    const expected = {
      code: 'SESSION_CORRUPT',
      message: `session "${id}" cannot be read: its stored log is damaged; nothing was done. An operator can run \`loom sessions verify ${id}\``,
    }
    const replies = [
      await api.request('GET', `/v1/sessions/${id}`),
      await api.request('GET', `/v1/sessions/${id}/events`),
      await api.request('POST', `/v1/sessions/${id}/messages`, { text: 'continue' }),
    ]
    for (const reply of replies) {
      expect(reply.status).toBe(500)
      expect(reply.body.error).toEqual(expected)
      expect(reply.text).not.toContain(dirname(at.cwd))
    }
    expect(host.stderr()).toContain(path)
  })
})

describe('loom serve --max-connections', () => {
  it('a connection past the cap is answered 503 TOO_MANY_CONNECTIONS, and served again once one closes', async () => {
    const at = project({ 'loom.yml': scriptedModel('- Hi.') })
    const host = await startHost('capped', at, { LOOM_SERVE_TOKEN: TOKEN }, ['--max-connections', '1', '--headers-timeout-ms', '20000'])
    try {
      const { port } = new URL(host.url)
      // One connection that says nothing holds the only place.
      const idle = connect(Number(port), '127.0.0.1')
      await new Promise<void>(resolve => idle.once('connect', () => resolve()))
      const api = client(host.url, TOKEN)
      const full = await eventually(
        async () => {
          const reply = await api.request('GET', '/v1/sessions')
          return reply.status === 503 ? reply : undefined
        },
        30_000,
        'the cap to refuse',
      )
      expect(full.body.error.code).toBe('TOO_MANY_CONNECTIONS')
      idle.destroy()
      const served = await eventually(
        async () => {
          const reply = await api.request('GET', '/v1/sessions')
          return reply.status === 200 ? reply : undefined
        },
        30_000,
        'a place to free up',
      )
      expect(served.body).toEqual({ sessions: [] })
    } finally {
      host.child.kill('SIGTERM')
      await host.exited
    }
  })
})
