// A host serves one project: two projects' sessions in one store (the memory
// backend of @loom/session/testing), and the API of a host started in one of
// them, on a real port. Every route that names another project's session
// answers exactly as for an unknown id; the list shows only its own; a session
// of its own still reaches the resume path. `loom serve` end to end:
// apps/cli/tests/serve-projects.test.ts.
import { Context } from '@deepseek-ai/cordis'
import { SessionStore } from '@loom/session'
import { type MemoryLogs, MemoryPersistence, meta, raw, shortTurn } from '@loom/session/testing'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createApi } from '../src/api.ts'
import { HostedSessions, type Persistence, type SessionOpener } from '../src/sessions.ts'

const TOKEN = 'project-test-token-0123456789'
const HOLDER = { pid: 1, host: 'elsewhere', since: 0, command: 'loom serve http://elsewhere' }

describe('a host serves the sessions of its own project only', () => {
  // Folders: project a (the host's, given through a symlink; another link to it), a subfolder of it, project b.
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'loom-serve-project-')))
  const a = join(base, 'a')
  const b = join(base, 'b')
  mkdirSync(join(a, 'sub'), { recursive: true })
  mkdirSync(b)
  symlinkSync(a, join(base, 'link-to-a'))
  symlinkSync(a, join(base, 'another-link'))

  const logs: MemoryLogs = new Map()
  const stored = (id: string, cwd: string | undefined, createdAt: number) =>
    logs.set(id, { header: meta(id, { cwd, createdAt }), events: raw(0, sink => shortTurn(sink, 1)) })
  stored('a-real', a, 1)
  stored('a-linked', join(base, 'link-to-a'), 2)
  stored('a-other-link', join(base, 'another-link'), 3)
  stored('b-other', b, 4)
  stored('a-sub', join(a, 'sub'), 5)
  stored('no-cwd', undefined, 6)
  stored('gone', join(base, 'deleted'), 7)
  const foreign = ['b-other', 'a-sub', 'no-cwd', 'gone']

  let store: Persistence
  let server: Server
  let address: string
  const opened: string[] = []
  const errors: unknown[] = []
  // A stored session resumed here is refused as held elsewhere: that it got this far is what is checked.
  const opener: SessionOpener = {
    async open(_flags, id) {
      opened.push(id!)
      throw Object.assign(new Error('held'), { code: 'SESSION_LEASE_HELD', holder: HOLDER })
    },
  }

  beforeAll(async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    await root.plugin(MemoryPersistence, { logs })
    const fiber = await root.plugin({ name: 'host', inject: ['sessions', 'sessionPersistence'], apply() {} })
    store = fiber.ctx.sessionPersistence
    const sessions = new HostedSessions(fiber.ctx, opener, store, { cwd: join(base, 'link-to-a'), route: {}, idleReleaseMs: 5000, tailIntervalMs: 50 })
    server = createServer(
      createApi(sessions, { token: TOKEN, maxBodyBytes: 1 << 20, heartbeatMs: 15_000, retryMs: 1000, store: 'memory', report: error => errors.push(error) }),
    )
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

  afterAll(async () => {
    await new Promise<void>(resolve => server.close(() => resolve()))
    rmSync(base, { recursive: true, force: true })
  })

  const request = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(address + path, {
      method,
      headers: { authorization: `Bearer ${TOKEN}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: response.status, text: await response.text() }
  }

  /** Every route that names a session, for `id`. */
  const routes = (id: string) =>
    [
      ['GET', `/v1/sessions/${id}`],
      ['GET', `/v1/sessions/${id}?from=3`],
      ['GET', `/v1/sessions/${id}/events`],
      ['POST', `/v1/sessions/${id}/messages`, { text: 'continue' }],
      ['POST', `/v1/sessions/${id}/messages`, { text: 'now', mode: 'steer' }],
      ['POST', `/v1/sessions/${id}/messages`, { text: 'context', mode: 'inject' }],
      ['POST', `/v1/sessions/${id}/cancel`],
    ] as const

  it('GET /v1/sessions lists the sessions recorded in its folder, through a symlink too; not a subfolder, another project, no cwd, a folder gone', async () => {
    const readFrom = vi.spyOn(store, 'readFrom')
    const listed = await request('GET', '/v1/sessions')
    expect(listed.status).toBe(200)
    expect(JSON.parse(listed.text).sessions.map((session: { id: string }) => session.id)).toEqual(['a-real', 'a-linked', 'a-other-link'])
    // The list's headers carry the cwd: no log was read for it.
    expect(readFrom).not.toHaveBeenCalled()
    readFrom.mockRestore()
  })

  it("another project's session answers every route as an unknown id does, byte for byte, and is never resumed", async () => {
    for (const [method, path, body] of routes('never-stored')) {
      const unknown = await request(method, path, body)
      expect(unknown.status, `${method} ${path}`).toBe(404)
      expect(JSON.parse(unknown.text)).toEqual({ error: { code: 'SESSION_NOT_FOUND', message: `session "never-stored" not found in this server's project` } })
    }
    for (const id of foreign) {
      for (const [method, path, body] of routes(id)) {
        const reply = await request(method, path, body)
        const unknown = await request(method, path.replace(id, 'never-stored'), body)
        expect({ status: reply.status, text: reply.text }, `${method} ${path}`).toEqual({ status: 404, text: unknown.text.replace('never-stored', id) })
      }
    }
    expect(opened).toEqual([])
    expect(errors).toEqual([])
    // Nothing was appended to any log.
    for (const id of foreign) expect(logs.get(id)!.events.length).toBe(6)
  })

  it('its own sessions are read, streamed and reach the resume path (here refused as held elsewhere)', async () => {
    for (const id of ['a-real', 'a-linked', 'a-other-link']) {
      const read = await request('GET', `/v1/sessions/${id}`)
      expect(read.status).toBe(200)
      expect(JSON.parse(read.text).session).toMatchObject({ id, turns: 1, status: 'idle' })
      const message = await request('POST', `/v1/sessions/${id}/messages`, { text: 'continue' })
      expect(message.status).toBe(409)
      expect(JSON.parse(message.text).error.code).toBe('SESSION_LEASE_HELD')
    }
    expect(opened).toEqual(['a-real', 'a-linked', 'a-other-link'])
  })

  it("a session's recorded cwd is kept once known: later requests for it read no log", async () => {
    const readFrom = vi.spyOn(store, 'readFrom')
    await request('POST', '/v1/sessions/b-other/messages', { text: 'again' })
    await request('POST', '/v1/sessions/b-other/messages', { text: 'and again' })
    expect(readFrom).not.toHaveBeenCalled()
    readFrom.mockRestore()
  })
})
