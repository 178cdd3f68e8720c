// Chunk sequences: the two canonical helpers other packages' tests use, and the
// realistic streaming of a scripted reply.

import { estimateHeader, estimateMessage, estimateText, type ContentBlock, type GenerateOptions, type StreamChunk, type TokenUsage } from '../index.ts'

/**
 * `block-start`, one `text-delta` per character, `block-end`, usage
 * `{inputTokens: 10, outputTokens: text.length}`, `finish stop`.
 */
export function textResponse(text: string): StreamChunk[] {
  return [
    { type: 'block-start', index: 0, blockType: 'text' },
    ...[...text].map((char): StreamChunk => ({ type: 'text-delta', index: 0, text: char })),
    { type: 'block-end', index: 0, block: { type: 'text', text } },
    { type: 'usage', usage: { inputTokens: 10, outputTokens: text.length } },
    { type: 'finish', reason: { kind: 'stop' } },
  ]
}

/**
 * An optional text block (one delta), then a tool-call block whose arguments
 * arrive in two deltas split at 5 characters (the first carries the name), usage
 * `{10, 5}` and `finish tool-calls`.
 */
export function toolCallResponse(id: string, name: string, args: unknown, text?: string): StreamChunk[] {
  const chunks: StreamChunk[] = []
  let index = 0
  if (text !== undefined) {
    chunks.push(
      { type: 'block-start', index, blockType: 'text' },
      { type: 'text-delta', index, text },
      { type: 'block-end', index, block: { type: 'text', text } },
    )
    index++
  }
  const json = JSON.stringify(args)
  chunks.push(
    { type: 'block-start', index, blockType: 'tool-call' },
    { type: 'tool-call-delta', index, id, name, argumentsDelta: json.slice(0, 5) },
    { type: 'tool-call-delta', index, id, argumentsDelta: json.slice(5) },
    { type: 'block-end', index, block: { type: 'tool-call', id, name, arguments: json } },
    { type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } },
    { type: 'finish', reason: { kind: 'tool-calls' } },
  )
  return chunks
}

/** An estimate of the request's input tokens: system, tools and every message (the token meter's heuristic). */
export function estimateInputTokens(request: Pick<GenerateOptions, 'messages' | 'system' | 'tools'>): number {
  let total = estimateHeader(request)
  for (const message of request.messages ?? []) total += estimateMessage(message)
  return total
}

/** Word-sized pieces, whitespace kept: "several deltas" the way providers send them. */
function textPieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? []
}

function slices(text: string, size: number): string[] {
  const pieces: string[] = []
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size))
  return pieces.length ? pieces : ['']
}

/**
 * Streams finished blocks as a provider would: per block a `block-start`,
 * several deltas and a `block-end`; then usage and `finish` (`tool-calls` when a
 * tool call was emitted, else `stop`).
 */
export function blockChunks(
  blocks: readonly ContentBlock[],
  request: Pick<GenerateOptions, 'messages' | 'system' | 'tools'>,
  usage?: TokenUsage,
): StreamChunk[] {
  const chunks: StreamChunk[] = []
  let output = 0
  let reasoning = 0
  blocks.forEach((block, index) => {
    chunks.push({ type: 'block-start', index, blockType: block.type })
    switch (block.type) {
      case 'text':
        for (const text of textPieces(block.text)) chunks.push({ type: 'text-delta', index, text })
        output += estimateText(block.text)
        break
      case 'reasoning':
        for (const text of textPieces(block.text)) chunks.push({ type: 'reasoning-delta', index, text })
        output += estimateText(block.text)
        reasoning += estimateText(block.text)
        break
      case 'tool-call':
        slices(block.arguments, 12).forEach((argumentsDelta, i) => {
          chunks.push(
            i === 0
              ? { type: 'tool-call-delta', index, id: block.id, name: block.name, argumentsDelta }
              : { type: 'tool-call-delta', index, id: block.id, argumentsDelta },
          )
        })
        output += estimateText(block.name) + estimateText(block.arguments)
        break
    }
    chunks.push({ type: 'block-end', index, block: structuredClone(block) })
  })
  chunks.push({
    type: 'usage',
    usage: usage ?? { inputTokens: estimateInputTokens(request), outputTokens: output, ...(reasoning > 0 && { reasoningTokens: reasoning }) },
  })
  chunks.push({ type: 'finish', reason: { kind: blocks.some(block => block.type === 'tool-call') ? 'tool-calls' : 'stop' } })
  return chunks
}
