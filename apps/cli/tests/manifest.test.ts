// `loom prompt` ends with the manifest: one row per contribution with its owner.
import { describe, expect, it } from 'vitest'
import { loom, project } from './helpers.ts'

interface Row {
  kind: string
  name: string
  owner: string
  order: number
  stability: string | null
  chars: number
  tokens: number
  sha256: string
  counted: boolean
}

describe('loom prompt manifest', () => {
  it('--json lists every section, runtime context and tool with its owner, size, tokens and digest', async () => {
    const { cwd, home } = project({ 'AGENTS.md': '# Rules\n\nAlways run the tests.\n' })
    const run = await loom(['prompt', '--json'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    const rows: Row[] = report.manifest.rows
    const of = (kind: string) => rows.filter(row => row.kind === kind)
    expect(of('section').map(row => row.name)).toEqual(report.sections.map((section: { name: string }) => section.name))
    expect(of('context').map(row => row.name)).toEqual(report.contexts.map((context: { name: string }) => context.name))
    expect(of('tool').map(row => row.name)).toEqual(report.tools.map((tool: { name: string }) => tool.name))
    expect(of('message')).toEqual([])
    for (const row of rows) {
      expect(row.owner).toMatch(/\S/)
      expect(row.sha256).toMatch(/^[0-9a-f]{64}$/)
      expect(row.tokens).toBe(Math.ceil(row.chars / 4))
    }
    expect(of('section').find(row => row.name === 'harness:identity')).toMatchObject({ owner: '@loom/system-prompt', order: -100, stability: 'static' })
    // The system text is the non-empty sections joined by blank lines.
    const sections = of('section').filter(row => row.chars > 0)
    expect(sections.reduce((sum, row) => sum + row.chars, 0) + 2 * (sections.length - 1)).toBe(report.system.length)
    const owners = report.manifest.totals.byOwner
    expect(owners.reduce((sum: number, total: { tokens: number }) => sum + total.tokens, 0)).toBe(report.manifest.totals.tokens)
    expect(owners.map((total: { owner: string }) => total.owner)).toContain('@loom/context-time')
  })

  it('text: the manifest table and the totals by owner follow the snapshot', async () => {
    const { cwd, home } = project()
    const run = await loom(['prompt'], { cwd, home })
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/── manifest \(\d+ rows, ~\d+ tokens estimated\) /)
    expect(run.stdout).toMatch(/KIND +NAME +OWNER +ORDER +STABILITY +CHARS +TOKENS +SHA256\n/)
    expect(run.stdout).toMatch(/\nsection +harness:identity +@loom\/system-prompt +-100 +static +\d+ +\d+ +[0-9a-f]{12}\n/)
    expect(run.stdout).toMatch(/\nOWNER +ROWS +CHARS +TOKENS\n/)
    expect(run.stdout.indexOf('── manifest')).toBeGreaterThan(run.stdout.indexOf('── runtime-context snapshot'))
  })
})
