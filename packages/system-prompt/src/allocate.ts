// Category budgets: the sections and runtime contexts of a step, grouped by
// category (instructions, memory, skills, files, runtime, ...), each category
// under its cap, all of them under a total that never squeezes a category below
// its floor. Sections are allocated first and on their own: what the system text
// keeps depends on the sections alone, so a runtime context that grows from step to
// step never changes the cached prefix; the contexts fit in the room that is left
// (the floors of categories without sections are kept for them), the one at the
// edge cut at a line boundary. Within and across categories what stays is decided
// by priority, then trust (product guidance last to go), then what the model
// cannot fetch again, then age (newer first; a fact with no source is current),
// then by name: never by registration order. Whatever is left out or cut is named
// in one notice the model reads.
import { applyBudget } from './budget.ts'
import type { AssembledContext, AssembledSection, AssemblyAttribution, Category, Trust } from './types.ts'

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

/** One contribution that the budgets left out, or cut. */
export interface Omission {
  kind: 'section' | 'context'
  name: string
  owner: string
  category: Category
  /** Characters left out (for a cut context: what was cut away). */
  chars: number
  /** `category` (over its cap), `total` (over `maxChars`), or `self` (the entry left it out of its own text, for `reason`). */
  over: 'category' | 'total' | 'self'
  /** A context cut to the room left, rather than left out whole. */
  cut?: true
  reason?: string
}

/** Floors that add up to more than `maxChars`: the request is over its total by `over` characters, said in the notice. */
export interface BudgetOverflow {
  maxChars: number
  floors: number
  over: number
}

/** The runtime context that tells the model what was left out. */
export const BUDGET_NOTICE = 'budget:notice'

/** A cut context keeps at least this much of its text, else it is left out whole. */
const MIN_CUT_CHARS = 200

/** Most trusted first (see `Trust`): lower trust gives way first. */
const TRUST_RANK: Record<Trust, number> = { product: 0, deployment: 1, repository: 2, 'user-confirmed': 3, workspace: 4, 'tool-output': 5 }

interface Candidate {
  kind: 'section' | 'context'
  entry: AssembledSection | AssembledContext
  category: Category
  placement: Placement
  trust: number
  /** ms since the epoch the source was written; newer stays first; no source: current. */
  modifiedAt: number
}

/** Keep order: the first stays longest. */
function keepOrder(a: Candidate, b: Candidate): number {
  return (
    b.placement.priority - a.placement.priority ||
    a.trust - b.trust ||
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
 * The sections and contexts that fit the budgets, in their original order, what
 * was left out or cut, and the overflow when the floors alone exceed `maxChars`.
 * Empty texts take no room and are never left out. `trustOf` gives an entry's
 * trust (declared, or by its owner).
 */
export function allocate(
  sections: readonly AssembledSection[],
  contexts: readonly AssembledContext[],
  attribution: AssemblyAttribution,
  placements: ReadonlyMap<string, Placement>,
  budgets: CategoryBudgets,
  trustOf: (kind: 'section' | 'context', name: string, owner: string) => Trust,
): { sections: AssembledSection[]; contexts: AssembledContext[]; omitted: Omission[]; overflow?: BudgetOverflow } {
  const candidate = (kind: 'section' | 'context', entry: AssembledSection | AssembledContext): Candidate => {
    const source = (kind === 'section' ? attribution.sections : attribution.contexts)[entry.name]?.source
    return {
      kind,
      entry,
      category: categoryOf(attribution, kind, entry.name),
      placement: placements.get(`${kind}\0${entry.name}`) ?? { priority: 0, recoverable: false },
      trust: TRUST_RANK[trustOf(kind, entry.name, entry.owner)] ?? TRUST_RANK.deployment,
      modifiedAt: source?.modifiedAt ?? Number.POSITIVE_INFINITY,
    }
  }
  const ofSections = sections.filter(entry => entry.text !== '').map(entry => candidate('section', entry))
  const ofContexts = contexts.filter(entry => entry.text !== '').map(entry => candidate('context', entry))
  const floor = (category: Category) => budgets.categories?.[category]?.floor ?? 0
  const cap = (category: Category) => budgets.categories?.[category]?.cap
  const max = budgets.maxChars
  const omitted = new Map<Candidate, Omission>()
  /** Contexts cut to the room left: their new text. */
  const cuts = new Map<Candidate, string>()
  const size = (c: Candidate) => cuts.get(c)?.length ?? c.entry.text.length
  const total = (list: readonly Candidate[]) => list.reduce((sum, c) => sum + size(c), 0)
  const leaveOut = (c: Candidate, over: Omission['over']) =>
    omitted.set(c, { kind: c.kind, name: c.entry.name, owner: c.entry.owner, category: c.category, chars: c.entry.text.length, over })

  /**
   * `members` under what is left of each category's cap (`taken` is already used)
   * and, together, under `limit`: what lies above its category's floor gives way,
   * least kept first; with `cutEdge`, the entry at the edge is cut to fit instead.
   */
  const fit = (members: readonly Candidate[], taken: ReadonlyMap<Category, number>, limit: number | undefined, cutEdge: boolean) => {
    const stays: Candidate[] = []
    const used = new Map(taken)
    for (const c of members.slice().sort(keepOrder)) {
      const before = used.get(c.category) ?? 0
      const limitOfCap = cap(c.category)
      if (limitOfCap !== undefined && before + c.entry.text.length > limitOfCap) leaveOut(c, 'category')
      else {
        used.set(c.category, before + c.entry.text.length)
        stays.push(c)
      }
    }
    let sum = total(stays)
    if (limit === undefined || sum <= limit) return stays
    const aboveFloor: Candidate[] = []
    const filled = new Map(taken)
    for (const c of stays) {
      const before = filled.get(c.category) ?? 0
      filled.set(c.category, before + c.entry.text.length)
      if (before + c.entry.text.length > floor(c.category)) aboveFloor.push(c)
    }
    const gone = new Set<Candidate>()
    for (const c of aboveFloor.reverse()) {
      if (sum <= limit) break
      const left = limit - (sum - c.entry.text.length)
      if (cutEdge && left >= MIN_CUT_CHARS) {
        const text = applyBudget(c.entry.text, c.entry.name, left)
        cuts.set(c, text)
        omitted.set(c, {
          kind: c.kind,
          name: c.entry.name,
          owner: c.entry.owner,
          category: c.category,
          chars: c.entry.text.length - text.length,
          over: 'total',
          cut: true,
        })
        sum -= c.entry.text.length - text.length
      } else {
        leaveOut(c, 'total')
        gone.add(c)
        sum -= c.entry.text.length
      }
    }
    return stays.filter(c => !gone.has(c))
  }

  // The sections first, on their own: the room kept for the contexts is the floors of the categories no section uses.
  const sectionCategories = new Set(ofSections.map(c => c.category))
  const reserved = (Object.keys(budgets.categories ?? {}) as Category[])
    .filter(category => !sectionCategories.has(category))
    .reduce((sum, category) => sum + floor(category), 0)
  const keptSections = fit(ofSections, new Map(), max === undefined ? undefined : Math.max(0, max - reserved), false)
  // Then the contexts, in what the sections left of each cap and of the total.
  const sectionUse = new Map<Category, number>()
  for (const c of keptSections) sectionUse.set(c.category, (sectionUse.get(c.category) ?? 0) + size(c))
  const keptContexts = fit(ofContexts, sectionUse, max === undefined ? undefined : Math.max(0, max - total(keptSections)), true)

  // The floors protect more than the total allows: said, never exceeded in silence.
  const used = total(keptSections) + total(keptContexts)
  const floors = [...new Set([...ofSections, ...ofContexts].map(c => c.category))].reduce((sum, category) => sum + floor(category), 0)
  const overflow = max !== undefined && used > max ? { maxChars: max, floors, over: used - max } : undefined
  const kept = new Map<AssembledSection | AssembledContext, Candidate>([...keptSections, ...keptContexts].map(c => [c.entry, c]))
  const stays = (entry: AssembledSection | AssembledContext) => entry.text === '' || kept.has(entry)
  const text = (entry: AssembledContext) => {
    const c = kept.get(entry)
    return c && cuts.has(c) ? { ...entry, text: cuts.get(c)! } : entry
  }
  return {
    sections: sections.filter(stays),
    contexts: contexts.filter(stays).map(text),
    omitted: [...ofSections, ...ofContexts].filter(c => omitted.has(c)).map(c => omitted.get(c)!),
    ...(overflow && { overflow }),
  }
}

/**
 * The notice of what was left out, one line per category: `files: 2 of 12
 * included; left out: a.md, b.md, … (40,210 characters, over the files cap)`; a
 * context cut to fit, and floors that exceed the total, are said too.
 */
export function omissionNotice(omitted: readonly Omission[], candidates: ReadonlyMap<Category, number>, overflow?: BudgetOverflow): string {
  const byCategory = new Map<Category, Omission[]>()
  for (const o of omitted) byCategory.set(o.category, [...(byCategory.get(o.category) ?? []), o])
  const names = (list: readonly Omission[]) => {
    const all = list.map(o => o.name)
    return (all.length > 8 ? [...all.slice(0, 8), `… ${all.length - 8} more`] : all).join(', ')
  }
  const chars = (list: readonly Omission[]) => list.reduce((sum, o) => sum + o.chars, 0).toLocaleString('en-US')
  const lines = [...byCategory].map(([category, left]) => {
    const parts: string[] = []
    const budgeted = left.filter(o => o.over !== 'self' && !o.cut)
    if (budgeted.length) {
      const all = candidates.get(category) ?? budgeted.length
      const why = budgeted.every(o => o.over === 'category') ? `over the ${category} budget` : 'over the total budget'
      parts.push(`${all - budgeted.length} of ${all} included; left out: ${names(budgeted)} (${chars(budgeted)} characters, ${why})`)
    }
    const cut = left.filter(o => o.cut)
    if (cut.length) parts.push(`cut to fit the total budget: ${names(cut)} (${chars(cut)} characters left out)`)
    const reasons = new Map<string, Omission[]>()
    for (const o of left.filter(o => o.over === 'self')) reasons.set(o.reason ?? 'left out', [...(reasons.get(o.reason ?? 'left out') ?? []), o])
    for (const [reason, list] of reasons) parts.push(`${list.length} left out ${reason}: ${names(list)} (${chars(list)} characters)`)
    return `- ${category}: ${parts.join('; ')}`
  })
  if (overflow) {
    lines.push(
      `- the floors of the budgets (${overflow.floors.toLocaleString('en-US')} characters) exceed the total of ${overflow.maxChars.toLocaleString('en-US')}: this request is ${overflow.over.toLocaleString('en-US')} characters over it`,
    )
  }
  return ['Some context was left out of this request to stay within its budgets:', ...lines, 'Ask for what you need, or read it with a tool.'].join('\n')
}
