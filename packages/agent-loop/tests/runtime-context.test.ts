// Contracts 5.3 (59–67): the runtime-context snapshot projection, end to end.
import { createUserMessage, type UserMessage } from '@loom/llm'
import { Session, type SessionEvent } from '@loom/session'
import { defineTool } from '@loom/tools'
import { RuntimeContextProjection } from '@loom/agent-loop'
import { describe, expect, it } from 'vitest'
import { harness, IDENTITY, textResponse, toolCallResponse } from './harness.ts'
import { CLEARED, CONTEXT_HEADER, isOwnedMessage, OWNER, ownedEvents, pluginText, textOf, turn, turnEnds } from './request-support.ts'

const snapshot = (...texts: string[]) => `${CONTEXT_HEADER}\n\n${texts.join('\n\n')}`
const ownedTexts = (events: readonly SessionEvent[]) => ownedEvents(events).map(event => textOf(event.data as UserMessage))
const noop = defineTool({ name: 'noop', description: 'Does nothing.', parameters: { type: 'object', properties: {} }, execute: () => 'done' })

/** The index range of each step of the log: `[step/start index, step/end index]`. */
function stepRanges(events: readonly SessionEvent[]): { turn: number; step: number; from: number; to: number }[] {
  const ranges: { turn: number; step: number; from: number; to: number }[] = []
  events.forEach((event, index) => {
    const data = event.data as { turn: number; step: number }
    if (event.type === 'step/start') ranges.push({ turn: data.turn, step: data.step, from: index, to: -1 })
    if (event.type === 'step/end') ranges.at(-1)!.to = index
  })
  return ranges
}

function ownedInRequest(messages: readonly UserMessage[] | readonly { source?: unknown; content: readonly unknown[] }[]) {
  return messages.filter(isOwnedMessage)
}

describe('5.3 runtime context', () => {
  it('emits a snapshot only when the rendered context changes, and CLEARED once after it goes (59)', async () => {
    let mode = 'read-only'
    const h = await harness({ script: Array.from({ length: 5 }, (_, i) => textResponse(`ok ${i + 1}`)) })
    const dispose = h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: () => `Mode: ${mode}.` })

    await turn(h.agent, 'turn 1')
    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.')])
    expect(ownedTexts(h.events())[0]).toBe('Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nMode: read-only.')
    await turn(h.agent, 'turn 2')
    expect(ownedEvents(h.events())).toHaveLength(1)
    mode = 'danger-full-access'
    await turn(h.agent, 'turn 3')
    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.'), snapshot('Mode: danger-full-access.')])
    dispose()
    await turn(h.agent, 'turn 4')
    expect(ownedTexts(h.events())).toHaveLength(3)
    expect(ownedTexts(h.events())[2]).toBe('Current runtime context: none. Earlier runtime-context snapshots no longer apply.')
    await turn(h.agent, 'turn 5')
    expect(ownedEvents(h.events())).toHaveLength(3)

    expect(turnEnds(h.events()).map(r => r.kind)).toEqual(['completed', 'completed', 'completed', 'completed', 'completed'])
    expect(h.adapter.requests.map(r => r.system)).toEqual(Array(5).fill(IDENTITY))
    expect(h.types().filter(type => type === 'request/header')).toHaveLength(1)
    // The model sees the latest snapshot, never in the system text.
    expect(h.adapter.requests.map(r => ownedInRequest(r.messages).map(textOf).at(-1))).toEqual([
      snapshot('Mode: read-only.'),
      snapshot('Mode: read-only.'),
      snapshot('Mode: danger-full-access.'),
      CLEARED,
      CLEARED,
    ])
  })

  it('enters the snapshot right after the prompt, only through the pre-step decision, with its source (60)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const dispose = h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    const payloads: number[] = []
    const decisions: number[] = []
    h.agent.ctx.on('agent/pre-step', async (payload, next) => {
      payloads.push(payload.messages.length)
      const decision = await next()
      decisions.push(decision.kind === 'enter' ? decision.messages.length : -1)
      return decision
    })
    const prompt = await turn(h.agent, 'hi')

    const events = h.events()
    const [step] = stepRanges(events)
    expect(events[step.from + 1].data).toEqual(prompt)
    const owned = events[step.from + 2]
    expect(owned.type).toBe('user/message')
    expect(owned.surfaceOp).toBe('append')
    expect(step.from + 2).toBeLessThan(step.to)
    expect((owned.data as UserMessage).content).toEqual([{ type: 'text', text: snapshot('Mode: read-only.') }])
    expect((owned.data as UserMessage).source).toStrictEqual({
      kind: 'plugin',
      plugin: '@loom/system-prompt',
      form: 'snapshot',
      // What the manifest of this request shows of each context is recorded with it.
      sections: [{ name: 'policy', text: 'Mode: read-only.', owner: 'test-host', order: 0, stability: 'step', trust: 'deployment', category: 'runtime' }],
    })
    expect(payloads).toEqual([1])
    expect(decisions).toEqual([2])
    expect(h.adapter.requests[0].messages).toEqual([prompt, owned.data])

    dispose()
    await turn(h.agent, 'again')
    const cleared = ownedEvents(h.events())[1]
    expect((cleared.data as UserMessage).content).toEqual([{ type: 'text', text: CLEARED }])
    expect((cleared.data as UserMessage).source).toStrictEqual({ kind: 'plugin', plugin: '@loom/system-prompt' })
    await droppedSnapshotIsReproposed()
  })

  /** Contract 60, last point: a decision built from the payload drops the snapshot; the next step re-proposes it. */
  async function droppedSnapshotIsReproposed() {
    const h = await harness({
      script: [toolCallResponse('c1', 'noop', {}), textResponse('done')],
      setup: ctx => {
        ctx.tools.register(noop)
      },
    })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    h.agent.ctx.on('agent/pre-step', async (payload, next) => (payload.step === 1 ? { kind: 'enter', messages: [...payload.messages] } : next()))
    await turn(h.agent, 'hi')

    const events = h.events()
    const [first, second] = stepRanges(events)
    expect(second).toMatchObject({ turn: 1, step: 2 })
    const owned = ownedEvents(events)
    expect(owned).toHaveLength(1)
    const at = events.indexOf(owned[0])
    expect(at).toBeGreaterThan(second.from)
    expect(at).toBeLessThan(second.to)
    expect(at > first.to).toBe(true)
    expect(ownedInRequest(h.adapter.requests[0].messages)).toEqual([])
    expect(ownedInRequest(h.adapter.requests[1].messages).map(textOf)).toEqual([snapshot('Mode: read-only.')])
  }

  it('re-emits the snapshot after compaction shadowed it (61)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    await turn(h.agent, 'first')
    const [shadowed] = ownedEvents(h.events())
    h.agent.session.append('user/message', pluginText('[summary of the runtime context]', 'compaction'), {
      surfaceOp: { op: 'replace', start: shadowed.seq, end: shadowed.seq },
      sourceEventSeqs: [shadowed.seq],
    })
    await turn(h.agent, 'second')

    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.'), snapshot('Mode: read-only.')])
    const second = h.adapter.requests[1]
    expect(ownedInRequest(second.messages).map(textOf)).toEqual([snapshot('Mode: read-only.')])
    expect(second.messages.map(textOf)).toEqual(['first', '[summary of the runtime context]', 'one', 'second', snapshot('Mode: read-only.')])
  })

  it('sends CLEARED after a shadowed snapshot whose context went away (62)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const dispose = h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    await turn(h.agent, 'first')
    const [shadowed] = ownedEvents(h.events())
    h.agent.session.append('user/message', pluginText('[summary of the runtime context]', 'compaction'), {
      surfaceOp: { op: 'replace', start: shadowed.seq, end: shadowed.seq },
      sourceEventSeqs: [shadowed.seq],
    })
    dispose()
    await turn(h.agent, 'second')

    const owned = ownedInRequest(h.adapter.requests[1].messages)
    expect(owned).toHaveLength(1)
    expect(owned[0].content).toEqual([{ type: 'text', text: CLEARED }])
    expect(ownedEvents(h.events())).toHaveLength(2)
  })

  it('never sends a phantom CLEARED when no context ever existed (63)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const note = pluginText('an unrelated note', 'other-plugin')
    h.agent.inject(note)
    await turn(h.agent, 'first')
    const noteEvent = h.events().find(event => event.type === 'user/message' && (event.data as UserMessage).id === note.id)!
    expect(h.agent.session.surface.nodes).toContain(noteEvent.seq)
    h.agent.session.append('user/message', pluginText('[summary of the note]', 'compaction'), {
      surfaceOp: { op: 'replace', start: noteEvent.seq, end: noteEvent.seq },
      sourceEventSeqs: [noteEvent.seq],
    })
    await turn(h.agent, 'second')

    expect(h.adapter.requests).toHaveLength(2)
    expect(h.adapter.requests.flatMap(r => ownedInRequest(r.messages))).toEqual([])
    expect(ownedEvents(h.events())).toEqual([])
    expect(h.adapter.requests[1].messages.map(textOf)).toEqual(['[summary of the note]', 'first', 'one', 'second'])
  })

  it('replaces a retained snapshot that is not exactly one text block (64)', async () => {
    const h = await harness({ script: [textResponse('one')] })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    // Its first block already is the full text: only "exactly one text block" counts.
    const malformed = createUserMessage({
      content: [
        { type: 'text', text: snapshot('Mode: read-only.') },
        { type: 'text', text: 'trailing block' },
      ],
      source: { kind: 'plugin', plugin: OWNER },
    })
    const appended = h.agent.session.append('user/message', malformed, { surfaceOp: 'append' })
    expect(h.agent.session.surface.nodes).toContain(appended.seq)
    await turn(h.agent, 'go')

    const owned = ownedEvents(h.events())
    expect(owned).toHaveLength(2)
    expect((owned[1].data as UserMessage).content).toEqual([{ type: 'text', text: snapshot('Mode: read-only.') }])
    expect(ownedInRequest(h.adapter.requests[0].messages)).toHaveLength(2)
  })

  it('does not commit a candidate whose step was rejected (65)', async () => {
    const h = await harness({ script: [textResponse('one')] })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    h.agent.ctx.on('agent/pre-step', async (payload, next) => (payload.turn === 1 ? { kind: 'reject' } : next()))
    await turn(h.agent, 'blocked')
    expect(turnEnds(h.events())).toEqual([{ kind: 'blocked' }])
    expect(ownedEvents(h.events())).toEqual([])
    expect(h.types()).not.toContain('step/start')
    await turn(h.agent, 'entered')

    const events = h.events()
    const owned = ownedEvents(events)
    expect(owned).toHaveLength(1)
    const ranges = stepRanges(events)
    expect(ranges.map(({ turn, step }) => ({ turn, step }))).toEqual([{ turn: 2, step: 1 }])
    const at = events.indexOf(owned[0])
    expect(at).toBeGreaterThan(ranges[0].from)
    expect(at).toBeLessThan(ranges[0].to)
    expect(ownedInRequest(h.adapter.requests[0].messages).map(textOf)).toEqual([snapshot('Mode: read-only.')])
  })

  it('restores its state from the log and follows only its own session (66)', async () => {
    const owned = (text: string) => createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: OWNER } })
    const session = Session.create('restore')
    session.append('user/message', owned('retained'), { surfaceOp: 'append' })
    const shadowed = session.append('user/message', owned('shadowed'), { surfaceOp: 'append' })
    session.append('user/message', pluginText('[summary]', 'compaction'), {
      surfaceOp: { op: 'replace', start: shadowed.seq, end: shadowed.seq },
      sourceEventSeqs: [shadowed.seq],
    })

    const projection = new RuntimeContextProjection(session)
    expect(projection.project('retained', [])).toBeUndefined()
    // The latest owned event is shadowed: the model no longer sees `shadowed`.
    expect(projection.project('shadowed', [])?.content).toEqual([{ type: 'text', text: 'shadowed' }])
    const next = projection.project('next', [{ name: 'sandbox:policy', text: 'policy' }])!
    expect(next.content).toEqual([{ type: 'text', text: 'next' }])
    expect(next.source).toStrictEqual({
      kind: 'plugin',
      plugin: '@loom/system-prompt',
      form: 'snapshot',
      sections: [{ name: 'sandbox:policy', text: 'policy' }],
    })
    expect(projection.project('', [])?.content).toEqual([{ type: 'text', text: CLEARED }])

    // End to end: an owned message in another live session leaves the agent's state alone.
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    await turn(h.agent, 'first')
    const other = h.ctx.sessions.create('other')
    other.append('user/message', owned(snapshot('Mode: elsewhere.')), { surfaceOp: 'append' })
    await turn(h.agent, 'second')
    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.')])
    expect(ownedInRequest(h.adapter.requests[1].messages).map(textOf)).toEqual([snapshot('Mode: read-only.')])
  })

  it("follows every agent's session through one listener, so an append runs no other agent's code", async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    // Cordis keeps a listener list per event; each append of any session calls every entry.
    const listeners = () => (h.root.events as unknown as { _hooks: Record<string, unknown[]> })._hooks['session/event'].length
    const before = listeners()
    const others = Array.from({ length: 20 }, (_, i) => h.ctx.agents.create(`other-${i}`, { provider: 'mock', model: 'mock' }))
    expect(listeners()).toBe(before)
    await turn(h.agent, 'first')
    await turn(h.agent, 'second')
    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.')])
    for (const other of others) await other.dispose()
    expect(listeners()).toBe(before)
  })

  it('emits CLEARED once when runtime context becomes suppressed (67)', async () => {
    const h = await harness({
      script: [textResponse('one'), toolCallResponse('c1', 'noop', {}), textResponse('two'), textResponse('three')],
      setup: ctx => {
        ctx.tools.register(noop)
      },
    })
    h.ctx.systemPrompt.context({ name: 'policy', order: 0, text: 'Mode: read-only.' })
    await turn(h.agent, 'first')
    expect(ownedTexts(h.events())).toEqual([snapshot('Mode: read-only.')])
    h.ctx.systemPrompt.suppressRuntimeContext()
    await turn(h.agent, 'tool turn')
    await turn(h.agent, 'third')

    const events = h.events()
    const owned = ownedEvents(events)
    expect(owned.map(event => textOf(event.data as UserMessage))).toEqual([snapshot('Mode: read-only.'), CLEARED])
    expect((owned[1].data as UserMessage).source).toStrictEqual({ kind: 'plugin', plugin: '@loom/system-prompt' })
    const at = events.indexOf(owned[1])
    const step = stepRanges(events).find(range => range.from < at && at < range.to)!
    expect({ turn: step.turn, step: step.step }).toEqual({ turn: 2, step: 1 })
    expect(stepRanges(events).map(({ turn, step }) => `${turn}.${step}`)).toEqual(['1.1', '2.1', '2.2', '3.1'])
    expect(h.adapter.requests).toHaveLength(4)
  })
})
