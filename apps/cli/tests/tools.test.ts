// The default deployment's file and search tools side by side: their guidance
// in order, and one workspace confinement for both (they share it through
// @loom/tools/workspace, not through each other).
import { describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

const SEARCHING_MODEL = scriptedModel(`
- toolCalls:
    - { name: glob, arguments: { pattern: '**/*.ts' } }
    - { name: grep, arguments: { pattern: 'x', path: '../' } }
    - { name: read, arguments: { path: '../outside.txt' } }
- done
`)

describe('tool-fs and tool-search in one deployment', () => {
  it('order their guidance read, glob, grep and confine both to the workspace', async () => {
    const { cwd, home } = project({ 'loom.yml': SEARCHING_MODEL, 'src/a.ts': 'export const x = 1\n' })
    const prompt = await loom(['prompt'], { cwd, home })
    expect(prompt.code, prompt.stderr).toBe(0)
    const system = prompt.stdout
    expect(system.indexOf('Use `read`')).toBeGreaterThan(-1)
    expect(system.indexOf('Use `read`')).toBeLessThan(system.indexOf('Use `glob`'))
    expect(system.indexOf('Use `glob`')).toBeLessThan(system.indexOf('Use `grep` to search'))

    const run = await loom(['run', 'find'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const results = events(sessionFiles(home)[0])
      .filter(event => event.type === 'tool/result')
      .map(event => event.data.message.content[0].content[0].text as string)
    expect(results[0]).toContain('src/a.ts')
    expect(results[1]).toContain('path "../" is outside the workspace')
    expect(results[2]).toContain('path "../outside.txt" is outside the workspace')
  })
})
