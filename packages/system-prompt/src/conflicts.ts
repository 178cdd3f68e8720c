// Conflicts between contributions. A section or context may declare the rules
// it asserts (`asserts: { 'package-manager': 'pnpm' }`); when two entries assert
// different values for one rule, the model is told in one `[context-conflict]`
// line per rule: every source, its trust, which to follow, and that the user's
// word in this conversation outranks every source below the deployment.
// Undeclared prose is never compared.
import type { Trust } from './types.ts'

/** Most trusted first: who stands behind a contribution (the manifest's and the budgets' ladder). */
export const TRUST_ORDER: readonly Trust[] = ['product', 'deployment', 'repository', 'user-confirmed', 'workspace', 'tool-output']

/**
 * Which source a conflict follows, first first. It is the trust ladder with one
 * change (seed 003): the workspace (the files as they are now: a lockfile) ranks
 * above a memory, which is what the user confirmed in an earlier session and may
 * be out of date. The user's word in this conversation is above all of these but
 * the product and the deployment; the line tells the model so.
 */
export const CONFLICT_ORDER: readonly Trust[] = ['product', 'deployment', 'repository', 'workspace', 'user-confirmed', 'tool-output']

/** Trusts whose rules a request of the user does not change: Loom's own and the operator's. */
const BINDING: ReadonlySet<Trust> = new Set(['product', 'deployment'])

/** A rule's asserted value; `from` names where it was read when one entry gathers several sources (a lockfile, a memory record). */
export type Asserted = string | { readonly value: string; readonly from?: string }

/** One entry's assertion of a rule. */
export interface Assertion {
  rule: string
  value: string
  /** `section "name" (plugin "owner")`. */
  source: string
  trust: Trust
  /** The file or record the value was read from (`pnpm-lock.yaml`), when the entry says. */
  from?: string
}

/** A rule asserted with different values: what each source says, and what to follow (none when the top sources disagree). */
export interface Conflict {
  rule: string
  assertions: Assertion[]
  follow: Assertion | undefined
}

export const CONFLICT_NOTICE = 'context:conflicts'

/** The assertions of one entry's declared rules. */
export function declaredAssertions(rules: Readonly<Record<string, Asserted>> | undefined, source: string, trust: Trust): Assertion[] {
  return Object.entries(rules ?? {}).map(([rule, asserted]) =>
    typeof asserted === 'string'
      ? { rule, value: asserted, source, trust }
      : { rule, value: asserted.value, source, trust, ...(asserted.from && { from: asserted.from }) },
  )
}

export function findConflicts(assertions: readonly Assertion[]): Conflict[] {
  const byRule = new Map<string, Assertion[]>()
  for (const assertion of assertions) byRule.set(assertion.rule, [...(byRule.get(assertion.rule) ?? []), assertion])
  const conflicts: Conflict[] = []
  for (const [rule, list] of [...byRule].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (new Set(list.map(assertion => assertion.value)).size < 2) continue
    const ranked = list.slice().sort((a, b) => CONFLICT_ORDER.indexOf(a.trust) - CONFLICT_ORDER.indexOf(b.trust))
    const top = ranked.filter(assertion => assertion.trust === ranked[0].trust)
    // The top-ranked sources agree: follow them; otherwise nobody wins.
    const follow = new Set(top.map(assertion => assertion.value)).size === 1 ? top[0] : undefined
    conflicts.push({ rule, assertions: ranked, follow })
  }
  return conflicts
}

/** Where a value was read, as the model reads it: the file, then the entry that brought it. */
const origin = (assertion: Assertion) => assertion.from ?? assertion.source

/** The notice the model reads: one `[context-conflict]` line per rule. */
export function conflictNotice(conflicts: readonly Conflict[]): string {
  return conflicts
    .map(({ rule, assertions, follow }) => {
      const said = assertions.map(a => `${origin(a)} says ${JSON.stringify(a.value)} (${a.trust}${a.from ? `; ${a.source}` : ''})`).join('; ')
      let verdict: string
      if (!follow) verdict = 'They are equally trusted: do what the user says in this conversation, else ask the user which holds.'
      else if (BINDING.has(follow.trust))
        verdict = `Follow ${origin(follow)}: ${JSON.stringify(follow.value)} (${follow.trust}, ranked first); a request of the user does not change a ${follow.trust} rule.`
      else
        verdict = `Follow ${origin(follow)}: ${JSON.stringify(follow.value)} (${follow.trust}, ranked first), unless the user says otherwise in this conversation: the user's word outranks all of these. Say which you follow before you act on it.`
      return `[context-conflict] "${rule}": ${said}. ${verdict}`
    })
    .join('\n')
}

/** What a file's front matter asserts, and the lines that could not be read (`line 3: …`). */
export interface FrontMatterAsserts {
  asserts: Record<string, string>
  problems: string[]
}

/**
 * The `asserts:` block of a Markdown file's front matter (AGENTS.md, a memory
 * record): the file starts with a `---` line, the block ends at the next one, and
 * under `asserts:` each indented line is `rule: value` (quotes around the value
 * are dropped, `#` lines are comments). Other keys of the front matter are left
 * alone. A file without front matter asserts nothing.
 *
 * ```markdown
 * ---
 * asserts:
 *   package-manager: pnpm
 *   test-command: pnpm test
 * ---
 * ```
 */
export function frontMatterAsserts(text: string): FrontMatterAsserts {
  const result: FrontMatterAsserts = { asserts: {}, problems: [] }
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  if (lines[0]?.trimEnd() !== '---') return result
  const end = lines.findIndex((line, index) => index > 0 && line.trimEnd() === '---')
  if (end === -1) {
    result.problems.push('line 1: the front matter has no closing "---" line')
    return result
  }
  let inAsserts = false
  for (let index = 1; index < end; index++) {
    const line = lines[index]
    const at = `line ${index + 1}`
    if (!/^\s/.test(line)) {
      // A key at the margin starts a new block; only `asserts:` is read.
      const key = /^([^:#\s][^:]*):(.*)$/.exec(line)
      inAsserts = key?.[1].trim() === 'asserts'
      if (inAsserts && key![2].trim() !== '') result.problems.push(`${at}: write each rule of "asserts:" on its own indented line ("  rule: value")`)
      continue
    }
    if (!inAsserts || line.trim() === '' || line.trim().startsWith('#')) continue
    const pair = /^\s+([A-Za-z0-9][\w.-]*):\s*(.*?)\s*$/.exec(line)
    const value = pair?.[2].replace(/^(["'])(.*)\1$/, '$2')
    if (!pair || !value) {
      result.problems.push(`${at}: ${JSON.stringify(line.trim())} is not "rule: value"`)
      continue
    }
    result.asserts[pair[1].toLowerCase()] = value
  }
  return result
}
