import { afterEach, describe, expect, test } from 'vitest'
import type { Agent } from '@loom/agent-loop'
import { renderPrompt } from '@loom/system-prompt'
import { createHost, SCRIPTED_MODEL, SCRIPTED_PROVIDER, type Host } from '@loom/testkit'
import * as plugin from '../src/index.ts'

const CWD = '/workspace/project'
const IDENTITY = 'You are an AI agent powered by Loom.'
const hosts: Host[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
})

async function host(persona = '') {
  const created = await createHost({ cwd: CWD, prompt: { persona } })
  hosts.push(created)
  return created
}

const agent = (h: Host, id: string) => h.ctx.agents.create(id, { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
const system = async (h: Host, a: Agent) => renderPrompt(await h.ctx.systemPrompt.assemble({ agent: a, scope: a }))

describe('every agent (no `agents` list)', () => {
  test("the delta is one static section deployment:persona at order 0, in the agent's scope", async () => {
    const h = await host()
    const mounted = await h.mount(plugin, { persona: 'You review code for {{model}}.' })
    expect(await mounted.delta()).toEqual({
      sections: [
        { name: 'deployment:persona', order: 0, stability: 'static', text: 'You review code for {{model}}.', rendered: 'You review code for scripted.' },
      ],
      contexts: [],
      tools: [],
      variables: [],
    })
  })

  test("the assembled deployment:persona of an agent is owned by @loom/persona, in the agent's layer only", async () => {
    const h = await host('The global persona.')
    const before = agent(h, 'before')
    await h.mount(plugin, { persona: 'A terse reviewer.' })
    const after = agent(h, 'after')
    for (const a of [before, after]) {
      const sections = (await h.ctx.systemPrompt.assemble({ agent: a, scope: a })).sections
      expect(sections.find(s => s.name === 'deployment:persona')).toMatchObject({ text: 'A terse reviewer.', owner: '@loom/persona' })
    }
    // The global layer keeps the service's own persona.
    expect((await h.ctx.systemPrompt.assemble()).sections.find(s => s.name === 'deployment:persona')).toMatchObject({
      text: 'The global persona.',
      owner: '@loom/system-prompt',
    })
  })

  test('it shadows the deployment persona for agents created before and after it starts', async () => {
    const h = await host('The global persona.')
    const before = agent(h, 'before')
    expect(await system(h, before)).toBe(`${IDENTITY}\n\nThe global persona.`)
    const mounted = await h.mount(plugin, { persona: 'A terse reviewer.' })
    const after = agent(h, 'after')
    expect(await system(h, before)).toBe(`${IDENTITY}\n\nA terse reviewer.`)
    expect(await system(h, after)).toBe(`${IDENTITY}\n\nA terse reviewer.`)
    // The global layer is untouched.
    expect(renderPrompt(await h.ctx.systemPrompt.assemble())).toBe(`${IDENTITY}\n\nThe global persona.`)

    h.scriptedModel(['ok'])
    const run = await h.run('hi')
    expect(run.requests[0].system).toBe(`${IDENTITY}\n\nA terse reviewer.`)

    await after.dispose()
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    expect(await system(h, before)).toBe(`${IDENTITY}\n\nThe global persona.`)
  })

  test('an empty persona switches the deployment persona off', async () => {
    const h = await host('The global persona.')
    await h.mount(plugin, { persona: '' })
    h.scriptedModel(['ok'])
    expect((await h.run('hi')).requests[0].system).toBe(IDENTITY)
  })
})

describe('chosen agents', () => {
  test('only the agents named in `agents` get the persona', async () => {
    const h = await host('Global.')
    const early = agent(h, 'reviewer')
    const mounted = await h.mount(plugin, { persona: 'Reviewer persona.', agents: ['reviewer', 'planner'] })
    const planner = agent(h, 'planner')
    const other = agent(h, 'coder')
    expect(await system(h, early)).toBe(`${IDENTITY}\n\nReviewer persona.`)
    expect(await system(h, planner)).toBe(`${IDENTITY}\n\nReviewer persona.`)
    expect(await system(h, other)).toBe(`${IDENTITY}\n\nGlobal.`)
    // A probe agent of the kit is not named: the delta is empty.
    expect((await mounted.delta()).sections).toEqual([])
    await planner.dispose()
    await other.dispose()
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    expect(await system(h, early)).toBe(`${IDENTITY}\n\nGlobal.`)
  })

  test("`agents` names an agent by its name too: a role across sessions, such as the CLI's `main`", async () => {
    const h = await host('Global.')
    const named = (id: string, name?: string) => h.ctx.agents.create(id, { name, provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
    const early = named('20261129-134221-k3f9', 'main')
    const mounted = await h.mount(plugin, { persona: 'Main persona.', agents: ['main'] })
    const later = named('20261129-134305-a1b2', 'main')
    const helper = named('20261129-134307-c3d4', 'helper')
    const unnamed = named('20261129-134309-e5f6')
    expect(await system(h, early)).toBe(`${IDENTITY}\n\nMain persona.`)
    expect(await system(h, later)).toBe(`${IDENTITY}\n\nMain persona.`)
    expect(await system(h, helper)).toBe(`${IDENTITY}\n\nGlobal.`)
    expect(await system(h, unnamed)).toBe(`${IDENTITY}\n\nGlobal.`)
    for (const a of [later, helper, unnamed]) await a.dispose()
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    expect(await system(h, early)).toBe(`${IDENTITY}\n\nGlobal.`)
  })

  test('an empty `agents` list means every agent', async () => {
    const h = await host()
    const mounted = await h.mount(plugin, { persona: 'Everyone.', agents: [] })
    expect((await mounted.delta()).sections.map(s => s.rendered)).toEqual(['Everyone.'])
  })
})

describe('complete mode', () => {
  test('the persona becomes the whole system prompt of the chosen agents', async () => {
    const h = await host('Global.')
    const other = agent(h, 'other')
    await h.root.plugin({
      name: 'guidance',
      inject: ['systemPrompt'],
      apply: ctx => {
        ctx.systemPrompt.section({ name: 'tool:guide', order: 100, text: 'Use the tools.' })
      },
    })
    const chosen = agent(h, 'chosen')
    const mounted = await h.mount(plugin, { persona: 'Only this.', complete: true, agents: ['chosen'] })
    expect(await system(h, chosen)).toBe('Only this.')
    expect(await system(h, other)).toBe(`${IDENTITY}\n\nGlobal.\n\nUse the tools.`)
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    expect(await system(h, chosen)).toBe(`${IDENTITY}\n\nGlobal.\n\nUse the tools.`)
  })

  test('in a run', async () => {
    const h = await host()
    await h.mount(plugin, { persona: 'You are Yuki.', complete: true })
    h.scriptedModel(['ok'])
    expect((await h.run('hi')).requests[0].system).toBe('You are Yuki.')
  })
})

describe('lifecycle', () => {
  test('an agent that goes takes its registration; unloading later is clean', async () => {
    const h = await host()
    const mounted = await h.mount(plugin, { persona: 'P.' })
    const gone = agent(h, 'gone')
    expect(await system(h, gone)).toBe(`${IDENTITY}\n\nP.`)
    await gone.dispose()
    // Removed on `agent/disposed` while the plugin stays loaded: nothing is left in the gone agent's layer.
    expect((await h.ctx.systemPrompt.assemble({ scope: gone })).sections.find(s => s.name === 'deployment:persona')?.owner).toBe('@loom/system-prompt')
    const again = agent(h, 'gone') // same id, new agent
    expect(await system(h, again)).toBe(`${IDENTITY}\n\nP.`)
    await again.dispose()
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
  })

  test('after unload, new agents get the deployment persona again', async () => {
    const h = await host('Global.')
    const mounted = await h.mount(plugin, { persona: 'P.' })
    await mounted.dispose()
    const fresh = agent(h, 'fresh')
    expect(await system(h, fresh)).toBe(`${IDENTITY}\n\nGlobal.`)
  })

  test('`persona` is required (an empty string is allowed and switches the persona off)', async () => {
    const h = await host()
    await expect(h.mount(plugin, {})).rejects.toThrow(
      'plugin "@loom/persona" failed to start: invalid config:\n  - $.persona missing required value (at persona)',
    )
  })

  test('a second persona for the same agent fails loudly, naming the agent', async () => {
    const h = await host()
    agent(h, 'x')
    const first = await h.mount(plugin, { persona: 'First.' })
    await expect(h.mount(plugin, { persona: 'Second.' })).rejects.toThrow(
      '@loom/persona: cannot set the persona of agent "x": prompt section "deployment:persona" is already registered in this scope',
    )
    await first.dispose()
    await h.assertZeroResidue(first)
  })
})
