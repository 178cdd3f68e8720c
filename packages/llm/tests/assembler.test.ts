import { describe, expect, it } from 'vitest'
import { BlockAssembler, type StreamChunk } from '@loom/llm'

function assemble(chunks: StreamChunk[]) {
  const assembler = new BlockAssembler()
  for (const chunk of chunks) assembler.push(chunk)
  return assembler
}

const text = (index: number, value: string): StreamChunk[] => [
  { type: 'block-start', index, blockType: 'text' },
  ...[...value].map((char): StreamChunk => ({ type: 'text-delta', index, text: char })),
  { type: 'block-end', index, block: { type: 'text', text: value } },
]

describe('BlockAssembler', () => {
  it('assembles closed blocks in first-seen index order', () => {
    const a = assemble([
      { type: 'block-start', index: 1, blockType: 'text' },
      { type: 'block-start', index: 0, blockType: 'reasoning' },
      { type: 'reasoning-delta', index: 0, text: 'think' },
      { type: 'text-delta', index: 1, text: 'answer' },
      { type: 'block-end', index: 0, block: { type: 'reasoning', text: 'think' } },
      { type: 'block-end', index: 1, block: { type: 'text', text: 'answer' } },
    ])
    expect(a.blocks()).toEqual([
      { type: 'text', text: 'answer' },
      { type: 'reasoning', text: 'think' },
    ])
  })

  it('finish defaults to stop; usage keeps the last usage chunk; finish keeps reason and replay state', () => {
    const a = new BlockAssembler()
    expect(a.finish).toEqual({ kind: 'stop' })
    expect(a.usage).toBeUndefined()
    expect(a.replayState).toBeUndefined()
    a.push({ type: 'usage', usage: { inputTokens: 1, outputTokens: 2 } })
    a.push({ type: 'usage', usage: { inputTokens: 3, outputTokens: 4, cacheReadTokens: 5 } })
    a.push({ type: 'finish', reason: { kind: 'tool-calls' }, replayState: { response: { id: 'r1' } } })
    expect(a.usage).toEqual({ inputTokens: 3, outputTokens: 4, cacheReadTokens: 5 })
    expect(a.finish).toEqual({ kind: 'tool-calls' })
    expect(a.replayState).toEqual({ response: { id: 'r1' } })
  })

  it('the block-end block is authoritative, the first close wins, later deltas are ignored', () => {
    const a = assemble([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text: 'draft' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'final' } },
      { type: 'text-delta', index: 0, text: ' more' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'second close' } },
    ])
    expect(a.blocks()).toEqual([{ type: 'text', text: 'final' }])
  })

  it('creates blocks lazily from deltas and assembles open blocks', () => {
    const a = assemble([
      { type: 'text-delta', index: 0, text: 'he' },
      { type: 'text-delta', index: 0, text: 'llo' },
      { type: 'reasoning-delta', index: 1, text: 'hm' },
      { type: 'tool-call-delta', index: 2, id: 'c1', name: 'echo', argumentsDelta: '{"te' },
      { type: 'tool-call-delta', index: 2, id: 'c1', argumentsDelta: 'xt":1}' },
    ])
    expect(a.blocks()).toEqual([
      { type: 'text', text: 'hello' },
      { type: 'reasoning', text: 'hm' },
      { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":1}' },
    ])
  })

  it('an open tool call without an id gets call-<index> and an empty name', () => {
    const a = assemble([
      { type: 'block-start', index: 3, blockType: 'tool-call' },
      { type: 'tool-call-delta', index: 3, id: '', argumentsDelta: '{}' },
    ])
    expect(a.blocks()).toEqual([{ type: 'tool-call', id: 'call-3', name: '', arguments: '{}' }])
    const started = assemble([{ type: 'block-start', index: 0, blockType: 'tool-call' }])
    expect(started.blocks()).toEqual([{ type: 'tool-call', id: 'call-0', name: '', arguments: '' }])
  })

  it('a later tool-call delta may set the name', () => {
    const a = assemble([
      { type: 'tool-call-delta', index: 0, id: 'c1', argumentsDelta: '{' },
      { type: 'tool-call-delta', index: 0, id: 'c1', name: 'late', argumentsDelta: '}' },
    ])
    expect(a.blocks()).toEqual([{ type: 'tool-call', id: 'c1', name: 'late', arguments: '{}' }])
  })

  it('ignores a delta whose kind does not match the block', () => {
    const a = assemble([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'reasoning-delta', index: 0, text: 'x' },
      { type: 'text-delta', index: 0, text: 'y' },
    ])
    expect(a.blocks()).toEqual([{ type: 'text', text: 'y' }])
  })

  it('an open block of an unknown type cannot be assembled; a closed one can', () => {
    const open = assemble([{ type: 'block-start', index: 0, blockType: 'tool-result' }])
    expect(() => open.blocks()).toThrow('cannot assemble incomplete block of type "tool-result"')
    const closed = assemble([
      { type: 'block-start', index: 0, blockType: 'tool-result' },
      { type: 'block-end', index: 0, block: { type: 'tool-result', toolCallId: 'c1', content: [] } },
    ])
    expect(closed.blocks()).toEqual([{ type: 'tool-result', toolCallId: 'c1', content: [] }])
  })

  it('a max-tokens finish drops every tool call, open or closed', () => {
    const a = assemble([
      ...text(0, 'partial'),
      { type: 'block-start', index: 1, blockType: 'tool-call' },
      { type: 'tool-call-delta', index: 1, id: 'c1', name: 'echo', argumentsDelta: '{}' },
      { type: 'block-end', index: 1, block: { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{}' } },
      { type: 'tool-call-delta', index: 2, id: 'c2', name: 'half', argumentsDelta: '{"a' },
      { type: 'finish', reason: { kind: 'max-tokens' } },
    ])
    expect(a.blocks()).toEqual([{ type: 'text', text: 'partial' }])
    expect(a.finish).toEqual({ kind: 'max-tokens' })
  })

  it('prunes the replay envelope blocks at the dropped positions', () => {
    const a = assemble([
      ...text(0, 'text'),
      { type: 'tool-call-delta', index: 1, id: 'c1', name: 'echo', argumentsDelta: '{"te' },
      { type: 'finish', reason: { kind: 'max-tokens' }, replayState: { response: { responseId: 'resp-1' }, blocks: ['text-meta', 'tool-meta'] } },
    ])
    expect(a.blocks()).toEqual([{ type: 'text', text: 'text' }])
    expect(a.replayState).toEqual({ response: { responseId: 'resp-1' }, blocks: ['text-meta'] })
  })

  it('keeps the replay envelope whole when nothing is dropped', () => {
    const a = assemble([
      ...text(0, 'a'),
      { type: 'block-end', index: 1, block: { type: 'tool-call', id: 'c1', name: 'x', arguments: '{}' } },
      { type: 'finish', reason: { kind: 'tool-calls' }, replayState: { response: 1, blocks: ['m0', 'm1'] } },
    ])
    expect(a.blocks()).toHaveLength(2)
    expect(a.replayState).toEqual({ response: 1, blocks: ['m0', 'm1'] })
  })

  it('drops the replay state when its blocks do not match the emitted blocks', () => {
    const a = assemble([...text(0, 'a'), { type: 'finish', reason: { kind: 'stop' }, replayState: { response: 1, blocks: ['m0', 'm1'] } }])
    expect(a.replayState).toBeUndefined()
    expect(a.blocks()).toEqual([{ type: 'text', text: 'a' }])
  })

  it('interruptedBlocks keeps text and reasoning with non-whitespace text only', () => {
    const a = assemble([
      ...text(0, 'closed text'),
      { type: 'reasoning-delta', index: 1, text: 'open reasoning' },
      { type: 'text-delta', index: 2, text: '  \n ' },
      { type: 'tool-call-delta', index: 3, id: 'c1', name: 'echo', argumentsDelta: '{' },
      { type: 'block-start', index: 4, blockType: 'tool-result' },
      { type: 'text-delta', index: 5, text: 'open text' },
    ])
    expect(a.interruptedBlocks()).toEqual([
      { type: 'text', text: 'closed text' },
      { type: 'reasoning', text: 'open reasoning' },
      { type: 'text', text: 'open text' },
    ])
  })

  it('returns detached blocks', () => {
    const block = { type: 'text' as const, text: 'x' }
    const a = assemble([{ type: 'block-end', index: 0, block }])
    const out = a.blocks()
    expect(out[0]).not.toBe(block)
    ;(out[0] as { text: string }).text = 'changed'
    expect(a.blocks()).toEqual([{ type: 'text', text: 'x' }])
  })

  it('an empty stream assembles to no blocks', () => {
    const a = assemble([{ type: 'finish', reason: { kind: 'stop' } }])
    expect(a.blocks()).toEqual([])
    expect(a.interruptedBlocks()).toEqual([])
  })
})
