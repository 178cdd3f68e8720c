// The inspector's first view of a long session, in the system's Chromium: a
// generated session of 10,000 events in a JSONL store, opened as `loom inspect
// ID` opens it; the page marks `loom:first-view` once the transcript is on
// screen, so the figure is navigation start → first view, measured in the page.
// The first load pays for the server's cold start; the median is of the loads after.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import SessionStore from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import { persistenceSource, startInspector } from '../src/index.ts'
import { findChromium, openBrowser } from '../src/testing.ts'
import { writeSyntheticSession } from './synthetic.ts'

export interface FirstViewFigure {
  bench: 'inspector/first-view'
  events: number
  /** Transcript entries of the session, and how many of them the page holds. */
  entries: number
  rendered: number
  cold_ms: number
  median_ms: number
  runs: number
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

export async function benchFirstView(runs = 7): Promise<FirstViewFigure | { bench: 'inspector/first-view'; skipped: string }> {
  if (!findChromium()) return { bench: 'inspector/first-view', skipped: 'no Chromium (apt-get install -y chromium, or set LOOM_CHROMIUM)' }
  const root = mkdtempSync(join(tmpdir(), 'loom-bench-inspector-'))
  const ctx = new Context()
  let store: { dispose(): unknown } | undefined
  let server: Awaited<ReturnType<typeof startInspector>> | undefined
  let browser: Awaited<ReturnType<typeof openBrowser>> | undefined
  try {
    const { id, events } = await writeSyntheticSession(root, 10_000)
    await ctx.plugin(SessionStore)
    store = await ctx.plugin(JsonlPersistence, { root })
    server = await startInspector({ source: persistenceSource(ctx.sessionPersistence) })
    browser = await openBrowser()
    const times: number[] = []
    let entries = 0
    let rendered = 0
    for (let run = 0; run < runs; run++) {
      const page = await browser.page()
      await page.goto(server.url(id))
      await page.waitForFunction(() => performance.getEntriesByName('loom:first-view').length > 0, null, { timeout: 60_000 })
      times.push(await page.evaluate(() => performance.getEntriesByName('loom:first-view')[0].startTime))
      const rows = page.getByRole('list', { name: 'Transcript' }).locator('[aria-posinset]')
      rendered = await rows.count()
      entries = Number(await rows.first().getAttribute('aria-setsize'))
      await page.close()
    }
    if (browser.problems.length) throw new Error(`inspector/first-view: the page logged errors: ${browser.problems.join('; ')}`)
    return {
      bench: 'inspector/first-view',
      events,
      entries,
      rendered,
      cold_ms: Math.round(times[0]),
      median_ms: Math.round(median(times.slice(1))),
      runs: runs - 1,
    }
  } finally {
    await browser?.close()
    await server?.close()
    await store?.dispose()
    rmSync(root, { recursive: true, force: true })
  }
}
