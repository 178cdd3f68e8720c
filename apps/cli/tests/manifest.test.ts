// `loom prompt` ends with the manifest: one row per contribution with its owner.
import { describe, expect, it } from 'vitest'
import { readFileSync, writeFileSync } from 'node:fs'
import { loom, project, scriptedModel, sessionFiles } from './helpers.ts'

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
  it('--json lists every section, runtime context and tool the request carries with its owner, size, tokens and digest', async () => {
    const { cwd, home } = project({ 'AGENTS.md': '# Rules\n\nAlways run the tests.\n' })
    const run = await loom(['prompt', '--json'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    const rows: Row[] = report.manifest.rows
    const of = (kind: string) => rows.filter(row => row.kind === kind)
    // What renders empty does not reach the model: no row, as in a stored request's manifest.
    const names = report.sections.map((section: { name: string }) => section.name)
    expect(of('section').map(row => row.name)).toEqual(names.filter((name: string) => of('section').some(row => row.name === name)))
    expect(of('section').filter(row => row.chars === 0)).toEqual([])
    const contexts = report.contexts.filter((context: { text: string }) => context.text !== '')
    expect(of('context').map(row => row.name)).toEqual(contexts.map((context: { name: string }) => context.name))
    expect(of('tool').map(row => row.name)).toEqual(report.tools.map((tool: { name: string }) => tool.name))
    expect(of('message')).toEqual([])
    for (const row of rows) {
      expect(row.owner).toMatch(/\S/)
      expect(row.sha256).toMatch(/^[0-9a-f]{64}$/)
      expect(row.tokens).toBe(Math.ceil(row.chars / 4))
    }
    expect(of('section').find(row => row.name === 'harness:identity')).toMatchObject({ owner: '@loom/system-prompt', order: -100, stability: 'static' })
    // The system text is the sections joined by blank lines.
    const sections = of('section')
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
    // The logged request has the rows a new agent's prompt has: the same sections with the same
    // digests, and its runtime contexts one by one, with their owners, trust and category.
    const identity = (row: Row & { trust?: string; category?: string }) => [row.kind, row.name, row.owner, row.trust, row.category]
    expect(rows.filter(row => row.kind === 'section').map(row => [row.name, row.sha256])).toEqual(
      live.filter(row => row.kind === 'section').map(row => [row.name, row.sha256]),
    )
    expect(rows.filter(row => row.kind === 'context').map(identity)).toEqual(live.filter(row => row.kind === 'context').map(identity))
    expect(rows.find(row => row.name === 'runtime:workspace')).toMatchObject({ owner: '@loom/context-workspace', trust: 'workspace', category: 'runtime' })
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

    // Against the same deployment now, like with like: only what changes by itself (the clock) may differ.
    const now = JSON.parse((await loom(['prompt', '--diff', `${id}:1`, '--json'], { cwd, home })).stdout)
    expect(now).toMatchObject({ added: [], removed: [], moved: [], messages: { before: 2, after: 0 } })
    for (const change of now.changed as { after: Row }[]) expect(change.after.name).toBe('runtime:time')
  })

  it('a log written before trust and contexts were recorded still shows its manifest, with what it does not know as unknown', async () => {
    const { cwd, home } = project({ 'loom.yml': TWO_STEPS })
    const run = await loom(['run', '--json', 'look'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const id = JSON.parse(run.stdout).sessionId as string
    // The log as an earlier version wrote it: snapshots with names and texts, sections without trust or category.
    const file = sessionFiles(home)[0]
    const older = readFileSync(file, 'utf8')
      .split('\n')
      .map(line => {
        if (!line) return line
        const event = JSON.parse(line)
        if (event.type === 'user/message' && event.data.source.form === 'snapshot') {
          event.data.source.sections = event.data.source.sections.map(({ name, text }: { name: string; text: string }) => ({ name, text }))
        }
        if (event.type === 'request/header') {
          event.data.sources.sections = event.data.sources.sections.map(({ trust, category, ...kept }: Record<string, unknown>) => kept)
        }
        return JSON.stringify(event)
      })
      .join('\n')
    writeFileSync(file, older)

    const shown = await loom(['sessions', 'manifest', id, '--step', '1', '--json'], { cwd, home })
    expect(shown.code, shown.stderr).toBe(0)
    const rows = JSON.parse(shown.stdout).manifest.rows as (Row & { trust: string; category: string })[]
    expect(rows.find(row => row.name === 'runtime:workspace')).toMatchObject({ kind: 'context', owner: 'unknown', trust: 'unknown', category: 'unknown' })
    expect(rows.find(row => row.name === 'harness:identity')).toMatchObject({ owner: '@loom/system-prompt', trust: 'unknown', category: 'unknown' })
    expect(rows.find(row => row.name.startsWith('runtime-context#'))).toMatchObject({ trust: 'unknown', category: 'runtime' })
    const text = await loom(['sessions', 'manifest', id, '--step', '1'], { cwd, home })
    expect(text.stdout).toMatch(/\ncontext +runtime:workspace +unknown +\d+ +- +unknown +unknown +- /)
  })

  it('prompt --diff of two deployments: what a layer file adds, moves and changes', async () => {
    const plugin = (name: string, order: string) =>
      `export const name = '${name}'\nexport const inject = ['systemPrompt']\nexport function apply(ctx: any, config: any) {\n  ctx.systemPrompt.section({ name: '${name}:hello', order: ${order}, text: 'Hello.' })\n}\n`
    const { cwd, home } = project({
      'loom.yml': '- insert:\n    - id: waver\n      name: ./waver.ts\n',
      'waver.ts': plugin('waver', 'config?.order ?? 95'),
      'greeter.ts': plugin('greeter', '96'),
      'more.yml':
        "- insert:\n    - id: greeter\n      name: ./greeter.ts\n- id: waver\n  config: { order: 300 }\n- id: prompt\n  config:\n    persona: 'Another persona.'\n",
    })
    const run = await loom(['prompt', '--diff', 'deployment', 'more.yml'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('A deployment\nB deployment + more.yml\n')
    expect(run.stdout).toMatch(/added {4}section greeter:hello ← greeter \(\d+ tokens\)/)
    expect(run.stdout).toMatch(/changed {2}section deployment:persona ← @loom\/system-prompt: \d+ → 16 chars/)
    // Moved: the section whose order changed, not those the added one shifted.
    expect(run.stdout).toMatch(/moved {4}section waver:hello ← waver: position \d+ → \d+/)
    expect(run.stdout.match(/^moved/gm)).toHaveLength(1)
    const lone = await loom(['prompt', 'more.yml'], { cwd, home })
    expect(lone.code).toBe(2)
    expect(lone.stderr).toContain('prompt: "more.yml" is the second side of a comparison: give the first with --diff')
  })
})
