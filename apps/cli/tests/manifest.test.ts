// `loom prompt` ends with the manifest: one row per contribution with its owner.
import { describe, expect, it } from 'vitest'
import { loom, project, scriptedModel } from './helpers.ts'

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
    expect(run.stdout).toMatch(/KIND +NAME +OWNER +ORDER +STABILITY +TRUST +CATEGORY +AGE +CHARS +TOKENS +SHA256\n/)
    expect(run.stdout).toMatch(/\nsection +harness:identity +@loom\/system-prompt +-100 +static +product +instructions +- +\d+ +\d+ +[0-9a-f]{12}\n/)
    expect(run.stdout).toMatch(/\ncontext +runtime:workspace +@loom\/context-workspace +\d+ +step +workspace +runtime +- /)
    expect(run.stdout).toMatch(/\nOWNER +ROWS +CHARS +TOKENS\n/)
    expect(run.stdout.indexOf('── manifest')).toBeGreaterThan(run.stdout.indexOf('── runtime-context snapshot'))
  })
})

describe('the manifest of requests a session sent, and differences', () => {
  const TWO_STEPS = scriptedModel(`
- toolCalls:
    - { id: c1, name: read, arguments: { path: AGENTS.md } }
- Done.
`)

  it('sessions manifest rebuilds a request from the log: sections with trust, category and source, tools, history', async () => {
    const { cwd, home } = project({ 'loom.yml': TWO_STEPS, 'AGENTS.md': '# Rules\n\nAlways run the tests.\n' })
    const run = await loom(['run', '--json', 'check the rules'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const id = JSON.parse(run.stdout).sessionId as string
    const live = JSON.parse((await loom(['prompt', '--json'], { cwd, home })).stdout).manifest.rows as Row[]

    const first = JSON.parse((await loom(['sessions', 'manifest', id, '--step', '1', '--json'], { cwd, home })).stdout)
    expect(first).toMatchObject({ id, step: 1, steps: 2, turn: 1 })
    const rows = first.manifest.rows as (Row & { trust: string; category: string; sourceHash: string | null })[]
    const instructions = rows.find(row => row.name === 'instructions:project')!
    expect(instructions).toMatchObject({
      kind: 'section',
      owner: '@loom/agent-instructions',
      trust: 'repository',
      category: 'instructions',
      sourceHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    })
    // The logged request's sections are those a new agent's prompt has, with the same digests.
    expect(rows.filter(row => row.kind === 'section').map(row => [row.name, row.sha256])).toEqual(
      live.filter(row => row.kind === 'section' && row.chars > 0).map(row => [row.name, row.sha256]),
    )
    const last = JSON.parse((await loom(['sessions', 'manifest', id, '--json'], { cwd, home })).stdout)
    expect(last.step).toBe(2)
    expect(last.manifest.rows.filter((row: Row) => row.kind === 'message').length).toBeGreaterThan(
      first.manifest.rows.filter((row: Row) => row.kind === 'message').length,
    )

    const beyond = await loom(['sessions', 'manifest', id, '--step', '3'], { cwd, home })
    expect(beyond.code).toBe(2)
    expect(beyond.stderr).toContain(`session ${id} has 2 requests: --step takes 1 to 2, not 3`)

    const steps = JSON.parse((await loom(['prompt', '--diff', `${id}:1`, `${id.slice(0, 12)}:2`, '--json'], { cwd, home })).stdout)
    expect(steps).toMatchObject({ added: [], removed: [], moved: [], changed: [], messages: { before: 2, after: 4 } })
  })

  it('prompt --diff of two deployments: what a layer file adds, moves and changes', async () => {
    const { cwd, home } = project({
      'greeter.ts': `export const name = 'greeter'\nexport const inject = ['systemPrompt']\nexport function apply(ctx: any) {\n  ctx.systemPrompt.section({ name: 'greeter:hello', order: 95, text: 'Hello.' })\n}\n`,
      'more.yml': "- insert:\n    - id: greeter\n      name: ./greeter.ts\n- id: prompt\n  config:\n    persona: 'Another persona.'\n",
    })
    const run = await loom(['prompt', '--diff', 'deployment', 'more.yml'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('A deployment\nB deployment + more.yml\n')
    expect(run.stdout).toMatch(/added {4}section greeter:hello ← greeter \(\d+ tokens\)/)
    expect(run.stdout).toMatch(/changed {2}section deployment:persona ← @loom\/system-prompt: \d+ → 16 chars/)
    expect(run.stdout).toMatch(/moved {4}section tool:read ← @loom\/tool-fs: position \d+ → \d+/)
    const lone = await loom(['prompt', 'more.yml'], { cwd, home })
    expect(lone.code).toBe(2)
    expect(lone.stderr).toContain('prompt: "more.yml" is the second side of a comparison: give the first with --diff')
  })
})
