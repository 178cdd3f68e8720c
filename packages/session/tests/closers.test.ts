// interruptedTurnClosers: closing a turn a crash left open (spec §3.6 closers; contract 132).
import { describe, expect, it } from 'vitest'
import { interruptedTurnClosers, openTail, TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN_TEXT } from '../src/closers.ts'
import { EVENT_BLOCK } from '../src/event-log.ts'
import type { SessionEvent } from '../src/events.ts'
import { Session } from '../src/session.ts'
import { appendOpenTurn, appendToolTurn, assistantData, toolCall, toolResultData } from './helpers.ts'

/** Copies of the events with distinct times (1000 + 10·seq), so reused times are recognisable. */
const retimed = (session: Session): SessionEvent[] => session.events.map(e => ({ ...e, time: 1000 + 10 * e.seq }))

/** A closed turn 1, then an open turn 2 whose assistant message calls `callIds`; `recorded` get a tool/call. */
function crashed(callIds: string[], recorded: string[] = []) {
  const session = Session.create('s')
  appendToolTurn(session, 1)
  appendOpenTurn(session, 2)
  session.append('assistant/message', assistantData(2, 1, [{ type: 'text', text: 'calling' }, ...callIds.map(id => toolCall(id))]), { surfaceOp: 'append' })
  const callSeqs: Record<string, number> = {}
  for (const callId of recorded) {
    callSeqs[callId] = session.append('tool/call', { turn: 2, step: 1, callId, name: 'read_file', arguments: '{}' }).seq
  }
  return { session, callSeqs }
}

describe('interruptedTurnClosers', () => {
  it('returns [] for an empty log', () => {
    expect(interruptedTurnClosers([])).toEqual([])
  })

  it('returns [] when no turn is open', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    appendToolTurn(session, 2)
    expect(interruptedTurnClosers(session.events)).toEqual([])
  })

  it('closes an open step and the open turn as interrupted, continuing seqs with the last time', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    appendOpenTurn(session, 2)
    const events = retimed(session)
    const last = events.at(-1)!
    expect(interruptedTurnClosers(events)).toEqual([
      { type: 'step/end', seq: last.seq + 1, time: last.time, data: { turn: 2, step: 1 } },
      { type: 'turn/end', seq: last.seq + 2, time: last.time, data: { turn: 2, reason: { kind: 'interrupted' } } },
    ])
  })

  it('closes only the turn when its step was already closed', () => {
    const session = Session.create('s')
    appendOpenTurn(session, 1)
    session.append('step/end', { turn: 1, step: 1 })
    const events = retimed(session)
    expect(interruptedTurnClosers(events)).toEqual([{ type: 'turn/end', seq: 4, time: events[3].time, data: { turn: 1, reason: { kind: 'interrupted' } } }])
  })

  it('answers a call that never reached tool/call with a TOOL_NOT_STARTED result (132)', () => {
    const { session } = crashed(['call-x'])
    const events = retimed(session)
    const last = events.at(-1)!
    const closers = interruptedTurnClosers(events)
    expect([...events, ...closers].slice(-4).map(e => e.type)).toEqual(['assistant/message', 'tool/result', 'step/end', 'turn/end'])
    const [result] = closers
    expect(result).toEqual({
      type: 'tool/result',
      seq: last.seq + 1,
      time: last.time,
      data: {
        turn: 2,
        step: 1,
        message: {
          id: `interrupted-tool-result-call-x-${last.seq + 1}`,
          role: 'user',
          source: { kind: 'tool', callId: 'call-x' },
          content: [{ type: 'tool-result', toolCallId: 'call-x', isError: true, content: [{ type: 'text', text: TOOL_NOT_STARTED_TEXT }] }],
        },
        error: { name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' },
      },
      surfaceOp: 'append',
    })
    expect(result).not.toHaveProperty('sourceEventSeqs')
    expect(TOOL_NOT_STARTED_TEXT).toMatch(/interrupted before .* recorded it as started\. Retry it if it is still needed\./)
    expect(closers.slice(1).map(e => e.seq)).toEqual([last.seq + 2, last.seq + 3])
  })

  it('answers a recorded call with a TOOL_OUTCOME_UNKNOWN result that cites its tool/call (132)', () => {
    const { session, callSeqs } = crashed(['call-x'], ['call-x'])
    const [result] = interruptedTurnClosers(session.events)
    expect(result.type).toBe('tool/result')
    expect(result.sourceEventSeqs).toEqual([callSeqs['call-x']])
    expect(result.data).toMatchObject({
      turn: 2,
      step: 1,
      message: { source: { kind: 'tool', callId: 'call-x' }, content: [{ type: 'tool-result', toolCallId: 'call-x', isError: true }] },
      error: { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' },
    })
    const text = JSON.stringify(result.data)
    expect(text).toContain('retry only if the operation is read-only or idempotent')
    expect(text).toContain(JSON.stringify(TOOL_OUTCOME_UNKNOWN_TEXT).slice(1, -1))
  })

  it('closes several pending calls in block order with consecutive seqs', () => {
    const { session, callSeqs } = crashed(['call-a', 'call-b', 'call-c'], ['call-b'])
    const n = session.seq
    const closers = interruptedTurnClosers(session.events)
    expect(closers.map(e => [e.type, e.seq])).toEqual([
      ['tool/result', n],
      ['tool/result', n + 1],
      ['tool/result', n + 2],
      ['step/end', n + 3],
      ['turn/end', n + 4],
    ])
    const results = closers.slice(0, 3) as SessionEvent<'tool/result'>[]
    expect(results.map(e => e.data.message.source.callId)).toEqual(['call-a', 'call-b', 'call-c'])
    expect(results.map(e => e.data.error?.code)).toEqual(['TOOL_NOT_STARTED', 'TOOL_OUTCOME_UNKNOWN', 'TOOL_NOT_STARTED'])
    expect(results.map(e => e.sourceEventSeqs)).toEqual([undefined, [callSeqs['call-b']], undefined])
    expect(results.map(e => e.data.message.id)).toEqual([
      `interrupted-tool-result-call-a-${n}`,
      `interrupted-tool-result-call-b-${n + 1}`,
      `interrupted-tool-result-call-c-${n + 2}`,
    ])
  })

  it('does not close calls already resolved by a tool/result', () => {
    const { session, callSeqs } = crashed(['call-a', 'call-b'], ['call-a'])
    session.append('tool/result', toolResultData(2, 1, 'call-a'), { surfaceOp: 'append', sourceEventSeqs: [callSeqs['call-a']] })
    const closers = interruptedTurnClosers(session.events)
    expect(closers.map(e => e.type)).toEqual(['tool/result', 'step/end', 'turn/end'])
    expect((closers[0] as SessionEvent<'tool/result'>).data.message.source.callId).toBe('call-b')
  })

  it('does not close calls of a step that already ended', () => {
    const { session } = crashed(['call-a'])
    session.append('step/end', { turn: 2, step: 1 })
    expect(interruptedTurnClosers(session.events).map(e => e.type)).toEqual(['turn/end'])
  })

  it('produces closers that a seeded Session accepts', () => {
    const { session } = crashed(['call-a', 'call-b'], ['call-b'])
    const events = session.events
    const closers = interruptedTurnClosers(events)
    const repaired = Session.create('repaired', [...events, ...closers])
    expect(repaired.events.slice(events.length, -1)).toEqual(closers)
    expect(repaired.events.at(-1)!.type).toBe('session/end-seed')
    expect(repaired.firstLiveSeq).toBe(events.length + closers.length)
    const history = repaired.deriveMessages()
    expect(history.slice(-3).map(m => m.source.kind)).toEqual(['model', 'tool', 'tool'])
    expect(interruptedTurnClosers(repaired.events)).toEqual([])
  })
})

describe('a stream the crash cut short', () => {
  const chunk = (session: Session, data: object) => session.append('assistant/chunk', { turn: 2, step: 1, chunk: data as any }).seq

  it('is kept as an interrupted assistant message of its text and reasoning, citing its chunks', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    appendOpenTurn(session, 2)
    session.append('request/context', { provider: 'deepseek', model: 'deepseek-flash' })
    const seqs = [
      chunk(session, { type: 'block-start', index: 0, blockType: 'reasoning' }),
      chunk(session, { type: 'reasoning-delta', index: 0, text: 'Thinking.' }),
      chunk(session, { type: 'block-start', index: 1, blockType: 'text' }),
      chunk(session, { type: 'text-delta', index: 1, text: 'The answer is ' }),
    ]
    const closers = interruptedTurnClosers(session.events)
    expect(closers.map(event => event.type)).toEqual(['assistant/message', 'step/end', 'turn/end'])
    expect(closers[0]).toMatchObject({
      data: {
        turn: 2,
        step: 1,
        interrupted: true,
        message: {
          role: 'assistant',
          source: { kind: 'model', provider: 'deepseek', model: 'deepseek-flash' },
          content: [
            { type: 'reasoning', text: 'Thinking.' },
            { type: 'text', text: 'The answer is ' },
          ],
        },
      },
      surfaceOp: 'append',
      sourceEventSeqs: seqs,
    })
    // The closed log projects the partial answer into the history.
    for (const event of closers) {
      if (event.surfaceOp) session.append(event.type, event.data as never, { surfaceOp: event.surfaceOp, sourceEventSeqs: [...(event.sourceEventSeqs ?? [])] })
      else session.append(event.type, event.data as never)
    }
    expect(session.deriveMessages().at(-1)).toMatchObject({ role: 'assistant', content: [{ type: 'reasoning' }, { type: 'text', text: 'The answer is ' }] })
  })

  it("names the open turn's model, never one an earlier turn used", () => {
    const session = Session.create('s')
    session.append('request/context', { provider: 'deepseek', model: 'deepseek-pro' })
    appendToolTurn(session, 1)
    appendOpenTurn(session, 2)
    chunk(session, { type: 'text-delta', index: 0, text: 'cut' })
    expect(interruptedTurnClosers(session.events)[0]).toMatchObject({ data: { message: { source: { provider: 'unknown', model: 'unknown' } } } })
    session.append('request/context', { provider: 'openai', model: 'gpt' })
    chunk(session, { type: 'text-delta', index: 0, text: 'cut' })
    expect(interruptedTurnClosers(session.events)[0]).toMatchObject({ data: { message: { source: { provider: 'openai', model: 'gpt' } } } })
  })

  it('a failed attempt before it is dropped; a stream without text leaves no message', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    appendOpenTurn(session, 2)
    chunk(session, { type: 'text-delta', index: 0, text: 'doomed' })
    chunk(session, { type: 'finish', reason: { kind: 'error', failure: { code: 'NETWORK', message: 'reset' } } })
    chunk(session, { type: 'block-start', index: 0, blockType: 'tool-call' })
    expect(interruptedTurnClosers(session.events).map(event => event.type)).toEqual(['step/end', 'turn/end'])
  })
})

describe('openTail', () => {
  /** `session`'s events in blocks of EVENT_BLOCK, as a store reads them. */
  const blocksOf = (session: Session) => {
    const events = session.events
    return Array.from({ length: Math.ceil(events.length / EVENT_BLOCK) }, (_, i) => events.slice(i * EVENT_BLOCK, (i + 1) * EVENT_BLOCK))
  }
  const chunks = (session: Session, turn: number, count: number) => {
    for (let i = 0; i < count; i++) session.append('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text: `${i} ` } })
  }

  it('holds what the closers of the whole log need, whichever block the last turn/end is in', () => {
    // The open turn starts in the first block and streams across two more.
    const spanning = Session.create('s')
    appendToolTurn(spanning, 1)
    appendOpenTurn(spanning, 2)
    spanning.append('request/context', { provider: 'deepseek', model: 'deepseek-flash' })
    spanning.append('assistant/message', assistantData(2, 1, [toolCall('call-a')]), { surfaceOp: 'append' })
    chunks(spanning, 2, 2 * EVENT_BLOCK)
    // A long history, then a turn left open in the last block.
    const late = Session.create('s')
    chunks(late, 0, EVENT_BLOCK + 10)
    appendToolTurn(late, 1)
    appendOpenTurn(late, 2)
    for (const session of [spanning, late]) {
      const blocks = blocksOf(session)
      expect(blocks.length).toBeGreaterThan(1)
      const whole = interruptedTurnClosers(session.events)
      expect(whole.length).toBeGreaterThan(1)
      expect(interruptedTurnClosers(openTail(blocks))).toEqual(whole)
    }
    expect(openTail(blocksOf(late)).length).toBeLessThan(late.events.length)
    expect(openTail([])).toEqual([])
  })
})
