// Session.fromRestore adopts a seed without changing or copying its array, and builds the
// history a live session would have, with or without replacements in the seed.
import { userText } from '@loom/llm'
import { describe, expect, it, vi } from 'vitest'
import type { SessionEvent } from '../src/events.ts'
import { Session } from '../src/session.ts'
import { appendToolTurn } from './helpers.ts'

/** The events of `session` as a stored log hands them back: fresh, unfrozen JSON. */
const stored = (session: Session): SessionEvent[] => JSON.parse(JSON.stringify(session.events))

describe('fromRestore', () => {
  it('leaves the seed array as it was: the end-seed marker goes into the session log only', () => {
    const live = Session.create('r')
    appendToolTurn(live, 1)
    const seed = stored(live)
    const restored = Session.fromRestore('r', seed, { version: 0, id: 'r', createdAt: 1 })
    expect(seed).toHaveLength(live.events.length)
    expect(seed.at(-1)?.type).toBe('turn/end')
    expect(restored.events).toHaveLength(seed.length + 1)
    expect(restored.events.slice(0, seed.length).every((event, i) => event === seed[i])).toBe(true)
    expect(restored.events.at(-1)).toMatchObject({ type: 'session/end-seed', seq: seed.length })
    // Appends go to the session's log, never to the caller's array.
    restored.append('turn/start', { turn: 2 })
    expect(seed).toHaveLength(live.events.length)
  })

  it('adds no second marker to a seed that ends with one, and appends past it without changing the array', () => {
    const live = Session.create('r', [])
    appendToolTurn(live, 1)
    const once = Session.fromRestore('r', stored(live), { version: 0, id: 'r', createdAt: 1 })
    const seed = stored(once)
    expect(seed.at(-1)?.type).toBe('session/end-seed')
    const twice = Session.fromRestore('r', seed, { version: 0, id: 'r', createdAt: 1 })
    expect(twice.events).toHaveLength(seed.length)
    twice.append('turn/start', { turn: 2 })
    expect(twice.events).toHaveLength(seed.length + 1)
    expect(seed.at(-1)?.type).toBe('session/end-seed')
  })

  it('builds the history of a seed without replacements as live appends did, restored or copied', () => {
    const live = Session.create('r')
    for (let turn = 1; turn <= 3; turn++) appendToolTurn(live, turn)
    const restored = Session.fromRestore('r', stored(live), { version: 0, id: 'r', createdAt: 1 })
    expect(restored.deriveMessages()).toEqual(live.deriveMessages())
    expect(restored.surface).toEqual(live.surface)
    expect(Session.create('c', stored(live)).deriveMessages()).toEqual(live.deriveMessages())
  })

  it('projects the history of a seed whose replacement comes after later appends', () => {
    const live = Session.create('r')
    const first = appendToolTurn(live, 1)
    appendToolTurn(live, 2)
    const nodes = [first.user, first.assistant, first.toolResult]
    live.append('user/message', userText('summary of turn 1'), { surfaceOp: { op: 'replace', start: nodes[0], end: nodes[2] }, sourceEventSeqs: nodes })
    appendToolTurn(live, 3)
    for (const restored of [Session.fromRestore('r', stored(live), { version: 0, id: 'r', createdAt: 1 }), Session.create('c', stored(live))]) {
      expect(restored.deriveMessages()).toEqual(live.deriveMessages())
      expect(restored.deriveMessages()[0]).toMatchObject({ content: [{ type: 'text', text: 'summary of turn 1' }] })
    }
  })

  it('projects the history at its first read, not during the load, and keeps it up with appends after', () => {
    const live = Session.create('r')
    for (let turn = 1; turn <= 3; turn++) appendToolTurn(live, turn)
    const derive = vi.spyOn(Session.prototype, 'deriveEventMessage')
    try {
      const restored = Session.fromRestore('r', stored(live), { version: 0, id: 'r', createdAt: 1 })
      expect(derive).not.toHaveBeenCalled()
      const history = restored.deriveMessages()
      expect(history).toEqual(live.deriveMessages())
      expect(derive).toHaveBeenCalledTimes(restored.surface.nodes.length)
      // Handed out frozen, though the log's events were not frozen by the load.
      expect(history.every(message => Object.isFrozen(message) && Object.isFrozen(message.content))).toBe(true)
      derive.mockClear()
      restored.append('user/message', userText('and then?'), { surfaceOp: 'append' })
      expect(restored.deriveMessages()).toHaveLength(history.length + 1)
      expect(derive).toHaveBeenCalledTimes(1)
    } finally {
      derive.mockRestore()
    }
  })
})
