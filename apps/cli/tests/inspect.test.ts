// The inspector in a real browser (the system's Chromium, headless, through
// playwright-core) on sessions the CLI recorded with the scripted model: a plain
// run, a prompt budget that leaves a section out, a subagent, and a tool call the
// policy asked about and nobody approved; `loom inspect` serves them on loopback.
// Then `loom serve`'s /ui behind its bearer token, following a running session
// live. What is checked is text and structure (roles, labels), never pixels; no
// page may log an error. With LOOM_SCREENSHOTS=1 the tests also write the
// screenshots of the docs (docs/images/inspector-*.png, light theme).
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, findChromium, focused, type Locator, openBrowser, type Page } from '@loom/inspector/testing'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { bashAskedByPolicy, DELEGATING_MODEL, loom, project, type Run, scriptedModel, trustLayer } from './helpers.ts'
import { client, eventually, startHost, turnEnded } from './serve-client.ts'

const CHROMIUM = findChromium()
if (!CHROMIUM) console.warn('note: inspect.test.ts is skipped: no Chromium (apt-get install -y chromium, or set LOOM_CHROMIUM)')

const IMAGES = fileURLToPath(new URL('../../../docs/images/', import.meta.url))
/** With LOOM_SCREENSHOTS=1, the page as it is now, for the docs. */
async function screenshot(page: Page, name: string) {
  if (process.env.LOOM_SCREENSHOTS !== '1') return
  // The top of the view: below it, a system text would name this machine's temporary folders.
  await page.evaluate(() => (globalThis as any).scrollTo(0, 0))
  await page.screenshot({ path: join(IMAGES, `inspector-${name}.png`) })
}

/** The text of each element, its runs of white space made one space. */
const texts = async (locator: Locator) => (await locator.allTextContents()).map((text: string) => text.replace(/\s+/g, ' ').trim())

/** The transcript's entries (not the lists inside them). */
const entries = (transcript: Locator) => transcript.locator('[role="listitem"][aria-posinset]')

/** A path-mounted plugin: a static guide, and rules read from RULES.md (session-stable, so a change of the file is a header change). */
const HOUSE = `import { readFileSync } from 'node:fs'
export const name = 'house'
export const inject = ['systemPrompt']
export function apply(ctx) {
  ctx.systemPrompt.section({ name: 'house:guide', order: 210, text: 'Keep answers short. '.repeat(40) })
  ctx.systemPrompt.section({
    name: 'house:rules',
    order: 330,
    stability: 'session',
    literal: true,
    trust: 'repository',
    text: () => readFileSync(new URL('./RULES.md', import.meta.url), 'utf8'),
  })
}
`

const PLAIN = scriptedModel(`
- toolCalls:
    - { id: call-read, name: read, arguments: { path: README.md } }
- The README greets the reader.
`)

/** Two turns of two requests each under a total budget; RULES.md grows in between, and the budgets leave the rules out. */
const BUDGET = `${scriptedModel(`
- toolCalls:
    - { id: call-1, name: read, arguments: { path: RULES.md } }
- The rules say to be kind.
- toolCalls:
    - { id: call-2, name: read, arguments: { path: RULES.md } }
- The rules still say to be kind, at length.
`)}
- id: prompt
  config:
    budgets:
      maxChars: 6000
- insert:
    - id: house
      name: ./house.ts
`

describe.skipIf(!CHROMIUM)('loom inspect in a browser', () => {
  let browser: Browser
  // One store (LOOM_HOME) for the four projects, as on a machine where they all ran.
  const home = project().home
  const at = (files: Record<string, string>) => {
    const { cwd } = project(files, { trusted: false })
    if ('loom.yml' in files) trustLayer(home, join(cwd, 'loom.yml'))
    return { cwd, home }
  }
  const ids = { plain: '', budget: '', parent: '', child: '', denied: '' }
  let inspect: { url: string; run: Promise<Run>; stop: () => void }

  beforeAll(async () => {
    const run = async (files: Record<string, string>, task: string) => {
      const place = at(files)
      const result = await loom(['run', '--json', task], place)
      expect(result.code, result.stderr).toBeLessThan(2)
      return { ...place, id: JSON.parse(result.stdout).sessionId as string }
    }
    ids.plain = (await run({ 'loom.yml': PLAIN, 'README.md': '# Hello reader\n' }, 'What does the README say?')).id
    const budget = await run({ 'loom.yml': BUDGET, 'house.ts': HOUSE, 'RULES.md': 'Rule: be kind.\n' }, 'first')
    ids.budget = budget.id
    writeFileSync(join(budget.cwd, 'RULES.md'), 'Rule: be kind. '.repeat(200))
    const resumed = await loom(['sessions', 'resume', budget.id, 'second'], budget)
    expect(resumed.code, resumed.stderr).toBe(0)
    ids.parent = (await run({ 'loom.yml': DELEGATING_MODEL, 'README.md': '# Hello reader\n' }, 'Delegate the README summary.')).id
    ids.denied = (await run({ 'loom.yml': bashAskedByPolicy('echo approved-and-ran') }, 'say it')).id
    const listed = JSON.parse((await loom(['sessions', 'list', '--json'], { cwd: home, home })).stdout) as { id: string; parentSession?: string }[]
    ids.child = listed.find(session => session.parentSession === ids.parent)!.id

    // `loom inspect` runs until its stop signal, in this process.
    let signal: (signal: NodeJS.Signals) => void = () => {}
    let output = () => ''
    const running = loom(['inspect'], {
      cwd: home,
      home,
      onStart: started => {
        signal = started.signal
        output = started.stdout
      },
    })
    const url = await eventually(() => /loom inspect: (http:\S+)/.exec(output())?.[1], 30_000, 'loom inspect to print its address')
    inspect = { url, run: running, stop: () => signal('SIGINT') }
    browser = await openBrowser({ width: 1280, height: 800 })
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    if (inspect) {
      inspect.stop()
      expect((await inspect.run).code).toBe(0)
    }
  })

  afterEach(() => {
    // No page logged an error (a 401 the test asked for is the one exception).
    expect(browser.problems.filter(problem => !problem.includes('status of 401'))).toEqual([])
    browser.problems.length = 0
  })

  /** A signed-in tab on `hash`. */
  async function open(hash = '#/'): Promise<Page> {
    const page = await browser.page()
    await page.goto(inspect.url.replace(/#.*$/, '') + hash)
    await page.waitForSelector('main[data-ready]', { timeout: 20_000 })
    return page
  }

  it('prints a loopback address with a token made for the run; the page keeps the token in the tab, not the address; a wrong token is refused', async () => {
    expect(inspect.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}$/)
    const origin = new URL(inspect.url).origin
    const token = new URL(inspect.url).searchParams.get('token')!
    const page = await open()
    expect(page.url()).toBe(`${origin}/#/`)
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('loom-inspector-token'))).toBe(token)
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor()

    for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Basic ${token}`]) {
      const response = await fetch(`${origin}/api/sessions`, { headers: authorization ? { authorization } : {} })
      expect(response.status, authorization).toBe(401)
      expect(((await response.json()) as any).error.code).toBe('UNAUTHORIZED')
    }
    expect((await fetch(`${origin}/api/sessions`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200)

    // A tab without the token asks for it; a wrong one is refused with the reason, the right one opens the sessions.
    const fresh = await browser.page()
    await fresh.goto(`${origin}/`)
    await fresh.getByRole('heading', { name: 'Sign in to the Loom inspector' }).waitFor()
    await fresh.getByLabel('Token').fill('not-the-token-0123456789')
    await fresh.getByRole('button', { name: 'Sign in' }).click()
    expect(await fresh.getByRole('alert').textContent()).toContain('not accepted (401)')
    await fresh.getByLabel('Token').fill(token)
    await fresh.getByRole('button', { name: 'Sign in' }).click()
    await fresh.getByRole('heading', { name: 'Sessions', exact: true }).waitFor()
  })

  it('lists the sessions with project, status, turns, tokens, cost and cache hits, the subagent folded under its parent', async () => {
    const page = await open()
    const table = page.getByRole('table')
    const headers = await table.getByRole('columnheader').allTextContents()
    expect(headers).toEqual(['Session', 'Project', 'Status', 'Turns', 'Requests', 'Input tokens', 'Cost', 'Cache hits', 'Created'])
    const rows = await table.getByRole('row').allTextContents()
    const rowOf = (id: string) => rows.find((row: string) => row.includes(id)) ?? ''
    expect(rowOf(ids.plain)).toMatch(/projectcompleted\s*12/)
    expect(rowOf(ids.budget)).toMatch(/projectcompleted\s*24/)
    // The subagent's row comes right after its parent's, marked as its subagent.
    const parent = rows.findIndex((row: string) => row.includes(ids.parent))
    expect(rows[parent + 1]).toContain(`↳ ${ids.child}`)
    expect(rows.filter((row: string) => row.includes(ids.child))).toHaveLength(1)
    // The scripted model reports its usage: the figures are the provider's; it has no price.
    expect(rowOf(ids.plain)).toContain('unknown price')
    await screenshot(page, 'sessions')
  })

  it('a plain run: the transcript with the tool call and its result, and the request with its manifest, system text, tools and runtime context', async () => {
    const page = await open(`#/s/${ids.plain}`)
    await page.getByRole('heading', { name: `Session ${ids.plain}` }).waitFor()
    const transcript = page.getByRole('list', { name: 'Transcript' })
    const shown = await texts(entries(transcript))
    expect(shown[0]).toBe('Turn 1')
    expect(shown).toContain('User What does the README say?')
    expect(shown.some((entry: string) => /^Runtime context: runtime:time, runtime:workspace/.test(entry))).toBe(true)
    expect(shown.some((entry: string) => entry.startsWith('Request header (initial) scripted/scripted-1'))).toBe(true)
    expect(shown.at(-1)).toBe('Turn 1 ended: completed')
    // The call is collapsed to one line; opened, it shows its arguments and result.
    const call = transcript.getByRole('button', { name: /Tool read: README\.md/ })
    expect(await call.getAttribute('aria-expanded')).toBe('false')
    await call.click()
    expect(await call.getAttribute('aria-expanded')).toBe('true')
    const opened = await entries(transcript).filter({ hasText: 'Tool read: README.md' }).textContent()
    expect(opened).toContain('{"path":"README.md"}')
    expect(opened).toContain('# Hello reader')
    await screenshot(page, 'transcript')

    await transcript.getByRole('link', { name: 'request 2' }).click()
    await page.getByRole('heading', { name: 'Request 2 of 2' }).waitFor()
    expect(await page.getByRole('img', { name: /^Tokens by owner: / }).getAttribute('aria-label')).toMatch(/@loom\/tool-fs \d+\.\d%/)
    expect(await page.getByRole('img', { name: /^Tokens by category: / }).getAttribute('aria-label')).toMatch(/instructions \d+\.\d%/)
    const manifest = await page.getByRole('table').filter({ hasText: 'Sections, runtime contexts and tools' }).getByRole('row').allTextContents()
    expect(manifest.some((row: string) => /^sectiontool:read@loom\/tool-fs100staticproductinstructions/.test(row))).toBe(true)
    expect(manifest.some((row: string) => /^contextruntime:workspace@loom\/context-workspace\d+stepworkspaceruntime/.test(row))).toBe(true)
    expect(await page.getByLabel('System text').textContent()).toContain('You are an AI agent powered by Loom.')
    expect(await page.getByLabel('Runtime-context snapshot').textContent()).toContain('Current runtime context.')
    await screenshot(page, 'request')
    await page.getByText('Tools (7)').click()
    expect(
      await page
        .getByRole('listitem')
        .filter({ hasText: /^read ← @loom\/tool-fs/ })
        .count(),
    ).toBe(1)
  })

  it('a prompt budget that leaves a section out: the cause in the transcript, on the cache chart axis, in the diff and in the plugin footprint', async () => {
    const page = await open(`#/s/${ids.budget}`)
    const transcript = page.getByRole('list', { name: 'Transcript' })
    const resumed = entries(transcript).filter({ hasText: 'Request header (resume)' })
    expect(await resumed.textContent()).toContain('section "house:rules" of plugin "house" left out by the prompt budgets')

    await page.getByRole('link', { name: 'Cache & tokens' }).click()
    await page.getByRole('heading', { name: 'Cache and tokens over the session' }).waitFor()
    const hits = page.getByRole('img', { name: /^Cache-hit share per request: / })
    expect(await hits.getAttribute('aria-label')).toBe(
      'Cache-hit share per request: reported by the provider and estimated over 4 requests; header changes at request 3',
    )
    expect(await page.getByRole('img', { name: /^Input tokens per request: / }).count()).toBe(1)
    const changes = await page.getByRole('region', { name: 'Request header changes' }).textContent()
    expect(changes).toContain('Request 3: resume')
    expect(changes).toContain('section "house:rules" of plugin "house" left out by the prompt budgets')
    await screenshot(page, 'series')
    // The table alternative of the charts.
    await page.getByText('The figures as a table').click()
    const figures = await page.getByRole('table').filter({ hasText: 'Hits (reported)' }).getByRole('row').allTextContents()
    expect(figures).toHaveLength(5)
    expect(figures[3]).toMatch(/^32\s*.*resume$/)

    await page.getByRole('link', { name: 'Diff' }).click()
    await page.getByRole('heading', { name: 'Request 3 → request 4' }).waitFor()
    expect(await page.getByRole('region', { name: 'What changed' }).textContent()).toContain('No section, context or tool differs.')
    await page.getByLabel('Request A').selectOption('2')
    await page.getByLabel('Request B').selectOption('3')
    await page.getByRole('heading', { name: 'Request 2 → request 3' }).waitFor()
    const summary = await page.getByRole('region', { name: 'What changed' }).textContent()
    expect(summary).toContain('removed section house:rules ← house')
    expect(await page.getByRole('region', { name: 'Request 2' }).textContent()).toContain('removed: section house:rules')
    expect(await page.getByRole('region', { name: 'Request 3' }).textContent()).not.toContain('house:rules')
    await screenshot(page, 'diff')

    await page.getByRole('link', { name: 'Footprint' }).click()
    await page.getByRole('heading', { name: /^Footprint of / }).waitFor()
    await page.getByLabel('Plugin').selectOption('house')
    await page.getByRole('heading', { name: 'Footprint of house' }).waitFor()
    expect(await page.getByRole('img', { name: /^Tokens of house per request: / }).getAttribute('aria-label')).toContain('header changes at request 3')
    expect(await page.getByRole('region', { name: 'Header changes it caused' }).textContent()).toContain(
      'Request 3 (resume): section "house:rules" of plugin "house" left out by the prompt budgets',
    )
    await screenshot(page, 'footprint')
  })

  it('a subagent: the task call links to the child session, and the child back to its parent', async () => {
    const page = await open(`#/s/${ids.parent}`)
    const transcript = page.getByRole('list', { name: 'Transcript' })
    const call = entries(transcript).filter({ hasText: 'Tool task: summarize the readme' })
    expect(await call.textContent()).toContain(`subagent session ${ids.child}`)
    await call.getByRole('link', { name: `subagent session ${ids.child}` }).click()
    await page.getByRole('heading', { name: `Session ${ids.child}` }).waitFor()
    expect(await page.getByRole('list', { name: 'About this session' }).textContent()).toContain(`subagent of${ids.parent}`)
    const shown = await texts(entries(page.getByRole('list', { name: 'Transcript' })))
    expect(shown).toContain('User What does README.md say?')
    expect(shown).toContain('Assistant request 1The README greets the reader.')
  })

  it('a tool call the policy asked about and nobody approved: failed, with the reason the model read', async () => {
    const page = await open(`#/s/${ids.denied}`)
    const transcript = page.getByRole('list', { name: 'Transcript' })
    const call = transcript.getByRole('button', { name: /Tool bash: echo approved-and-ran/ })
    const row = entries(transcript).filter({ hasText: 'Tool bash: echo approved-and-ran' })
    expect(await row.textContent()).toContain('✗ failed')
    await call.click()
    expect(await row.textContent()).toContain('tool "bash" was not approved')
  })

  it('reaches every view with Tab and Enter, and moves through the transcript with the arrow keys', async () => {
    const page = await open()
    /** Tabs until the focused element's text matches, then presses Enter. */
    const go = async (name: RegExp) => {
      for (let i = 0; i < 80; i++) {
        await page.keyboard.press('Tab')
        if (name.test((await focused(page)).text)) return page.keyboard.press('Enter')
      }
      throw new Error(`Tab never reached ${name}`)
    }
    await go(new RegExp(`^${ids.budget}$`))
    await page.getByRole('heading', { name: `Session ${ids.budget}` }).waitFor()
    await page.getByRole('list', { name: 'Transcript' }).waitFor()
    // The transcript is one tab stop: an arrow key moves between its entries, Enter opens one.
    await go(/^Turn 1$/)
    for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowDown')
    await expect.poll(async () => (await focused(page)).posinset, { timeout: 20_000 }).toBe('4')
    await page.keyboard.press('End')
    await expect.poll(async () => (await focused(page)).text, { timeout: 20_000 }).toBe('Turn 2 ended: completed')
    for (const [tab, heading] of [
      [/^Requests$/, 'Requests'],
      [/^Cache & tokens$/, 'Cache and tokens over the session'],
      [/^Diff$/, 'Request 3 → request 4'],
      [/^Footprint$/, /^Footprint of /],
    ] as const) {
      await go(tab)
      await page.getByRole('heading', { name: heading }).waitFor()
      // The view that opened has the focus on its heading (moved there once the view has rendered).
      await expect.poll(async () => (await focused(page)).tag, { timeout: 20_000 }).toBe('H2')
    }
    await go(/^Requests$/)
    await go(/^Request 2$/)
    await page.getByRole('heading', { name: 'Request 2 of 4' }).waitFor()
    await go(/^Loom inspector$/)
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor()
  })

  it('reads well in the dark: the dark theme applies when the system asks for it', async () => {
    const page = await browser.page({ colorScheme: 'dark' })
    await page.goto(inspect.url)
    await page.waitForSelector('main[data-ready]')
    const [background, text] = await page.evaluate(() => {
      const { getComputedStyle, document } = globalThis as any
      return [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color]
    })
    expect(background).toBe('rgb(15, 18, 22)')
    expect(text).toBe('rgb(230, 237, 243)')
  })
})

describe('loom inspect, the command', () => {
  it('--open starts $BROWSER on the address it prints; a stop signal ends it with 0', async () => {
    const { cwd, home } = project({ 'loom.yml': PLAIN, 'README.md': '# Hello reader\n' })
    const ran = await loom(['run', '--json', 'What does the README say?'], { cwd, home })
    const id = JSON.parse(ran.stdout).sessionId as string
    const opened = join(cwd, 'opened.txt')
    const browser = join(cwd, 'browser.sh')
    writeFileSync(browser, `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`, { mode: 0o755 })
    let signal: (signal: NodeJS.Signals) => void = () => {}
    let output = () => ''
    const running = loom(['inspect', 'last', '--open'], {
      cwd,
      home,
      env: { BROWSER: browser },
      onStart: started => {
        signal = started.signal
        output = started.stdout
      },
    })
    const url = await eventually(() => /loom inspect: (http:\S+)/.exec(output())?.[1], 30_000, 'the address')
    expect(url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/\\?token=[0-9a-f]{64}#/s/${id}$`))
    expect(await eventually(() => (existsSync(opened) ? readFileSync(opened, 'utf8') : undefined), 30_000, 'the browser to be started')).toBe(url)
    signal('SIGINT')
    expect((await running).code).toBe(0)
  })

  it('a session the store does not hold is a usage error', async () => {
    const { cwd, home } = project()
    const run = await loom(['inspect', 'no-such-session'], { cwd, home })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('no stored session no-such-session (see: loom sessions list)')
  })
})

/** bash asks, with no unattended answer: over the API, the call waits for the session's client. */
const ASKING = bashAskedByPolicy('echo asked')

describe.skipIf(!CHROMIUM)('loom serve /ui in a browser', () => {
  const TOKEN = 'inspector-ui-token-0123456789'
  let browser: Browser
  let host: Awaited<ReturnType<typeof startHost>>

  beforeAll(async () => {
    host = await startHost('ui', project({ 'loom.yml': ASKING }), { LOOM_SERVE_TOKEN: TOKEN }, ['--approve', 'api'])
    browser = await openBrowser()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    host?.child.kill('SIGTERM')
    await host?.exited
  })

  it('asks for the bearer token, keeps it in the tab, and follows a running session as its events arrive', async () => {
    const api = client(host.url, TOKEN)
    const page = await browser.page()
    await page.goto(`${host.url}/ui`)
    expect(page.url()).toBe(`${host.url}/ui/`)
    await page.getByRole('heading', { name: 'Sign in to the Loom inspector' }).waitFor()
    // The API of the page is behind the server's token; the page itself is not.
    expect((await fetch(`${host.url}/ui/api/sessions`)).status).toBe(401)
    await page.getByLabel('Token').fill('wrong-token-0123456789')
    await page.getByRole('button', { name: 'Sign in' }).click()
    expect(await page.getByRole('alert').textContent()).toContain('not accepted (401)')
    await page.getByLabel('Token').fill(TOKEN)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Sessions', exact: true }).waitFor()
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem('loom-inspector-token'))).toBe(TOKEN)

    const created = await api.request('POST', '/v1/sessions', { task: 'echo something' })
    expect(created.status).toBe(201)
    const { id } = created.body
    await page.goto(`${host.url}/ui/#/s/${id}`)
    const transcript = page.getByRole('list', { name: 'Transcript' })
    const approval = entries(transcript).filter({ hasText: 'Approval' })
    await eventually(async () => ((await approval.count()) ? await approval.textContent() : undefined), 30_000, 'the question on the page')
    expect(await approval.textContent()).toContain('bash: echo asked waiting for an answer')
    await screenshot(page, 'live')

    // The answer comes from another client; the open page shows it as it is logged.
    const answered = await api.request('POST', `/v1/sessions/${id}/approvals/c1`, { decision: 'deny', note: 'not now', by: 'ana' })
    expect(answered.status).toBe(200)
    await api.events(id, { until: turnEnded(1) })
    const ended = entries(transcript).filter({ hasText: 'Turn 1 ended: completed' })
    await ended.waitFor({ timeout: 30_000 })
    expect(await approval.textContent()).toContain('denied by ana')
    await approval.getByRole('button').click()
    expect(await approval.textContent()).toContain('note: not now')
    expect(await page.getByRole('status').textContent()).toMatch(/^live: /)
    expect(browser.problems.filter(problem => !problem.includes('status of 401'))).toEqual([])
  })
})
