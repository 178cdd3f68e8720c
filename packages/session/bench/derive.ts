// Cost of deriveMessages() on long sessions: a step appends a few events, then
// derives the history. The projection is incremental, so the per-call cost should
// stay flat as the log grows (what remains is one array copy of the history).
import { createAssistantMessage, userText } from '@loom/llm'
import { Session } from '@loom/session'

export interface DeriveFigure {
  bench: 'session/deriveMessages'
  events: number
  messages: number
  median_us: number
}

/** A session of about `events` events: turns of user, assistant and a few chunks. */
export function longSession(events: number): Session {
  const session = Session.create('bench')
  let turn = 0
  while (session.seq < events) {
    turn++
    session.append('turn/start', { turn })
    session.append('step/start', { turn, step: 1 })
    session.append('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
    for (let i = 0; i < 3; i++) session.append('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text: `part ${i} ` } })
    const message = createAssistantMessage({ content: [{ type: 'text', text: `answer ${turn}` }], source: { provider: 'p', model: 'm' } })
    session.append('assistant/message', { turn, step: 1, message }, { surfaceOp: 'append' })
    session.append('step/end', { turn, step: 1 })
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
  }
  return session
}

export function benchDerive(sizes = [100, 10_000, 100_000], samples = 200): DeriveFigure[] {
  return sizes.map(size => {
    const session = longSession(size)
    session.deriveMessages()
    const times: number[] = []
    let turn = 1_000_000
    for (let i = 0; i < samples; i++) {
      // One appended message between calls, as in a running loop.
      session.append('user/message', userText(`more ${turn++}`), { surfaceOp: 'append' })
      const start = process.hrtime.bigint()
      session.deriveMessages()
      times.push(Number(process.hrtime.bigint() - start) / 1000)
    }
    times.sort((a, b) => a - b)
    return {
      bench: 'session/deriveMessages' as const,
      events: size,
      messages: session.deriveMessages().length,
      median_us: Math.round(times[times.length >> 1] * 10) / 10,
    }
  })
}
