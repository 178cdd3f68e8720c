// Conflicts between contributions. A section or context may declare the rules
// it asserts (`asserts: { indentation: 'tabs' }`); when two entries assert
// different values for one rule, the model is told in one `[context-conflict]`
// notice: both sources, their trust, and which to follow (the more trusted one;
// with equal trust, neither: ask the user). Undeclared prose is never compared.
import type { Trust } from './types.ts'

/** Most trusted first. */
export const TRUST_ORDER: readonly Trust[] = ['product', 'deployment', 'repository', 'user-confirmed', 'workspace', 'tool-output']

/** One entry's assertion of a rule. */
export interface Assertion {
  rule: string
  value: string
  /** `section "name" (plugin "owner")`. */
  source: string
  trust: Trust
}

/** A rule asserted with different values: what each source says, and what to follow (none when their trust is equal). */
export interface Conflict {
  rule: string
  assertions: Assertion[]
  follow: Assertion | undefined
}

export const CONFLICT_NOTICE = 'context:conflicts'

export function findConflicts(assertions: readonly Assertion[]): Conflict[] {
  const byRule = new Map<string, Assertion[]>()
  for (const assertion of assertions) byRule.set(assertion.rule, [...(byRule.get(assertion.rule) ?? []), assertion])
  const conflicts: Conflict[] = []
  for (const [rule, list] of [...byRule].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (new Set(list.map(assertion => assertion.value)).size < 2) continue
    const ranked = list.slice().sort((a, b) => TRUST_ORDER.indexOf(a.trust) - TRUST_ORDER.indexOf(b.trust))
    const top = ranked.filter(assertion => assertion.trust === ranked[0].trust)
    // The most trusted sources agree: follow them; otherwise nobody wins.
    const follow = new Set(top.map(assertion => assertion.value)).size === 1 ? top[0] : undefined
    conflicts.push({ rule, assertions: ranked, follow })
  }
  return conflicts
}

/** The notice the model reads: one `[context-conflict]` line per rule. */
export function conflictNotice(conflicts: readonly Conflict[]): string {
  return conflicts
    .map(({ rule, assertions, follow }) => {
      const said = assertions.map(a => `${a.source}, ${a.trust}, says ${JSON.stringify(a.value)}`).join('; ')
      const verdict = follow
        ? `follow ${follow.source} (${follow.trust}, the more trusted): ${JSON.stringify(follow.value)}`
        : 'they are equally trusted: ask the user which holds'
      return `[context-conflict] "${rule}": ${said}. ${verdict}.`
    })
    .join('\n')
}
