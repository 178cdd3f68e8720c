// Paths no tool may read (credential stores such as ~/.ssh, and what a deployment adds), and the
// ones let through on purpose. The rules are plain data, so a search worker thread checks the same
// rules as the runtime (`ctx.tools.readRules()`); the check is a lookup per folder of the path, no I/O.
import { sep } from 'node:path'

export interface ReadRule {
  /** Absolute and symlink-resolved (as far as it exists); a folder covers everything below it. */
  readonly path: string
  /** Why, as the user and the model read it: `a credential store: SSH keys`. */
  readonly reason: string
  /** The plugin that made the rule. */
  readonly owner: string
}

/** What tools may not read (`deny`), and what is let through anyway (`allow`). */
export interface ReadRules {
  readonly deny: readonly ReadRule[]
  readonly allow: readonly ReadRule[]
}

/** Whether `rule` is `path` or a folder above it (both absolute and normalized). */
function covers(rule: string, path: string): boolean {
  if (!path.startsWith(rule)) return false
  return path.length === rule.length || path[rule.length] === sep || rule.endsWith(sep)
}

// Each rules object indexed by path once (`null`: an allow rule there): a check then looks up the
// path and each folder above it, nearest first, and the first rule met decides.
const indexes = new WeakMap<ReadRules, Map<string, ReadRule | null>>()

function indexOf(rules: ReadRules): Map<string, ReadRule | null> {
  let index = indexes.get(rules)
  if (index === undefined) {
    index = new Map()
    for (const rule of rules.deny) index.set(rule.path, rule)
    for (const rule of rules.allow) index.set(rule.path, null)
    indexes.set(rules, index)
  }
  return index
}

/**
 * The deny rule that keeps `path` (absolute, symlinks resolved) from being read, or `undefined`.
 * The nearest rule at or above the path decides: `allow: [~/.ssh/known_hosts]` lets that file
 * out of a denied `~/.ssh`, and a deny rule below an allowed folder still holds. At the same
 * path, allow wins. It costs a lookup per folder of the path, whatever the number of rules.
 */
export function readDenial(rules: ReadRules, path: string): ReadRule | undefined {
  if (rules.deny.length === 0) return undefined
  const index = indexOf(rules)
  for (let end = path.length; ; end = path.lastIndexOf(sep, end - 1)) {
    const hit = index.get(end === path.length ? path : end <= 0 ? sep : path.slice(0, end))
    if (hit !== undefined) return hit ?? undefined
    if (end <= 0) return undefined
  }
}

/** Whether an allow rule lies strictly below `dir`: a walk must enter a denied folder that has one. */
export function allowedBelow(rules: ReadRules, dir: string): boolean {
  return rules.allow.some(rule => rule.path !== dir && covers(dir, rule.path))
}

/** The rules that can decide something at or below `dir` (those above it, or inside it): a walk from `dir` needs no others. */
export function rulesFor(rules: ReadRules, dir: string): ReadRules {
  const relevant = (rule: ReadRule) => covers(rule.path, dir) || covers(dir, rule.path)
  return { deny: rules.deny.filter(relevant), allow: rules.allow.filter(relevant) }
}

/** A tool refused a path a deny rule covers; the message says why and how the user lets it through. */
export class ReadDeniedError extends Error {
  override name = 'ReadDeniedError'
  constructor(display: string, rule: ReadRule) {
    super(
      `"${display}" is out of reach: tools may not read or change "${rule.path}" (${rule.reason}). ` +
        'Do not try to reach it another way; if the task needs it, ask the user, who can let it through with allowRead on the @loom/tools row of loom.yml.',
    )
  }
}
