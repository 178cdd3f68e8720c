// A session's log as the transcript the page shows: one item per thing a person
// reads (a turn, a message, a tool call with its result, an approval and its
// decision, a header change and its causes, a retry), in log order. Streamed
// chunks are left out: the message they make is one item. Long texts are cut
// here and fetched whole on demand (`GET api/sessions/:id/events/:seq`).
import type { ContentBlock, Message } from '@loom/llm'
import { describeDrift, describeHeaderChanges, describeReason, describeRetry, describeRouteSwitch, headerChangeCauses, type SessionEvent } from '@loom/session'

/** Characters of a text sent with the transcript; the rest is fetched when the reader asks. */
export const TEXT_LIMIT = 4000

/** A text, cut to TEXT_LIMIT; `length` is the whole text's when it was cut. */
export interface Clipped {
  text: string
  length?: number
}

export type TranscriptItem =
  | { kind: 'turn'; seq: number; turn: number }
  | { kind: 'turn-end'; seq: number; turn: number; status: string; reason: string }
  | { kind: 'user'; seq: number; text: Clipped }
  /** A plugin's message in the history: the runtime-context snapshot (with the contexts it carries), or another plugin's note. */
  | { kind: 'context'; seq: number; plugin: string; form: string; names: string[]; text: Clipped }
  | { kind: 'assistant'; seq: number; turn: number; step: number; text: Clipped; reasoning: Clipped | null; interrupted: boolean; request: number | null }
  | {
      kind: 'tool'
      seq: number
      callId: string
      name: string
      summary: string
      arguments: Clipped
      result: { seq: number; text: Clipped; isError: boolean; code: string | null } | null
      /** The session a subagent ran this call in. */
      child: string | null
    }
  | {
      kind: 'approval'
      seq: number
      callId: string
      tool: string
      preview: string
      reason: string | null
      decision: string | null
      note: string | null
      by: string | null
      source: string | null
    }
  | { kind: 'header'; seq: number; reason: string; summary: string; causes: string[] }
  | { kind: 'model'; seq: number; route: string }
  | { kind: 'retry'; seq: number; text: string }
  | { kind: 'compaction'; seq: number; text: Clipped }
  | { kind: 'resumed'; seq: number }

/** The request (0-based, as `reconstructRequests` numbers them) whose answer each assistant message is: its chunks end before it. */
export interface RequestBounds {
  seq: number
  endSeq: number
}

export function transcriptItems(events: readonly SessionEvent[], requests: readonly RequestBounds[]): TranscriptItem[] {
  const items: TranscriptItem[] = []
  const tools = new Map<string, Extract<TranscriptItem, { kind: 'tool' }>>()
  const approvals = new Map<string, Extract<TranscriptItem, { kind: 'approval' }>>()
  let request = -1
  for (const event of events) {
    const { seq } = event
    // The latest request whose chunks ended before this event.
    while (request + 1 < requests.length && requests[request + 1].endSeq < seq) request++
    switch (event.type) {
      case 'turn/start':
        items.push({ kind: 'turn', seq, turn: event.data.turn })
        break
      case 'turn/end':
        items.push({ kind: 'turn-end', seq, turn: event.data.turn, status: event.data.reason.kind, reason: describeReason(event.data.reason) })
        break
      case 'user/message': {
        const message = event.data
        if (message.source.kind === 'plugin') {
          const source = message.source
          const names = source.form === 'snapshot' ? source.sections.map(section => section.name) : []
          items.push({ kind: 'context', seq, plugin: source.plugin, form: source.form ?? 'message', names, text: clip(blockText(message.content)) })
        } else items.push({ kind: 'user', seq, text: clip(blockText(message.content)) })
        break
      }
      case 'assistant/message': {
        const { message, turn, step, interrupted } = event.data
        const reasoning = textOf(message, 'reasoning')
        items.push({
          kind: 'assistant',
          seq,
          turn,
          step,
          text: clip(textOf(message, 'text')),
          reasoning: reasoning.trim() ? clip(reasoning) : null,
          interrupted: interrupted === true,
          request: request >= 0 ? request : null,
        })
        break
      }
      case 'tool/call': {
        const { callId, name, arguments: raw } = event.data
        const item = { kind: 'tool' as const, seq, callId, name, summary: describeCall(name, raw), arguments: clip(raw), result: null, child: null }
        tools.set(callId, item)
        items.push(item)
        break
      }
      case 'tool/result': {
        const { message, error, meta } = event.data
        const block = message.content[0]
        const result = { seq, text: clip(blockText(block.content)), isError: block.isError === true, code: error?.code ?? null }
        const child = childSessionOf(meta)
        const call = tools.get(block.toolCallId)
        // A pruned result replaces the first one: the call shows the latest.
        if (call) Object.assign(call, { result, child: child ?? call.child })
        else items.push({ kind: 'tool', seq, callId: block.toolCallId, name: 'tool', summary: block.toolCallId, arguments: clip(''), result, child })
        break
      }
      case 'approval/requested': {
        const data = event.data
        const item = {
          kind: 'approval' as const,
          seq,
          callId: data.callId,
          tool: data.tool,
          preview: data.preview,
          reason: data.reason ?? null,
          decision: null,
          note: null,
          by: null,
          source: null,
        }
        approvals.set(data.callId, item)
        items.push(item)
        break
      }
      case 'approval/answered': {
        const data = event.data
        const asked = approvals.get(data.callId)
        const answer = { decision: data.decision, note: data.note ?? null, by: data.by ?? null, source: data.source }
        if (asked) Object.assign(asked, answer)
        else items.push({ kind: 'approval', seq, callId: data.callId, tool: 'tool', preview: '', reason: null, ...answer })
        break
      }
      case 'request/header': {
        const { header, reason, changes, drift } = event.data
        const route = `${header.config.provider}/${header.config.model}`
        const tools = (header.tools ?? []).map(tool => tool.name)
        const summary =
          reason === 'change' && changes
            ? describeHeaderChanges(changes, drift)
            : `${route} · system ${(header.system ?? '').length} chars · ${tools.length} tools${tools.length ? `: ${tools.join(', ')}` : ''}`
        const causes = changes ? headerChangeCauses(changes, drift) : drift ? [`other plugins than before: ${describeDrift(drift)}`] : []
        items.push({ kind: 'header', seq, reason, summary, causes })
        break
      }
      case 'request/context':
        items.push({ kind: 'model', seq, route: `${event.data.provider}/${event.data.model}` })
        break
      case 'agent/route':
        items.push({ kind: 'model', seq, route: describeRouteSwitch(event.data) })
        break
      case 'request/retry':
        items.push({ kind: 'retry', seq, text: describeRetry(event.data) })
        break
      case 'compaction/summary':
        items.push({ kind: 'compaction', seq, text: clip(`${event.data.shadowedSeqs.length} events summarized:\n${blockText(event.data.summary)}`) })
        break
      case 'compaction/prune':
        items.push({ kind: 'compaction', seq, text: clip(`${event.data.shadowedSeqs.length} tool results pruned`) })
        break
      case 'session/end-seed':
        items.push({ kind: 'resumed', seq })
        break
      default:
        break
    }
  }
  return items
}

export function clip(text: string): Clipped {
  return text.length > TEXT_LIMIT ? { text: text.slice(0, TEXT_LIMIT), length: text.length } : { text }
}

/** The text of content blocks (tool results nest theirs). */
export function blockText(blocks: readonly ContentBlock[]): string {
  return blocks
    .map(block => (block.type === 'text' ? block.text : block.type === 'tool-result' ? blockText(block.content) : ''))
    .filter(Boolean)
    .join('\n')
}

function textOf(message: Message, type: 'text' | 'reasoning'): string {
  return message.content.flatMap(block => (block.type === type ? [block.text] : [])).join(type === 'text' ? '' : '\n')
}

/** `bash: ls -la`, `read: README.md`: the argument a person recognizes a call by, else the arguments as they came. */
function describeCall(name: string, raw: string): string {
  let args: unknown
  try {
    args = raw === '' ? {} : JSON.parse(raw)
  } catch {
    return `${name} ${raw.slice(0, 100)}`
  }
  if (typeof args === 'object' && args !== null && !Array.isArray(args)) {
    for (const key of ['command', 'path', 'pattern', 'query', 'url', 'description']) {
      const value = (args as Record<string, unknown>)[key]
      if (typeof value === 'string') return `${name}: ${value.replace(/\s*\n\s*/g, ' ⏎ ').slice(0, 100)}`
    }
  }
  return `${name} ${JSON.stringify(args).slice(0, 100)}`
}

/** The `childSession` a tool result's meta names (a subagent's `task`), if any. */
function childSessionOf(meta: unknown): string | null {
  if (typeof meta !== 'object' || meta === null || !('childSession' in meta)) return null
  return typeof meta.childSession === 'string' ? meta.childSession : null
}
