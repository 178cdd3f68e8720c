// Rule matching, kept free of Cordis so it reads (and is tested) on its own.
import type { ToolEffect } from '@loom/tools'

export type Action = 'allow' | 'ask' | 'deny'

export interface Rule {
  /** A tool name, or `*` for every tool (the default). */
  tool?: string
  action: Action
  /**
   * Effects of the call (see `ToolEffect`): an `allow` rule matches a call whose every declared
   * effect is listed, an `ask` or `deny` rule one that declares any of them; a call whose tool
   * declares none never matches. Absent or empty: any call.
   */
  effects?: ToolEffect[]
  /** Prefixes of the call's `command` argument (bash), matched word by word; absent or empty: any call. */
  commands?: string[]
  /** Globs of the call's `path` argument (read, write, edit), relative to the workspace; absent or empty: any call. */
  paths?: string[]
  /** An `ask` rule only: the answer where nobody can be asked (a headless run under `--approve policy`); absent: deny. */
  unattended?: 'allow' | 'deny'
}

/** What a call looks like to the rules: its tool, its `command`, and its `path` relative to the workspace (when inside it). */
export interface CallFacts {
  tool: string
  /** What the call may do, as its tool declares; absent when unknown. */
  effects?: readonly ToolEffect[]
  command?: string
  /** Workspace-relative with `/` separators; absent when the call has no path or it lies outside the workspace. */
  path?: string
}

/** A rule ready to match: globs compiled, prefixes split into words. */
export interface CompiledRule {
  readonly index: number
  readonly rule: Rule
  readonly prefixes?: string[][]
  readonly globs?: RegExp[]
}

/** The rule that decides a call, or `undefined` for the default action. */
export function firstMatch(rules: readonly CompiledRule[], call: CallFacts): CompiledRule | undefined {
  return rules.find(rule => matches(rule, call))
}

/** Checks every rule up front, so a mistake in the config is an error naming the rule, not a silent non-match. */
export function compileRules(rules: readonly Rule[]): CompiledRule[] {
  return rules.map((rule, index) => {
    const where = `rule ${index + 1} (${rule.tool !== undefined ? `tool ${JSON.stringify(rule.tool)}` : `effects ${(rule.effects ?? []).join(', ') || 'any'}`})`
    if (rule.unattended !== undefined && rule.action !== 'ask')
      throw new Error(`${where}: unattended applies to ask rules only, and its action is ${rule.action}`)
    // An empty list is no pattern (the config schema fills absent lists with []).
    const prefixes = nonEmpty(rule.commands)?.map(prefix => {
      const words = wordsOf(prefix)
      if (words.length === 0) throw new Error(`${where}: the command prefix ${JSON.stringify(prefix)} is blank`)
      return words
    })
    const globs = nonEmpty(rule.paths)?.map(glob => {
      const problem = globProblem(glob)
      if (problem) throw new Error(`${where}: the path glob ${JSON.stringify(glob)} ${problem}`)
      return globToRegExp(glob)
    })
    return { index, rule, ...(prefixes && { prefixes }), ...(globs && { globs }) }
  })
}

function nonEmpty<T>(list: T[] | undefined): T[] | undefined {
  return list?.length ? list : undefined
}

function matches({ rule, prefixes, globs }: CompiledRule, call: CallFacts): boolean {
  if (rule.tool !== undefined && rule.tool !== '*' && rule.tool !== call.tool) return false
  if (rule.effects?.length && !effectsMatch(call.effects, rule.effects, rule.action)) return false
  if (prefixes && (call.command === undefined || !commandMatches(call.command, prefixes, rule.action))) return false
  if (globs && (call.path === undefined || !globs.some(glob => glob.test(call.path!)))) return false
  return true
}

/** Characters that chain, substitute, redirect or escape in a shell. */
const SHELL_SYNTAX = /[;&|`$()<>\\\n\r]/
const SEPARATORS = /[;&|`$()<>\n\r]+/

/**
 * A prefix matches whole words: `git status` matches `git status -s`, not `git
 * statuses`. An `allow` rule only matches a single plain command (no `;`, `&&`,
 * `|`, `$(...)`, redirection or backslash), so `git status; rm -rf .` is not
 * allowed by a `git status` prefix. An `ask` or `deny` rule matches when any part
 * of the command line starts with a prefix, so `ls && rm -rf .` is caught by `rm`.
 */
export function commandMatches(command: string, prefixes: readonly string[][], action: Action): boolean {
  if (action === 'allow') return !SHELL_SYNTAX.test(command) && prefixes.some(prefix => startsWithWords(wordsOf(command), prefix))
  const parts = command.split(SEPARATORS).map(wordsOf)
  return parts.some(words => prefixes.some(prefix => startsWithWords(words, prefix)))
}

/** As for commands: an `allow` rule covers a call only when it lists everything the call may do; `ask` and `deny` catch any part of it. */
function effectsMatch(effects: readonly ToolEffect[] | undefined, listed: readonly ToolEffect[], action: Action): boolean {
  if (!effects?.length) return false
  return action === 'allow' ? effects.every(effect => listed.includes(effect)) : effects.some(effect => listed.includes(effect))
}

function wordsOf(text: string): string[] {
  return text.trim().split(/\s+/).filter(Boolean)
}

function startsWithWords(words: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= words.length && prefix.every((word, i) => words[i] === word)
}

function globProblem(glob: string): string | undefined {
  if (glob === '') return 'is empty'
  if (glob.startsWith('/')) return 'is absolute; write it relative to the workspace'
  if (glob.split('/').includes('..')) return 'leaves the workspace (..)'
  return undefined
}

/**
 * `*` matches within one path segment, `**` any number of segments (`src/**`
 * everything below src, `**\/*.ts` every .ts file), `?` one character; the rest is
 * literal. A leading `./` is ignored.
 */
export function globToRegExp(glob: string): RegExp {
  const source = glob.startsWith('./') ? glob.slice(2) : glob
  let pattern = ''
  for (let i = 0; i < source.length; i++) {
    const char = source[i]
    if (char === '*' && source[i + 1] === '*') {
      const slash = source[i + 2] === '/'
      pattern += slash ? '(?:[^/]*/)*' : '.*'
      i += slash ? 2 : 1
    } else if (char === '*') {
      pattern += '[^/]*'
    } else if (char === '?') {
      pattern += '[^/]'
    } else {
      pattern += char.replace(/[.+^${}()|[\]\\]/g, '\\$&')
    }
  }
  return new RegExp(`^${pattern}$`)
}
