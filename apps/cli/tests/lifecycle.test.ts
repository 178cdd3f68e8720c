// A plugin cannot hold `loom` hostage at its end: a dispose that never settles
// is given up after a deadline, named, and the command exits with its own code.
import { describe, expect, it } from 'vitest'
import { loomProcess, project, scriptedModel } from './helpers.ts'

/** A row whose plugin's dispose returns a promise that never settles (and keeps nothing running). */
const HANG = `
- insert:
    - id: hang
      name: ./hang.ts
`
const HANG_PLUGIN = `import type { Context } from '@deepseek-ai/cordis'
export const name = 'hang'
export function apply(ctx: Context) {
  ctx.effect(() => () => new Promise<void>(() => {}))
}
`

describe('a plugin at the end of a command', () => {
  it('a dispose that never settles is given up, naming the row; loom run exits 0', { timeout: 60_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': scriptedModel('- Hello.') + HANG, 'hang.ts': HANG_PLUGIN })
    const run = await loomProcess(['run', 'hi'], { cwd, home })
    expect(run.stdout).toContain('Hello.')
    expect(run.stderr).toMatch(/loom: warning: row "hang" \(\S*hang\.ts\) did not finish unloading within 5000 ms; given up\n/)
    expect(run.code, run.stderr).toBe(0)
  })
})
