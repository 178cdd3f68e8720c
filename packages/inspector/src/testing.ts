// The inspector in a real browser, for tests and the benchmark: the system's
// Chromium, headless, driven through playwright-core (which downloads nothing),
// in a fresh profile removed afterwards. Without Chromium, `findChromium()` is
// undefined and the caller skips with a note.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { BrowserContext, ConsoleMessage, Page } from 'playwright-core'

export type { Locator, Page } from 'playwright-core'

/** The Chromium to drive: `LOOM_CHROMIUM`, else Debian's. */
export function findChromium(): string | undefined {
  const candidates = [process.env.LOOM_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((path): path is string => Boolean(path))
  return candidates.find(path => existsSync(path))
}

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** What the focused element of the page is: its tag, text and position in a list (`aria-posinset`). */
export function focused(page: Page): Promise<{ tag: string; text: string; posinset: string | null }> {
  // A function, not a string (the page's Content-Security-Policy refuses eval); the page's DOM types are not this program's.
  return page.evaluate(() => {
    const element = (
      globalThis as { document?: { activeElement?: { tagName: string; textContent: string | null; getAttribute(name: string): string | null } } }
    ).document?.activeElement
    return { tag: element?.tagName ?? '', text: element?.textContent?.trim() ?? '', posinset: element?.getAttribute('aria-posinset') ?? null }
  })
}

export interface Browser {
  /** A new tab; what it logs as an error, and any uncaught exception, is collected in `problems`. */
  page(options?: { colorScheme?: 'light' | 'dark' }): Promise<Page>
  /** Console errors and uncaught exceptions of every tab opened, in order. */
  readonly problems: string[]
  close(): Promise<void>
}

/** Starts Chromium with an empty profile of its own. */
export async function openBrowser(options: { width?: number; height?: number } = {}): Promise<Browser> {
  const executablePath = findChromium()
  if (!executablePath) throw new Error('no Chromium found: install it (apt-get install -y chromium) or set LOOM_CHROMIUM')
  const { chromium } = await import('playwright-core')
  const profile = mkdtempSync(join(tmpdir(), 'loom-inspector-chromium-'))
  let context: BrowserContext
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: options.width ?? 1280, height: options.height ?? 900 },
      colorScheme: 'light',
    })
  } catch (error) {
    rmSync(profile, { recursive: true, force: true })
    throw error
  }
  const problems: string[] = []
  const watch = (page: Page) => {
    page.on('console', (message: ConsoleMessage) => {
      if (message.type() === 'error') problems.push(`console error: ${message.text()}`)
    })
    page.on('pageerror', error => problems.push(`uncaught: ${error.message}`))
  }
  return {
    problems,
    async page({ colorScheme = 'light' } = {}) {
      const page = await context.newPage()
      await page.emulateMedia({ colorScheme })
      watch(page)
      return page
    },
    async close() {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    },
  }
}
