import { describe, expect, it } from 'vitest'
import { TOOL_NAME } from '@loom/tools'
import { callResultText, toolNames } from '../src/index.ts'

describe('toolNames', () => {
  it('is mcp__<server>__<tool>, other characters becoming _', () => {
    expect([...toolNames('git.hub', ['get issue', 'list-prs']).values()]).toEqual(['mcp__git_hub__get_issue', 'mcp__git_hub__list-prs'])
  })

  it('keeps names unique and within 64 characters with a hash of the original', () => {
    const names = toolNames('docs', ['a.b', 'a_b', 'x'.repeat(80)])
    expect(names.get('a.b')).not.toBe(names.get('a_b'))
    expect(names.get('a.b')).toMatch(/^mcp__docs__a_b_[0-9a-f]{8}$/)
    expect(names.get('x'.repeat(80))).toHaveLength(64)
    for (const name of names.values()) expect(name).toMatch(TOOL_NAME)
    // The same on every connection.
    expect(toolNames('docs', ['x'.repeat(80)]).get('x'.repeat(80))).toBe(names.get('x'.repeat(80)))
  })
})

describe('results', () => {
  it('adds structured content only when no text block carries it', () => {
    expect(callResultText({ content: [{ type: 'text', text: '{"sum":5}' }], structuredContent: { sum: 5 } })).toBe('{"sum":5}')
    expect(callResultText({ content: [], structuredContent: { sum: 5 } })).toBe('{\n  "sum": 5\n}')
    expect(callResultText({ content: [] })).toBe('(no content)')
  })
})
