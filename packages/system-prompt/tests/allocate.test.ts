// Category budgets: each category under its cap, all under a total that keeps
// every category's floor; within a category priority, then what the model cannot
// fetch again, then age decide, never registration order; one notice names
// everything left out.
import { describe, expect, it } from 'vitest'
import { BUDGET_NOTICE, type PromptSection } from '@loom/system-prompt'
import { root } from './helpers.ts'

const file = (name: string, chars: number, extra: Partial<PromptSection> = {}): PromptSection => ({
  name,
  order: 100,
  text: name[0].repeat(chars),
  category: 'files',
  ...extra,
})

describe('category budgets', () => {
  it('a category over its cap keeps by priority, then not recoverable, then newer; the notice names the rest', async () => {
    for (const reversed of [false, true]) {
      const h = await root({ budgets: { categories: { files: { cap: 250 } } } })
      const plugin = await h.plugin('files')
      const entries = [
        file('a.md', 100, { recoverable: true }),
        file('b.md', 100, { source: { path: 'b.md', sha256: 'x', modifiedAt: 1 } }),
        file('c.md', 100, { source: { path: 'c.md', sha256: 'y', modifiedAt: 2 } }),
        file('d.md', 100, { priority: 5, recoverable: true }),
      ]
      // Registration order never decides.
      for (const entry of reversed ? entries.slice().reverse() : entries) plugin.systemPrompt.section(entry)
      const assembly = await h.asm()
      expect(assembly.sections.filter(section => section.name.endsWith('.md')).map(section => section.name)).toEqual(['c.md', 'd.md'])
      expect(assembly.omitted?.map(o => [o.name, o.over])).toEqual([
        ['a.md', 'category'],
        ['b.md', 'category'],
      ])
      const notice = assembly.contexts.find(context => context.name === BUDGET_NOTICE)!
      expect(notice.owner).toBe('@loom/system-prompt')
      expect(notice.text).toContain('- files: 2 of 4 included; left out: a.md, b.md (200 characters, over the files budget)')
    }
  })

  it('the total gives way above the floors, least kept first; without omissions there is no notice', async () => {
    const h = await root({ includeHarnessIdentity: false, budgets: { maxChars: 300, categories: { memory: { floor: 150 } } } })
    const plugin = await h.plugin('mixed')
    plugin.systemPrompt.section({ name: 'rules', order: 10, text: 'r'.repeat(100), priority: 10 })
    plugin.systemPrompt.context({ name: 'memory:a', order: 10, text: 'm'.repeat(100), category: 'memory' })
    plugin.systemPrompt.context({ name: 'memory:b', order: 11, text: 'n'.repeat(100), category: 'memory', priority: -1 })
    plugin.systemPrompt.section({ name: 'guide', order: 20, text: 'g'.repeat(100) })
    const assembly = await h.asm()
    // 400 characters for 300. The sections go first, in 300 less the memory floor kept for the
    // contexts: guide is the least kept section; the contexts fit in the 200 left.
    expect(assembly.omitted?.map(o => [o.kind, o.name, o.over])).toEqual([['section', 'guide', 'total']])
    expect(assembly.contexts.map(context => context.name)).toEqual(['memory:a', 'memory:b', BUDGET_NOTICE])

    const roomy = await root({ budgets: { maxChars: 10_000 } })
    ;(await roomy.plugin('small')).systemPrompt.section({ name: 'rules', order: 10, text: 'Be brief.' })
    const fits = await roomy.asm()
    expect(fits.omitted).toEqual([])
    expect(fits.contexts.map(context => context.name)).not.toContain(BUDGET_NOTICE)
  })

  it('a section budget cuts its text as a context budget does; a bad one is refused at registration', async () => {
    const h = await root()
    const plugin = await h.plugin('long')
    plugin.systemPrompt.section({ name: 'long', order: 10, text: 'line one\nline two\nline three', budget: { maxChars: 80 } })
    plugin.systemPrompt.section({ name: 'longer', order: 11, text: `${'x'.repeat(50)}\n${'y'.repeat(200)}`, budget: { maxChars: 130 } })
    const texts = Object.fromEntries((await h.asm()).sections.map(section => [section.name, section.text]))
    expect(texts.long).toBe('line one\nline two\nline three')
    expect(texts.longer).toBe(`${'x'.repeat(50)}\n[… 201 characters of "longer" omitted: over its budget of 130 characters]`)
    expect(() => plugin.systemPrompt.section({ name: 'bad', order: 12, text: 'x', budget: { maxChars: 0 } })).toThrow(
      'prompt section "bad" budget.maxChars must be a positive integer',
    )
  })

  it('what an entry left out of its own text joins the one notice, budgets or not', async () => {
    const h = await root()
    const plugin = await h.plugin('notes')
    plugin.systemPrompt.context({
      name: 'notes:recent',
      order: 10,
      text: 'two notes',
      category: 'memory',
      omissions: () => [
        { name: 'old.md', chars: 1200, reason: 'older than 30 days' },
        { name: 'older.md', chars: 800, reason: 'older than 30 days' },
      ],
    })
    const assembly = await h.asm()
    expect(assembly.omitted?.map(o => [o.kind, o.name, o.owner, o.category, o.over])).toEqual([
      ['context', 'old.md', 'notes', 'memory', 'self'],
      ['context', 'older.md', 'notes', 'memory', 'self'],
    ])
    expect(assembly.contexts.find(context => context.name === BUDGET_NOTICE)?.text).toBe(
      [
        'Some context was left out of this request to stay within its budgets:',
        '- memory: 2 left out older than 30 days: old.md, older.md (2,000 characters)',
        'Ask for what you need, or read it with a tool.',
      ].join('\n'),
    )
  })

  it('a runtime context that grows never changes the system text: it is cut to the room the sections leave, and said so', async () => {
    const h = await root({ includeHarnessIdentity: false, budgets: { maxChars: 1000 } })
    const plugin = await h.plugin('build')
    plugin.systemPrompt.section({ name: 'tool:read', order: 100, text: 'r'.repeat(300) })
    plugin.systemPrompt.section({ name: 'tool:write', order: 101, text: 'w'.repeat(300) })
    let lines = 1
    plugin.systemPrompt.context({ name: 'build:log', order: 10, text: () => Array.from({ length: lines }, (_, i) => `line ${i} ${'.'.repeat(40)}`).join('\n') })
    const systems: string[] = []
    for (lines = 1; lines <= 40; lines += 3) {
      const assembly = await h.asm()
      systems.push(assembly.sections.map(section => section.text).join('\n'))
      const log = assembly.contexts.find(context => context.name === 'build:log')!
      // Sections 600, the log in the 400 left.
      expect(log.text.length).toBeLessThanOrEqual(400)
      if (lines * 49 > 400) {
        expect(log.text).toMatch(/\[… \d+ characters of "build:log" omitted: over its budget of 400 characters\]$/)
        expect(assembly.contexts.find(context => context.name === BUDGET_NOTICE)!.text).toContain('- runtime: cut to fit the total budget: build:log (')
      }
    }
    expect(new Set(systems).size).toBe(1)
    expect(systems[0]).toContain('w'.repeat(300))
  })

  it('lower trust gives way first, then what can be fetched again; a fact with no source is current, not old', async () => {
    const h = await root({ includeHarnessIdentity: false, budgets: { maxChars: 250 } })
    const product = await h.root.plugin({ name: '@loom/guide', inject: ['systemPrompt'], apply() {} })
    product.ctx.systemPrompt.section({ name: 'guide:product', order: 100, text: 'p'.repeat(100) })
    const third = await h.plugin('third-party')
    third.systemPrompt.section({ name: 'guide:third', order: 101, text: 't'.repeat(100) })
    third.systemPrompt.section({ name: 'guide:files', order: 102, text: 'f'.repeat(100), trust: 'repository' })
    // Product guidance stays, the repository's file goes first (lowest trust), then it fits.
    expect((await h.asm()).omitted?.map(o => o.name)).toEqual(['guide:files'])

    const facts = await root({ includeHarnessIdentity: false, budgets: { maxChars: 100 } })
    const plugin = await facts.plugin('facts')
    const fortyDaysAgo = Date.now() - 40 * 86_400_000
    plugin.systemPrompt.context({ name: 'memory:old', order: 10, text: 'm'.repeat(60), source: { path: 'm.md', sha256: 'x', modifiedAt: fortyDaysAgo } })
    plugin.systemPrompt.context({ name: 'time', order: 11, text: 't'.repeat(60) })
    const assembly = await facts.asm()
    expect(assembly.omitted?.map(o => o.name)).toEqual(['memory:old'])
    expect(assembly.contexts.map(context => context.name)).toEqual(['time', BUDGET_NOTICE])
  })

  it('floors that add up to more than the total are reported to the model and in a warning, never exceeded in silence', async () => {
    const h = await root({ includeHarnessIdentity: false, budgets: { maxChars: 300, categories: { memory: { floor: 200 }, runtime: { floor: 200 } } } })
    const plugin = await h.plugin('floors')
    plugin.systemPrompt.context({ name: 'memory:a', order: 10, text: 'm'.repeat(200), category: 'memory' })
    plugin.systemPrompt.context({ name: 'time', order: 11, text: 't'.repeat(200) })
    const assembly = await h.asm()
    expect(assembly.contexts.find(context => context.name === BUDGET_NOTICE)!.text).toContain(
      '- the floors of the budgets (400 characters) exceed the total of 300: this request is 100 characters over it',
    )
    expect(h.warnings.some(warning => warning.includes('the floors (400 characters) exceed maxChars (300)'))).toBe(true)
  })
})
