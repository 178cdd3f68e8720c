// `measure` on hand-built sessions (agent-session-spec 4.2).
import { describe, expect, it } from 'vitest'
import {
  createAssistantMessage,
  createToolResultMessage,
  estimateHeader,
  estimateMessage,
  userText,
  type StreamChunk,
  type TokenUsage,
  type ToolResultMessage,
} from '@loom/llm'
import { Session, type RequestHeader, type SessionEvent } from '@loom/session'
import { Context } from '@deepseek-ai/cordis'
import { createReplayState, foldEvent, measureState, type MeteredSession, type TokenMeasurement } from '../src/index.ts'
import * as meterPlugin from '../src/index.ts'

const HEADER: RequestHeader = {
  config: { provider: 'p', model: 'm' },
  system: 'You are a careful engineer.',
  tools: [{ name: 'read', description: 'Read a file.', parameters: { type: 'object' } }],
}

async function meter() {
  const root = new Context()
  await root.plugin(meterPlugin.default)
  return root.tokenMeter
}

function textChunks(text: string, usage?: TokenUsage): StreamChunk[] {
  return [
    { type: 'block-start', index: 0, blockType: 'text' },
    { type: 'text-delta', index: 0, text },
    { type: 'block-end', index: 0, block: { type: 'text', text } },
    ...(usage ? [{ type: 'usage', usage } as StreamChunk] : []),
    { type: 'finish', reason: { kind: 'stop' } },
  ]
}

/** One step: step/start, the user prompt, the streamed answer and its message. */
function step(session: Session, turn: number, prompt: string, answer: string, usage?: TokenUsage, cite = true) {
  session.append('step/start', { turn, step: 1 })
  session.append('user/message', userText(prompt), { surfaceOp: 'append' })
  const seqs = textChunks(answer, usage).map(chunk => session.append('assistant/chunk', { turn, step: 1, chunk }).seq)
  const message = createAssistantMessage({ content: [{ type: 'text', text: answer }], source: { provider: 'p', model: 'm' } })
  session.append(
    'assistant/message',
    { turn, step: 1, message, ...(usage && { usage }) },
    cite ? { surfaceOp: 'append', sourceEventSeqs: seqs } : { surfaceOp: 'append' },
  )
  session.append('step/end', { turn, step: 1 })
}

const sum = (m: TokenMeasurement) => m.nodes.reduce((total, node) => total + node.tokens, 0)

describe('measure', () => {
  it('an empty session measures exactly nothing', async () => {
    const tokenMeter = await meter()
    const result = tokenMeter.measure(Session.create('s'))
    expect(result).toEqual({ logRevision: 0, baseline: { kind: 'none', tokens: 0 }, surfaceDeltaTokens: 0, totalTokens: 0, surfaceTokens: 0, nodes: [] })
    expect(Object.isFrozen(result) && Object.isFrozen(result.nodes) && Object.isFrozen(result.baseline)).toBe(true)
  })

  it('without a header or usage, it estimates the history', async () => {
    const tokenMeter = await meter()
    const session = Session.create('s')
    session.append('user/message', userText('abcd'), { surfaceOp: 'append' })
    expect(tokenMeter.measure(session)).toEqual({
      logRevision: 1,
      baseline: { kind: 'estimated', tokens: 9 },
      surfaceDeltaTokens: 0,
      totalTokens: 9,
      surfaceTokens: 9,
      nodes: [{ seq: 0, tokens: 9 }],
    })
    expect(tokenMeter.estimateMessage(userText('abcd'))).toBe(9)
  })

  it('reuses provider usage while the header matches, adding the estimated growth since', async () => {
    const tokenMeter = await meter()
    const session = Session.create('s')
    session.append('request/header', { header: HEADER, reason: 'initial' })
    const usage = { inputTokens: 4000, outputTokens: 20, cacheReadTokens: 900, cacheWriteTokens: 80, reasoningTokens: 10 }
    step(session, 1, 'hello there', 'abcdefgh', usage)
    const first = tokenMeter.measure(session)
    const answer = estimateMessage({ content: [{ type: 'text', text: 'abcdefgh' }] })
    const prompt = estimateMessage(userText('hello there'))
    // The anchor is the surface at step/start (0) plus the provider's answer.
    expect(first.baseline).toEqual({ kind: 'usage', tokens: 4000 + 900 + 80 + 20, usage })
    expect(first.surfaceTokens).toBe(prompt + answer)
    expect(first.surfaceDeltaTokens).toBe(prompt)
    expect(first.totalTokens).toBe(5000 + prompt)
    expect(sum(first)).toBe(first.surfaceTokens)

    // A tool result arrives: the growth since the anchor is estimated on top of the usage.
    session.append(
      'tool/result',
      { turn: 1, step: 1, message: createToolResultMessage({ callId: 'c1', content: [{ type: 'text', text: 'x'.repeat(40) }] }) },
      { surfaceOp: 'append' },
    )
    const second = tokenMeter.measure(session)
    expect(second.logRevision).toBe(session.events.length)
    expect(second.surfaceDeltaTokens).toBe(prompt + (10 + 4 + 4 + 4))
    expect(second.totalTokens).toBe(5000 + second.surfaceDeltaTokens)

    // Another header (a new tool): the usage no longer applies; the estimate does.
    const other = { ...HEADER, tools: [...HEADER.tools!, { name: 'write', description: 'Write a file.', parameters: {} }] }
    const projected = tokenMeter.measure(session, other)
    expect(projected.baseline).toEqual({ kind: 'estimated', tokens: estimateHeader(other) + second.surfaceTokens })
    expect(projected.surfaceDeltaTokens).toBe(0)
    expect(projected.nodes).toEqual(second.nodes) // an override changes only the pressure fields
    // The same header passed explicitly (in another key order) matches the anchor.
    expect(tokenMeter.measure(session, { tools: HEADER.tools, system: HEADER.system, config: HEADER.config })).toEqual(second)
  })

  it('estimates when the reported usage is below the estimate, or there is none', async () => {
    const tokenMeter = await meter()
    const low = Session.create('low')
    low.append('request/header', { header: HEADER, reason: 'initial' })
    step(low, 1, 'hi', 'abcd', { inputTokens: 1, outputTokens: 1 })
    const answer = 9
    expect(tokenMeter.measure(low).baseline).toEqual({ kind: 'estimated', tokens: estimateHeader(HEADER) + answer })

    const none = Session.create('none')
    none.append('request/header', { header: HEADER, reason: 'initial' })
    step(none, 1, 'hi', 'abcd')
    const result = tokenMeter.measure(none)
    expect(result.baseline).toEqual({ kind: 'estimated', tokens: estimateHeader(HEADER) + answer })
    expect(result.totalTokens).toBe(estimateHeader(HEADER) + result.surfaceTokens)
  })

  it('prices the cited chunks, and a legacy message without citations by its durable content', async () => {
    const tokenMeter = await meter()
    const usage = { inputTokens: 5000, outputTokens: 3 }
    const legacy = Session.create('legacy')
    legacy.append('request/header', { header: HEADER, reason: 'initial' })
    step(legacy, 1, 'hi', 'abcdefghijkl', usage, false)
    const cited = Session.create('cited')
    cited.append('request/header', { header: HEADER, reason: 'initial' })
    step(cited, 1, 'hi', 'abcdefghijkl', usage)
    expect(tokenMeter.measure(legacy)).toMatchObject({ baseline: { kind: 'usage', tokens: 5003 }, surfaceDeltaTokens: estimateMessage(userText('hi')) })
    expect(tokenMeter.measure(cited).totalTokens).toBe(tokenMeter.measure(legacy).totalTokens)
  })

  it('folds replace events: the replaced nodes leave, the replacement enters', async () => {
    const tokenMeter = await meter()
    const session = Session.create('s')
    const original = createToolResultMessage({ callId: 'c1', content: [{ type: 'text', text: 'y'.repeat(400) }] })
    session.append('user/message', userText('read it'), { surfaceOp: 'append' })
    const result = session.append('tool/result', { turn: 1, step: 1, message: original }, { surfaceOp: 'append' })
    const before = tokenMeter.measure(session)
    expect(before.nodes.map(node => node.tokens)).toEqual([2 + 4 + 4, 100 + 4 + 4 + 4])
    const pruned: ToolResultMessage = { ...original, content: [{ ...original.content[0], content: [{ type: 'text', text: 'y'.repeat(8) }] }] }
    session.append(
      'tool/result',
      { turn: 1, step: 1, message: pruned },
      { surfaceOp: { op: 'replace', start: result.seq, end: result.seq }, sourceEventSeqs: [result.seq] },
    )
    const after = tokenMeter.measure(session)
    expect(after.nodes).toEqual([before.nodes[0], { seq: 2, tokens: 2 + 4 + 4 + 4 }])
    expect(after.surfaceTokens).toBe(sum(after))

    // A summary replacing the whole history.
    session.append('user/message', userText('<compacted-summary>s</compacted-summary>'), {
      surfaceOp: { op: 'replace', start: 0, end: 2 },
      sourceEventSeqs: [0, 2],
    })
    const summarized = tokenMeter.measure(session)
    expect(summarized.nodes).toEqual([{ seq: 3, tokens: estimateMessage(userText('<compacted-summary>s</compacted-summary>')) }])
    expect(summarized.totalTokens).toBe(summarized.surfaceTokens)
  })
})

describe('malformed logs', () => {
  const ev = (seq: number, type: string, data: unknown, extra: Partial<SessionEvent> = {}) => ({ type, seq, time: 0, data, ...extra }) as SessionEvent

  function expectNoAdvance(events: SessionEvent[], message: RegExp) {
    const state = createReplayState()
    for (const event of events.slice(0, -1)) foldEvent(state, event, events)
    const before = structuredClone(state)
    expect(() => foldEvent(state, events.at(-1)!, events)).toThrow(message)
    expect(state).toEqual(before)
    return state
  }

  it('throws on a second step/start, an unmatched step/end and an unmatched assistant/message, without advancing', () => {
    expectNoAdvance(
      [ev(0, 'step/start', { turn: 1, step: 1 }), ev(1, 'step/start', { turn: 1, step: 2 })],
      /step\/start at seq 1 while step 1 of turn 1 is still open/,
    )
    expectNoAdvance([ev(0, 'step/start', { turn: 1, step: 1 }), ev(1, 'step/end', { turn: 1, step: 2 })], /step\/end at seq 1 has no matching step\/start/)
    const message = createAssistantMessage({ content: [{ type: 'text', text: 'a' }], source: { provider: 'p', model: 'm' } })
    const state = expectNoAdvance(
      [ev(0, 'user/message', userText('abcd'), { surfaceOp: 'append' }), ev(1, 'assistant/message', { turn: 1, step: 1, message }, { surfaceOp: 'append' })],
      /token meter: assistant\/message at seq 1 has no matching step\/start event/,
    )
    expect(state).toMatchObject({ consumedEvents: 1, surfaceTokens: 9 })
  })

  it('throws on a replace whose range is not current', () => {
    expectNoAdvance(
      [
        ev(0, 'user/message', userText('a'), { surfaceOp: 'append' }),
        ev(1, 'user/message', userText('b'), { surfaceOp: { op: 'replace', start: 0, end: 7 }, sourceEventSeqs: [0] }),
      ],
      /^token surface: replace at seq 1 has invalid current range 0-7$/,
    )
  })

  it('throws on bad data, bad citations and gaps', () => {
    expectNoAdvance([ev(0, 'user/message', { nope: true }, { surfaceOp: 'append' })], /token meter: user\/message at seq 0/)
    expectNoAdvance([ev(0, 'user/message', userText('a'))], /requires a surfaceOp/)
    expectNoAdvance([ev(0, 'step/start', { turn: 1, step: 1 }), ev(2, 'step/end', { turn: 1, step: 1 })], /has seq 2/)
    const message = createAssistantMessage({ content: [{ type: 'text', text: 'a' }], source: { provider: 'p', model: 'm' } })
    expectNoAdvance(
      [
        ev(0, 'request/header', { header: HEADER, reason: 'initial' }),
        ev(1, 'step/start', { turn: 1, step: 1 }),
        ev(2, 'user/message', userText('a'), { surfaceOp: 'append' }),
        ev(3, 'assistant/message', { turn: 1, step: 1, message, usage: { inputTokens: 1, outputTokens: 1 } }, { surfaceOp: 'append', sourceEventSeqs: [2] }),
      ],
      /cites seq 2, which is not an earlier, distinct assistant\/chunk/,
    )
  })

  it('measure keeps throwing on a malformed session and never half-applies it', async () => {
    const tokenMeter = await meter()
    const session: MeteredSession = { events: [ev(0, 'user/message', userText('abcd'), { surfaceOp: 'append' }), ev(1, 'step/end', { turn: 1, step: 1 })] }
    expect(() => tokenMeter.measure(session)).toThrow(/step\/end at seq 1/)
    expect(() => tokenMeter.measure(session)).toThrow(/step\/end at seq 1/)
    const state = createReplayState()
    foldEvent(state, session.events[0], session.events)
    expect(measureState(state).totalTokens).toBe(9)
  })
})
