// Context budgets: an over-budget runtime context is cut at a line boundary with a visible notice.
import { describe, expect, it } from 'vitest'
import { renderContextSnapshot } from '@loom/system-prompt'
import { root } from './helpers.ts'

const notice = (name: string, omitted: number, max: number) => `[… ${omitted} characters of "${name}" omitted: over its budget of ${max} characters]`

const LINES = Array.from({ length: 20 }, (_, i) => `line ${String(i + 1).padStart(2, '0')}: ${'x'.repeat(30)}`)
const TEXT = LINES.join('\n') // 20 lines of 39 characters

describe('context budgets', () => {
  it('leaves a context within its budget untouched, to the last character', async () => {
    const h = await root()
    h.sp.context({ name: 'fits', order: 1, text: TEXT, budget: { maxChars: TEXT.length } })
    h.sp.context({ name: 'roomy', order: 2, text: () => 'short', budget: { maxChars: 1000 } })
    const a = await h.asm()
    expect(a.contexts.map(c => c.text)).toEqual([TEXT, 'short'])
    expect(Object.keys(a.contexts[0]).sort()).toEqual(['name', 'order', 'owner', 'stability', 'text'])
  })

  it('cuts an over-budget context after the last whole line that fits, and says so', async () => {
    const h = await root()
    const p = await h.plugin('git-log')
    p.systemPrompt.context({ name: 'git:log', order: 30, text: () => TEXT, budget: { maxChars: 400 } })
    const [context] = (await h.asm()).contexts
    const [kept, last] = [context.text.slice(0, context.text.lastIndexOf('\n')), context.text.slice(context.text.lastIndexOf('\n') + 1)]
    // Whole lines from the start, never a partial one.
    expect(kept.split('\n')).toEqual(LINES.slice(0, kept.split('\n').length))
    expect(last).toBe(notice('git:log', TEXT.length - kept.length, 400))
    expect(context.text.length).toBeLessThanOrEqual(400)
    // As many lines as fit: one more would not.
    const lines = kept.split('\n').length
    expect(lines).toBe(8) // 8 × 39 + 7 = 319, + 1 + the notice (75) = 395
    const more = LINES.slice(0, lines + 1).join('\n')
    expect(more.length + 1 + notice('git:log', TEXT.length - more.length, 400).length).toBeGreaterThan(400)
    expect(renderContextSnapshot(await h.asm())).toContain(`\n${notice('git:log', TEXT.length - kept.length, 400)}`)
  })

  it('counts the notice inside the budget', async () => {
    const h = await root()
    // Two lines fit by themselves (79 characters), but not with the notice.
    h.sp.context({ name: 'n', order: 1, text: TEXT, budget: { maxChars: 120 } })
    const [context] = (await h.asm()).contexts
    expect(context.text).toBe(`${LINES[0]}\n${notice('n', TEXT.length - LINES[0].length, 120)}`)
    expect(context.text.length).toBeLessThanOrEqual(120)
  })

  it('drops blank lines before the cut, and gives the notice alone when no line fits', async () => {
    const h = await root()
    const text = `First paragraph.\n\n\nSecond paragraph, ${'much '.repeat(20)}longer.`
    h.sp.context({ name: 'paras', order: 1, text, budget: { maxChars: 100 } })
    h.sp.context({ name: 'tiny', order: 2, text: 'one very long line without any break at all', budget: { maxChars: 10 } })
    const a = await h.asm()
    expect(a.contexts[0].text).toBe(`First paragraph.\n${notice('paras', text.length - 'First paragraph.'.length, 100)}`)
    expect(a.contexts[1].text).toBe(notice('tiny', 43, 10))
  })

  it('cuts a literal context the same way and keeps it verbatim', async () => {
    const h = await root()
    const text = ['branch: {{not-a-variable}}', '${X:-{{y}', 'z'.repeat(200)].join('\n')
    h.sp.context({ name: 'literal', order: 1, text, literal: true, budget: { maxChars: 150 } })
    const a = await h.asm()
    const kept = 'branch: {{not-a-variable}}\n${X:-{{y}'
    expect(a.contexts[0]).toMatchObject({ literal: true, text: `${kept}\n${notice('literal', text.length - kept.length, 150)}` })
    expect(renderContextSnapshot(a)).toContain(kept)
  })

  it('refuses a budget that is not a positive integer, naming the context', async () => {
    const h = await root()
    for (const maxChars of [0, -1, 1.5, Number.NaN, Infinity]) {
      expect(() => h.sp.context({ name: 'bad', order: 1, text: 'x', budget: { maxChars } })).toThrow(
        new TypeError('prompt context "bad" budget.maxChars must be a positive integer'),
      )
    }
    expect((await h.asm()).contexts).toEqual([])
  })
})
