// Requests rebuilt from a log, their serialization, prefix reuse and cost (beyond.md 4).
import { userText, type StreamChunk } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import type { RequestHeader } from '../src/events.ts'
import { foldRequestHeader } from '../src/header.ts'
import { DEFAULT_CACHE_PRICES, listPrices, usageCost } from '../src/prices.ts'
import { commonPrefixLength, prefixReuse, reconstructRequests, requestEconomics, serializeRequest } from '../src/requests.ts'
import { Session } from '../src/session.ts'
import { assistantData, MODEL, toolCall, toolResultData } from './helpers.ts'

const HEADER: RequestHeader = {
  config: { ...MODEL },
  system: 'You are a test agent.',
  tools: [{ name: 'read_file', description: 'Reads a file.', parameters: { type: 'object', properties: {} } }],
}

const text = (t: string): StreamChunk[] => [
  { type: 'block-start', index: 0, blockType: 'text' },
  { type: 'text-delta', index: 0, text: t },
  { type: 'block-end', index: 0, block: { type: 'text', text: t } },
  { type: 'finish', reason: { kind: 'stop' } },
]

/** One step that asks for `read_file` and gets its result. */
function toolStep(session: Session, turn: number, step: number, callId: string) {
  session.append('step/start', { turn, step })
  for (const chunk of [
    { type: 'block-end', index: 0, block: toolCall(callId) },
    { type: 'finish', reason: { kind: 'tool-calls' } },
  ] as StreamChunk[])
    session.append('assistant/chunk', { turn, step, chunk })
  session.append('assistant/message', assistantData(turn, step, [toolCall(callId)]), { surfaceOp: 'append' })
  const call = session.append('tool/call', { turn, step, callId, name: 'read_file', arguments: '{"path":"a.txt"}' }).seq
  const result = session.append('tool/result', toolResultData(turn, step, callId, `contents ${callId} `.repeat(20)), {
    surfaceOp: 'append',
    sourceEventSeqs: [call],
  }).seq
  session.append('step/end', { turn, step })
  return result
}

function answerStep(session: Session, turn: number, step: number, answer: string) {
  session.append('step/start', { turn, step })
  for (const chunk of text(answer)) session.append('assistant/chunk', { turn, step, chunk })
  session.append('assistant/message', assistantData(turn, step, [{ type: 'text', text: answer }]), { surfaceOp: 'append' })
  session.append('step/end', { turn, step })
}

describe('reconstructRequests', () => {
  it('gives each request the history and header of the log prefix before its first chunk', () => {
    const session = Session.create('s')
    session.append('request/header', { header: HEADER, reason: 'initial' })
    session.append('turn/start', { turn: 1 })
    session.append('user/message', userText('read a.txt'), { surfaceOp: 'append' })
    toolStep(session, 1, 1, 'c1')
    answerStep(session, 1, 2, 'It says hello.')
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })

    const requests = reconstructRequests(session.events)
    expect(requests.map(r => [r.turn, r.step, r.messages.length])).toEqual([
      [1, 1, 1],
      [1, 2, 3],
    ])
    for (const request of requests) {
      const prefix = session.events.slice(0, request.seq)
      expect(request.messages).toEqual(Session.create('p', prefix).deriveMessages())
      expect(request.header).toEqual(foldRequestHeader(prefix))
      expect(session.events[request.seq].type).toBe('assistant/chunk')
      expect(session.events[request.endSeq].type).toBe('assistant/chunk')
    }
    expect(requests[1].outputChars).toBe('It says hello.'.length)
  })

  it("splits two attempts whose chunks touch at the failed attempt's finish", () => {
    const session = Session.create('s')
    session.append('request/header', { header: HEADER, reason: 'initial' })
    session.append('turn/start', { turn: 1 })
    session.append('step/start', { turn: 1, step: 1 })
    session.append('user/message', userText('hi'), { surfaceOp: 'append' })
    session.append('assistant/chunk', {
      turn: 1,
      step: 1,
      chunk: { type: 'finish', reason: { kind: 'error', failure: { code: 'RATE_LIMITED', message: 'slow down' } } },
    })
    for (const chunk of text('hello')) session.append('assistant/chunk', { turn: 1, step: 1, chunk })
    const requests = reconstructRequests(session.events)
    expect(requests.map(r => [r.seq, r.endSeq])).toEqual([
      [4, 4],
      [5, 8],
    ])
    expect(serializeRequest(requests[0])).toBe(serializeRequest(requests[1]))
  })

  it('a log without chunks has no requests', () => {
    const session = Session.create('s')
    session.append('user/message', userText('hi'), { surfaceOp: 'append' })
    expect(reconstructRequests(session.events)).toEqual([])
  })
})

describe('serializeRequest and prefixReuse', () => {
  it('serializes tools, then system, then one line per message', () => {
    const message = userText('hi')
    expect(serializeRequest({ messages: [message], header: HEADER })).toBe(
      `${JSON.stringify(HEADER.tools)}\n${JSON.stringify(HEADER.system)}\n${JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'hi' }] })}\n`,
    )
    expect(serializeRequest({ messages: [], system: 'x' })).toBe('[]\n"x"\n')
    expect(commonPrefixLength('abcd', 'abxy')).toBe(2)
  })

  it('is 1 for an appended history, lower after a header change, lower after a compaction-style replace', () => {
    const session = Session.create('s')
    session.append('request/header', { header: HEADER, reason: 'initial' })
    session.append('turn/start', { turn: 1 })
    session.append('user/message', userText('read it all'), { surfaceOp: 'append' })
    const first = toolStep(session, 1, 1, 'c1')
    toolStep(session, 1, 2, 'c2')
    // A header change: a new system section.
    session.append('request/header', { header: { ...HEADER, system: `${HEADER.system}\n\nA new rule.` }, reason: 'change' })
    toolStep(session, 1, 3, 'c3')
    toolStep(session, 1, 4, 'c4')
    // The pruner's case: the first tool result rewritten in place.
    const original = structuredClone(session.events[first].data) as any
    original.message.content[0].content = [{ type: 'text', text: '[pruned]' }]
    session.append('tool/result', original, { surfaceOp: { op: 'replace', start: first, end: first }, sourceEventSeqs: [first] })
    toolStep(session, 1, 5, 'c5')
    // A summary replacing the history so far.
    const nodes = session.surface.nodes
    session.append('user/message', userText('Summary: five files were read.'), {
      surfaceOp: { op: 'replace', start: nodes[0], end: nodes.at(-1)! },
      sourceEventSeqs: [...nodes],
    })
    answerStep(session, 1, 6, 'Done.')

    const requests = reconstructRequests(session.events)
    expect(requests).toHaveLength(6)
    const reuse = requests.slice(1).map((r, i) => prefixReuse(requests[i], r))
    expect(reuse[0]).toBe(1)
    expect(reuse[1]).toBeLessThan(1) // header change
    expect(reuse[1]).toBeGreaterThan(0) // the tools still come first, unchanged
    expect(reuse[2]).toBe(1)
    expect(reuse[3]).toBeLessThan(1) // pruned result
    expect(reuse[3]).toBeGreaterThan(reuse[1]) // the cut is later than the system text
    expect(reuse[4]).toBeLessThan(reuse[3]) // the summary replaces the whole history
    expect(prefixReuse(serializeRequest(requests[0]), serializeRequest(requests[1]))).toBe(1)

    // The header change is a cache break at the system text: the tools line is all that is reused.
    const [a, b] = [serializeRequest(requests[1]), serializeRequest(requests[2])]
    expect(commonPrefixLength(a, b)).toBe(JSON.stringify(HEADER.tools).length + 1 + JSON.stringify(HEADER.system).length - 1)
  })
})

describe('requestEconomics', () => {
  it('prices the reused prefix at the hit price and the rest at the miss price', () => {
    const header = { system: 'S'.repeat(400) }
    const m1 = userText('a'.repeat(100))
    const m2 = userText('b'.repeat(100))
    const requests = [
      { header, messages: [m1] },
      { header, messages: [m1, m2] },
      { header: { system: 'T'.repeat(400) }, messages: [m1, m2] },
    ]
    const prices = { hit: 1, miss: 10, output: 100 }
    const { requests: rows, totals } = requestEconomics(requests, prices)
    const texts = requests.map(serializeRequest)
    expect(rows[0]).toMatchObject({ reuse: null, reusedChars: 0, hitTokens: 0, missTokens: Math.ceil(texts[0].length / 4) })
    expect(rows[1]).toMatchObject({ reuse: 1, reusedChars: texts[0].length, hitTokens: Math.floor(texts[0].length / 4) })
    expect(rows[1].hitTokens + rows[1].missTokens).toBe(Math.ceil(texts[1].length / 4))
    expect(rows[1].inputCost).toBeCloseTo((rows[1].hitTokens * 1 + rows[1].missTokens * 10) / 1e6, 12)
    expect(rows[2].reusedChars).toBe(4) // `[]\n"`, then the system text differs
    expect(totals.requests).toBe(3)
    expect(totals.meanReuse).toBeCloseTo((1 + 4 / texts[1].length) / 2, 12)
    expect(totals.minReuse).toBe(4 / texts[1].length)
    expect(totals.uncachedInputCost).toBeCloseTo(((totals.hitTokens + totals.missTokens) * 10) / 1e6, 12)
    expect(totals.inputCost).toBeLessThan(totals.uncachedInputCost)
  })

  it('defaults to DeepSeek list prices (deepseek-flash, peak hours)', () => {
    expect(DEFAULT_CACHE_PRICES).toEqual({ hit: 0.006, miss: 0.3, output: 1.2 })
    expect(requestEconomics([]).totals).toMatchObject({ requests: 0, meanReuse: null, minReuse: null, inputCost: 0 })
  })

  it('prices reported cache writes at the write price; at an unknown price (null) the figures stay and every cost is null', () => {
    const header = { system: 'S'.repeat(40) }
    const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 1000, cacheWriteTokens: 400 }
    const requests = [{ header, messages: [userText('a')], usage }]
    const prices = { hit: 1, miss: 10, output: 100, write: 20 }
    const { reported } = requestEconomics(requests, prices).requests[0]
    expect(reported).toMatchObject({ inputTokens: 1500, hitTokens: 1000, writeTokens: 400, hitShare: 1000 / 1500 })
    expect(reported!.inputCost).toBeCloseTo((1000 * 1 + 100 * 10 + 400 * 20) / 1e6, 12)
    expect(reported!.outputCost).toBeCloseTo((10 * 100) / 1e6, 12)
    // Without a write price, a write costs a miss.
    expect(requestEconomics(requests, { hit: 1, miss: 10, output: 100 }).totals.reported!.inputCost).toBeCloseTo((1000 + 500 * 10) / 1e6, 12)

    const unpriced = requestEconomics(requests, null)
    expect(unpriced.prices).toBeNull()
    expect(unpriced.requests[0]).toMatchObject({ inputCost: null, outputCost: null, reported: { inputTokens: 1500, inputCost: null, outputCost: null } })
    expect(unpriced.totals).toMatchObject({
      requests: 1,
      inputCost: null,
      outputCost: null,
      uncachedInputCost: null,
      reported: { writeTokens: 400, inputCost: null },
    })
    expect(unpriced.totals.missTokens).toBe(requestEconomics(requests, prices).totals.missTokens)
  })
})

describe('list prices', () => {
  it('by provider and model: DeepSeek as listed, Anthropic with its cache-write rate, dated snapshots as their model', () => {
    expect(listPrices('deepseek', 'deepseek-flash')).toEqual(DEFAULT_CACHE_PRICES)
    expect(listPrices('anthropic', 'claude-sonnet-5-5')).toEqual({ miss: 2, write: 2.5, hit: 0.1, output: 10 })
    expect(listPrices('anthropic', 'claude-haiku-4-5-20251001')).toEqual({ miss: 1, write: 1.25, hit: 0.1, output: 5 })
    expect(listPrices('anthropic', 'claude-opus-5-5')).toEqual({ miss: 4, write: 5, hit: 0.2, output: 20 })
  })

  it('knows no price for an unknown model, a model on another provider, or a name of Object.prototype', () => {
    expect(listPrices('anthropic', 'claude-next-9')).toBeUndefined()
    expect(listPrices('scripted', 'deepseek-flash')).toBeUndefined()
    expect(listPrices('openai', 'claude-sonnet-5-5')).toBeUndefined()
    expect(listPrices('anthropic', 'constructor')).toBeUndefined()
    expect(listPrices('toString', 'x')).toBeUndefined()
  })

  it('usageCost: reads at hit, writes at write, other input at miss, output at output', () => {
    const cost = usageCost({ inputTokens: 950, outputTokens: 40, cacheReadTokens: 800, cacheWriteTokens: 900 }, listPrices('anthropic', 'claude-sonnet-5-5')!)
    expect(cost.input).toBeCloseTo((950 * 2 + 900 * 2.5 + 800 * 0.1) / 1e6, 12)
    expect(cost.output).toBeCloseTo((40 * 10) / 1e6, 12)
  })
})
