// Category budgets: the sections and runtime contexts of a step, grouped by
// category (instructions, memory, skills, files, runtime, ...), each category
// under its cap, all of them under a total that never squeezes a category below
// its floor. Within a category what stays is decided by priority, then by what
// the model cannot fetch again, then by age (newer first), then by name: never by
// registration order. Whatever is left out is named in one notice the model reads.
import type { AssembledContext, AssembledSection, AssemblyAttribution, Category } from './types.ts'

/** Characters per category, and for all sections and contexts of a step together. */
export interface CategoryBudgets {
  /** All sections and contexts together; categories above their floor give way, lowest priority first. */
  maxChars?: number
  categories?: Partial<Record<Category, { cap?: number; floor?: number }>>
}

/** How an entry competes for its category's room (set when registering; see `PromptSection`). */
export interface Placement {
  /** Higher stays first (default 0). */
  priority: number
  /** The model can fetch it again with a tool (a skill, a file): it gives way first. */
  recoverable: boolean
}

/** One contribution that the budgets left out. */
export interface Omission {
  kind: 'section' | 'context'
  name: string
  owner: string
  category: Category
  chars: number
  /** `category` (over its cap), `total` (over `maxChars`), or `self` (the entry left it out of its own text, for `reason`). */
  over: 'category' | 'total' | 'self'
  reason?: string
}

/** The runtime context that tells the model what was left out. */
export const BUDGET_NOTICE = 'budget:notice'

interface Candidate {
  kind: 'section' | 'context'
  entry: AssembledSection | AssembledContext
  category: Category
  placement: Placement
  /** ms since the epoch the source was written; newer stays first. */
  modifiedAt: number
}

/** Keep order: the first stays longest. */
function keepOrder(a: Candidate, b: Candidate): number {
  return (
    b.placement.priority - a.placement.priority ||
    Number(a.placement.recoverable) - Number(b.placement.recoverable) ||
    b.modifiedAt - a.modifiedAt ||
    (a.entry.name < b.entry.name ? -1 : a.entry.name > b.entry.name ? 1 : 0)
  )
}

/** The budget category of an entry: its declared one, else `instructions` for a section and `runtime` for a context. */
export function categoryOf(attribution: AssemblyAttribution, kind: 'section' | 'context', name: string): Category {
  return kind === 'section' ? (attribution.sections[name]?.category ?? 'instructions') : (attribution.contexts[name]?.category ?? 'runtime')
}

/**
 * The sections and contexts that fit the budgets, in their original order, and
 * what was left out. Empty texts take no room and are never left out.
 */
export function allocate(
  sections: readonly AssembledSection[],
  contexts: readonly AssembledContext[],
  attribution: AssemblyAttribution,
  placements: ReadonlyMap<string, Placement>,
  budgets: CategoryBudgets,
): { sections: AssembledSection[]; contexts: AssembledContext[]; omitted: Omission[] } {
  const candidates: Candidate[] = [
    ...sections.map(entry => candidate('section', entry, categoryOf(attribution, 'section', entry.name))),
    ...contexts.map(entry => candidate('context', entry, categoryOf(attribution, 'context', entry.name))),
  ].filter(c => c.entry.text !== '')
  function candidate(kind: 'section' | 'context', entry: AssembledSection | AssembledContext, category: Category): Candidate {
    const source = (kind === 'section' ? attribution.sections : attribution.contexts)[entry.name]?.source
    const placement = placements.get(`${kind}\0${entry.name}`) ?? { priority: 0, recoverable: false }
    return { kind, entry, category, placement, modifiedAt: source?.modifiedAt ?? 0 }
  }

  const byCategory = new Map<Category, Candidate[]>()
  for (const c of candidates) byCategory.set(c.category, [...(byCategory.get(c.category) ?? []), c])
  const dropped = new Map<Candidate, Omission['over']>()

  // Each category under its cap: keep in keep order while it fits.
  const kept = new Map<Category, Candidate[]>()
  for (const [category, members] of byCategory) {
    const cap = budgets.categories?.[category]?.cap
    const ordered = members.slice().sort(keepOrder)
    let used = 0
    const stays: Candidate[] = []
    for (const c of ordered) {
      if (cap !== undefined && used + c.entry.text.length > cap) dropped.set(c, 'category')
      else {
        used += c.entry.text.length
        stays.push(c)
      }
    }
    kept.set(category, stays)
  }

  // All together under maxChars: what lies above its category's floor gives way, least kept first.
  const max = budgets.maxChars
  let total = [...kept.values()].flat().reduce((sum, c) => sum + c.entry.text.length, 0)
  if (max !== undefined && total > max) {
    const aboveFloor: Candidate[] = []
    for (const [category, stays] of kept) {
      const floor = budgets.categories?.[category]?.floor ?? 0
      let used = 0
      for (const c of stays) {
        used += c.entry.text.length
        if (used > floor) aboveFloor.push(c)
      }
    }
    for (const c of aboveFloor.sort(keepOrder).reverse()) {
      if (total <= max) break
      dropped.set(c, 'total')
      total -= c.entry.text.length
    }
  }

  const omitted: Omission[] = candidates
    .filter(c => dropped.has(c))
    .map(c => ({ kind: c.kind, name: c.entry.name, owner: c.entry.owner, category: c.category, chars: c.entry.text.length, over: dropped.get(c)! }))
  const gone = new Set(candidates.filter(c => dropped.has(c)).map(c => c.entry))
  return { sections: sections.filter(entry => !gone.has(entry)), contexts: contexts.filter(entry => !gone.has(entry)), omitted }
}

/**
 * The notice of what was left out, one line per category: `files: 2 of 12
 * included; left out: a.md, b.md, … (40,210 characters, over the files cap)`.
 */
export function omissionNotice(omitted: readonly Omission[], candidates: ReadonlyMap<Category, number>): string {
  const byCategory = new Map<Category, Omission[]>()
  for (const o of omitted) byCategory.set(o.category, [...(byCategory.get(o.category) ?? []), o])
  const names = (list: readonly Omission[]) => {
    const all = list.map(o => o.name)
    return (all.length > 8 ? [...all.slice(0, 8), `… ${all.length - 8} more`] : all).join(', ')
  }
  const chars = (list: readonly Omission[]) => list.reduce((sum, o) => sum + o.chars, 0).toLocaleString('en-US')
  const lines = [...byCategory].map(([category, left]) => {
    const parts: string[] = []
    const budgeted = left.filter(o => o.over !== 'self')
    if (budgeted.length) {
      const all = candidates.get(category) ?? budgeted.length
      const why = budgeted.every(o => o.over === 'category') ? `over the ${category} budget` : 'over the total budget'
      parts.push(`${all - budgeted.length} of ${all} included; left out: ${names(budgeted)} (${chars(budgeted)} characters, ${why})`)
    }
    const reasons = new Map<string, Omission[]>()
    for (const o of left.filter(o => o.over === 'self')) reasons.set(o.reason ?? 'left out', [...(reasons.get(o.reason ?? 'left out') ?? []), o])
    for (const [reason, list] of reasons) parts.push(`${list.length} left out ${reason}: ${names(list)} (${chars(list)} characters)`)
    return `- ${category}: ${parts.join('; ')}`
  })
  return ['Some context was left out of this request to stay within its budgets:', ...lines, 'Ask for what you need, or read it with a tool.'].join('\n')
}
