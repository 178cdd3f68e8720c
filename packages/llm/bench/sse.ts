// SSE parsing of one long `data:` line, fed in network-sized pieces: the time per
// megabyte stays flat as the line grows (the parser never rescans what it kept).
import { SseParser } from '../src/sse.ts'

export interface SseFigure {
  bench: 'llm/sse-long-line'
  megabytes: number
  ms: number
  ms_per_mb: number
}

const PIECE = 64 * 1024

function parseOneLine(megabytes: number): number {
  const piece = 'x'.repeat(PIECE)
  const pieces = Math.round((megabytes * 1024 * 1024) / PIECE)
  const parser = new SseParser()
  const started = performance.now()
  parser.push('data: ')
  for (let i = 0; i < pieces; i++) parser.push(piece)
  const events = parser.push('\n\n')
  const ms = performance.now() - started
  if (events.length !== 1 || events[0].data.length !== pieces * PIECE) throw new Error('sse bench: the line did not parse whole')
  return ms
}

export function benchSse(sizes = [10, 25, 50]): SseFigure[] {
  parseOneLine(1) // warm up
  return sizes.map(megabytes => {
    const ms = parseOneLine(megabytes)
    return { bench: 'llm/sse-long-line', megabytes, ms: Math.round(ms * 10) / 10, ms_per_mb: Math.round((ms / megabytes) * 100) / 100 }
  })
}
