import { dirname, isAbsolute, relative, resolve, sep } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Message } from '@loom/llm'
import { defineTool } from '@loom/tools'
import type { AgentRef } from '@loom/scope'
import type { SessionStore } from '@loom/session'
import { type Asserted, type AssembleContext, frontMatterAsserts, type SelfOmission } from '@loom/system-prompt'
import type {} from '@loom/agent-loop'
import { FileCache } from './files.ts'
import { matchEntries, parseIndex } from './select.ts'

export const name = '@loom/memory'
export const inject = ['systemPrompt', 'sessions', 'tools']

export const INDEX_CONTEXT = 'memory:index'
export const INDEX_ORDER = 30
export const RECORDS_CONTEXT = 'memory:records'
export const RECORDS_ORDER = 31
/** An index larger than this is not read at all. */
export const MAX_INDEX_FILE_BYTES = 1048576

export interface Config {
  root?: string
  file: string
  maxIndexBytes: number
  maxRecordBytes: number
  maxAgeDays?: number
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description("Workspace root the index path resolves against. Default: the agent's working directory."),
  file: Schema.string()
    .default('.loom/memory/MEMORY.md')
    .description('The memory index: relative to the workspace root, or absolute. Record links resolve against its directory.'),
  maxIndexBytes: Schema.natural().min(1).default(16384).description('Budget of the index text; over it, whole lines at the end are left out with a notice.'),
  maxRecordBytes: Schema.natural()
    .min(1)
    .default(8192)
    .description('Budget of the relevant record bodies of one step; records that do not fit are left out whole, with a notice.'),
  maxAgeDays: Schema.natural().min(1).description('Records last written longer ago than this are left out, with a notice (absent: records never age out).'),
}) as Schema<Config>

/** The tool the model calls when the user asks it to work without memory in this session. */
export const IGNORE_TOOL = 'memory_ignore'
const DAY_MS = 86_400_000

const MAX_LISTED = 12
const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

function list(items: readonly string[]): string {
  const shown = items.slice(0, MAX_LISTED)
  return shown.join(', ') + (items.length > shown.length ? ` and ${items.length - shown.length} more` : '')
}

/** The text blocks of a user-sourced message, or `undefined` for any other message. */
function userTextOf(message: Message | undefined): string | undefined {
  if (!message || message.role !== 'user' || message.source.kind !== 'user') return undefined
  const text = message.content.flatMap(block => (block.type === 'text' ? [block.text] : [])).join('\n')
  return text === '' ? undefined : text
}

/** The latest user-written text in an agent's history. */
function lastUserTextInLog(sessions: SessionStore, agent: AgentRef): string | undefined {
  const messages = sessions.get(agent.sessionId)?.deriveMessages() ?? []
  for (let index = messages.length - 1; index >= 0; index--) {
    const text = userTextOf(messages[index])
    if (text !== undefined) return text
  }
  return undefined
}

/** The records of one step: their text, what was left out, and the rules their front matter asserts. */
interface Selection {
  text: string
  omitted: SelfOmission[]
  asserts: Record<string, Asserted>
}

/** Keeps whole lines of `text` within `maxBytes`; the second value is what was left out. */
function keepLines(text: string, maxBytes: number): { kept: string; leftLines: number; leftBytes: number } {
  if (bytes(text) <= maxBytes) return { kept: text, leftLines: 0, leftBytes: 0 }
  const lines = text.split('\n')
  let used = 0
  let count = 0
  for (const line of lines) {
    const size = bytes(line) + (count ? 1 : 0)
    if (used + size > maxBytes) break
    used += size
    count++
  }
  const left = lines.slice(count)
  return { kept: lines.slice(0, count).join('\n').replace(/\s+$/, ''), leftLines: left.length, leftBytes: bytes(left.join('\n')) }
}

/**
 * The memory index (`memory:index`, session-stable) and the bodies of the records
 * whose index line shares a word with the latest user message (`memory:records`,
 * step-stable), both as runtime contexts.
 */
export function apply(ctx: Context, config: Config) {
  const file = config.file ?? '.loom/memory/MEMORY.md'
  const maxIndexBytes = config.maxIndexBytes ?? 16384
  const maxRecordBytes = config.maxRecordBytes ?? 8192
  const cache = new FileCache()
  // The newest user message an agent claimed from its inbox: at the first step of a
  // turn it is claimed but not yet in the log when the prompt is assembled.
  const claimed = new WeakMap<AgentRef, string>()

  const locate = (context: AssembleContext) => {
    const cwd = context.agent?.cwd ?? process.cwd()
    const root = resolve(cwd, config.root ?? '.')
    const path = resolve(root, file)
    const rel = relative(root, path)
    const label = rel && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel) ? rel.split(sep).join('/') : path
    return { path, label, dir: dirname(path) }
  }

  const indexText = (context: AssembleContext): string => {
    if (ignored(context.agent)) return ''
    const { path, label } = locate(context)
    const read = cache.read(path, MAX_INDEX_FILE_BYTES)
    if (read.kind === 'missing') return ''
    if (read.kind === 'unusable') return `Memory index (${label}): not included; the file ${read.reason}.`
    const body = read.text.replace(/\s+$/, '')
    if (body.trim() === '') return ''
    const { kept, leftLines, leftBytes } = keepLines(body, maxIndexBytes)
    const recordsDir = dirname(label) === '.' ? 'the workspace root' : dirname(label)
    const intro = `Memory index (${label}): notes kept from earlier sessions, one line per record; record paths are relative to ${recordsDir}. Read a record when its summary bears on the task. Memories can be out of date: the current files and the user's words come first.`
    const notice = leftLines
      ? `\n\n[Index trimmed to stay within ${maxIndexBytes} bytes: left out the last ${leftLines} lines (${leftBytes} bytes). The full index is ${path}.]`
      : ''
    return `${intro}\n\n${kept}${notice}`
  }

  // A session whose log holds a successful memory_ignore call sees no memory from then on (a resume too).
  // Each session's log is read once, then only what it appended since.
  const ignoring = new Map<string, { scanned: number; calls: Set<string>; ignored: boolean }>()
  const ignored = (agent: AgentRef | undefined): boolean => {
    const session = agent && ctx.sessions.get(agent.sessionId)
    if (!agent || !session) return false
    let state = ignoring.get(agent.sessionId)
    if (!state) ignoring.set(agent.sessionId, (state = { scanned: 0, calls: new Set(), ignored: false }))
    if (state.ignored) return true
    // A result always follows its call: the calls of the new events first, then their results.
    for (const call of session.eventsOfType('tool/call', state.scanned)) if (call.data.name === IGNORE_TOOL) state.calls.add(call.data.callId)
    if (state.calls.size) {
      for (const result of session.eventsOfType('tool/result', state.scanned)) {
        const block = result.data.message.content[0]
        if (state.calls.has(block.toolCallId) && block.isError !== true) state.ignored = true
      }
    }
    state.scanned = session.seq
    return state.ignored
  }

  const logger = ctx.logger('memory')
  const warned = new Set<string>()
  const warnOnce = (message: string) => {
    if (warned.has(message)) return
    warned.add(message)
    logger.warn(message)
  }

  // The records of one assembly: its text, what was left out (named in the budget notice), and the rules they assert.
  const selections = new WeakMap<AssembleContext, Selection>()
  const records = (context: AssembleContext) => {
    let selection = selections.get(context)
    if (!selection) selections.set(context, (selection = selectRecords(context)))
    return selection
  }

  const selectRecords = (context: AssembleContext): Selection => {
    const none = { text: '', omitted: [], asserts: {} }
    const agent = context.agent
    if (ignored(agent)) return none
    const message = agent && (claimed.get(agent) ?? lastUserTextInLog(ctx.sessions, agent))
    if (message === undefined) return none
    const { path, dir } = locate(context)
    const read = cache.read(path, MAX_INDEX_FILE_BYTES)
    if (read.kind !== 'text') return none
    const blocks: string[] = []
    const omitted: SelfOmission[] = []
    const overBudget = `over the memory record budget of ${maxRecordBytes} bytes`
    const unusable: string[] = []
    // Rule → value, from the newest record that asserts it.
    const asserts: Record<string, { value: string; from: string; days: number }> = {}
    const now = Date.now()
    const seen = new Set<string>()
    let used = 0
    // A pasted log can be huge: its first 64 KiB say what it is about.
    for (const { entry, words } of matchEntries(parseIndex(read.text), message.slice(0, 65536))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(entry.target)) continue // a URL, not a record file
      let target: string
      try {
        target = resolve(dir, decodeURI(entry.target))
      } catch {
        target = resolve(dir, entry.target)
      }
      if (seen.has(target)) continue
      seen.add(target)
      const rel = relative(dir, target)
      if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
        unusable.push(`${entry.target} (outside the memory directory)`)
        continue
      }
      const record = cache.read(target, maxRecordBytes)
      if (record.kind === 'missing') {
        unusable.push(`${entry.target} (missing)`)
        continue
      }
      if (record.kind === 'unusable') {
        // Too big for the budget is "left out"; anything else cannot be read.
        if (record.size !== undefined) omitted.push({ name: entry.target, chars: record.size, reason: overBudget })
        else unusable.push(`${entry.target} (${record.reason})`)
        continue
      }
      const days = Math.floor((now - record.modifiedAt) / DAY_MS)
      if (config.maxAgeDays !== undefined && days > config.maxAgeDays) {
        omitted.push({ name: entry.target, chars: record.bytes, reason: `older than ${config.maxAgeDays} days (${days} days)` })
        continue
      }
      const body = record.text.replace(/\s+$/, '')
      const size = bytes(body)
      if (used + size > maxRecordBytes) {
        omitted.push({ name: entry.target, chars: body.length, reason: overBudget })
        continue
      }
      used += size
      const declared = frontMatterAsserts(body)
      for (const problem of declared.problems)
        warnOnce(`memory record ${entry.target}: ${problem} (its asserts are read from front matter, see the @loom/memory README)`)
      for (const [rule, value] of Object.entries(declared.asserts)) {
        if ((asserts[rule]?.days ?? Infinity) <= days) continue
        asserts[rule] = { value, from: `memory record ${entry.target} (${days === 0 ? 'written today' : days === 1 ? '1 day old' : `${days} days old`})`, days }
      }
      blocks.push(
        `<memory-record file="${entry.target}" title="${entry.title.replaceAll('"', "'")}" matched="${words.join(' ')}" age="${days}d">\n${body}\n</memory-record>`,
      )
    }
    if (!blocks.length && !unusable.length) return { text: '', omitted, asserts: {} }
    const parts = ['Memory records relevant to the latest user message (their index line shares a word with it):']
    parts.push(...blocks)
    if (unusable.length) parts.push(`[Not included, could not be used: ${list(unusable)}.]`)
    return { text: parts.join('\n\n'), omitted, asserts: Object.fromEntries(Object.entries(asserts).map(([rule, { value, from }]) => [rule, { value, from }])) }
  }

  // File text, never a template: a `{{` in the index or a record reaches the model as written.
  // What the user asked to remember: their words, confirmed when saved.
  const memory = { trust: 'user-confirmed', category: 'memory' } as const
  ctx.systemPrompt.context({ name: INDEX_CONTEXT, order: INDEX_ORDER, stability: 'session', literal: true, ...memory, text: indexText })
  ctx.systemPrompt.context({
    name: RECORDS_CONTEXT,
    order: RECORDS_ORDER,
    stability: 'step',
    literal: true,
    ...memory,
    text: context => records(context).text,
    omissions: context => records(context).omitted,
    asserts: context => records(context).asserts,
  })
  ctx.tools.register(
    defineTool({
      name: IGNORE_TOOL,
      description:
        'Stops giving you the memory of earlier sessions (its index and records) for the rest of this session. Call it only when the user asks you to ignore or not use memory.',
      parameters: { type: 'object', properties: {}, additionalProperties: false },
      // It changes only what this session is shown.
      effects: ['read'],
      execute: () => 'Memory is ignored for the rest of this session: its index and records are no longer in the runtime context.',
    }),
  )
  ctx.on('agent/inbox/claimed', ({ agent, message }) => {
    const text = userTextOf(message)
    if (text !== undefined) claimed.set(agent, text)
  })
}

export { parseIndex, matchEntries, wordsOf, type IndexEntry } from './select.ts'
