// Readable summaries of what happened in a session: one-line tool calls and
// results for the live stream, and the whole transcript for `loom sessions show`.
import type { AssistantMessage, ContentBlock, LlmCallConfig, ToolResultMessage, ToolSchema, UserMessage } from '@loom/llm'
import type { RequestHeader, SessionEvent, SessionHeader } from '@loom/session'
import { describeDrift, describeHeaderChanges, describeReason, describeRetry, describeRouteSwitch } from '@loom/session'
import { clip } from './term.ts'

/** How a turn ended, a retry, plugin drift and a header change, in words: shared with the inspector, in @loom/session. */
export { describeDrift, describeHeaderChanges, describeReason, describeRetry }

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
      case 'agent/route':
        out.push(`[route] ${describeRouteSwitch(event.data)}`)
        break
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
      case 'approval/requested': {
        const { tool, preview, reason, unattended, deadlineMs, agent } = event.data
        const who = agent === undefined ? '' : ` (subagent ${agent})`
        out.push(`[approval asked] ${tool}${who}: ${clip(preview, 160)}${reason ? ` · ${reason}` : ''} · unanswered in ${deadlineMs / 1000} s: ${unattended}`)
        break
      }
      case 'approval/answered': {
        const { decision, source, by, note } = event.data
        const answer = decision === 'allow-session' ? 'allow for the session' : decision
        out.push(`[approval answered] ${answer}, ${source === 'deadline' ? 'at the deadline' : `by ${by ?? 'a client'}`}${note ? `: ${note}` : ''}`)
        break
      }
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
