// Stability by default. A contribution's text may change when the registry
// changes (a plugin loaded, unloaded, reloaded, re-registered); when it changes
// between two assemblies of one scope with no registry change in between, it
// would move the cached system prefix on its own: a clock in a static section,
// an undeclared variable that reads the time. The check compares each assembly
// with the previous one of its scope and names the culprit, its plugin and the
// first differing characters.
//
// What is checked: `static` sections (the default) and `static`/`session`
// variables (the default), as errors under `error` and warnings under `warn`; a
// `session` section is declared to follow outside content (an instructions file,
// a server's tool list), so its change is only ever a warning. `step` variables
// may change at will: they can only reach runtime contexts.
import type { ScopeKey } from '@loom/scope'
import type { PromptAssembly } from './types.ts'

/** `error`: an unstable contribution fails the assembly (development, tests); `warn`: it is logged (production); `off`. */
export type StabilityCheckMode = 'error' | 'warn' | 'off'

/** The texts an assembly rendered, compared with the next one's. */
interface Texts {
  sections: Map<string, string>
  variables: Map<string, string | undefined>
}

/** What was assembled last for a scope, and at which registry version. */
interface Baseline extends Texts {
  version: number
}

export interface Instability {
  /** `prompt section "x" (plugin "p", static)`: the contribution, the same at every change. */
  subject: string
  kind: 'section' | 'variable'
  name: string
  /** The plugin that registered it. */
  owner: string
  /** The message naming the contribution, its plugin and the first difference. */
  message: string
  /** Whether the mode's `error` applies (a `session` section only ever warns). */
  severe: boolean
}

/** The code of a stability failure wherever it surfaces (a turn's end, `loom dev`, the test kit). */
export const PROMPT_UNSTABLE = 'PROMPT_UNSTABLE'

/** An assembly failed the stability check in `error` mode; the message names the contribution, its plugin and the difference. */
export class PromptUnstableError extends Error {
  readonly code = PROMPT_UNSTABLE
  readonly instability: Instability

  constructor(instability: Instability) {
    super(instability.message)
    this.name = 'PromptUnstableError'
    this.instability = instability
  }
}

export class StabilityCheck {
  private version = 0
  private readonly scoped = new WeakMap<ScopeKey, Baseline>()
  private unscoped: Baseline | undefined

  /** A registration or removal: the next assembly of every scope starts a new baseline. */
  registryChanged(): void {
    this.version++
  }

  /** The next assembly of `scope` starts a new baseline: what changed before it was announced, not on its own. */
  forget(scope: ScopeKey): void {
    this.scoped.delete(scope)
  }

  /** Compares `assembly` with the previous assembly of `scope` (then remembers it); returns what changed on its own. */
  check(scope: ScopeKey | undefined, assembly: PromptAssembly): Instability[] {
    const previous = scope === undefined ? this.unscoped : this.scoped.get(scope)
    const next: Baseline = { version: this.version, ...textsOf(assembly) }
    if (scope === undefined) this.unscoped = next
    else this.scoped.set(scope, next)
    if (!previous || previous.version !== this.version) return []
    return changes(previous, assembly)
  }
}

/**
 * What changed on its own between two assemblies of one scope with no
 * registration change in between (`loom prompt` assembles twice and asks), in
 * the words of the check.
 */
export function findInstabilities(before: PromptAssembly, after: PromptAssembly): Instability[] {
  return changes(textsOf(before), after)
}

function textsOf(assembly: PromptAssembly): Texts {
  return {
    sections: new Map(assembly.sections.map(section => [section.name, section.text])),
    variables: new Map(Object.entries(assembly.variables)),
  }
}

function changes(previous: Texts, assembly: PromptAssembly): Instability[] {
  const found: Instability[] = []
  for (const section of assembly.sections) {
    const before = previous.sections.get(section.name)
    if (before === undefined || before === section.text) continue
    const declared = section.stability === 'session' ? 'session-stable' : 'static'
    const subject = `prompt section "${section.name}" (plugin "${section.owner}", ${declared})`
    found.push({
      subject,
      kind: 'section',
      name: section.name,
      owner: section.owner,
      severe: section.stability !== 'session',
      message:
        `${subject} changed between two assemblies with no registration change: ${difference(before, section.text)}. ` +
        (section.stability === 'session'
          ? 'Each change moves the cached system prefix; re-register the section when its source changes, or move what changes into a runtime context (ctx.systemPrompt.context).'
          : 'A static section must render the same text every time: move what changes into a runtime context (ctx.systemPrompt.context), or declare stability "session" if it follows outside content.'),
    })
  }
  for (const [name, info] of Object.entries(assembly.variableInfo)) {
    if (info.stability === 'step' || !previous.variables.has(name)) continue
    const before = previous.variables.get(name)
    const after = assembly.variables[name]
    if (before === after) continue
    const subject = `prompt variable "{{${name}}}" (plugin "${info.owner}", ${info.stability}-stable)`
    found.push({
      subject,
      kind: 'variable',
      name,
      owner: info.owner,
      severe: true,
      message:
        `${subject} changed between two assemblies with no registration change: ${difference(before ?? '', after ?? '')}. ` +
        `A value that changes between steps must be registered with { stability: 'step' } and used in runtime contexts only.`,
    })
  }
  return found
}

/** `first difference at character 12: "…at 10:01:02" became "…at 10:01:03"` */
export function difference(before: string, after: string): string {
  let at = 0
  while (at < before.length && at < after.length && before[at] === after[at]) at++
  const from = Math.max(0, at - 12)
  const excerpt = (text: string) => JSON.stringify((from > 0 ? '…' : '') + text.slice(from, at + 24) + (text.length > at + 24 ? '…' : ''))
  return `first difference at character ${at}: ${excerpt(before)} became ${excerpt(after)}`
}
