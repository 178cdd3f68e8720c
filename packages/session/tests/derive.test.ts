// The derived model history: projection rules and the cache (spec §1.5 deriveMessages; contract 126).
import { userText } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import type { SessionEventMap } from '../src/events.ts'
import { Session } from '../src/session.ts'
import { appendToolTurn, assistantData, isDeepFrozen } from './helpers.ts'

function withHistory() {
  const session = Session.create('s')
  const seqs = appendToolTurn(session, 1)
  return { session, seqs }
}

describe('deriveMessages (126)', () => {
  it('returns a fresh array on each call', () => {
    const { session } = withHistory()
    const a = session.deriveMessages()
    const b = session.deriveMessages()
    expect(a).not.toBe(b)
    expect(a).toEqual(b)
    a.pop()
    expect(session.deriveMessages()).toHaveLength(3)
  })

  it('does not grow an array held across later appends', () => {
    const { session } = withHistory()
    const held = session.deriveMessages()
    expect(held).toHaveLength(3)
    appendToolTurn(session, 2)
    expect(held).toHaveLength(3)
    expect(session.deriveMessages()).toHaveLength(6)
  })

  it('projects the user, assistant and tool messages in surface order', () => {
    const { session } = withHistory()
    expect(session.deriveMessages().map(m => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(session.deriveMessages().map(m => m.source.kind)).toEqual(['user', 'model', 'tool'])
  })

  it('shares the frozen message objects stored in the events', () => {
    const { session, seqs } = withHistory()
    const [user, assistant, result] = session.deriveMessages()
    const events = session.events
    expect(user).toBe(events[seqs.user].data)
    expect(assistant).toBe((events[seqs.assistant].data as SessionEventMap['assistant/message']).message)
    expect(result).toBe((events[seqs.toolResult].data as SessionEventMap['tool/result']).message)
    for (const message of [user, assistant, result]) expect(isDeepFrozen(message)).toBe(true)
  })

  it('projects an assistant message with empty content to nothing', () => {
    const { session } = withHistory()
    session.append('turn/start', { turn: 2 })
    const empty = session.append('assistant/message', assistantData(2, 1, []), { surfaceOp: 'append', sourceEventSeqs: [] })
    expect(session.surface.nodes).toContain(empty.seq)
    expect(session.deriveMessages()).toHaveLength(3)
    expect(session.deriveEventMessage(empty)).toBeNull()
  })

  it('projects an event that is not a surface type to nothing', () => {
    const { session, seqs } = withHistory()
    expect(session.deriveEventMessage(session.events[seqs.turnStart])).toBeNull()
    expect(session.deriveEventMessage(session.events[seqs.toolCall])).toBeNull()
  })

  it('rebuilds after a replace to what a scratch replay derives', () => {
    const { session, seqs } = withHistory()
    appendToolTurn(session, 2)
    const before = session.deriveMessages()
    session.append('user/message', userText('summary of turn 1'), {
      surfaceOp: { op: 'replace', start: seqs.user, end: seqs.toolResult },
      sourceEventSeqs: [seqs.user, seqs.assistant, seqs.toolResult],
    })
    const after = session.deriveMessages()
    expect(after).toHaveLength(4)
    expect(after[0]).toBe(session.events.at(-1)!.data)
    expect(after.slice(1)).toEqual(before.slice(3))
    expect(before).toHaveLength(6)
    expect(after).toEqual(Session.create('scratch', session.events).deriveMessages())
  })

  it('keeps appending incrementally after a replace', () => {
    const { session, seqs } = withHistory()
    session.append('user/message', userText('summary'), {
      surfaceOp: { op: 'replace', start: seqs.user, end: seqs.assistant },
      sourceEventSeqs: [seqs.user, seqs.assistant],
    })
    const next = session.append('user/message', userText('and then?'), { surfaceOp: 'append' })
    const messages = session.deriveMessages()
    expect(messages.map(m => m.content[0])).toMatchObject([{ text: 'summary' }, { type: 'tool-result' }, { text: 'and then?' }])
    expect(messages.at(-1)).toBe(next.data)
    expect(messages).toEqual(Session.create('scratch', session.events).deriveMessages())
  })
})
