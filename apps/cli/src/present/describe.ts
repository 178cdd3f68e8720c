// Readable summaries of what happened in a session: one-line tool calls and
// results for the live stream, and the whole transcript for `loom sessions show`.
import type { AssistantMessage, ContentBlock, LlmCallConfig, ToolResultMessage, ToolSchema, UserMessage } from '@loom/llm'
import type {
  AgentCancelCause,
  PluginDrift,
  RequestHeader,
  RequestHeaderChanges,
  SessionEvent,
  SessionEventMap,
  SessionHeader,
  TurnEndReason,
} from '@loom/session'
import { clip } from './term.ts'

/** The text of content blocks (tool results nest theirs). */
export function blockText(blocks: readonly ContentBlock[]): string {
  return blocks
    .map(block => {
      if (block.type === 'text') return block.text
      if (block.type === 'tool-result') return blockText(block.content)
      return ''
    })
    .filter(Boolean)
    .join('\n')
}

/** The visible text of an assistant message. */
export function assistantText(message: AssistantMessage): string {
  return message.content
    .filter(block => block.type === 'text')
    .map(block => (block as { text: string }).text)
    .join('')
}

/** Tool arguments as the model sent them (raw JSON text), parsed when they parse. */
export function parseArguments(raw: string): unknown {
  if (raw === '') return {}
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** `bash: ls -la`, `read: README.md`, or the arguments as compact JSON. */
export function describeCall(name: string, raw: string): string {
  const args = parseArguments(raw)
  if (typeof args === 'object' && args !== null && !Array.isArray(args)) {
    const record = args as Record<string, unknown>
    for (const key of ['command', 'path', 'pattern', 'query', 'url', 'file_path', 'description']) {
      if (typeof record[key] === 'string') {
        const rest = Object.keys(record).filter(other => other !== key)
        const extra = rest.length ? ' ' + clip(JSON.stringify(Object.fromEntries(rest.map(k => [k, record[k]]))), 60) : ''
        return `${name}: ${clip(oneLine(record[key] as string), 100)}${extra}`
      }
    }
  }
  const text = typeof args === 'string' ? args : JSON.stringify(args)
  return `${name} ${clip(text, 100)}`
}

/** The tool result's text and whether it is an error. */
export function resultOf(message: ToolResultMessage): { text: string; isError: boolean } {
  const block = message.content[0]
  return { text: blockText(block.content), isError: block.isError === true }
}

/** `12 lines`, the single short line itself, or the first line of an error. */
export function describeResult(message: ToolResultMessage): { ok: boolean; summary: string } {
  const { text, isError } = resultOf(message)
  const lines = text.replace(/\n+$/, '').split('\n')
  if (isError) return { ok: false, summary: clip(lines[0] || 'error', 160) }
  if (text.trim() === '') return { ok: true, summary: '(no output)' }
  if (lines.length === 1) return { ok: true, summary: clip(lines[0], 120) }
  return { ok: true, summary: `${lines.length} lines` }
}

export function describeReason(reason: TurnEndReason): string {
  switch (reason.kind) {
    case 'error':
      return `error: ${reason.error.code}: ${reason.error.message}`
    case 'aborted':
      return `aborted (${describeCause(reason.reason)})`
    case 'limit':
      return `stopped at the ${describeLimit(reason)}`
    default:
      return reason.kind
  }
}

function describeCause(cause: AgentCancelCause): string {
  if (cause.kind === 'hook') return `hook: ${cause.reason}`
  if (cause.kind === 'uncaught') return `${cause.plugin === undefined ? 'an internal error' : `an uncaught error of plugin "${cause.plugin}"`}: ${cause.error}`
  return cause.kind
}

/** `limit of 50 steps per turn (50 used)`, `limit of $0.50 per turn ($0.52 used)`. */
function describeLimit(reason: Extract<TurnEndReason, { kind: 'limit' }>): string {
  switch (reason.limit) {
    case 'max-steps':
      return `limit of ${reason.max} model requests per turn (--max-steps)`
    case 'max-input-tokens':
      return `limit of ${reason.max} input tokens per turn (${reason.used} used; --max-input-tokens)`
    case 'max-cost-usd':
      return `limit of $${reason.max} per turn ($${reason.used.toFixed(4)} used; --max-cost)`
  }
}

/** `retrying in 2 s: deepseek: HTTP 429: … (retry 1 of 5)` */
export function describeRetry(retry: SessionEventMap['request/retry']): string {
  const wait = retry.delayMs >= 1000 ? `${(retry.delayMs / 1000).toFixed(retry.delayMs % 1000 ? 1 : 0)} s` : `${retry.delayMs} ms`
  return `retrying in ${wait}: ${retry.failure.message} (retry ${retry.retry}${retry.maxRetries !== undefined ? ` of ${retry.maxRetries}` : ''})`
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ⏎ ')
}

function isContextSnapshot(message: UserMessage): boolean {
  return message.source.kind === 'plugin'
}

function route(config: LlmCallConfig): string {
  return `${config.provider}/${config.model}`
}

function toolNames(tools: readonly ToolSchema[] | undefined): string {
  return (tools ?? []).map(tool => tool.name).join(', ') || 'none'
}

/** A header as the transcript introduces it: route, system text size, tools. */
export function headerSummary(header: RequestHeader): string {
  return `${route(header.config)} · system ${(header.system ?? '').length} chars · ${(header.tools ?? []).length} tools: ${toolNames(header.tools)}`
}

/** `added @loom/web-fetch 0.1.0; removed @loom/mcp 0.1.0; upgraded @loom/tool-fs 0.1.0 → 0.2.0; edited greeter (source 3f2a1b9c04d2 → 9c8d7e11aa00)` */
export function describeDrift({ added, removed, upgraded, changed = [] }: PluginDrift): string {
  const at = (version: string | undefined) => version ?? '(version unknown)'
  return [
    ...added.map(plugin => `added ${plugin.name} ${at(plugin.version)}`),
    ...removed.map(plugin => `removed ${plugin.name} ${at(plugin.version)}`),
    ...upgraded.map(plugin => `upgraded ${plugin.name} ${at(plugin.from)} → ${at(plugin.to)}`),
    ...changed.map(
      plugin => `edited ${plugin.name}${plugin.version ? ` ${plugin.version}` : ''} (source ${plugin.from.slice(0, 12)} → ${plugin.to.slice(0, 12)})`,
    ),
  ].join('; ')
}

/**
 * The attribution of a `change` header in words: `request header changed (section
 * "greeter:one" of plugin "greeter" changed; first difference at byte 1234)`; a
 * resumed one's names the plugins that drifted first.
 */
export function describeHeaderChanges(changes: RequestHeaderChanges, drift?: PluginDrift): string {
  const parts = [
    ...(drift ? [`other plugins than before: ${describeDrift(drift)}`] : []),
    ...changes.sections.map(
      entry =>
        `section "${entry.name}" of plugin "${entry.owner}" ${entry.byBudget ? (entry.change === 'removed' ? 'left out by the prompt budgets' : 'back within the prompt budgets') : entry.change}`,
    ),
    ...(changes.resized ?? []).map(
      entry =>
        `section "${entry.name}" of plugin "${entry.owner}" ${entry.toChars > entry.fromChars ? 'grew' : 'shrank'} from ${entry.fromChars} to ${entry.toChars} characters`,
    ),
    ...changes.tools.map(entry => `tool "${entry.name}" of plugin "${entry.owner}" ${entry.change}`),
    ...(changes.config.length ? [`config ${changes.config.map(key => `"${key}"`).join(', ')} changed`] : []),
    ...(changes.firstDifference !== undefined ? [`first difference at byte ${changes.firstDifference}`] : []),
  ]
  return `request header changed (${parts.join('; ') || 'no attribution'})`
}

export interface TranscriptOptions {
  /** Lines of each tool result to show (default 8). */
  resultLines?: number
}

/** The session log as a readable transcript. */
export function transcript(header: SessionHeader, events: readonly SessionEvent[], options: TranscriptOptions = {}): string {
  const maxLines = options.resultLines ?? 8
  const out: string[] = []
  const turns = events.filter(event => event.type === 'turn/start').length
  out.push(`session ${header.id}`)
  out.push(`  created  ${formatTime(header.createdAt)}`)
  if (header.cwd !== undefined) out.push(`  cwd      ${header.cwd}`)
  if (header.parentSession !== undefined) {
    const delegated = header.origin === 'subagent' ? ` (subagent, depth ${header.delegationDepth ?? 1})` : ''
    out.push(`  parent   ${header.parentSession}${delegated}`)
  }
  out.push(`  turns    ${turns}`)
  out.push(`  events   ${events.length}`)
  const calls = new Map<string, string>()
  const indent = (text: string, prefix = '    │ ') => {
    const lines = text.replace(/\n+$/, '').split('\n')
    const shown = lines.slice(0, maxLines).map(line => (prefix + clip(line, 160)).trimEnd())
    if (lines.length > maxLines) shown.push(`${prefix}… ${lines.length - maxLines} more lines`)
    return shown.join('\n')
  }
  for (const event of events) {
    switch (event.type) {
      case 'turn/start': {
        const { turn } = event.data
        out.push('', `── turn ${turn} ${'─'.repeat(50)}`)
        break
      }
      case 'turn/end': {
        const { turn, reason } = event.data
        out.push(`turn ${turn} ended: ${describeReason(reason)}`)
        break
      }
      case 'request/header': {
        const { header, reason, changes, drift } = event.data
        // A change is printed from what the loop recorded when it logged the header: one diff, in the log.
        out.push(
          reason === 'change'
            ? `[request header, change] ${changes ? describeHeaderChanges(changes) : 'request header changed'}`
            : `[request header, ${reason}] ${headerSummary(header)}${drift ? ` · other plugins than before: ${describeDrift(drift)}` : ''}${changes ? ` · ${describeHeaderChanges(changes)}` : ''}`,
        )
        break
      }
      case 'request/context': {
        const { provider, model, contextWindow } = event.data
        out.push(`[model] ${provider}/${model}${contextWindow ? ` · context window ${contextWindow}` : ''}`)
        break
      }
      case 'user/message': {
        const message = event.data
        const text = blockText(message.content)
        if (isContextSnapshot(message)) out.push('[runtime context]', indent(text))
        else out.push(`user: ${text}`)
        break
      }
      case 'request/retry':
        out.push(`[retry] ${describeRetry(event.data)}`)
        break
      case 'assistant/message': {
        const { message, interrupted } = event.data
        const reasoning = message.content.flatMap(block => (block.type === 'reasoning' ? [block.text] : [])).join('\n')
        if (reasoning.trim()) out.push('reasoning:', indent(reasoning, '    ┊ '))
        const text = assistantText(message)
        if (text.trim()) out.push(`assistant${interrupted ? ' (interrupted)' : ''}: ${text.replace(/\n/g, '\n  ')}`)
        else if (interrupted) out.push('assistant (interrupted)')
        break
      }
      case 'tool/call': {
        const { callId, name, arguments: raw } = event.data
        calls.set(callId, name)
        out.push(`→ ${describeCall(name, raw)}`)
        break
      }
      case 'tool/result': {
        const { message, error } = event.data
        const { text, isError } = resultOf(message)
        const name = calls.get(message.content[0].toolCallId) ?? 'tool'
        out.push(`  ${isError ? '✗' : '✓'} ${name}${isError && error ? ` (${error.code})` : ''}`)
        // A tool that ran a child session (a subagent's `task`) names it in its result's meta.
        const child = childSessionOf(event.data.meta)
        if (child !== undefined) out.push(`    ↳ subagent session ${child}`)
        if (text.trim()) out.push(indent(text))
        break
      }
      case 'session/end-seed':
        out.push('', '── resumed ──')
        break
      case 'compaction/summary': {
        const data = event.data
        out.push(`[compaction] ${data.shadowedSeqs.length} events summarized`, indent(blockText(data.summary)))
        break
      }
      case 'compaction/prune': {
        const data = event.data
        out.push(`[compaction] ${data.shadowedSeqs.length} tool results pruned`)
        break
      }
      default:
        break
    }
  }
  return out.join('\n') + '\n'
}

/** The `childSession` a tool result's meta names, if any. */
function childSessionOf(meta: unknown): string | undefined {
  if (typeof meta !== 'object' || meta === null || !('childSession' in meta)) return undefined
  return typeof meta.childSession === 'string' ? meta.childSession : undefined
}

export function formatTime(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC')
}
