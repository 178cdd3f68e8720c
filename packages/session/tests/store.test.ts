// SessionStore: ids, publication, observers, ownership, flush and fork (spec §1.5, §3.7, §3.8; contract 125).
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import type { SessionEvent } from '../src/events.ts'
import { Session } from '../src/session.ts'
import { SessionForkError, SessionStore, type SessionForkErrorCode } from '../src/store.ts'
import { appendOpenTurn, appendToolTurn, isDeepFrozen } from './helpers.ts'

async function host() {
  const root = new Context()
  const errors: unknown[] = []
  root.logger.exporter({
    levels: { default: 3 },
    export(message) {
      if (message.type === 'error') errors.push(message.args[0])
    },
  })
  await root.plugin(SessionStore)
  const fiber = await root.plugin({ name: 'host', inject: ['sessions'], apply() {} })
  const ctx = fiber.ctx
  return { root, ctx, sessions: ctx.sessions, errors }
}

/** Lets promise callbacks (rejection logging) run. */
const settle = () => new Promise<void>(resolve => setTimeout(resolve, 0))

function caught(fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

function forkError(fn: () => unknown, code: SessionForkErrorCode): SessionForkError {
  const error = caught(fn)
  expect(error).toBeInstanceOf(SessionForkError)
  expect(error).toMatchObject({ name: 'SessionForkError', code })
  return error as SessionForkError
}

describe('create', () => {
  it('mints session-1, session-2, … from a per-store counter', async () => {
    const { sessions } = await host()
    expect(sessions.create().id).toBe('session-1')
    expect(sessions.create().id).toBe('session-2')
  })

  it('skips minted ids that are already live', async () => {
    const { sessions } = await host()
    sessions.create('session-1')
    expect(sessions.create().id).toBe('session-2')
  })

  it('throws on an id that is already live', async () => {
    const { sessions } = await host()
    const first = sessions.create('dup')
    expect(() => sessions.create('dup')).toThrow(/^session "dup" already exists$/)
    expect(() => sessions.prepare('dup')).toThrow(/session "dup" already exists/)
    expect(sessions.get('dup')).toBe(first)
  })

  it('throws on a relative cwd', async () => {
    const { sessions } = await host()
    expect(() => sessions.create('s', { meta: { cwd: 'work/dir' } })).toThrow(/^session header cwd must be an absolute path, got "work\/dir"$/)
    expect(sessions.get('s')).toBeUndefined()
  })

  it('writes the meta into the session header', async () => {
    const { sessions } = await host()
    const session = sessions.create('s', { meta: { cwd: '/workspace', createdAt: 42, origin: 'subagent', delegationDepth: 1, agentPreset: 'p' } })
    expect(session.header).toEqual({ version: 0, id: 's', createdAt: 42, cwd: '/workspace', origin: 'subagent', delegationDepth: 1, agentPreset: 'p' })
  })

  it('builds a seeded session with an end-seed marker', async () => {
    const { sessions } = await host()
    const source = Session.create('src')
    appendToolTurn(source, 1)
    const session = sessions.create('s', { seed: source.events })
    expect(session.events.slice(0, -1)).toEqual(source.events)
    expect(session.events.at(-1)!.type).toBe('session/end-seed')
    expect(session.firstLiveSeq).toBe(source.events.length)
  })

  it('lists live sessions in creation order', async () => {
    const { sessions } = await host()
    const b = sessions.create('b')
    const a = sessions.create('a')
    const c = sessions.create()
    expect(sessions.list()).toEqual([b, a, c])
    expect(sessions.get('a')).toBe(a)
    expect(sessions.get('zzz')).toBeUndefined()
  })
})

describe('publication', () => {
  it('emits session/created once per session', async () => {
    const { ctx, sessions } = await host()
    const created: Session[] = []
    ctx.on('session/created', session => {
      created.push(session)
    })
    const session = sessions.create('s')
    expect(created).toEqual([session])
    sessions.announce(session)
    expect(created).toHaveLength(1)
  })

  it('publishes a prepared session only when entered and announced', async () => {
    const { ctx, sessions } = await host()
    const created: Session[] = []
    const disposed: Session[] = []
    ctx.on('session/created', session => {
      created.push(session)
    })
    ctx.on('session/disposed', session => {
      disposed.push(session)
    })
    const session = sessions.prepare('p')
    expect(sessions.get('p')).toBeUndefined()
    const detach = sessions.enter(session)
    expect(sessions.get('p')).toBe(session)
    expect(created).toEqual([])
    sessions.announce(session)
    expect(created).toEqual([session])
    detach()
    detach()
    expect(sessions.get('p')).toBeUndefined()
    expect(disposed).toEqual([session])
  })

  it('rolls the session back when a session/created listener throws', async () => {
    const { ctx, sessions } = await host()
    const disposed: Session[] = []
    ctx.on('session/disposed', session => {
      disposed.push(session)
    })
    const veto = new Error('vetoed')
    const off = ctx.on('session/created', () => {
      throw veto
    })
    expect(caught(() => sessions.create('v'))).toBe(veto)
    expect(sessions.get('v')).toBeUndefined()
    expect(sessions.list()).toEqual([])
    expect(disposed).toEqual([])
    off()
    const session = sessions.create('v')
    expect(sessions.get('v')).toBe(session)
  })

  it('emits session/event for each committed append with the stored event', async () => {
    const { ctx, sessions } = await host()
    const heard: [Session, SessionEvent][] = []
    ctx.on('session/event', (session, event) => {
      heard.push([session, event])
    })
    const session = sessions.create('s')
    const a = session.append('turn/start', { turn: 1 })
    const b = session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    expect(heard).toHaveLength(2)
    expect(heard[0][0]).toBe(session)
    expect(heard[0][1]).toBe(a)
    expect(heard[1][1]).toBe(b)
  })

  it('does not publish a rejected append', async () => {
    const { ctx, sessions } = await host()
    const heard: SessionEvent[] = []
    ctx.on('session/event', (_, event) => {
      heard.push(event)
    })
    const session = sessions.create('s')
    expect(() => session.append('turn/start', { turn: 1n as unknown as number })).toThrow(/non-JSON/)
    expect(heard).toEqual([])
  })

  it('does not publish the end-seed marker of a seeded session', async () => {
    const { ctx, sessions } = await host()
    const heard: SessionEvent[] = []
    ctx.on('session/event', (_, event) => {
      heard.push(event)
    })
    const session = sessions.create('s', { seed: [] })
    expect(session.events).toHaveLength(1)
    expect(heard).toEqual([])
  })

  it('contains and logs a session/event listener that throws, keeping the append', async () => {
    const { ctx, sessions, errors } = await host()
    const failure = new Error('observer broke')
    const later: number[] = []
    ctx.on('session/event', () => {
      throw failure
    })
    ctx.on('session/event', (_, event) => {
      later.push(event.seq)
    })
    const session = sessions.create('s')
    const event = session.append('turn/start', { turn: 1 })
    expect(session.events).toEqual([event])
    expect(later).toEqual([0])
    expect(errors).toContain(failure)
  })

  it('contains and logs a session/event listener that rejects, keeping the append', async () => {
    const { ctx, sessions, errors } = await host()
    const failure = new Error('async observer broke')
    ctx.on('session/event', async () => {
      throw failure
    })
    const session = sessions.create('s')
    const event = session.append('turn/start', { turn: 1 })
    expect(session.events).toEqual([event])
    await settle()
    expect(errors).toContain(failure)
  })

  it('detaches the sessions of a disposed plugin and emits session/disposed', async () => {
    const { root, ctx, sessions } = await host()
    const disposed: Session[] = []
    const heard: SessionEvent[] = []
    ctx.on('session/disposed', session => {
      disposed.push(session)
    })
    ctx.on('session/event', (_, event) => {
      heard.push(event)
    })
    const owner = await root.plugin({ name: 'owner', inject: ['sessions'], apply() {} })
    const owned = owner.ctx.sessions.create('owned')
    const kept = sessions.create('kept')
    expect(sessions.list()).toEqual([owned, kept])
    await owner.dispose()
    expect(sessions.get('owned')).toBeUndefined()
    expect(sessions.list()).toEqual([kept])
    expect(disposed).toEqual([owned])
    owned.append('turn/start', { turn: 1 })
    expect(heard).toEqual([])
    expect(owned.events).toHaveLength(1)
  })
})

describe('flush', () => {
  it('returns false without session/flush listeners', async () => {
    const { sessions } = await host()
    await expect(sessions.flush(sessions.create('s'))).resolves.toBe(false)
  })

  it('returns true once a listener made the session durable', async () => {
    const { ctx, sessions } = await host()
    const flushed: Session[] = []
    ctx.on('session/flush', async session => {
      flushed.push(session)
    })
    const session = sessions.create('s')
    await expect(sessions.flush(session)).resolves.toBe(true)
    expect(flushed).toEqual([session])
  })

  it('rejects with the first failure after every listener ran', async () => {
    const { ctx, sessions } = await host()
    const first = new Error('first')
    const second = new Error('second')
    let slowDone = false
    ctx.on('session/flush', async () => {
      throw first
    })
    ctx.on('session/flush', async () => {
      await new Promise(resolve => setTimeout(resolve, 5))
      slowDone = true
      throw second
    })
    await expect(sessions.flush(sessions.create('s'))).rejects.toBe(first)
    expect(slowDone).toBe(true)
  })
})

describe('fork (125)', () => {
  async function parentWithTurns() {
    const h = await host()
    const parent = h.sessions.create('parent', { meta: { cwd: '/workspace' } })
    const turn1 = appendToolTurn(parent, 1)
    const turn2 = appendToolTurn(parent, 2)
    const turn3 = appendOpenTurn(parent, 3)
    return { ...h, parent, turn1, turn2, turn3 }
  }

  it('seeds the child with the events up to the boundary', async () => {
    const { sessions, parent, turn1 } = await parentWithTurns()
    const b = turn1.turnEnd
    const child = sessions.fork(parent, b, 'child-from-first')
    expect(child.id).toBe('child-from-first')
    expect(child.events.slice(0, b + 1)).toEqual(parent.events.slice(0, b + 1))
    expect(child.events).toHaveLength(b + 2)
    expect(child.events[b + 1]).toMatchObject({ type: 'session/end-seed', seq: b + 1, data: {} })
    expect(child.firstLiveSeq).toBe(b + 1)
    expect(child.deriveMessages()).toEqual(parent.deriveMessages().slice(0, 3))
  })

  it('records cwd, parentSession and seedLength in the child header', async () => {
    const { sessions, parent, turn1 } = await parentWithTurns()
    const child = sessions.fork(parent, turn1.turnEnd, 'child-from-first')
    expect(child.header).toMatchObject({ version: 0, id: 'child-from-first', cwd: '/workspace', parentSession: 'parent', seedLength: turn1.turnEnd + 1 })
  })

  it('gives the child deep-frozen copies of the parent events', async () => {
    const { sessions, parent, turn2 } = await parentWithTurns()
    const child = sessions.fork(parent, turn2.turnEnd, 'c')
    expect(child.events[0]).not.toBe(parent.events[0])
    expect(isDeepFrozen(child.events)).toBe(true)
  })

  it('publishes the child as a live session', async () => {
    const { ctx, sessions, parent, turn1 } = await parentWithTurns()
    const created: Session[] = []
    ctx.on('session/created', session => {
      created.push(session)
    })
    const child = sessions.fork('parent', turn1.turnEnd)
    expect(child.id).toBe('session-1')
    expect(sessions.get(child.id)).toBe(child)
    expect(created).toEqual([child])
    expect(sessions.list()).toEqual([parent, child])
  })

  it('forks the whole log by default when no turn is open', async () => {
    const { sessions } = await host()
    const parent = sessions.create('p')
    appendToolTurn(parent, 1)
    const child = sessions.fork(parent, undefined, 'c')
    expect(child.events.slice(0, -1)).toEqual(parent.events)
    expect(child.header.seedLength).toBe(parent.events.length)
    expect(child.header).not.toHaveProperty('cwd')
  })

  it('refuses a boundary inside an open turn with OPEN_TURN', async () => {
    const { sessions, parent, turn3 } = await parentWithTurns()
    const error = forkError(() => sessions.fork(parent, turn3.user, 'c'), 'OPEN_TURN')
    expect(error.message).toMatch(new RegExp(`^fork boundary ${turn3.user} in session "parent" ends inside open turn 3$`))
    forkError(() => sessions.fork(parent, undefined, 'c'), 'OPEN_TURN')
    expect(sessions.get('c')).toBeUndefined()
  })

  it('refuses a boundary inside an earlier, since closed turn with OPEN_TURN', async () => {
    const { sessions, parent, turn1, turn2 } = await parentWithTurns()
    expect(forkError(() => sessions.fork(parent, turn1.toolResult), 'OPEN_TURN').message).toMatch(/ends inside open turn 1$/)
    expect(forkError(() => sessions.fork(parent, turn2.turnStart), 'OPEN_TURN').message).toMatch(/ends inside open turn 2$/)
  })

  it('checks SESSION_ALREADY_EXISTS before the source and the boundary', async () => {
    const { sessions, parent } = await parentWithTurns()
    sessions.create('taken')
    expect(forkError(() => sessions.fork(parent, 9999, 'taken'), 'SESSION_ALREADY_EXISTS').message).toMatch(/session "taken" already exists/)
    forkError(() => sessions.fork(parent, undefined, 'taken'), 'SESSION_ALREADY_EXISTS')
    forkError(() => sessions.fork('missing', 0, 'taken'), 'SESSION_ALREADY_EXISTS')
  })

  it('refuses an unknown source id with SESSION_NOT_FOUND', async () => {
    const { sessions } = await parentWithTurns()
    expect(forkError(() => sessions.fork('missing'), 'SESSION_NOT_FOUND').message).toMatch(/session "missing" not found/)
  })

  it('refuses a detached Session object with SESSION_NOT_LIVE', async () => {
    const { sessions, parent } = await parentWithTurns()
    const detached = Session.create('parent', parent.events.slice(0, 8))
    expect(forkError(() => sessions.fork(detached, 0, 'c'), 'SESSION_NOT_LIVE').message).toMatch(/session "parent" is not a live session/)
    forkError(() => sessions.fork(Session.create('other'), undefined, 'c'), 'SESSION_NOT_LIVE')
  })

  it.each([[-1], [1.5], [NaN], ['events.length']])('refuses the boundary %s with INVALID_BOUNDARY', async boundary => {
    const { sessions, parent } = await parentWithTurns()
    const b = boundary === 'events.length' ? parent.events.length : (boundary as number)
    forkError(() => sessions.fork(parent, b, 'c'), 'INVALID_BOUNDARY')
    expect(sessions.get('c')).toBeUndefined()
  })

  it('forks an empty source into a child holding only the end-seed marker', async () => {
    const { sessions } = await host()
    sessions.create('empty')
    const child = sessions.fork('empty', undefined, 'c')
    expect(child.events).toHaveLength(1)
    expect(child.events[0]).toMatchObject({ type: 'session/end-seed', seq: 0, data: {} })
    expect(child.firstLiveSeq).toBe(0)
    expect(child.header).toMatchObject({ parentSession: 'empty', seedLength: 0 })
  })
})
