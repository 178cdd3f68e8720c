// The inspector's server on a real JSONL store: the page without a token and
// its API only with one, the views of a long session (series with header
// changes, a request's manifest, a diff, a plugin's footprint), live events as
// they are stored, the size of what the page loads, and a 10,000-event session
// in a real browser (Chromium headless): its first view and a virtualized
// transcript the keyboard moves through.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { Context } from '@deepseek-ai/cordis'
import { userText } from '@loom/llm'
import SessionStore, { type SessionHeader, type StoredSession } from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { writeSyntheticSession } from '../bench/synthetic.ts'
import { AssetStore, type InspectorServer, type InspectorSource, InspectorViews, persistenceSource, startInspector } from '../src/index.ts'
import { pageDocument } from '../src/assets.ts'
import { findChromium, focused, openBrowser } from '../src/testing.ts'

const folders: string[] = []
const readers: { dispose(): unknown }[] = []
afterAll(async () => {
  for (const reader of readers) await reader.dispose()
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})
const folder = () => {
  const dir = mkdtempSync(join(tmpdir(), 'loom-inspector-test-'))
  folders.push(dir)
  return dir
}

/** A reader of the store under `root`, as `loom inspect` opens it. */
async function store(root: string) {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  readers.push(await ctx.plugin(JsonlPersistence, { root }))
  return ctx
}

const get = (server: InspectorServer, path: string, token: string | null = server.token) =>
  fetch(`${server.origin}${path}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } })

describe('the inspector server', () => {
  let server: InspectorServer
  let id: string
  beforeAll(async () => {
    const root = folder()
    ;({ id } = await writeSyntheticSession(root, 1200))
    server = await startInspector({ source: persistenceSource((await store(root)).sessionPersistence) })
  })
  afterAll(() => server?.close())

  it('serves the page and its assets without a token, the API only with it; a wrong token is 401', async () => {
    const page = await get(server, '/', null)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/)
    expect(page.headers.get('referrer-policy')).toBe('no-referrer')
    expect(await page.text()).toContain('<script type="importmap">')
    const preact = await get(server, '/assets/vendor/preact.mjs', null)
    expect(preact.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(await preact.text()).toMatch(/export\s*\{/)
    // A client that has the file gets 304.
    expect((await fetch(`${server.origin}/assets/app.js`, { headers: { 'if-none-match': preact.headers.get('etag')! } })).status).toBe(200)
    const app = await get(server, '/assets/app.js', null)
    expect((await fetch(`${server.origin}/assets/app.js`, { headers: { 'if-none-match': app.headers.get('etag')! } })).status).toBe(304)

    for (const token of [null, 'wrong-token', `${server.token}x`]) {
      const refused = await get(server, '/api/sessions', token)
      expect(refused.status).toBe(401)
      expect((await refused.json()) as any).toEqual({ error: { code: 'UNAUTHORIZED', message: 'a valid token is required (Authorization: Bearer <token>)' } })
    }
    expect((await get(server, '/api/sessions')).status).toBe(200)
    expect(server.url(id)).toBe(`${server.origin}/?token=${server.token}#/s/${id}`)
  })

  it('answers what it cannot show with a status and a message naming it', async () => {
    const cases: [string, number, string][] = [
      ['/api/sessions/nope', 404, 'no session nope is stored here'],
      [`/api/sessions/${id}/requests/0`, 404, `session ${id} has 100 requests: 1 to 100, not 0`],
      [`/api/sessions/${id}/requests/x`, 400, 'request must be a whole number, got "x"'],
      [`/api/sessions/${id}/footprint?plugin=nobody`, 404, `no section, context, tool or header change of session ${id} belongs to plugin "nobody"`],
      [`/api/sessions/${id}/diff?a=1`, 400, 'query parameter "b" must be a whole number, got ""'],
      ['/api/other', 404, 'no such endpoint: /api/other'],
      ['/assets/missing.js', 404, 'no such asset: /assets/missing.js'],
    ]
    for (const [path, status, message] of cases) {
      const response = await get(server, path)
      expect(response.status, path).toBe(status)
      expect(((await response.json()) as any).error.message, path).toBe(message)
    }
    const posted = await fetch(`${server.origin}/api/sessions`, { method: 'POST', headers: { authorization: `Bearer ${server.token}` } })
    expect(posted.status).toBe(405)
  })

  it('rebuilds every request: cache hits reported beside estimated, input tokens, header changes with their causes', async () => {
    const series = (await (await get(server, `/api/sessions/${id}/series`)).json()) as any
    expect(series.points).toHaveLength(100)
    const [first, second] = series.points
    expect(first).toMatchObject({
      request: 1,
      turn: 1,
      step: 1,
      reportedHitShare: 0,
      header: { reason: 'initial', causes: ['the first request of the session'] },
    })
    expect(second.reportedHitShare).toBeCloseTo(120 / 240)
    expect(second.estimatedHitShare).toBeGreaterThan(0.7)
    const changed = series.points.filter((point: any) => point.header?.reason === 'change')
    // 100 steps: the first change would come at step 201.
    expect(changed).toEqual([])
    const long = await server.handler.views.series(id)
    expect(long.totals.requests).toBe(100)
  })

  it('a request: its manifest by owner and category, the exact system text and tools, the runtime-context snapshot', async () => {
    const request = (await (await get(server, `/api/sessions/${id}/requests/2`)).json()) as any
    expect(request).toMatchObject({ request: 2, requests: 100, turn: 1, step: 2, route: 'deepseek/deepseek-flash', header: null })
    expect(request.system).toMatch(/^You are an AI agent powered by Loom\.\n\nGuidance for the tools, version 0\./)
    expect(request.tools.map((tool: any) => `${tool.name} ← ${tool.owner}`)).toEqual(['read ← @loom/tool-fs', 'grep ← @loom/tool-fs', 'bash ← @loom/tool-fs'])
    expect(request.runtimeContext).toBe('Current runtime context.\n\nCurrent time: step 1.2')
    const rows = request.manifest.rows.filter((row: any) => row.kind !== 'message')
    expect(rows.map((row: any) => `${row.kind} ${row.name} ${row.owner} ${row.stability} ${row.trust} ${row.category}`)).toEqual([
      'section harness:identity @loom/system-prompt static product instructions',
      'section tool:guidance example-guidance static deployment instructions',
      'context runtime:time @loom/context-time step product runtime',
      'tool read @loom/tool-fs null product tools',
      'tool grep @loom/tool-fs null product tools',
      'tool bash @loom/tool-fs null product tools',
    ])
  })

  it("the diff of two requests and a plugin's footprint name the header change and its cause", async () => {
    const root = folder()
    const { id: long } = await writeSyntheticSession(root, 2800)
    const views = new InspectorViews(persistenceSource((await store(root)).sessionPersistence))
    const series = await views.series(long)
    const change = series.points.find(point => point.header?.reason === 'change')!
    expect(change.request).toBe(201)
    expect(change.header).toEqual({
      reason: 'change',
      causes: ['section "tool:guidance" of plugin "example-guidance" changed', 'first difference at byte 96'],
      owners: ['example-guidance'],
    })
    const { diff } = await views.diff(long, 200, 201)
    expect(diff.changed.map(entry => `${entry.after.kind} ${entry.after.name}`)).toEqual(['section tool:guidance', 'context runtime:time'])
    expect(diff.added).toEqual([])
    const footprint = await views.footprint(long, 'example-guidance')
    expect(footprint.steps).toHaveLength(series.points.length)
    expect(footprint.steps[0]).toMatchObject({ request: 1, sections: 350, contexts: 0, tools: 0, tokens: 350 })
    expect(footprint.changes).toEqual([{ request: 201, reason: 'change', causes: ['section "tool:guidance" of plugin "example-guidance" changed'] }])
    expect(footprint.plugins.map(plugin => plugin.name)).toContain('@loom/tool-fs')
    // Without a plugin: the one with the most tokens in the last request.
    expect((await views.footprint(long)).plugin).toBe('example-guidance')
  })
})

describe('the sessions view', () => {
  it('folds a subagent under the session that delegated to it, and says when a turn was left open by a writer that is gone', async () => {
    const header = (id: string, extra: Partial<SessionHeader> = {}): SessionHeader => ({ version: 0, id, createdAt: 1, cwd: '/srv/shop', ...extra })
    const turn = (open: boolean) =>
      [
        { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
        { type: 'user/message', seq: 1, time: 1, data: userText('hi'), surfaceOp: 'append' },
        ...(open ? [] : [{ type: 'turn/end', seq: 2, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }]),
      ] as StoredSession['events']
    const logs = new Map<string, StoredSession>([
      ['parent', { meta: header('parent'), events: turn(false) }],
      ['child', { meta: header('child', { parentSession: 'parent', origin: 'subagent' }), events: turn(false) }],
      ['crashed', { meta: header('crashed'), events: turn(true) }],
    ])
    const source: InspectorSource = {
      list: async () => [...logs.values()].map(stored => stored.meta),
      read: async (id, from = 0) => {
        const stored = logs.get(id)
        return stored && { meta: stored.meta, events: stored.events.slice(from) }
      },
      async *follow() {},
      running: async () => false,
      prices: () => undefined,
    }
    const server = await startInspector({ source })
    try {
      const { sessions } = (await (await get(server, '/api/sessions')).json()) as any
      expect(sessions.map((row: any) => [row.id, row.project, row.status, row.children.map((child: any) => child.id)])).toEqual([
        ['parent', 'shop', 'completed', ['child']],
        ['crashed', 'shop', 'interrupted', []],
      ])
    } finally {
      await server.close()
    }
  })
})

describe('live', () => {
  it('streams the events of a session as they are stored, from the seq the page has', async () => {
    const root = folder()
    const writer = await store(root)
    const session = writer.sessions.create(undefined, { meta: { cwd: '/srv/project' } })
    session.append('turn/start', { turn: 1 })
    session.append('user/message', userText('hello'), { surfaceOp: 'append' })
    await writer.sessions.flush(session)
    const server = await startInspector({ source: persistenceSource((await store(root)).sessionPersistence, { pollMs: 20 }) })
    const abort = new AbortController()
    try {
      const response = await get(server, `/api/sessions/${session.id}/events?after=0`)
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let text = ''
      const until = async (pattern: RegExp) => {
        while (!pattern.test(text)) {
          const { value, done } = await reader.read()
          if (done) throw new Error(`the stream ended before ${pattern}: ${text}`)
          text += value
        }
      }
      await until(/id: 1\n/)
      expect(text).toContain('data: {"seq":1,"type":"user/message"}')
      expect(text).not.toContain('id: 0\n')
      session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      await writer.sessions.flush(session)
      await until(/id: 2\n/)
      expect(text).toContain('data: {"seq":2,"type":"turn/end"}')
      await reader.cancel()
    } finally {
      abort.abort()
      await server.close()
    }
  })
})

describe('the page', () => {
  it('loads less than 250 KB gzipped in total: its own files and the libraries it imports', () => {
    const assets = new AssetStore()
    const names = assets.names()
    expect(names).toEqual(
      expect.arrayContaining(['app.js', 'style.css', 'vendor/preact.mjs', 'vendor/hooks.mjs', 'vendor/htm.mjs', 'vendor/uplot.mjs', 'vendor/uplot.css']),
    )
    const sizes = names.map(name => assets.get(name)!.gzip.length)
    const total = sizes.reduce((sum, size) => sum + size, gzipSync(pageDocument().asset.body).length)
    console.log(`inspector assets: ${names.length + 1} files, ${(total / 1024).toFixed(1)} KB gzipped`)
    expect(total).toBeLessThan(250 * 1024)
  })
})

const CHROMIUM = findChromium()
if (!CHROMIUM) console.warn('note: the browser tests of @loom/inspector are skipped: no Chromium (apt-get install -y chromium, or set LOOM_CHROMIUM)')

describe.skipIf(!CHROMIUM)('a 10,000-event session in the browser', () => {
  it('shows its transcript with only the entries in view in the page, and the keyboard reaches its end', { timeout: 120_000 }, async () => {
    const root = folder()
    const { id, events } = await writeSyntheticSession(root, 10_000)
    expect(events).toBeGreaterThanOrEqual(10_000)
    const server = await startInspector({ source: persistenceSource((await store(root)).sessionPersistence) })
    const browser = await openBrowser()
    try {
      const page = await browser.page()
      await page.goto(server.url(id))
      await page.waitForSelector('main[data-ready]', { timeout: 60_000 })
      const transcript = page.getByRole('list', { name: 'Transcript' })
      const rendered = await transcript.locator('[aria-posinset]').count()
      const total = Number(await transcript.locator('[aria-posinset]').first().getAttribute('aria-setsize'))
      expect(total).toBeGreaterThan(3000)
      expect(rendered).toBeLessThan(100)
      await transcript.locator('[aria-posinset]').first().focus()
      await page.keyboard.press('End')
      // A function, not a string: the page's Content-Security-Policy refuses eval.
      await page.waitForFunction(setsize => (globalThis as any).document.activeElement?.getAttribute('aria-posinset') === setsize, String(total))
      expect((await focused(page)).text).toMatch(/^Turn \d+ ended: completed$/)
      expect(await transcript.locator('[aria-posinset]').count()).toBeLessThan(100)
      expect(browser.problems).toEqual([])
    } finally {
      await browser.close()
      await server.close()
    }
  })
})
