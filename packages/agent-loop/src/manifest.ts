import { createHash } from 'node:crypto'
import { estimateMessage, estimateText, type ContentBlock, type ContextSnapshotSection, type Message } from '@loom/llm'
import type { RequestHeader, RequestSources } from '@loom/session'
import {
  type Attributed,
  type Category,
  defaultTrust,
  renderAssembly,
  renderContextSnapshot,
  type PromptAssembly,
  type Stability,
  type Trust,
  TRUST_ORDER,
} from '@loom/system-prompt'
import { CLEARED_RUNTIME_CONTEXT, RUNTIME_CONTEXT_OWNER } from './runtime-context.ts'

export type ManifestKind = 'section' | 'context' | 'tool' | 'message'

/** What a stored log did not record: an owner, a trust, a category. */
const UNKNOWN = 'unknown'
const CATEGORIES: readonly Category[] = ['instructions', 'memory', 'skills', 'files', 'runtime', 'tools', 'tool-results']

/** One contribution to a request. */
export interface ManifestRow {
  kind: ManifestKind
  /** Section, context or tool name; for a message `<role>#<index>` (`runtime-context#0`, `tool-result#3`). */
  name: string
  /**
   * The plugin that registered a section, context or tool. For a message, its
   * source: `user`, `model:<provider>`, `tool:<callId>` or the plugin's name.
   */
  owner: string
  /** Registered order (sections, contexts); position in the request (tools, messages). */
  order: number
  /** Stability class of a section or context; `null` for tools and messages. */
  stability: Stability | null
  /**
   * Who stands behind it (see `Trust` of @loom/system-prompt); `null` for a message
   * of the user or the model; `unknown` in a request logged before it was recorded.
   */
  trust: Trust | 'unknown' | null
  /** What it is: instructions, memory, skills, files, runtime, tools, tool-results; `null` for a message of the user or the model; `unknown` as for trust. */
  category: Category | 'unknown' | null
  /** ms since its source was last written, when known (file-backed content). */
  age: number | null
  /** sha256 of the source it was read from (file-backed content), else `null`. */
  sourceHash: string | null
  /** Characters the estimate is based on: rendered text, schema JSON, message content. */
  chars: number
  /** Estimated tokens (the fixed heuristic of `@loom/llm`). */
  tokens: number
  /** sha256 (hex) of the rendered text, the schema JSON or the message JSON. */
  sha256: string
  /**
   * `false` for context rows when `messages` already holds the runtime-context
   * snapshot that carries them (they are then counted in that message's row).
   */
  counted: boolean
}

export interface ManifestTotal {
  owner: string
  rows: number
  chars: number
  tokens: number
}

export interface Manifest {
  rows: ManifestRow[]
  totals: {
    chars: number
    tokens: number
    /** Counted rows grouped by owner, most tokens first (ties by owner name). */
    byOwner: ManifestTotal[]
  }
}

export interface ManifestInput {
  assembly: PromptAssembly
  /** The history the request carries (default none). */
  messages?: readonly Message[]
  /** The time ages are measured at (default now). */
  now?: number
}

/** The trust, category, age and source hash columns of a section or context row (the defaults for one a listener added). */
function attribution(declared: Attributed | undefined, owner: string, category: Category, now: number) {
  const source = declared?.source
  return {
    trust: declared?.trust ?? defaultTrust(owner),
    category: declared?.category ?? category,
    age: source?.modifiedAt === undefined ? null : Math.max(0, now - source.modifiedAt),
    sourceHash: source?.sha256 ?? null,
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/** The characters the estimate of a block is based on. */
function blockChars(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return block.text.length
    case 'tool-call':
      return block.name.length + block.arguments.length
    case 'tool-result':
      return block.content.reduce((sum, nested) => sum + blockChars(nested), 0)
    default:
      return JSON.stringify(block).length
  }
}

function isRuntimeContext(message: Message): boolean {
  return message.source.kind === 'plugin' && message.source.plugin === RUNTIME_CONTEXT_OWNER && message.role === 'user'
}

function messageName(message: Message, index: number): string {
  if (isRuntimeContext(message)) return `runtime-context#${index}`
  if (message.source.kind === 'tool') return `tool-result#${index}`
  return `${message.role}#${index}`
}

function messageOwner(message: Message): string {
  const source = message.source
  switch (source.kind) {
    case 'user':
      return 'user'
    case 'model':
      return `model:${source.provider}`
    case 'tool':
      return `tool:${source.callId}`
    case 'plugin':
      return source.plugin
    default:
      return 'unknown'
  }
}

function textOf(message: Message): string | undefined {
  return message.content.length === 1 && message.content[0].type === 'text' ? message.content[0].text : undefined
}

/**
 * The manifest of a request: one row per system section, runtime context, tool
 * schema and history message, each with its owner, size, estimated tokens and
 * digest, plus totals by owner. Section and context texts are interpolated as the
 * model reads them (an unknown variable throws, as rendering would); one whose
 * text is empty does not reach the model and has no row, as in a stored request's.
 */
export function buildManifest({ assembly, messages = [], now = Date.now() }: ManifestInput): Manifest {
  const rows: ManifestRow[] = []

  const rendered = renderAssembly(assembly)
  assembly.sections.forEach((section, i) => {
    const { text, sha256 } = rendered.sections[i]
    if (text === '') return
    rows.push({
      kind: 'section',
      name: section.name,
      owner: section.owner,
      order: section.order,
      stability: section.stability,
      ...attribution(assembly.attribution?.sections[section.name], section.owner, 'instructions', now),
      chars: text.length,
      tokens: estimateText(text),
      sha256,
      counted: true,
    })
  })

  // Contexts reach the model inside a runtime-context snapshot message. When the
  // latest one in the history already says exactly this, the rows only attribute it.
  const snapshot = renderContextSnapshot(assembly)
  const latest = messages.findLast(isRuntimeContext)
  const carried = snapshot !== '' && latest !== undefined && textOf(latest) === snapshot
  assembly.contexts.forEach((context, i) => {
    const { text, sha256 } = rendered.contexts[i]
    if (text === '') return
    rows.push({
      kind: 'context',
      name: context.name,
      owner: context.owner,
      order: context.order,
      stability: context.stability,
      ...attribution(assembly.attribution?.contexts[context.name], context.owner, 'runtime', now),
      chars: text.length,
      tokens: estimateText(text),
      sha256,
      counted: !carried,
    })
  })

  rows.push(...toolRows(assembly.tools), ...messageRows(messages))
  return withTotals(rows)
}

/** The tools of a request, in request order. */
function toolRows(tools: readonly { name: string; description: string; parameters: Record<string, unknown>; owner: string }[]): ManifestRow[] {
  return tools.map(({ name, description, parameters, owner }, index) => {
    const json = JSON.stringify({ name, description, parameters })
    return {
      kind: 'tool',
      name,
      owner,
      order: index,
      stability: null,
      trust: owner === UNKNOWN ? UNKNOWN : defaultTrust(owner),
      category: 'tools',
      age: null,
      sourceHash: null,
      chars: json.length,
      tokens: estimateText(json),
      sha256: sha256(json),
      counted: true,
    }
  })
}

/** The history of a request, one row per message. */
function messageRows(messages: readonly Message[]): ManifestRow[] {
  return messages.map((message, index) => ({
    kind: 'message',
    name: messageName(message, index),
    owner: messageOwner(message),
    order: index,
    stability: null,
    ...messageAttribution(message),
    age: null,
    sourceHash: null,
    chars: message.content.reduce((sum, block) => sum + blockChars(block), 0),
    tokens: estimateMessage(message),
    sha256: sha256(JSON.stringify(message)),
    counted: true,
  }))
}

/** The manifest of `rows`: totals over the counted ones, by owner most tokens first. */
function withTotals(rows: ManifestRow[]): Manifest {
  const byOwner = new Map<string, ManifestTotal>()
  let chars = 0
  let tokens = 0
  for (const row of rows) {
    if (!row.counted) continue
    chars += row.chars
    tokens += row.tokens
    const total = byOwner.get(row.owner) ?? { owner: row.owner, rows: 0, chars: 0, tokens: 0 }
    total.rows++
    total.chars += row.chars
    total.tokens += row.tokens
    byOwner.set(row.owner, total)
  }
  const owners = [...byOwner.values()].sort((a, b) => b.tokens - a.tokens || (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0))
  return { rows, totals: { chars, tokens, byOwner: owners } }
}

/**
 * Tool results are tool output; a runtime-context snapshot is as trusted as the
 * least trusted context it carries (its context rows tell each one's); a plugin's
 * message is its plugin's; the user's and the model's have neither.
 */
function messageAttribution(message: Message): Pick<ManifestRow, 'trust' | 'category'> {
  if (message.source.kind === 'tool') return { trust: 'tool-output', category: 'tool-results' }
  if (isRuntimeContext(message)) return { trust: snapshotTrust(message), category: 'runtime' }
  if (message.source.kind === 'plugin') return { trust: defaultTrust(message.source.plugin), category: null }
  return { trust: null, category: null }
}

/** The contexts a runtime-context snapshot recorded (a snapshot logged before they were has none). */
function snapshotSectionsOf(message: Message): readonly ContextSnapshotSection[] {
  return message.source.kind === 'plugin' && message.source.form === 'snapshot' ? message.source.sections : []
}

function snapshotTrust(message: Message): Trust | 'unknown' {
  // The marker that facts went away is the harness's own words.
  if (textOf(message) === CLEARED_RUNTIME_CONTEXT) return 'product'
  const ranks = snapshotSectionsOf(message).map(section => TRUST_ORDER.indexOf(section.trust as Trust))
  if (!ranks.length || ranks.includes(-1)) return UNKNOWN
  return TRUST_ORDER[Math.max(...ranks)]
}

/** A recorded trust or category, `unknown` when the log has none (or one this build does not know). */
function known<T extends string>(value: string | undefined, values: readonly T[]): T | 'unknown' {
  return values.includes(value as T) ? (value as T) : UNKNOWN
}

/**
 * The runtime contexts of a logged request: those of the latest snapshot in its
 * history (the one the model reads as current), as that snapshot recorded them.
 * The snapshot's message row counts their tokens, so these rows only attribute them.
 */
function contextRows(messages: readonly Message[], at: number): ManifestRow[] {
  const latest = messages.findLast(isRuntimeContext)
  if (!latest) return []
  return snapshotSectionsOf(latest).map((section, index) => ({
    kind: 'context',
    name: section.name,
    owner: section.owner ?? UNKNOWN,
    order: section.order ?? index,
    stability: section.stability ?? null,
    trust: known(section.trust, TRUST_ORDER),
    category: known(section.category, CATEGORIES),
    age: section.modifiedAt === undefined ? null : Math.max(0, at - section.modifiedAt),
    sourceHash: section.sourceHash ?? null,
    chars: section.text.length,
    tokens: estimateText(section.text),
    sha256: sha256(section.text),
    counted: false,
  }))
}

export interface LoggedRequest {
  /** The header in force (system text, tools). */
  header: RequestHeader | undefined
  /** What the header's event recorded of its sections and tools. */
  sources: RequestSources | undefined
  /** The history the model received. */
  messages: readonly Message[]
  /** When the request was sent (ms since the epoch): ages are measured then. */
  at: number
}

/**
 * The manifest of a request a session sent, rebuilt from its log, with the rows
 * `buildManifest` gave it then: the sections its header recorded (sizes, trust,
 * category and source when the header has them; a header logged before they were
 * has sizes of 0 and trust and category `unknown`), the runtime contexts its latest
 * snapshot recorded, its tools with their owners, and its history.
 */
export function requestManifest({ header, sources, messages, at }: LoggedRequest): Manifest {
  const sections = (sources?.sections ?? []).map(
    (entry, index): ManifestRow => ({
      kind: 'section',
      name: entry.name,
      owner: entry.owner,
      order: entry.order ?? index,
      stability: entry.stability ?? null,
      trust: known(entry.trust, TRUST_ORDER),
      category: known(entry.category, CATEGORIES),
      age: entry.modifiedAt === undefined ? null : Math.max(0, at - entry.modifiedAt),
      sourceHash: entry.sourceHash ?? null,
      chars: entry.chars ?? 0,
      tokens: entry.tokens ?? 0,
      sha256: entry.sha256,
      counted: true,
    }),
  )
  const owners = new Map((sources?.tools ?? []).map(tool => [tool.name, tool.owner]))
  const tools = (header?.tools ?? []).map(tool => ({ ...tool, owner: owners.get(tool.name) ?? UNKNOWN }))
  return withTotals([...sections, ...contextRows(messages, at), ...toolRows(tools), ...messageRows(messages)])
}

/** How two manifests differ, row by row (sections, contexts and tools by kind and name; the history by its size). */
export interface ManifestDiff {
  added: ManifestRow[]
  removed: ManifestRow[]
  /**
   * A row on both sides whose order relative to the other rows of its kind on both
   * sides changed (the fewest such rows that explain the new order); `from` and `to`
   * are its positions among the rows of its kind.
   */
  moved: { row: ManifestRow; from: number; to: number }[]
  /** Same row, other content; `hashOnly` when its size stayed the same. */
  changed: { before: ManifestRow; after: ManifestRow; hashOnly: boolean }[]
  messages: { before: number; after: number }
  tokens: { before: number; after: number }
}

const KINDS: readonly ManifestKind[] = ['section', 'context', 'tool']

/**
 * The difference of two manifests. Rows are matched by kind and name, never by
 * position: a row that only shifted because another came or went has not moved.
 */
export function diffManifests(before: Manifest, after: Manifest): ManifestDiff {
  const diff: ManifestDiff = {
    added: [],
    removed: [],
    moved: [],
    changed: [],
    messages: { before: before.rows.filter(row => row.kind === 'message').length, after: after.rows.filter(row => row.kind === 'message').length },
    tokens: { before: before.totals.tokens, after: after.totals.tokens },
  }
  for (const kind of KINDS) {
    const was = before.rows.filter(row => row.kind === kind)
    const now = after.rows.filter(row => row.kind === kind)
    const wasAt = new Map(was.map((row, position) => [row.name, position]))
    const nowAt = new Map(now.map((row, position) => [row.name, position]))
    diff.added.push(...now.filter(row => !wasAt.has(row.name)))
    diff.removed.push(...was.filter(row => !nowAt.has(row.name)))
    const common = now.filter(row => wasAt.has(row.name)).map(row => row.name)
    const commonBefore = was.filter(row => nowAt.has(row.name)).map(row => row.name)
    const kept = inOrder(commonBefore, common)
    for (const name of common) {
      const [from, to] = [wasAt.get(name)!, nowAt.get(name)!]
      const [a, b] = [was[from], now[to]]
      if (!kept.has(name)) diff.moved.push({ row: b, from, to })
      if (a.sha256 !== b.sha256) diff.changed.push({ before: a, after: b, hashOnly: a.chars === b.chars })
    }
  }
  return diff
}

/** The names of a longest common subsequence of two orders of the same names: those that kept their relative order. */
export function inOrder(before: readonly string[], after: readonly string[]): Set<string> {
  // lengths[i][j]: the longest common subsequence of before[i..] and after[j..] (a few dozen rows: quadratic is fine).
  const lengths = Array.from({ length: before.length + 1 }, () => new Array<number>(after.length + 1).fill(0))
  for (let i = before.length - 1; i >= 0; i--) {
    for (let j = after.length - 1; j >= 0; j--) {
      lengths[i][j] = before[i] === after[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1])
    }
  }
  const kept = new Set<string>()
  for (let i = 0, j = 0; i < before.length && j < after.length; ) {
    if (before[i] === after[j]) {
      kept.add(before[i])
      i++
      j++
    } else if (lengths[i + 1][j] >= lengths[i][j + 1]) i++
    else j++
  }
  return kept
}
