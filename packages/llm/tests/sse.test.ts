import { describe, expect, it } from 'vitest'
import { SseParser } from '../src/sse.ts'

const parseAll = (...pieces: string[]) => {
  const parser = new SseParser()
  return [...pieces.flatMap(piece => parser.push(piece)), ...parser.end()]
}

describe('SseParser', () => {
  it('dispatches data events on blank lines and drops comments', () => {
    expect(parseAll(': hello\n\ndata: one\n\ndata:two\n\n')).toEqual([
      { event: 'message', data: 'one' },
      { event: 'message', data: 'two' },
    ])
  })

  it('joins multi-line data with newlines and keeps only one leading space', () => {
    expect(parseAll('data: a\ndata:  b\ndata\n\n')).toEqual([{ event: 'message', data: 'a\n b\n' }])
  })

  it('handles CRLF and CR line endings, also split across pieces', () => {
    expect(parseAll('data: x\r', '\n\r', '\ndata: y\r\r')).toEqual([
      { event: 'message', data: 'x' },
      { event: 'message', data: 'y' },
    ])
  })

  it('handles lines split at any byte', () => {
    const text = 'event: delta\ndata: {"a":1}\nid: 7\n\ndata: [DONE]\n\n'
    for (let cut = 0; cut <= text.length; cut++) {
      expect(parseAll(text.slice(0, cut), text.slice(cut))).toEqual([
        { event: 'delta', data: '{"a":1}', id: '7' },
        { event: 'message', data: '[DONE]', id: '7' },
      ])
    }
  })

  it('ignores events without data, unknown fields and a leading BOM', () => {
    expect(parseAll('\uFEFFevent: ping\n\nretry: 10\nfoo: bar\ndata: z\n\n')).toEqual([{ event: 'message', data: 'z' }])
  })

  it('flushes a final event without a terminating blank line at end()', () => {
    expect(parseAll('data: a\n\ndata: [DONE]')).toEqual([
      { event: 'message', data: 'a' },
      { event: 'message', data: '[DONE]' },
    ])
  })
})
