// The total prompt budget where features meet (issue: context engineering that holds): a 30-step
// DeepSeek thinking-mode session on the default bundle, in a git repository with AGENTS.md and
// memory, under `budgets.maxChars: 6000`, while a runtime context grows by about 300 characters a
// step. The system text never changes, every request extends the previous one, and the provider's
// reported cache hits stay as high as with the growing context cut by its own budget.
import { describe, expect, it } from 'vitest'
import { budgetSession } from '../bench/budget-session.ts'

describe('a growing runtime context under a total budget', () => {
  it('keeps the system text, the prefix and the provider cache', { timeout: 180_000 }, async () => {
    const total = await budgetSession('total')
    const own = await budgetSession('own')
    expect(total).toMatchObject({ requests: 30, system_texts: 1 })
    expect(total.min_reuse).toBeGreaterThanOrEqual(0.99)
    expect(total.reported_hit_share).toBeGreaterThanOrEqual(0.93)
    // No worse than the same session without a total budget (the log cut by its own budget of 1,750 characters).
    expect(own).toMatchObject({ requests: 30, system_texts: 1 })
    expect(total.reported_hit_share).toBeGreaterThanOrEqual(own.reported_hit_share - 0.002)
  })
})
