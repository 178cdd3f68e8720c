import type { GenerateOptions } from '@loom/llm'

/**
 * A request as stable JSON text (2-space indent) for golden files: `signal` is
 * dropped, message ids become `<id:0>`, `<id:1>`, ... and tool-call ids
 * `<call:0>`, ... in order of first appearance, and `sessionId` becomes
 * `<session>`. Two runs of the same script give the same text.
 */
export function snapshotRequest(request: GenerateOptions | Record<string, unknown>): string {
  const messageIds = new Map<string, string>()
  const callIds = new Map<string, string>()
  const messageId = (id: unknown) => placeholder(messageIds, id, 'id')
  const callId = (id: unknown) => placeholder(callIds, id, 'call')

  const { signal: _signal, ...rest } = request as Record<string, unknown>
  const copy = JSON.parse(JSON.stringify(rest)) as Record<string, unknown>
  if (copy.sessionId !== undefined) copy.sessionId = '<session>'
  if (Array.isArray(copy.messages)) {
    // biome-ignore lint/suspicious/noExplicitAny: rewrites ids inside arbitrary request JSON
    for (const message of copy.messages as Record<string, any>[]) {
      if (typeof message !== 'object' || message === null) continue
      if ('id' in message) message.id = messageId(message.id)
      if (message.source?.callId !== undefined) message.source.callId = callId(message.source.callId)
      for (const block of Array.isArray(message.content) ? message.content : []) rewriteBlock(block, callId)
    }
  }
  return JSON.stringify(copy, null, 2)
}

// biome-ignore lint/suspicious/noExplicitAny: rewrites ids inside arbitrary request JSON
function rewriteBlock(block: Record<string, any>, callId: (id: unknown) => string) {
  if (typeof block !== 'object' || block === null) return
  if (block.type === 'tool-call' && block.id !== undefined) block.id = callId(block.id)
  if (block.type === 'tool-result') {
    if (block.toolCallId !== undefined) block.toolCallId = callId(block.toolCallId)
    for (const inner of Array.isArray(block.content) ? block.content : []) rewriteBlock(inner, callId)
  }
}

function placeholder(table: Map<string, string>, id: unknown, kind: string): string {
  const key = String(id)
  let value = table.get(key)
  if (value === undefined) {
    value = `<${kind}:${table.size}>`
    table.set(key, value)
  }
  return value
}
