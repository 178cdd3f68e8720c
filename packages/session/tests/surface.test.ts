// Surface semantics: markers, replace, tool/result rewrites, foldSurface (spec §1.6; contracts 121, 122).
import { userText, type UserMessage } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import type { SessionEvent, SessionEventMap, SurfaceIntent } from '../src/events.ts'
import { Session } from '../src/session.ts'
import { foldSurface, isAppendSurfaceEvent, isReplacementSurfaceEvent } from '../src/surface.ts'
import { assistantData, toolCall, toolResultData } from './helpers.ts'

/**
 * Surface nodes [1, 3, 5]: 0 turn/start, 1 user/message, 2 step/start, 3 assistant/message
 * (tool call c1), 4 tool/call, 5 tool/result, 6 step/end. The next append gets seq 7.
 */
function fixture() {
  const session = Session.create('s')
  session.append('turn/start', { turn: 1 })
  session.append('user/message', userText('read a.txt'), { surfaceOp: 'append' })
  session.append('step/start', { turn: 1, step: 1 })
  session.append('assistant/message', assistantData(1, 1, [toolCall('c1')]), { surfaceOp: 'append' })
  session.append('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read_file', arguments: '{}' })
  session.append('tool/result', toolResultData(1, 1, 'c1', 'file contents'), { surfaceOp: 'append', sourceEventSeqs: [4] })
  session.append('step/end', { turn: 1, step: 1 })
  expect(session.surface.nodes).toEqual([1, 3, 5])
  return session
}

const summary = (text = 'summary'): UserMessage => userText(text)
const replace = (start: number, end: number, sourceEventSeqs?: number[]): SurfaceIntent => ({
  surfaceOp: { op: 'replace', start, end },
  ...(sourceEventSeqs && { sourceEventSeqs }),
})

/** Appends with arbitrary (possibly ill-typed) arguments. */
const rawAppend = (session: Session, type: string, data: unknown, intent?: unknown) =>
  (session.append as (...args: unknown[]) => SessionEvent)(type, data, ...(intent === undefined ? [] : [intent]))

/** A copy of the data of the tool/result at seq 5, to be edited into a rewrite. */
const resultData = (session: Session) => structuredClone(session.events[5].data) as SessionEventMap['tool/result'] & Record<string, unknown>

function snapshot(session: Session) {
  return { events: session.events, surface: session.surface, messages: session.deriveMessages(), seq: session.seq }
}

describe('surface markers', () => {
  it('appends the seq of each append-marked event to the nodes', () => {
    const session = fixture()
    expect(session.surface).toEqual({ nodes: [1, 3, 5], replaceGeneration: 0 })
  })

  it('rejects surfaceOp on an event that is not surface-eligible', () => {
    const session = Session.create('s')
    expect(() => rawAppend(session, 'turn/start', { turn: 1 }, { surfaceOp: 'append' })).toThrow(
      /^session event "turn\/start" is not surface-eligible and cannot carry surfaceOp$/,
    )
    expect(session.events).toEqual([])
  })

  it('rejects sourceEventSeqs on an event that is not surface-eligible', () => {
    const session = Session.create('s')
    session.append('turn/start', { turn: 1 })
    expect(() => rawAppend(session, 'step/start', { turn: 1, step: 1 }, { sourceEventSeqs: [0] })).toThrow(
      /^session event "step\/start" is not surface-eligible and cannot carry sourceEventSeqs$/,
    )
    expect(session.events).toHaveLength(1)
  })

  it('rejects surfaceOp on a non-surface seed event', () => {
    const seed = [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 }, surfaceOp: 'append' }] as unknown as SessionEvent[]
    expect(() => Session.create('s', seed)).toThrow(/is not surface-eligible and cannot carry surfaceOp/)
  })

  it.each([
    ['an unknown op string', 'prepend', /carries an invalid surfaceOp/],
    ['an unknown op object', { op: 'splice', start: 1, end: 1 }, /carries an invalid surfaceOp/],
    ['null', null, /carries an invalid surfaceOp/],
    ['a replace with an extra key', { op: 'replace', start: 1, end: 1, extra: 1 }, /carries an invalid replace surfaceOp/],
    ['a replace without end', { op: 'replace', start: 1 }, /carries an invalid replace surfaceOp/],
    ['a replace with a negative start', { op: 'replace', start: -1, end: 1 }, /carries an invalid replace surfaceOp/],
    ['a replace with a fractional end', { op: 'replace', start: 1, end: 1.5 }, /carries an invalid replace surfaceOp/],
  ])('rejects %s as surfaceOp', (_, surfaceOp, error) => {
    const session = fixture()
    expect(() => rawAppend(session, 'user/message', summary(), { surfaceOp, sourceEventSeqs: [1] })).toThrow(error)
    expect(session.seq).toBe(7)
  })

  it('rejects sourceEventSeqs that reference the event itself or later', () => {
    const session = fixture()
    expect(() => session.append('user/message', summary(), { surfaceOp: 'append', sourceEventSeqs: [1, 7] })).toThrow(
      /^sourceEventSeqs must reference earlier events: 7 >= current seq 7$/,
    )
    expect(() => session.append('user/message', summary(), { surfaceOp: 'append', sourceEventSeqs: [9] })).toThrow(/9 >= current seq 7/)
  })

  it('rejects duplicate sourceEventSeqs, in order or not; accepts distinct ones in any order', () => {
    const session = fixture()
    for (const sourceEventSeqs of [
      [1, 1],
      [2, 0, 2],
    ]) {
      expect(() => session.append('user/message', summary(), { surfaceOp: 'append', sourceEventSeqs })).toThrow(/^sourceEventSeqs must not contain duplicates$/)
    }
    expect(session.append('user/message', summary(), { surfaceOp: 'append', sourceEventSeqs: [2, 0] }).sourceEventSeqs).toEqual([2, 0])
  })

  it.each([[-1], [1.5], ['1']])('rejects the source seq %j', source => {
    const session = fixture()
    expect(() => rawAppend(session, 'user/message', summary(), { surfaceOp: 'append', sourceEventSeqs: [source] })).toThrow(
      /session event "user\/message" carries invalid sourceEventSeqs/,
    )
  })

  it('rejects empty sourceEventSeqs except on assistant/message', () => {
    const session = fixture()
    expect(() => session.append('user/message', summary(), { surfaceOp: 'append', sourceEventSeqs: [] })).toThrow(
      /^sourceEventSeqs must not be empty except on assistant\/message$/,
    )
    expect(() => session.append('tool/result', toolResultData(1, 2, 'c2'), { surfaceOp: 'append', sourceEventSeqs: [] })).toThrow(
      /must not be empty except on assistant\/message/,
    )
    const event = session.append('assistant/message', assistantData(1, 2, []), { surfaceOp: 'append', sourceEventSeqs: [] })
    expect(event.sourceEventSeqs).toEqual([])
    expect(session.surface.nodes).toEqual([1, 3, 5, 7])
  })

  it('tells append events from replacement events', () => {
    const session = fixture()
    const replacement = session.append('user/message', summary(), replace(3, 5, [3, 5]))
    expect(isAppendSurfaceEvent(session.events[1])).toBe(true)
    expect(isReplacementSurfaceEvent(session.events[1])).toBe(false)
    expect(isAppendSurfaceEvent(replacement)).toBe(false)
    expect(isReplacementSurfaceEvent(replacement)).toBe(true)
    expect(isAppendSurfaceEvent(session.events[0])).toBe(false)
    expect(isReplacementSurfaceEvent(session.events[0])).toBe(false)
  })
})

describe('replace (121)', () => {
  it('swaps the shadowed run for the new node and bumps replaceGeneration', () => {
    const session = fixture()
    const event = session.append('user/message', summary(), replace(3, 5, [3, 5]))
    expect(event.seq).toBe(7)
    expect(session.surface).toEqual({ nodes: [1, 7], replaceGeneration: 1 })
    const history = session.deriveMessages()
    expect(history).toEqual([session.events[1].data, event.data])
    expect(history).not.toContain((session.events[3].data as SessionEventMap['assistant/message']).message)
    expect(history).not.toContain((session.events[5].data as SessionEventMap['tool/result']).message)
  })

  it('names every shadowed node missing from sourceEventSeqs', () => {
    const session = fixture()
    expect(() => session.append('user/message', summary(), replace(3, 5, [3]))).toThrow(
      /^surface replace: sourceEventSeqs must include every shadowed surface node; missing 5$/,
    )
    expect(() => session.append('user/message', summary(), replace(1, 5, [3]))).toThrow(
      /^surface replace: sourceEventSeqs must include every shadowed surface node; missing 1, 5$/,
    )
    expect(() => session.append('user/message', summary(), replace(1, 1))).toThrow(/; missing 1$/)
  })

  it('rejects a start that comes after the end in surface position', () => {
    const session = fixture()
    expect(() => session.append('user/message', summary(), replace(5, 3, [3, 5]))).toThrow(
      /^surface replace: start seq 5 \(index 2\) is after end seq 3 \(index 1\)$/,
    )
  })

  it('orders by surface position, not by seq', () => {
    const session = fixture()
    session.append('user/message', summary('early'), replace(1, 3, [1, 3])) // seq 7 at index 0
    expect(session.surface.nodes).toEqual([7, 5])
    session.append('user/message', summary('all'), replace(7, 5, [7, 5])) // start 7 > end 5 numerically
    expect(session.surface).toEqual({ nodes: [8], replaceGeneration: 2 })
  })

  it('rejects a start or end that is not a current node', () => {
    const session = fixture()
    expect(() => session.append('user/message', summary(), replace(2, 5, [2, 5]))).toThrow(/^surface replace: start seq 2 not found in surface$/)
    expect(() => session.append('user/message', summary(), replace(3, 6, [3, 6]))).toThrow(/^surface replace: end seq 6 not found in surface$/)
    session.append('user/message', summary(), replace(3, 5, [3, 5]))
    expect(() => session.append('user/message', summary(), replace(3, 3, [3]))).toThrow(/start seq 3 not found in surface/)
  })

  it('accepts extra sources beyond the shadowed nodes', () => {
    const session = fixture()
    session.append('user/message', summary(), replace(5, 5, [4, 5]))
    expect(session.surface.nodes).toEqual([1, 3, 7])
  })

  it('leaves log, surface and history unchanged when surface validation fails', () => {
    const session = fixture()
    const before = snapshot(session)
    expect(() => session.append('user/message', summary(), replace(3, 5, [3]))).toThrow(/missing 5/)
    expect(() => session.append('tool/result', resultData(session), replace(3, 5, [3, 5]))).toThrow(/exactly one/)
    const after = snapshot(session)
    expect(after.events).toBe(before.events)
    expect(after).toEqual(before)
    expect(session.append('user/message', summary(), replace(3, 5, [3, 5])).seq).toBe(7)
    expect(session.surface).toEqual({ nodes: [1, 7], replaceGeneration: 1 })
  })
})

describe('tool/result rewrites (122)', () => {
  it('accepts a rewrite that changes only the result content', () => {
    const session = fixture()
    const data = resultData(session)
    data.message.content[0].content = [{ type: 'text', text: '[pruned]' }]
    const event = session.append('tool/result', data, replace(5, 5, [5]))
    expect(session.surface).toEqual({ nodes: [1, 3, 7], replaceGeneration: 1 })
    expect(session.deriveMessages().at(-1)).toBe(event.data.message)
    expect(session.deriveMessages().at(-1)!.content[0]).toMatchObject({ toolCallId: 'c1', content: [{ type: 'text', text: '[pruned]' }] })
  })

  it('ignores key order when comparing a rewrite with the original', () => {
    const session = fixture()
    const { turn, step, message } = resultData(session)
    const block = message.content[0]
    const reordered = {
      message: { content: [{ content: [], toolCallId: block.toolCallId, type: block.type }], source: message.source, role: message.role, id: message.id },
      step,
      turn,
    } as unknown as SessionEventMap['tool/result']
    session.append('tool/result', reordered, replace(5, 5, [5]))
    expect(session.surface.nodes).toEqual([1, 3, 7])
  })

  it('can rewrite a result that was already rewritten', () => {
    const session = fixture()
    session.append('tool/result', resultData(session), replace(5, 5, [5]))
    session.append('tool/result', resultData(session), replace(7, 7, [7]))
    expect(session.surface).toEqual({ nodes: [1, 3, 8], replaceGeneration: 2 })
  })

  it('rejects a rewrite spanning two nodes', () => {
    const session = fixture()
    expect(() => session.append('tool/result', resultData(session), replace(3, 5, [3, 5]))).toThrow(
      /^tool\/result surface replacement must rewrite exactly one current node$/,
    )
  })

  it('rejects a rewrite targeting a node that is not a tool/result', () => {
    const session = fixture()
    expect(() => session.append('tool/result', resultData(session), replace(3, 3, [3]))).toThrow(
      /^tool\/result surface replacement must target a current tool\/result$/,
    )
    expect(() => session.append('tool/result', resultData(session), replace(1, 1, [1]))).toThrow(/must target a current tool\/result/)
  })

  type Data = ReturnType<typeof resultData>
  it.each<[string, (data: Data) => void]>([
    [
      'meta',
      data => {
        data.meta = { pruned: true }
      },
    ],
    [
      'error',
      data => {
        data.error = { name: 'E', code: 'E' }
      },
    ],
    [
      'turn',
      data => {
        data.turn = 2
      },
    ],
    [
      'step',
      data => {
        data.step = 2
      },
    ],
    [
      'the message id',
      data => {
        ;(data.message as { id: string }).id = 'other-id'
      },
    ],
    [
      'isError',
      data => {
        data.message.content[0].isError = true
      },
    ],
    [
      'the call id',
      data => {
        ;(data.message.source as { callId: string }).callId = 'c9'
        data.message.content[0].toolCallId = 'c9'
      },
    ],
    [
      'an extra field',
      data => {
        data.extra = 1
      },
    ],
  ])('rejects a rewrite that changes %s', (_, edit) => {
    const session = fixture()
    const data = resultData(session)
    edit(data)
    expect(() => session.append('tool/result', data, replace(5, 5, [5]))).toThrow(/^tool\/result surface replacement may change only content$/)
    expect(session.surface.nodes).toEqual([1, 3, 5])
  })
})

describe('foldSurface', () => {
  function replaced() {
    const session = fixture()
    session.append('user/message', summary('early'), replace(1, 3, [1, 3]))
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    session.append('user/message', userText('next'), { surfaceOp: 'append' })
    session.append('tool/result', resultData(session), replace(5, 5, [5]))
    return session
  }

  it('computes the live surface offline', () => {
    const session = replaced()
    const folded = foldSurface(session.events)
    expect(folded.nodes).toEqual(session.surface.nodes)
    expect(folded.nodes).toEqual([7, 10, 9])
  })

  it('reports each replacement with its shadowed seqs', () => {
    expect(foldSurface(replaced().events).replacements).toEqual([
      { seq: 7, start: 1, end: 3, shadowedSeqs: [1, 3] },
      { seq: 10, start: 5, end: 5, shadowedSeqs: [5] },
    ])
  })

  it('raises the errors a live append raises', () => {
    const events = fixture().events
    const bad = { type: 'user/message', seq: 7, time: 1, data: summary(), surfaceOp: { op: 'replace', start: 3, end: 5 }, sourceEventSeqs: [3] }
    expect(() => foldSurface([...events, bad as SessionEvent])).toThrow(
      /^surface replace: sourceEventSeqs must include every shadowed surface node; missing 5$/,
    )
    const swapped = { ...bad, surfaceOp: { op: 'replace', start: 5, end: 3 }, sourceEventSeqs: [3, 5] }
    expect(() => foldSurface([...events, swapped as SessionEvent])).toThrow(/start seq 5 \(index 2\) is after end seq 3 \(index 1\)/)
  })
})
