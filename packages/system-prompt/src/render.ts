import type { ContextSnapshotSection, PromptAssembly } from './types.ts'

export const VARIABLE_NAME = /^[a-z][a-z0-9_]*$/
export const CONTEXT_SNAPSHOT_HEADER =
  'Current runtime context. This snapshot supersedes earlier runtime-context snapshots.'

type Kind = 'section' | 'context'

// A complete group: `{{`, a run without braces (newlines allowed), `}}`.
const GROUP = /\{\{([^{}]*)\}\}/y

/**
 * A text split at its references: `literals[i]`, then the value of `names[i]`, ...,
 * then the last literal. `malformed` is the first malformed reference, which fails
 * the render once the references before it have been checked.
 */
interface Template {
  literals: string[]
  names: string[]
  malformed?: (kind: Kind, owner: string) => string
}

/**
 * Strict `{{name}}` interpolation. Unknown, valueless and malformed references throw
 * with the owner named; values are inserted verbatim and never re-scanned; only own
 * properties count, so prototype names are unknown. A lone `{{` with no `}}` after it
 * is literal prose (shell `${X:-{{y}` stays as written).
 */
export function interpolate(text: string, variables: PromptAssembly['variables'], kind: Kind, owner: string): string {
  const { literals, names, malformed } = cached(templates, text, compile)
  let out = literals[0]
  for (let i = 0; i < names.length; i++) {
    const name = names[i]
    if (!Object.hasOwn(variables, name)) {
      const known = Object.keys(variables).join(', ') || '(none)'
      throw new Error(`unknown prompt variable "{{${name}}}" in ${kind} "${owner}"; registered variables: ${known}`)
    }
    const value = variables[name]
    if (value === undefined) {
      throw new Error(`prompt variable "{{${name}}}" has no value for this assembly (${kind} "${owner}")`)
    }
    out += value + literals[i + 1]
  }
  if (malformed) throw new Error(malformed(kind, owner))
  return out
}

function compile(text: string): Template {
  const literals: string[] = []
  const names: string[] = []
  let literal = ''
  let from = 0
  for (let at = text.indexOf('{{'); at !== -1; at = text.indexOf('{{', from)) {
    GROUP.lastIndex = at
    const group = GROUP.exec(text)
    if (!group) {
      if (text.indexOf('}}', at + 2) !== -1) {
        const snippet = text.slice(at, at + 16)
        return { literals, names, malformed: (kind, owner) => `malformed prompt variable reference at "${snippet}…" in ${kind} "${owner}" (references are complete simple {{name}} groups)` }
      }
      literal += text.slice(from, at + 2)
      from = at + 2
      continue
    }
    const name = group[1]
    if (!VARIABLE_NAME.test(name)) {
      return { literals, names, malformed: (kind, owner) => `malformed prompt variable reference "{{${name}}}" in ${kind} "${owner}" (variable names match ${VARIABLE_NAME})` }
    }
    literals.push(literal + text.slice(from, at))
    names.push(name)
    literal = ''
    from = GROUP.lastIndex
  }
  literals.push(literal + text.slice(from))
  return { literals, names }
}

/** Names referenced by the well-formed `{{name}}` groups of a text (malformed ones fail at render). */
export function referencedVariables(text: string): string[] {
  return cached(references, text, scanReferences).slice()
}

function scanReferences(text: string): string[] {
  return [...text.matchAll(/\{\{([a-z][a-z0-9_]*)\}\}/g)].map(match => match[1])
}

// Section and context texts repeat from one step to the next, so what is derived
// from a text is kept by the text. Bounded: long texts are not kept, and a full
// cache starts over (texts that change every step only churn it).
const CACHED_TEXT_CHARS = 16_384
const CACHED_TEXTS = 1_024
const templates = new Map<string, Template>()
const references = new Map<string, string[]>()

function cached<T>(cache: Map<string, T>, text: string, derive: (text: string) => T): T {
  let value = cache.get(text)
  if (value === undefined) {
    value = derive(text)
    if (text.length <= CACHED_TEXT_CHARS) {
      if (cache.size >= CACHED_TEXTS) cache.clear()
      cache.set(text, value)
    }
  }
  return value
}

/** The system text: sections interpolated in order, exactly-empty results dropped, joined by a blank line. */
export function renderPrompt(assembly: PromptAssembly): string {
  return assembly.sections
    .map(section => section.literal ? section.text : interpolate(section.text, assembly.variables, 'section', section.name))
    .filter(text => text !== '')
    .join('\n\n')
}

/** The runtime contexts whose interpolated text is non-empty. */
export function renderContextSections(assembly: PromptAssembly): ContextSnapshotSection[] {
  return assembly.contexts
    .map(context => ({ name: context.name, text: context.literal ? context.text : interpolate(context.text, assembly.variables, 'context', context.name) }))
    .filter(section => section.text !== '')
}

/** The body of the runtime-context snapshot message, or `''` when nothing is active. */
export function joinContextSections(sections: readonly ContextSnapshotSection[]): string {
  const body = sections.map(section => section.text).join('\n\n')
  return body === '' ? '' : `${CONTEXT_SNAPSHOT_HEADER}\n\n${body}`
}

export function renderContextSnapshot(assembly: PromptAssembly): string {
  return joinContextSections(renderContextSections(assembly))
}
