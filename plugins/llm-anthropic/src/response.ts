// Anthropic stream events → Loom stream chunks.
import { LlmError, type ContentBlock, type SseEvent, type StreamChunk, type TokenUsage } from '@loom/llm'
import { isObject, streamError, truncate, type CredentialHint } from './errors.ts'
import type { ReplayBlock } from './request.ts'

type OpenBlock =
  | { kind: 'text'; index: number; text: string }
  | { kind: 'thinking'; index: number; text: string; signature: string }
  | { kind: 'redacted'; index: number; data: string }
  | { kind: 'tool'; index: number; id: string; name: string; json: string; initial: string }
  | { kind: 'ignored' }

/**
 * Folds one response's events into chunks. Loom block indexes count the emitted
 * blocks in order (a block type Loom has no counterpart for, such as a server
 * tool's, is skipped); `replay` keeps one entry per emitted block.
 */
export class EventMapper {
  private readonly provider: string
  private readonly redact: (text: string) => string
  private readonly hint: CredentialHint
  /** `message_stop` arrived: the answer is complete. */
  stopped = false
  private sawEvent = false
  private stopReason: string | undefined
  private messageId: string | undefined
  private readonly usage: Partial<Record<'input_tokens' | 'output_tokens' | 'cache_read_input_tokens' | 'cache_creation_input_tokens', number>> = {}
  private sawUsage = false
  private nextIndex = 0
  private readonly open = new Map<number, OpenBlock>()
  private readonly replay: ReplayBlock[] = []
  private toolCalls = 0

  constructor(provider: string, redact: (text: string) => string, hint: CredentialHint) {
    this.provider = provider
    this.redact = redact
    this.hint = hint
  }

  *handle(event: SseEvent): Generator<StreamChunk> {
    this.sawEvent = true
    let data: unknown
    try {
      data = JSON.parse(event.data)
    } catch (cause) {
      throw new LlmError(`${this.provider}: malformed JSON in the event stream: ${this.redact(truncate(event.data, 200))}`, 'PROTOCOL', { cause })
    }
    if (!isObject(data)) throw this.protocol(`unexpected event data: ${truncate(event.data, 200)}`)
    const type = typeof data.type === 'string' ? data.type : event.event
    switch (type) {
      case 'message_start': {
        const message = isObject(data.message) ? data.message : {}
        if (typeof message.id === 'string') this.messageId = message.id
        this.addUsage(message.usage)
        return
      }
      case 'content_block_start':
        yield* this.start(data)
        return
      case 'content_block_delta':
        yield* this.delta(data)
        return
      case 'content_block_stop':
        yield* this.stop(this.indexOf(data))
        return
      case 'message_delta': {
        const delta = isObject(data.delta) ? data.delta : {}
        if (typeof delta.stop_reason === 'string') this.stopReason = delta.stop_reason
        this.addUsage(data.usage)
        return
      }
      case 'message_stop':
        this.stopped = true
        return
      case 'error':
        throw streamError(this.provider, data, this.redact, this.hint)
      default:
        return // `ping`, and event types added later
    }
  }

  private *start(data: Record<string, unknown>): Generator<StreamChunk> {
    const at = this.indexOf(data)
    if (this.open.has(at)) throw this.protocol(`content block ${at} started twice`)
    const block = isObject(data.content_block) ? data.content_block : {}
    switch (block.type) {
      case 'text': {
        const open = { kind: 'text' as const, index: this.nextIndex++, text: '' }
        this.open.set(at, open)
        yield { type: 'block-start', index: open.index, blockType: 'text' }
        if (typeof block.text === 'string' && block.text) yield* this.text(open, block.text)
        return
      }
      case 'thinking': {
        const open = { kind: 'thinking' as const, index: this.nextIndex++, text: '', signature: typeof block.signature === 'string' ? block.signature : '' }
        this.open.set(at, open)
        yield { type: 'block-start', index: open.index, blockType: 'reasoning' }
        if (typeof block.thinking === 'string' && block.thinking) yield* this.text(open, block.thinking)
        return
      }
      case 'redacted_thinking': {
        const open = { kind: 'redacted' as const, index: this.nextIndex++, data: typeof block.data === 'string' ? block.data : '' }
        this.open.set(at, open)
        yield { type: 'block-start', index: open.index, blockType: 'reasoning' }
        return
      }
      case 'tool_use': {
        if (typeof block.id !== 'string' || !block.id || typeof block.name !== 'string') throw this.protocol(`tool_use block ${at} has no id or name`)
        const initial = isObject(block.input) && Object.keys(block.input).length ? JSON.stringify(block.input) : ''
        const open = { kind: 'tool' as const, index: this.nextIndex++, id: block.id, name: block.name, json: '', initial }
        this.open.set(at, open)
        this.toolCalls++
        yield { type: 'block-start', index: open.index, blockType: 'tool-call' }
        yield { type: 'tool-call-delta', index: open.index, id: open.id, name: open.name, argumentsDelta: '' }
        return
      }
      default:
        this.open.set(at, { kind: 'ignored' })
    }
  }

  private *delta(data: Record<string, unknown>): Generator<StreamChunk> {
    const at = this.indexOf(data)
    const open = this.open.get(at)
    if (!open) throw this.protocol(`a delta for content block ${at}, which is not open`)
    const delta = isObject(data.delta) ? data.delta : {}
    switch (delta.type) {
      case 'text_delta':
        if (open.kind === 'text' && typeof delta.text === 'string') yield* this.text(open, delta.text)
        return
      case 'thinking_delta':
        if (open.kind === 'thinking' && typeof delta.thinking === 'string') yield* this.text(open, delta.thinking)
        return
      case 'signature_delta':
        if (open.kind === 'thinking' && typeof delta.signature === 'string') open.signature += delta.signature
        return
      case 'input_json_delta':
        if (open.kind === 'tool' && typeof delta.partial_json === 'string' && delta.partial_json) {
          open.json += delta.partial_json
          yield { type: 'tool-call-delta', index: open.index, id: open.id, argumentsDelta: delta.partial_json }
        }
        return
      default:
        return // citations and delta types added later
    }
  }

  private *text(open: Extract<OpenBlock, { kind: 'text' | 'thinking' }>, text: string): Generator<StreamChunk> {
    if (!text) return
    open.text += text
    yield open.kind === 'text' ? { type: 'text-delta', index: open.index, text } : { type: 'reasoning-delta', index: open.index, text }
  }

  private *stop(at: number): Generator<StreamChunk> {
    const open = this.open.get(at)
    if (!open) throw this.protocol(`content block ${at} stopped but was never started`)
    this.open.delete(at)
    yield* this.close(open)
  }

  private *close(open: OpenBlock): Generator<StreamChunk> {
    let block: ContentBlock
    let replay: ReplayBlock = null
    switch (open.kind) {
      case 'ignored':
        return
      case 'text':
        block = { type: 'text', text: open.text }
        break
      case 'thinking':
        block = { type: 'reasoning', text: open.text }
        if (open.signature) replay = { type: 'thinking', signature: open.signature }
        break
      case 'redacted':
        // Unreadable reasoning: an empty reasoning block whose data goes back unchanged.
        block = { type: 'reasoning', text: '' }
        if (open.data) replay = { type: 'redacted_thinking', data: open.data }
        break
      case 'tool':
        block = { type: 'tool-call', id: open.id, name: open.name, arguments: open.json || open.initial || '{}' }
        break
    }
    this.replay[open.index] = replay
    yield { type: 'block-end', index: open.index, block }
  }

  /** After the last event: open blocks closed, usage, finish (or the failure). */
  *finish(): Generator<StreamChunk> {
    if (!this.sawEvent) throw new LlmError(`${this.provider}: the provider answered with an empty event stream`, 'EMPTY_RESPONSE')
    if (!this.stopped) throw new LlmError(`${this.provider}: the stream ended before the response finished`, 'NETWORK')
    for (const open of [...this.open.values()]) yield* this.close(open)
    this.open.clear()
    if (this.sawUsage) yield { type: 'usage', usage: mapUsage(this.usage) }
    const replayState = this.replay.some(entry => entry !== null)
      ? { response: this.messageId ? { id: this.messageId } : null, blocks: Array.from({ length: this.nextIndex }, (_, i) => this.replay[i] ?? null) }
      : undefined
    switch (this.stopReason) {
      case 'max_tokens':
      case 'model_context_window_exceeded':
        yield { type: 'finish', reason: { kind: 'max-tokens' }, ...(replayState && { replayState }) }
        return
      case 'refusal':
        throw new LlmError(`${this.provider}: the model declined to answer (stop_reason "refusal")`, 'BAD_REQUEST')
      default:
        // 'tool_use', 'end_turn', 'stop_sequence', 'pause_turn', and reasons added later.
        yield {
          type: 'finish',
          reason: { kind: this.toolCalls || this.stopReason === 'tool_use' ? 'tool-calls' : 'stop' },
          ...(replayState && { replayState }),
        }
    }
  }

  private addUsage(usage: unknown): void {
    if (!isObject(usage)) return
    for (const key of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'] as const) {
      const value = usage[key]
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
        this.usage[key] = value
        this.sawUsage = true
      }
    }
  }

  private indexOf(data: Record<string, unknown>): number {
    if (typeof data.index !== 'number' || !Number.isInteger(data.index) || data.index < 0) throw this.protocol(`${String(data.type)} without a valid index`)
    return data.index
  }

  private protocol(what: string): LlmError {
    return new LlmError(`${this.provider}: ${this.redact(what)}`, 'PROTOCOL')
  }
}

/**
 * Anthropic usage → disjoint Loom buckets. `input_tokens` already excludes
 * cache reads and writes (the total input is the sum of the three), and
 * `output_tokens` includes thinking.
 */
export function mapUsage(usage: Partial<Record<string, number>>): TokenUsage {
  return {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0,
    ...(usage.cache_read_input_tokens !== undefined && { cacheReadTokens: usage.cache_read_input_tokens }),
    ...(usage.cache_creation_input_tokens !== undefined && { cacheWriteTokens: usage.cache_creation_input_tokens }),
  }
}
