import { createHash } from 'node:crypto'
import type { ContextSnapshotSection, PromptAssembly } from './types.ts'

export const VARIABLE_NAME = /^[a-z][a-z0-9_]*$/
export const CONTEXT_SNAPSHOT_HEADER = 'Current runtime context. This snapshot supersedes earlier runtime-context snapshots.'

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
        return {
          literals,
          names,
          malformed: (kind, owner) =>
            `malformed prompt variable reference at "${snippet}…" in ${kind} "${owner}" (references are complete simple {{name}} groups)`,
        }
      }
      literal += text.slice(from, at + 2)
      from = at + 2
      continue
    }
    const name = group[1]
    if (!VARIABLE_NAME.test(name)) {
      return {
        literals,
        names,
        malformed: (kind, owner) => `malformed prompt variable reference "{{${name}}}" in ${kind} "${owner}" (variable names match ${VARIABLE_NAME})`,
      }
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

/** A section's or context's text as the model reads it, and its sha256 (hex, computed when first asked for). */
export class RenderedText {
  readonly name: string
  readonly owner: string
  readonly text: string
  #sha256: string | undefined
  constructor(name: string, owner: string, text: string) {
    this.name = name
    this.owner = owner
    this.text = text
  }

  get sha256(): string {
    return (this.#sha256 ??= createHash('sha256').update(this.text, 'utf8').digest('hex'))
  }
}

/** Every section and context of an assembly rendered once: variables interpolated, literals verbatim, empty ones kept. */
export interface RenderedAssembly {
  readonly sections: readonly RenderedText[]
  readonly contexts: readonly RenderedText[]
}

type Item = { name: string; owner: string; text: string; literal?: boolean }
type Rendered = { from: readonly Item[]; texts: readonly string[]; rendered: readonly RenderedText[] }

class Rendering implements RenderedAssembly {
  private readonly assembly: PromptAssembly
  #sections: Rendered | undefined
  #contexts: Rendered | undefined
  readonly #variables: PromptAssembly['variables']
  constructor(assembly: PromptAssembly) {
    this.assembly = assembly
    this.#variables = assembly.variables
  }

  /** Still true to the assembly: the same variables, lists and texts (an assembly a caller edited renders anew). */
  fresh(): boolean {
    const same = (cached: Rendered | undefined, items: readonly Item[]) =>
      !cached || (cached.from === items && items.length === cached.texts.length && items.every((item, i) => item.text === cached.texts[i]))
    return this.assembly.variables === this.#variables && same(this.#sections, this.assembly.sections) && same(this.#contexts, this.assembly.contexts)
  }

  // Sections and contexts render separately: a bad variable in one never fails the other.
  get sections(): readonly RenderedText[] {
    const items = this.assembly.sections
    return (this.#sections ??= { from: items, texts: items.map(item => item.text), rendered: items.map(this.render('section')) }).rendered
  }

  get contexts(): readonly RenderedText[] {
    const items = this.assembly.contexts
    return (this.#contexts ??= { from: items, texts: items.map(item => item.text), rendered: items.map(this.render('context')) }).rendered
  }

  private render(kind: Kind) {
    const { variables } = this.assembly
    return (item: Item) => new RenderedText(item.name, item.owner, item.literal ? item.text : interpolate(item.text, variables, kind, item.name))
  }
}

const renderings = new WeakMap<PromptAssembly, Rendering>()

/**
 * The one rendering of an assembly, computed on first use and shared by the
 * system text, the runtime-context snapshot, provenance, the manifest, the token
 * meter and the test kit, so a text is interpolated (and hashed) once.
 */
export function renderAssembly(assembly: PromptAssembly): RenderedAssembly {
  let rendering = renderings.get(assembly)
  if (!rendering?.fresh()) renderings.set(assembly, (rendering = new Rendering(assembly)))
  return rendering
}

/** The system text: sections in order, exactly-empty results dropped, joined by a blank line. */
export function renderPrompt(assembly: PromptAssembly): string {
  return renderAssembly(assembly)
    .sections.map(section => section.text)
    .filter(text => text !== '')
    .join('\n\n')
}

/** The runtime contexts whose rendered text is non-empty. */
export function renderContextSections(assembly: PromptAssembly): ContextSnapshotSection[] {
  return renderAssembly(assembly)
    .contexts.filter(context => context.text !== '')
    .map(({ name, text }) => ({ name, text }))
}

/** The body of the runtime-context snapshot message, or `''` when nothing is active. */
export function joinContextSections(sections: readonly ContextSnapshotSection[]): string {
  const body = sections.map(section => section.text).join('\n\n')
  return body === '' ? '' : `${CONTEXT_SNAPSHOT_HEADER}\n\n${body}`
}

export function renderContextSnapshot(assembly: PromptAssembly): string {
  return joinContextSections(renderContextSections(assembly))
}
