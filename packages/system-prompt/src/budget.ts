// Context budgets: an over-budget runtime context is cut at a line boundary and
// says so, in text the model reads. Nothing is ever truncated silently.
import type { ContextBudget } from './types.ts'

/** The notice that ends a cut context. */
export function budgetNotice(name: string, omitted: number, maxChars: number): string {
  return `[… ${omitted} characters of "${name}" omitted: over its budget of ${maxChars} characters]`
}

/** Throws a `TypeError` naming the section or context unless `budget.maxChars` is a positive integer. */
export function checkBudget(name: string, budget: ContextBudget | undefined, kind: 'section' | 'context'): void {
  if (budget === undefined) return
  if (typeof budget !== 'object' || budget === null || !Number.isSafeInteger(budget.maxChars) || budget.maxChars <= 0) {
    throw new TypeError(`prompt ${kind} "${name}" budget.maxChars must be a positive integer`)
  }
}

/**
 * `text` within `maxChars` characters, notice included: the longest run of whole
 * lines from the start that fits together with the notice (trailing blank lines
 * dropped, never a partial line), then the notice on its own line. A budget too
 * small for even the notice yields the notice alone.
 */
export function applyBudget(text: string, name: string, maxChars: number): string {
  if (text.length <= maxChars) return text
  // Line ends: the candidate cut points after 1, 2, 3, ... whole lines.
  const cuts: number[] = []
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) cuts.push(at)
  for (let i = cuts.length - 1; i >= 0; i--) {
    let kept = cuts[i]
    while (kept > 0 && /\s/.test(text[kept - 1])) kept--
    if (kept === 0) break
    const notice = budgetNotice(name, text.length - kept, maxChars)
    if (kept + 1 + notice.length <= maxChars) return `${text.slice(0, kept)}\n${notice}`
  }
  return budgetNotice(name, text.length, maxChars)
}
