// The search worker is started in the background after the plugin starts, with ripgrep
// too: an empty answer from ripgrep says what the walk skipped, which the worker counts,
// and that call must not wait for a worker to start (50 to 150 ms, more on a first call).
// A file of its own: the count of workers started is the process's.
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { installedRipgrep } from '../src/ripgrep.ts'
import { workerCounts } from '../src/scan.ts'

const RG = await installedRipgrep()
let ws: string

beforeEach(async () => {
  ws = await realpath(await mkdtemp(join(tmpdir(), 'loom-tool-search-warm-')))
})
afterEach(async () => {
  await rm(ws, { recursive: true, force: true })
})

for (const ripgrep of [...(RG === undefined ? [] : [RG]), 'never']) {
  it(`the worker is started ahead of the first search (ripgrep: ${ripgrep === 'never' ? 'never' : 'rg'}); an empty answer counts what it skipped without starting one`, async () => {
    await mkdir(join(ws, 'out'))
    await writeFile(join(ws, 'a.txt'), 'needle\n')
    await writeFile(join(ws, '.gitignore'), 'out/\n')
    await writeFile(join(ws, 'out', 'b.txt'), 'x\n')
    const before = workerCounts.started
    const h = await createHost()
    try {
      await h.mount(toolSearch, { root: ws, ripgrep })
      await vi.waitFor(() => expect(workerCounts.started).toBe(before + 1), { timeout: 20_000, interval: 50 })
      const r = await h.callTool('grep', { pattern: 'absent' }, { cwd: ws })
      expect(r.meta).toMatchObject({ engine: ripgrep === 'never' ? 'worker' : 'ripgrep', matches: 0, ignoredSkipped: 1 })
      expect(r.content).toEqual([{ type: 'text', text: expect.stringContaining('Skipped 1 ignored entry') }])
      expect(workerCounts.started).toBe(before + 1) // the one started ahead answered
    } finally {
      await h.dispose()
    }
  })
}
