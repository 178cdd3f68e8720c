// The inbox (spec 1.8) and contracts 111–116 (section 5.7).
import { Context } from '@deepseek-ai/cordis'
import Llm, { createUserMessage, userText, type Message, type UserMessage } from '@loom/llm'
import SessionStore, { Session, type SessionEvent } from '@loom/session'
import { type MemoryLogs, MemoryPersistence } from '@loom/session/testing'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import AgentLoop, { Inbox, type InboxNotify } from '@loom/agent-loop'
import { afterEach, describe, expect, it } from 'vitest'
import { harness, MockAdapter, textResponse, type ScriptStep } from './harness.ts'

// ---- helpers (local to this file) ----

function plugin(text: string): UserMessage {
  return createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: 'test' } })
}

function textOf(message: Message): string {
  return message.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

/** A detached session and an Inbox on it that records every notification. */
function standalone(session = Session.create('inbox-test')) {
  const log: Array<[kind: 'inserted' | 'discarded' | 'claimed', id: string, turn?: number]> = []
  const notify: InboxNotify = {
    inserted: message => {
      log.push(['inserted', message.id])
    },
    discarded: message => {
      log.push(['discarded', message.id])
    },
    claimed: (message, turn) => {
      log.push(['claimed', message.id, turn])
    },
  }
  const inbox = new Inbox(session, notify)
  const splices = (from = 0) =>
    session.events
      .slice(from)
      .filter(e => e.type === 'agent/inbox/spliced')
      .map(e => e.data)
  const ids = (list: readonly UserMessage[]) => list.map(m => m.id)
  return { session, inbox, log, splices, ids }
}

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!()
})

/** A root like harness.ts, plus a persistence over `logs` (one store across restarts), with an owner plugin context. */
async function persistentRoot(logs: MemoryLogs, script: ScriptStep[]) {
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: '' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  const backend = await root.plugin(MemoryPersistence, { logs })
  const fiber = await root.plugin({ name: 'test-host', inject: ['systemPrompt', 'sessions', 'llm', 'tools', 'agents'], apply() {} })
  const adapter = new MockAdapter(script)
  fiber.ctx.llm.registerAdapter(['mock'], adapter)
  return { root, ctx: fiber.ctx, adapter, backend }
}

describe('inbox unit behaviour (spec 1.8)', () => {
  it('normalizes splice coordinates like Array.prototype.splice', () => {
    const { inbox, session, splices, ids, log } = standalone()
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(t => userText(t))

    // start beyond the length is capped; fractional values truncate
    expect(inbox.splice('next-turn', 99.7, 0, [a])).toEqual([])
    expect(inbox.splice('next-turn', 1.9, 0.5, [b])).toEqual([])
    // a negative start beyond the length floors at 0
    expect(inbox.splice('next-turn', -10, 0, [c])).toEqual([])
    expect(ids(inbox.nextTurn)).toEqual([c.id, a.id, b.id])
    expect(splices()).toEqual([
      { target: 'next-turn', start: 0, inserted: [a] },
      { target: 'next-turn', start: 1, inserted: [b] },
      { target: 'next-turn', start: 0, inserted: [c] },
    ])

    // deleteCount is clamped to [0, len - start]; negative start counts from the end
    const before = session.events.length
    const removed = inbox.splice('next-turn', -2, Infinity, [d])
    expect(ids(removed)).toEqual([a.id, b.id])
    expect(ids(inbox.nextTurn)).toEqual([c.id, d.id])
    expect(splices(before)).toEqual([{ target: 'next-turn', start: 1, removedCount: 2, inserted: [d], outcome: 'canceled' }])

    // a negative deleteCount removes nothing
    const mark = session.events.length
    expect(inbox.splice('next-turn', 0, -5, [])).toEqual([])
    // a splice that removes and inserts nothing is a no-op without an event
    expect(inbox.splice('next-turn', 1, 0, [])).toEqual([])
    expect(inbox.splice('next-step', 0, 3, [])).toEqual([])
    expect(session.events.length).toBe(mark)

    expect(log).toEqual([
      ['inserted', a.id],
      ['inserted', b.id],
      ['inserted', c.id],
      ['discarded', a.id],
      ['discarded', b.id],
      ['inserted', d.id],
    ])
  })

  it('writes the durable splice first: a vetoed append leaves both lists unchanged', async () => {
    const { inbox, session, log, ids } = standalone()
    const ok = userText('ok')
    inbox.append('next-turn', ok)
    const count = session.events.length
    // structured-clonable, but not JSON: the session append refuses it
    const bad = { ...userText('bad'), extra: Number.NaN } as unknown as UserMessage
    expect(() => inbox.append('next-turn', bad)).toThrow(/non-JSON-serializable/)
    expect(() => inbox.append('next-step', bad)).toThrow(/non-JSON-serializable/)
    expect(() => inbox.replace(ok.id, bad)).toThrow(/non-JSON-serializable/)
    expect(session.events.length).toBe(count)
    expect(ids(inbox.nextTurn)).toEqual([ok.id])
    expect(inbox.nextStep).toEqual([])
    expect(log).toEqual([['inserted', ok.id]])
    // the refused message's id is not pending
    const fixed = { ...userText('fixed'), id: bad.id }
    inbox.append('next-step', fixed)
    expect(inbox.nextStep).toEqual([fixed])

    // through the agent: the send throws, nothing is queued and no wake starts
    const h = await harness({ script: [] })
    expect(() => h.agent.followup(bad)).toThrow(/non-JSON-serializable/)
    expect(h.events()).toEqual([])
    expect(h.agent.inbox.hasPending).toBe(false)
    expect(h.agent.status).toBe('idle')
    expect(h.statuses).toEqual([])
    expect(h.adapter.requests).toHaveLength(0)
  })

  it('synchronous session observers see the list as it was before the splice', async () => {
    const h = await harness({ script: [] })
    const seen: Array<{ type: string; pending: string[] }> = []
    const notified: Array<{ pending: string[] }> = []
    h.ctx.on('session/event', (session, event) => {
      if (session === h.agent.session) seen.push({ type: event.type, pending: h.agent.inbox.nextStep.map(textOf) })
    })
    h.agent.ctx.on('agent/inbox/inserted', () => {
      notified.push({ pending: h.agent.inbox.nextStep.map(textOf) })
    })
    h.agent.inject(plugin('one'))
    h.agent.inject(plugin('two'))
    expect(seen).toEqual([
      { type: 'agent/inbox/spliced', pending: [] },
      { type: 'agent/inbox/spliced', pending: ['one'] },
    ])
    expect(notified).toEqual([{ pending: ['one'] }, { pending: ['one', 'two'] }])
  })

  it('claims next-step before next-turn, as pure deletions', () => {
    const { inbox, session, splices, ids, log } = standalone()
    const [p1, p2] = [userText('p1'), userText('p2')]
    const [s1, s2] = [plugin('s1'), plugin('s2')]
    inbox.append('next-turn', p1)
    inbox.append('next-turn', p2)
    inbox.append('next-step', s1)
    inbox.append('next-step', s2)
    log.length = 0
    const from = session.events.length

    expect(ids(inbox.claim('next-turn', 3))).toEqual([s1.id, s2.id, p1.id])
    expect(splices(from)).toEqual([
      { target: 'next-step', start: 0, removedCount: 2, inserted: [] },
      { target: 'next-turn', start: 0, removedCount: 1, inserted: [] },
    ])
    expect(log).toEqual([
      ['claimed', s1.id, 3],
      ['claimed', s2.id, 3],
      ['claimed', p1.id, 3],
    ])
    expect(ids(inbox.nextTurn)).toEqual([p2.id])
    expect(inbox.nextStep).toEqual([])

    // a next-step claim never takes a prompt; with nothing to take it writes nothing
    const mark = session.events.length
    expect(inbox.claim('next-step', 3)).toEqual([])
    expect(session.events.length).toBe(mark)
    expect(ids(inbox.nextTurn)).toEqual([p2.id])

    // the lists are rebuilt from the log
    const rebuilt = new Inbox(session, { inserted() {}, discarded() {}, claimed() {} })
    expect(ids(rebuilt.nextTurn)).toEqual([p2.id])
    expect(rebuilt.nextStep).toEqual([])
  })
})

describe('5.7 inbox contracts', () => {
  it('(111) clear discards next-step, then next-turn, once', () => {
    const { inbox, session, splices, log } = standalone()
    const turnMsg = userText('prompt')
    const stepMsg = plugin('context')
    inbox.append('next-turn', turnMsg)
    inbox.append('next-step', stepMsg)
    log.length = 0
    const from = session.events.length

    inbox.clear()
    expect(splices(from)).toEqual([
      { target: 'next-step', start: 0, removedCount: 1, inserted: [], outcome: 'canceled' },
      { target: 'next-turn', start: 0, removedCount: 1, inserted: [], outcome: 'canceled' },
    ])
    expect(session.events.length).toBe(from + 2)
    expect(log).toEqual([
      ['discarded', stepMsg.id],
      ['discarded', turnMsg.id],
    ])
    expect(inbox.hasPending).toBe(false)

    inbox.clear()
    expect(session.events.length).toBe(from + 2)
    expect(log).toHaveLength(2)
  })

  it('(112) replace swaps a pending message in place', () => {
    const { inbox, session, splices, log } = standalone()
    const original = userText('original')
    const nextStep = plugin('next step')
    const replacement = userText('replacement')
    const edited = plugin('edited')
    inbox.append('next-turn', original)
    inbox.append('next-step', nextStep)
    const from = session.events.length

    expect(inbox.replace(original.id, replacement)).toBe(true)
    expect(inbox.replace(nextStep.id, edited)).toBe(true)
    expect(inbox.replace('missing-id', userText('nope'))).toBe(false)
    expect(splices(from)).toEqual([
      { target: 'next-turn', start: 0, removedCount: 1, inserted: [replacement], outcome: 'canceled' },
      { target: 'next-step', start: 0, removedCount: 1, inserted: [edited], outcome: 'canceled' },
    ])
    expect(inbox.nextTurn).toEqual([replacement])
    expect(inbox.nextStep).toEqual([edited])
    expect(log.filter(([kind]) => kind === 'discarded').map(([, id]) => id)).toEqual([original.id, nextStep.id])
    expect(log.filter(([kind]) => kind === 'inserted').map(([, id]) => id)).toEqual([original.id, nextStep.id, replacement.id, edited.id])

    const count = session.events.length
    expect(() => inbox.replace(replacement.id, edited)).toThrow(`message "${edited.id}" is already pending`)
    expect(session.events.length).toBe(count)
    expect(inbox.nextTurn).toEqual([replacement])
  })

  it('(113) splice normalization: NaN coordinates and a negative start', () => {
    const { inbox, ids } = standalone()
    const a = userText('a')
    const b = userText('b')
    expect(inbox.splice('next-turn', Number.NaN, Number.NaN, [a, b])).toEqual([])
    expect(ids(inbox.nextTurn)).toEqual([a.id, b.id])
    expect(ids(inbox.splice('next-turn', -1, 1, []))).toEqual([b.id])
    expect(ids(inbox.nextTurn)).toEqual([a.id])
    expect(inbox.remove(b.id)).toBe(false)
    expect(() => inbox.append('next-step', a)).toThrow(`message "${a.id}" is already pending`)
    expect(inbox.nextStep).toEqual([])
  })

  it('(114) notifications: inserted, discarded, claimed after turn/start', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const order: string[] = []
    const inserted: string[] = []
    const discarded: string[] = []
    const claimed: Array<{ message: string; turn: number }> = []
    h.ctx.on('session/event', (session, event) => {
      if (session === h.agent.session) order.push(event.type)
    })
    h.agent.ctx.on('agent/inbox/inserted', ({ message }) => {
      inserted.push(message.id)
      order.push('inserted')
    })
    h.agent.ctx.on('agent/inbox/discarded', ({ message }) => {
      discarded.push(message.id)
      order.push('discarded')
    })
    h.agent.ctx.on('agent/inbox/claimed', ({ message, turn }) => {
      claimed.push({ message: message.id, turn })
      order.push('claimed')
    })

    const c = plugin('context')
    const p = userText('prompt')
    h.agent.inject(c)
    expect(h.agent.inbox.remove(c.id)).toBe(true)
    h.agent.followup(p)
    await h.settle()

    expect(inserted).toEqual([c.id, p.id])
    expect(discarded).toEqual([c.id])
    expect(claimed).toEqual([{ message: p.id, turn: 1 }])
    expect(order.slice(0, 9)).toEqual([
      'agent/inbox/spliced',
      'inserted',
      'agent/inbox/spliced',
      'discarded',
      'agent/inbox/spliced',
      'inserted',
      'turn/start',
      'agent/inbox/spliced',
      'claimed',
    ])
    expect(h.events()[1].data).toEqual({ target: 'next-step', start: 0, removedCount: 1, inserted: [], outcome: 'canceled' })
    expect(h.adapter.requests[0].messages).toEqual([p])
  })

  it('(115) replay validation rejects an impossible persisted splice', () => {
    const session = Session.create('replay', [
      { type: 'agent/inbox/spliced', seq: 0, time: 1, data: { target: 'next-turn', start: 1, inserted: [] } } as SessionEvent,
    ])
    expect(() => new Inbox(session, { inserted() {}, discarded() {}, claimed() {} })).toThrow('invalid persisted inbox splice at session seq 0')
    try {
      new Inbox(session, { inserted() {}, discarded() {}, claimed() {} })
    } catch (error) {
      expect((error as Error).cause).toBeInstanceOf(Error)
    }
  })

  it('(116) a pending inject survives a restart', async () => {
    const logs: MemoryLogs = new Map()

    // lifecycle 1: a turn, then a pending inject; flush and dispose
    const one = await persistentRoot(logs, [textResponse('ok')])
    const a1 = one.ctx.agents.create('a1', { provider: 'mock', model: 'mock' })
    a1.followup(userText('first'))
    await a1.idle()
    const notice = plugin('background job 42 finished')
    a1.inject(notice)
    expect(a1.status).toBe('idle')
    await one.ctx.sessions.flush(a1.session)
    const storedLength = a1.session.events.length
    await a1.dispose()
    await one.backend.dispose()

    // lifecycle 2: resume
    const two = await persistentRoot(logs, [textResponse('continued')])
    const a2 = await two.ctx.agents.resume('a1')
    cleanups.push(() => a2.dispose())
    expect(a2.session.events.length).toBeGreaterThanOrEqual(storedLength)
    expect(a2.inbox.nextStep).toEqual([notice])
    expect(a2.inbox.nextTurn).toEqual([])
    expect(a2.status).toBe('idle')
    const resumedAt = a2.session.events.length

    a2.followup(userText('continue'))
    await a2.idle()

    const texts = a2.session.deriveMessages().map(textOf)
    expect(texts).toContain('background job 42 finished')
    expect(texts).toEqual(['first', 'ok', 'background job 42 finished', 'continue', 'continued'])
    const after = a2.session.events.slice(resumedAt)
    expect(after.filter(e => e.type === 'turn/start').map(e => e.data)).toEqual([{ turn: 2 }])
    expect(a2.session.events.filter(e => e.type === 'turn/start')).toHaveLength(2)
    const turn2Users = after.filter(e => e.type === 'user/message').map(e => textOf(e.data as UserMessage))
    expect(turn2Users).toEqual(['background job 42 finished', 'continue'])
    expect(two.adapter.requests).toHaveLength(1)
    expect(a2.inbox.hasPending).toBe(false)
  })
})
