// Provenance in every request header, attribution of header changes to the
// sections, tools and config keys that broke the cached prefix, and pinned prompts.
import { createHash } from 'node:crypto'
import type { Context } from '@deepseek-ai/cordis'
import type { GenerateOptions, LlmCallConfig } from '@loom/llm'
import { describeHeaderChanges, type SessionEvent, type SessionEventMap } from '@loom/session'
import type { MemoryLogs } from '@loom/session/testing'
import { defineTool } from '@loom/tools'
import { describe, expect, it } from 'vitest'
import { harness, IDENTITY, MockAdapter, textResponse } from './harness.ts'
import { host, ofType, TableAdapter, turn } from './request-support.ts'

type HeaderData = SessionEventMap['request/header']

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex')
const headers = (events: readonly SessionEvent[]) => ofType<HeaderData>(events, 'request/header')
// Tools, then the system text, one JSON value per line: the serialization prefix reuse measures too.
const prefix = (request: GenerateOptions) => `${JSON.stringify(request.tools ?? [])}\n${JSON.stringify(request.system ?? '')}\n`

/** The byte offset where two texts' UTF-8 encodings first differ, computed the slow, obvious way. */
function firstDiff(a: string, b: string): number {
  const x = [...Buffer.from(a)]
  const y = [...Buffer.from(b)]
  let i = 0
  while (i < x.length && i < y.length && x[i] === y[i]) i++
  return i
}

const PARAMETERS = { type: 'object', properties: { text: { type: 'string' } } }
function tool(name: string) {
  return defineTool({ name, description: `The ${name} tool.`, parameters: PARAMETERS, execute: () => `${name} done` })
}
const toolSha = (name: string) => sha(JSON.stringify({ name, description: `The ${name} tool.`, parameters: PARAMETERS }))

/** A plugin named `greeter` with two sections; `one` is its first section's text. */
function greeter(one: string) {
  return {
    name: 'greeter',
    inject: ['systemPrompt'],
    apply(ctx: Context) {
      ctx.systemPrompt.section({ name: 'greeter:one', order: 200, text: one })
      ctx.systemPrompt.section({ name: 'greeter:two', order: 201, text: 'Keep greetings short.' })
    },
  }
}

function onRequest(ctx: Context, edit: (config: LlmCallConfig, payload: { turn: number }) => LlmCallConfig) {
  ctx.on('agent/request', async (payload: { turn: number }, next: () => Promise<LlmCallConfig>) => edit(await next(), payload))
}

describe('provenance in request headers', () => {
  it('the initial header lists every section and tool with its owner and digest, and each plugin with its version', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(tool('echo'))
      },
    })
    await h.root.plugin(greeter('Greet the user.'))
    await turn(h.agent, 'hi')

    const [initial] = headers(h.events())
    expect(initial.reason).toBe('initial')
    const sections = [
      { name: 'harness:identity', owner: '@loom/system-prompt', sha256: sha(IDENTITY) },
      { name: 'greeter:one', owner: 'greeter', sha256: sha('Greet the user.') },
      { name: 'greeter:two', owner: 'greeter', sha256: sha('Keep greetings short.') },
    ]
    // A tool is owned by the plugin that registered it (here the harness's host plugin).
    const tools = [{ name: 'echo', owner: 'test-host', sha256: toolSha('echo') }]
    // Each section also carries what its request's manifest shows of it (order, size, trust, category).
    expect(initial.sources?.sections[1]).toMatchObject({
      stability: 'static',
      chars: 'Greet the user.'.length,
      tokens: 4,
      trust: 'deployment',
      category: 'instructions',
    })
    expect(initial.sources).toEqual({
      sections: sections.map(section => expect.objectContaining(section)),
      tools,
      plugins: [
        // First-party plugins are packages: their version is found. `greeter` and `test-host` are no packages.
        { name: '@loom/system-prompt', version: '0.1.0', digest: sha(JSON.stringify({ sections: [['harness:identity', sha(IDENTITY)]], tools: [] })) },
        {
          name: 'greeter',
          digest: sha(
            JSON.stringify({
              sections: [
                ['greeter:one', sections[1].sha256],
                ['greeter:two', sections[2].sha256],
              ],
              tools: [],
            }),
          ),
        },
        { name: 'test-host', digest: sha(JSON.stringify({ sections: [], tools: [['echo', toolSha('echo')]] })) },
      ],
    })
    // The tool digest is over the exact schema the request carried.
    const [request] = h.adapter.requests
    expect(sha(JSON.stringify(request.tools![0]))).toBe(tools[0].sha256)
    expect(initial.changes).toBeUndefined()
  })

  it('provenance is metadata: an unchanged prompt logs no new header', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    await turn(h.agent, 'first')
    await turn(h.agent, 'second')
    expect(headers(h.events()).map(e => e.reason)).toEqual(['initial'])
  })
})

describe('cache-break attribution', () => {
  it('a section that moves past others is the only change: the sections it passed have not moved', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    await h.root.plugin(greeter('Greet the user.'))
    const mover = (order: number) => ({
      name: 'mover',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => ctx.systemPrompt.section({ name: 'mover:rule', order, text: 'Move along.' }),
    })
    const fiber = await h.root.plugin(mover(150))
    await turn(h.agent, 'first')
    await fiber.dispose()
    await h.root.plugin(mover(300))
    await turn(h.agent, 'second')
    const [, change] = headers(h.events())
    expect(change.changes?.sections).toEqual([{ name: 'mover:rule', owner: 'mover', change: 'changed' }])
  })

  it('a section the budgets leave out when another grows is attributed to the budget and to the section that grew', async () => {
    const h = await harness({
      script: [textResponse('one'), textResponse('two')],
      prompt: { includeHarnessIdentity: false, budgets: { maxChars: 200 } },
    })
    const guide = {
      name: 'guide',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => ctx.systemPrompt.section({ name: 'guide:tools', order: 100, text: 'g'.repeat(80), trust: 'deployment' as const }),
    }
    await h.root.plugin(guide)
    const fiber = await h.root.plugin(greeter('Greet the user.'))
    await turn(h.agent, 'first')
    // The greeter comes back with a longer first section: all three no longer fit, and the guide is the least kept (same trust, then by name).
    await fiber.dispose()
    await h.root.plugin(greeter(`Greet the user. ${'x'.repeat(120)}`))
    await turn(h.agent, 'second')

    const [, change] = headers(h.events())
    expect(change.sources?.leftOut).toEqual(['guide:tools'])
    expect(change.changes?.sections).toContainEqual({ name: 'guide:tools', owner: 'guide', change: 'removed', byBudget: true })
    expect(change.changes?.resized).toEqual([{ name: 'greeter:one', owner: 'greeter', fromChars: 15, toChars: 136 }])
  })

  it('a hot reload that edits one section is attributed to that section and plugin, with the first differing byte', async () => {
    const h = await harness({
      script: [textResponse('one'), textResponse('two')],
      setup: ctx => {
        ctx.tools.register(tool('echo'))
      },
    })
    const fiber = await h.root.plugin(greeter('Greet the user.'))
    await turn(h.agent, 'first')
    // A simulated hot reload: the old version's fiber is gone before the new one activates.
    await fiber.dispose()
    await h.root.plugin(greeter('Greet the user by name.'))
    await turn(h.agent, 'second')

    const [initial, change] = headers(h.events())
    expect(change.reason).toBe('change')
    const [before, after] = h.adapter.requests
    expect(after.system).not.toBe(before.system)
    const offset = firstDiff(prefix(before), prefix(after))
    expect(change.changes).toEqual({
      sections: [{ name: 'greeter:one', owner: 'greeter', change: 'changed' }],
      tools: [],
      config: [],
      firstDifference: offset,
    })
    // The offset points into the serialized system text, at the edited section.
    const bytes = Buffer.from(prefix(after))
    expect(bytes.subarray(0, offset).toString()).toContain('Greet the user')
    expect(bytes.subarray(offset).toString().startsWith(' by name.')).toBe(true)
    // Only the greeter's digest moved.
    const digests = (data: HeaderData) => Object.fromEntries(data.sources!.plugins.map(p => [p.name, p.digest]))
    const changed = Object.keys(digests(change)).filter(name => digests(change)[name] !== digests(initial)[name])
    expect(changed).toEqual(['greeter'])
    expect(change.sources!.sections.find(s => s.name === 'greeter:one')!.sha256).toBe(sha('Greet the user by name.'))
  })

  it('a tool added by another plugin is attributed as added', async () => {
    const h = await harness({
      script: [textResponse('one'), textResponse('two')],
      setup: ctx => {
        ctx.tools.register(tool('echo'))
      },
    })
    await turn(h.agent, 'first')
    await h.root.plugin({
      name: 'extra',
      inject: ['tools'],
      apply(ctx: Context) {
        ctx.tools.register(tool('zap'))
      },
    })
    await turn(h.agent, 'second')

    const [, change] = headers(h.events())
    const [before, after] = h.adapter.requests
    expect(after.tools!.map(t => t.name)).toEqual(['echo', 'zap'])
    expect(change.changes).toEqual({
      sections: [],
      tools: [{ name: 'zap', owner: 'extra', change: 'added' }],
      config: [],
      firstDifference: firstDiff(prefix(before), prefix(after)),
    })
    expect(change.sources!.tools.map(t => t.name)).toEqual(['echo', 'zap'])
  })

  it('removing a plugin attributes its sections as removed', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const fiber = await h.root.plugin(greeter('Greet the user.'))
    await turn(h.agent, 'first')
    await fiber.dispose()
    await turn(h.agent, 'second')
    const [, change] = headers(h.events())
    expect(change.changes!.sections).toEqual([
      { name: 'greeter:one', owner: 'greeter', change: 'removed' },
      { name: 'greeter:two', owner: 'greeter', change: 'removed' },
    ])
    // The identity stays a prefix of the system text: the difference starts right after it.
    const [before, after] = h.adapter.requests
    expect(change.changes!.firstDifference).toBe(firstDiff(prefix(before), prefix(after)))
    expect(change.sources!.plugins.map(p => p.name)).toEqual(['@loom/system-prompt'])
  })

  it('a route switch lists the config key and no prefix difference', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    onRequest(h.agent.ctx, (config, { turn }) => (turn === 2 ? { ...config, model: 'mock-2' } : config))
    await turn(h.agent, 'first')
    await turn(h.agent, 'second')
    const [, change] = headers(h.events())
    expect(change.reason).toBe('change')
    expect(change.changes).toEqual({ sections: [], tools: [], config: ['model'] })
    expect(change.sources).toEqual(headers(h.events())[0].sources)
  })
})

describe('pinned prompts', () => {
  const late = {
    name: 'late',
    inject: ['systemPrompt', 'tools'],
    apply(ctx: Context) {
      ctx.systemPrompt.section({ name: 'late:rule', order: 210, text: 'A rule loaded later.' })
      ctx.tools.register(tool('late_tool'))
    },
  }

  it('a pinned agent keeps its first system text and tools; a new agent sees the new plugin', async () => {
    const h = await harness({
      script: [textResponse('one'), textResponse('two'), textResponse('three'), textResponse('fresh')],
      agent: { provider: 'mock', model: 'mock', pinPrompt: true },
      setup: ctx => {
        ctx.tools.register(tool('echo'))
      },
    })
    await h.root.plugin(greeter('Greet the user.'))
    await turn(h.agent, 'first')
    await h.root.plugin(late)
    await turn(h.agent, 'second')

    const [first, second] = h.adapter.requests
    expect(second.system).toBe(first.system)
    expect(second.system).not.toContain('A rule loaded later.')
    expect(second.tools!.map(t => t.name)).toEqual(['echo'])
    expect(headers(h.events()).map(e => e.reason)).toEqual(['initial'])

    // A config change still logs, attributed to the config only, with the pinned sources.
    onRequest(h.agent.ctx, config => ({ ...config, model: 'mock-2' }))
    await turn(h.agent, 'third')
    const logged = headers(h.events())
    expect(logged.map(e => e.reason)).toEqual(['initial', 'change'])
    expect(logged[1].changes).toEqual({ sections: [], tools: [], config: ['model'] })
    expect(logged[1].sources).toEqual(logged[0].sources)
    expect(h.adapter.requests[2].system).toBe(first.system)

    // A new agent gets the late plugin's section and tool.
    const fresh = h.ctx.agents.create('a2', { provider: 'mock', model: 'mock' })
    await turn(fresh, 'hello')
    const request = h.adapter.requests[3]
    expect(request.system).toContain('A rule loaded later.')
    expect(request.tools!.map(t => t.name)).toEqual(['echo', 'late_tool'])
  })

  it('a resumed pinned agent keeps the header its log already holds', async () => {
    const logs: MemoryLogs = new Map()
    const gen1 = await host({ logs, providers: { mock: new MockAdapter([textResponse('one')]) } })
    await gen1.root.plugin(greeter('Greet the user.'))
    const agent = gen1.ctx.agents.create('p1', { provider: 'mock', model: 'mock' })
    await turn(agent, 'first')
    await gen1.ctx.sessions.flush(agent.session)
    await agent.dispose()
    const firstRequest = gen1.adapters.mock.requests[0]

    // The next process runs other code: the greeter changed and a late plugin is loaded.
    const gen2 = await host({ logs, providers: { mock: new MockAdapter([textResponse('two'), textResponse('three')]) } })
    await gen2.root.plugin(greeter('Greet the user by name.'))
    await gen2.root.plugin(late)
    const pinned = await gen2.ctx.agents.resume('p1', { pinPrompt: true })
    await turn(pinned, 'second')
    const resumedRequest = gen2.adapters.mock.requests[0]
    expect(resumedRequest.system).toBe(firstRequest.system)
    expect(resumedRequest.tools).toEqual(firstRequest.tools)
    const logged = headers(pinned.session.events)
    expect(logged.map(e => e.reason)).toEqual(['initial', 'resume'])
    expect(logged[1].sources).toEqual(logged[0].sources)
    expect(logged[1].drift).toBeUndefined()
    await pinned.dispose()

    // Without pinning, the same resume picks up the new code, and its header records the drift.
    const unpinned = await gen2.ctx.agents.resume('p1')
    await turn(unpinned, 'third')
    const last = headers(unpinned.session.events).at(-1)!
    expect(last.reason).toBe('resume')
    expect(last.drift).toEqual({ added: [last.sources!.plugins.find(p => p.name === 'late')], removed: [], upgraded: [], changed: [] })
    expect(gen2.adapters.mock.requests[1].system).toContain('A rule loaded later.')
    // The resumed request breaks the cached prefix: attributed as a change is.
    expect(last.changes?.sections).toContainEqual({ name: 'greeter:one', owner: 'greeter', change: 'changed' })
    expect(last.changes?.firstDifference).toEqual(expect.any(Number))
    expect(logged[1].changes).toBeUndefined()
    const greeterBefore = logged[0].sources!.plugins.find(p => p.name === 'greeter')!
    const greeterAfter = last.sources!.plugins.find(p => p.name === 'greeter')!
    expect(greeterAfter.digest).not.toBe(greeterBefore.digest)
  })
})

describe('a route switched in an open session', () => {
  it('is logged when switched, and the next header names it as the cause of the config change; the reasoning effort and limits follow the new route', async () => {
    // Only the first model reasons: its effort must not follow the switch.
    const mock = new TableAdapter([textResponse('one'), textResponse('two'), textResponse('three')], {
      small: { reasoning: { efforts: [{ id: 'high', name: 'high' }] } },
    })
    const h = await host({ providers: { mock, other: new MockAdapter([textResponse('four')]) } })
    const agent = h.ctx.agents.create('r1', { provider: 'mock', model: 'small', reasoningEffort: 'high' })
    await turn(agent, 'first')
    expect(agent.switchRoute({ provider: 'mock', model: 'small' })).toBe(false)
    expect(agent.switchRoute({ provider: 'mock', model: 'large' }, { by: '/model', limits: { maxSteps: 3 } })).toBe(true)
    expect(agent.session.events.at(-1)).toMatchObject({
      type: 'agent/route',
      data: { provider: 'mock', model: 'large', from: { provider: 'mock', model: 'small' }, by: '/model' },
    })
    expect(agent.options).toMatchObject({ provider: 'mock', model: 'large', limits: { maxSteps: 3 } })
    expect(agent.options.reasoningEffort).toBeUndefined()
    await turn(agent, 'second')
    expect(h.adapters.mock.requests.map(request => request.model)).toEqual(['small', 'large'])
    expect(h.adapters.mock.requests[1].reasoningEffort).toBeUndefined()
    const [, change] = headers(agent.session.events)
    const switched = agent.session.events.find(event => event.type === 'agent/route')!
    expect(change.reason).toBe('change')
    expect(change.changes?.route).toEqual({ provider: 'mock', model: 'large', from: { provider: 'mock', model: 'small' }, by: '/model', seq: switched.seq })
    expect(describeHeaderChanges(change.changes!)).toBe(
      'request header changed (route switched from mock/small to mock/large by /model; config "reasoningEffort" changed)',
    )
    // The next turn stays on it, with no new header; another provider is a switch too.
    await turn(agent, 'third')
    expect(headers(agent.session.events)).toHaveLength(2)
    agent.switchRoute({ provider: 'other', model: 'o1' }, { by: '/provider' })
    await turn(agent, 'fourth')
    expect(h.adapters.other.requests.map(request => request.model)).toEqual(['o1'])
    expect(describeHeaderChanges(headers(agent.session.events)[2].changes!)).toBe(
      'request header changed (route switched from mock/large to other/o1 by /provider)',
    )
  })

  it('a session resumed after a switch that no request used yet goes on with the new route, and its header names the switch', async () => {
    const logs: MemoryLogs = new Map()
    const gen1 = await host({ logs, providers: { mock: new MockAdapter([textResponse('one')]) } })
    const agent = gen1.ctx.agents.create('r2', { provider: 'mock', model: 'small' })
    await turn(agent, 'first')
    agent.switchRoute({ provider: 'mock', model: 'large' }, { by: '/model' })
    await gen1.ctx.sessions.flush(agent.session)
    await agent.dispose()

    const gen2 = await host({ logs, providers: { mock: new MockAdapter([textResponse('two')]) } })
    const resumed = await gen2.ctx.agents.resume('r2')
    expect(resumed.options).toMatchObject({ provider: 'mock', model: 'large' })
    await turn(resumed, 'second')
    expect(gen2.adapters.mock.requests[0].model).toBe('large')
    const last = headers(resumed.session.events).at(-1)!
    expect(last.reason).toBe('resume')
    expect(last.changes?.route).toMatchObject({ model: 'large', by: '/model' })
  })
})

describe('a route switch and the prompt stability check', () => {
  it('{{model}} in a section changes with the switch without failing a strict check', async () => {
    const h = await host({ prompt: { stabilityCheck: 'error' }, providers: { mock: new MockAdapter([textResponse('one'), textResponse('two')]) } })
    await h.root.plugin({
      name: 'route-note',
      inject: ['systemPrompt'],
      apply(ctx: Context) {
        ctx.systemPrompt.section({ name: 'route-note', order: 200, text: 'You run on {{model}}.' })
      },
    })
    const agent = h.ctx.agents.create('s1', { provider: 'mock', model: 'small' })
    await turn(agent, 'first')
    agent.switchRoute({ provider: 'mock', model: 'large' }, { by: '/model' })
    await turn(agent, 'second')
    expect(ofType(agent.session.events, 'turn/end').map(end => end.reason.kind)).toEqual(['completed', 'completed'])
    expect(h.adapters.mock.requests[1].system).toContain('You run on large.')
  })
})
