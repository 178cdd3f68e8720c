// A crash inside a compaction leaves its `compaction/start` without an end:
// crash repair closes it, before the open turn it ran in, if any.
import { userText } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import { COMPACTION_INTERRUPTED_ERROR, interruptedTurnClosers, unfinishedCompactions } from '../src/closers.ts'
import { Session } from '../src/session.ts'
import { appendOpenTurn, appendToolTurn } from './helpers.ts'

/** A summary that replaced seqs `start..end`, as the compaction plugin commits it. */
function commitSummary(session: Session, compactionId: string, start: number, end: number) {
  const shadowedSeqs = session.surface.nodes.filter(seq => seq >= start && seq <= end)
  session.append('compaction/summary', {
    compactionId,
    summary: [{ type: 'text', text: 'summary' }],
    shadowedRange: { start, end },
    shadowedSeqs,
    shadowedTokenCount: 100,
    provider: 'test',
    model: 'test-model',
  })
  session.append('user/message', userText('summary'), { surfaceOp: { op: 'replace', start, end }, sourceEventSeqs: shadowedSeqs })
}

describe('closing an unfinished compaction', () => {
  it('finds compactions with a start and no end', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    session.append('compaction/start', { compactionId: 'done', turn: null })
    session.append('compaction/end', { compactionId: 'done', turn: null })
    const start = session.append('compaction/start', { compactionId: 'crashed', turn: null }).seq
    expect(unfinishedCompactions(session.events)).toEqual([{ compactionId: 'crashed', turn: null, startSeq: start, committed: false }])
  })

  it('a compaction between turns (loom sessions compact) gets an end with an error, and nothing else', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    session.append('compaction/start', { compactionId: 'c1', turn: null })
    const last = session.events.at(-1)!
    expect(interruptedTurnClosers(session.events)).toEqual([
      { type: 'compaction/end', seq: last.seq + 1, time: last.time, data: { compactionId: 'c1', turn: null, error: COMPACTION_INTERRUPTED_ERROR } },
    ])
  })

  it('a compaction whose summary had committed gets a plain end: its replacement stands', () => {
    const session = Session.create('s')
    const first = appendToolTurn(session, 1)
    appendToolTurn(session, 2)
    session.append('compaction/start', { compactionId: 'c1', turn: null })
    commitSummary(session, 'c1', first.user, first.toolResult)
    expect(unfinishedCompactions(session.events)).toMatchObject([{ compactionId: 'c1', committed: true }])
    const [end] = interruptedTurnClosers(session.events)
    expect(end).toMatchObject({ type: 'compaction/end', data: { compactionId: 'c1', turn: null } })
    expect(end.data).not.toHaveProperty('error')
  })

  it('a compaction inside an open turn closes first, then the step and the turn; a Session accepts the result', () => {
    const session = Session.create('s')
    appendToolTurn(session, 1)
    appendOpenTurn(session, 2)
    session.append('compaction/start', { compactionId: 'c2', turn: 2 })
    const closers = interruptedTurnClosers(session.events)
    expect(closers.map(event => event.type)).toEqual(['compaction/end', 'step/end', 'turn/end'])
    expect(closers[0].data).toEqual({ compactionId: 'c2', turn: 2, error: COMPACTION_INTERRUPTED_ERROR })

    const repaired = Session.create('repaired', [...session.events, ...closers])
    expect(unfinishedCompactions(repaired.events)).toEqual([])
    expect(interruptedTurnClosers(repaired.events)).toEqual([])
  })
})
