// `agents.create` with delegation metadata: where a subagent's session comes from, in its header.
import { describe, expect, it } from 'vitest'
import { harness } from './harness.ts'

describe('delegation metadata of create()', () => {
  it('is recorded in the session header', async () => {
    const h = await harness()
    const child = h.ctx.agents.create('a1-child', { provider: 'mock', model: 'mock', parentSession: 'a1', origin: 'subagent', delegationDepth: 1 })
    expect(child.session.header).toMatchObject({ id: 'a1-child', parentSession: 'a1', origin: 'subagent', delegationDepth: 1 })
    expect(h.agent.session.header).not.toHaveProperty('origin')
    expect(h.agent.session.header).not.toHaveProperty('parentSession')
  })

  it('refuses a bad depth, origin or parent, naming the agent, and creates nothing', async () => {
    const h = await harness()
    expect(() => h.ctx.agents.create('bad-depth', { delegationDepth: -1 })).toThrow(
      'agent "bad-depth": delegationDepth must be a non-negative safe integer, got -1',
    )
    expect(() => h.ctx.agents.create('bad-depth', { delegationDepth: 1.5 })).toThrow('delegationDepth must be a non-negative safe integer')
    // @ts-expect-error only 'subagent' is an origin
    expect(() => h.ctx.agents.create('bad-origin', { origin: 'fork' })).toThrow(`agent "bad-origin": origin must be 'subagent', got "fork"`)
    expect(() => h.ctx.agents.create('bad-parent', { parentSession: '' })).toThrow('agent "bad-parent": parentSession must be a non-empty session id')
    expect(h.ctx.agents.list().map(agent => agent.id)).toEqual(['a1'])
  })
})
