// MemoryPersistence (@loom/session/testing): one store across "restarts".
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { SessionStore } from '../src/store.ts'
import { type MemoryLogs, MemoryPersistence } from '../src/testing/index.ts'
import { appendOpenTurn } from './helpers.ts'

async function host(logs: MemoryLogs) {
  const root = new Context()
  await root.plugin(SessionStore)
  await root.plugin(MemoryPersistence, { logs })
  const fiber = await root.plugin({ name: 'host', inject: ['sessions', 'sessionPersistence'], apply() {} })
  return fiber.ctx
}

describe('MemoryPersistence', () => {
  it('keeps every event of a live session, and a second host resumes it with the open turn closed', async () => {
    const logs: MemoryLogs = new Map()
    const first = await host(logs)
    const session = first.sessions.create('m1')
    appendOpenTurn(session, 1)
    expect(logs.get('m1')!.events.map(event => event.type)).toEqual(['turn/start', 'step/start', 'user/message'])

    const second = await host(logs)
    const resumed = await second.sessionPersistence.prepare('m1')
    expect(resumed.events.map(event => event.type)).toEqual(['turn/start', 'step/start', 'user/message', 'step/end', 'turn/end', 'session/end-seed'])
    const detach = second.sessions.enter(resumed)
    second.sessions.announce(resumed)
    resumed.append('turn/start', { turn: 2 })
    expect(
      logs
        .get('m1')!
        .events.map(event => event.type)
        .slice(-3),
    ).toEqual(['turn/end', 'session/end-seed', 'turn/start'])
    detach()
    await expect(second.sessionPersistence.prepare('missing')).rejects.toThrow('no stored session "missing" in memory')
  })
})
