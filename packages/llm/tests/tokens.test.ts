import { describe, expect, it } from 'vitest'
import {
  CHARS_PER_TOKEN,
  estimateBlock,
  estimateHeader,
  estimateMessage,
  estimateSystemTokens,
  estimateText,
  estimateToolsTokens,
  type ContentBlock,
} from '@loom/llm'

const text = (value: string): ContentBlock => ({ type: 'text', text: value })

describe('token estimate (fixed heuristic)', () => {
  it('a single text "abcd" costs 9', () => {
    expect(CHARS_PER_TOKEN).toBe(4)
    expect(estimateMessage({ content: [text('abcd')] })).toBe(9)
  })

  it('rounds every division up and counts UTF-16 code units', () => {
    expect(estimateText('')).toBe(0)
    expect(estimateText('a')).toBe(1)
    expect(estimateText('abcde')).toBe(2)
    expect(estimateText('😀😀')).toBe(1) // 4 code units
    expect(estimateBlock(text(''))).toBe(4)
    expect(estimateBlock({ type: 'reasoning', text: 'abcdefghi' })).toBe(3 + 4)
  })

  it('prices tool calls by name and arguments, tool results by their nested content', () => {
    expect(estimateBlock({ type: 'tool-call', id: 'c1', name: 'read', arguments: '{"path":"a"}' })).toBe(1 + 3 + 4)
    const result: ContentBlock = { type: 'tool-result', toolCallId: 'c1', content: [text('abcd'), text('abcdefgh')] }
    expect(estimateBlock(result)).toBe(1 + 4 + (2 + 4) + 4)
    expect(estimateMessage({ content: [result] })).toBe(15 + 4)
  })

  it('prices an unknown block by its JSON', () => {
    const block = { type: 'image', data: 'xyz' } as unknown as ContentBlock
    expect(estimateBlock(block)).toBe(4 + Math.ceil(JSON.stringify(block).length / 4))
  })

  it('an empty message costs its role overhead', () => {
    expect(estimateMessage({ content: [] })).toBe(4)
  })

  it('prices the header: system and tools, 0 when absent or empty', () => {
    const tools = [{ name: 'read', description: 'Read a file.', parameters: { type: 'object' } }]
    expect(estimateSystemTokens(undefined)).toBe(0)
    expect(estimateSystemTokens({ system: '' })).toBe(0)
    expect(estimateSystemTokens({ system: 'abcdefgh' })).toBe(2 + 4)
    expect(estimateToolsTokens({ tools: [] })).toBe(0)
    expect(estimateToolsTokens({})).toBe(0)
    expect(estimateToolsTokens({ tools })).toBe(Math.ceil(JSON.stringify(tools).length / 4) + 4)
    expect(estimateHeader({ system: 'abcdefgh', tools })).toBe(6 + Math.ceil(JSON.stringify(tools).length / 4) + 4)
    expect(estimateHeader(undefined)).toBe(0)
  })
})
