// Contracts 5.2 (35–58): prompt, header and request; plus Loom's stability rule
// and the load-order independence of tool providers.
import type { Context } from '@deepseek-ai/cordis'
import { userText, type GenerateOptions, type LlmCallConfig, type StreamChunk } from '@loom/llm'
import { foldRequestHeader, Session, type SessionEvent } from '@loom/session'
import type { MemoryLogs } from '@loom/session/testing'
import type { PromptAssembly } from '@loom/system-prompt'
import { defineTool } from '@loom/tools'
import { describe, expect, it, vi } from 'vitest'
import { harness, IDENTITY, MockAdapter, textResponse, toolCallResponse } from './harness.ts'
import { host, ofType, pluginText, TableAdapter, textOf, turn, turnEnds } from './request-support.ts'

const PARAMETERS = { type: 'object', properties: {} }

function tool(name: string) {
  return defineTool({ name, description: `The ${name} tool.`, parameters: PARAMETERS, execute: () => `${name} done` })
}

const headers = (events: readonly SessionEvent[]) => ofType(events, 'request/header')
const names = (tools: readonly { name: string }[] | undefined) => tools?.map(t => t.name)
const frozenDeep = (request: GenerateOptions) =>
  Object.isFrozen(request) && Object.isFrozen(request.messages) && request.messages.every(message => Object.isFrozen(message))

/** An `agent/request` listener: `edit` maps the proposed config (frozen) to the one to use. */
function onRequest(ctx: Context, edit: (config: LlmCallConfig, payload: { turn: number; step: number }) => LlmCallConfig) {
  ctx.on('agent/request', async (payload: { turn: number; step: number }, next: () => Promise<LlmCallConfig>) => edit(await next(), payload))
}

describe('5.2 prompt, header and request', () => {
  it('renders identity, persona and tool guidance into request.system (35)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      prompt: { persona: 'You are a test agent on {{model}}.' },
      setup: ctx => {
        ctx.systemPrompt.section({ name: 'tool:noop', order: 100, text: 'Use the noop tool wisely.' })
        ctx.tools.register(tool('noop'))
      },
    })
    await turn(h.agent, 'hi')
    expect(h.adapter.requests).toHaveLength(1)
    const [request] = h.adapter.requests
    expect(request.system).toBe(`${IDENTITY}\n\nYou are a test agent on mock.\n\nUse the noop tool wisely.`)
    expect(names(request.tools)).toEqual(['noop'])
    expect(request.tools).toEqual([{ name: 'noop', description: 'The noop tool.', parameters: PARAMETERS }])
  })

  it('fills {{cwd}} from the session header (36)', async () => {
    const h = await harness({
      id: 's-cwd',
      script: [textResponse('ok')],
      prompt: { persona: 'Working in {{cwd}}.' },
      agent: { provider: 'mock', model: 'mock', cwd: '/ws/space' },
    })
    await turn(h.agent, 'hi')
    expect(h.agent.session.header.cwd).toBe('/ws/space')
    expect(h.adapter.requests.map(r => r.system)).toEqual([`${IDENTITY}\n\nWorking in /ws/space.`])
    expect(h.adapter.requests[0].sessionId).toBe('s-cwd')
  })

  it('contains a strict-variable failure in its turn, after the step opened (37)', async () => {
    const h = await harness({ script: [textResponse('ok')], prompt: { persona: 'In {{cwd}}.' } })
    const errors: unknown[] = []
    h.agent.ctx.on('agent/error', ({ error }: { error: unknown }) => {
      errors.push(error)
    })
    await turn(h.agent, 'hi')

    const message = 'prompt variable "{{cwd}}" has no value for this assembly (section "deployment:persona")'
    expect(h.adapter.requests).toHaveLength(0)
    expect(errors).toHaveLength(1)
    expect((errors[0] as Error).message).toBe(message)
    expect(turnEnds(h.events())).toEqual([{ kind: 'error', error: { message, code: 'UNKNOWN' } }])
    expect(h.types()).toEqual(['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'step/start', 'user/message', 'step/end', 'turn/end'])
    expect(ofType(h.events(), 'step/start')).toEqual([{ turn: 1, step: 1 }])
    expect(ofType(h.events(), 'step/end')).toEqual([{ turn: 1, step: 1 }])

    h.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      const assembly = await next()
      return { ...assembly, variables: { ...assembly.variables, cwd: '/rescued' } }
    })
    await turn(h.agent, 'again')
    expect(h.adapter.requests.map(r => r.system)).toEqual([`${IDENTITY}\n\nIn /rescued.`])
    expect(turnEnds(h.events()).map(r => r.kind)).toEqual(['error', 'completed'])
  })

  it('omits the system key for an empty assembly (38)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(tool('noop'))
        ctx.on('system-prompt/assemble', async (): Promise<PromptAssembly> => ({ sections: [], contexts: [], tools: [], variables: {}, variableInfo: {} }))
      },
    })
    await turn(h.agent, 'hi')
    const [request] = h.adapter.requests
    expect('system' in request).toBe(false)
    expect('tools' in request).toBe(false)
    expect(headers(h.events())).toEqual([
      {
        header: { config: { provider: 'mock', model: 'mock' } },
        reason: 'initial',
        sources: { sections: [], tools: [], plugins: [] },
      },
    ])
  })

  it('orders tools canonically by name whatever the registration order (39)', async () => {
    const runs: { header: string; tools: string }[] = []
    for (const order of [
      ['zulu', 'alpha', 'mike'],
      ['mike', 'alpha', 'zulu'],
    ]) {
      const h = await harness({
        script: [textResponse('ok')],
        setup: ctx => {
          for (const name of order) ctx.tools.register(tool(name))
        },
      })
      await turn(h.agent, 'go')
      const [request] = h.adapter.requests
      expect(names(foldRequestHeader(h.events())!.tools)).toEqual(['alpha', 'mike', 'zulu'])
      expect(names(request.tools)).toEqual(['alpha', 'mike', 'zulu'])
      expect(Object.isFrozen(request)).toBe(true)
      expect(request.sessionId).toBe('a1')
      runs.push({ header: JSON.stringify(foldRequestHeader(h.events())), tools: JSON.stringify(request.tools) })
    }
    expect(runs[1]).toEqual(runs[0])
  })

  it('applies a configured toolOrder to header and request (40)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      prompt: { toolOrder: ['zulu', '<unlisted-tools>'] },
      setup: ctx => {
        for (const name of ['alpha', 'zulu', 'mike']) ctx.tools.register(tool(name))
      },
    })
    await turn(h.agent, 'go')
    expect(names(foldRequestHeader(h.events())!.tools)).toEqual(['zulu', 'alpha', 'mike'])
    expect(names(h.adapter.requests[0].tools)).toEqual(['zulu', 'alpha', 'mike'])
  })

  it('ends the turn before any step when toolOrder names an unknown tool (41)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      prompt: { toolOrder: ['ghost', '<unlisted-tools>'] },
      setup: ctx => {
        ctx.tools.register(tool('alpha'))
      },
    })
    await turn(h.agent, 'go')
    expect(h.adapter.requests).toHaveLength(0)
    expect(foldRequestHeader(h.events())).toBeUndefined()
    expect(h.types()).toEqual(['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'turn/end'])
    expect(turnEnds(h.events())).toEqual([
      { kind: 'error', error: { message: 'toolOrder lists unregistered tool "ghost"; known tools: alpha', code: 'UNKNOWN' } },
    ])
  })

  it('logs one initial header for a stable prompt across steps and turns (42)', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'noop', {}), toolCallResponse('c2', 'noop', {}), textResponse('done'), textResponse('again done')],
      prompt: { persona: 'Stable persona.' },
      setup: ctx => {
        ctx.tools.register(tool('noop'))
      },
    })
    await turn(h.agent, 'three steps')
    await turn(h.agent, 'one more')

    const requests = h.adapter.requests
    expect(requests).toHaveLength(4)
    expect(headers(h.events()).map(e => e.reason)).toEqual(['initial'])
    expect(ofType(h.events(), 'step/start')).toEqual([
      { turn: 1, step: 1 },
      { turn: 1, step: 2 },
      { turn: 1, step: 3 },
      { turn: 2, step: 1 },
    ])
    for (let i = 1; i < requests.length; i++) {
      const [previous, current] = [requests[i - 1], requests[i]]
      expect(current.messages.length).toBeGreaterThan(previous.messages.length)
      expect(JSON.stringify(current.messages.slice(0, previous.messages.length))).toBe(JSON.stringify(previous.messages))
      expect(current.system).toBe(previous.system)
      expect(current.tools).toEqual(previous.tools)
    }
    expect(requests[0].system).toBe(`${IDENTITY}\n\nStable persona.`)
    expect(requests.every(frozenDeep)).toBe(true)
  })

  it('logs a changed header with reason change (43)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two'), textResponse('three')] })
    await turn(h.agent, 'first')
    await turn(h.agent, 'second')
    h.ctx.systemPrompt.section({ name: 'extra', order: 2, text: 'new guidance' })
    await turn(h.agent, 'third')

    const logged = headers(h.events())
    expect(logged.map(e => e.reason)).toEqual(['initial', 'change'])
    expect(logged[1].header).toEqual({ config: { provider: 'mock', model: 'mock' }, system: `${IDENTITY}\n\nnew guidance` })
    const [, second, third] = h.adapter.requests
    expect(third.system).toBe(`${IDENTITY}\n\nnew guidance`)
    expect(third.messages.length).toBeGreaterThan(second.messages.length)
  })

  it('anchors a new loop instance with a resume header even when nothing changed (44)', async () => {
    const logs: MemoryLogs = new Map()
    const prompt = { persona: 'Generation-stable persona.' }
    const gen1 = await host({
      logs,
      prompt,
      providers: { mock: new MockAdapter([textResponse('one')]) },
      setup: ctx => {
        ctx.tools.register(tool('noop'))
      },
    })
    const first = gen1.ctx.agents.create('gen', { provider: 'mock', model: 'mock' })
    await turn(first, 'first')
    await gen1.ctx.sessions.flush(first.session)
    await first.dispose()
    const gen1Request = gen1.adapters.mock.requests[0]

    const gen2 = await host({
      logs,
      prompt,
      providers: { mock: new MockAdapter([textResponse('two')]) },
      setup: ctx => {
        ctx.tools.register(tool('noop'))
      },
    })
    const second = await gen2.ctx.agents.resume('gen', { provider: 'mock', model: 'mock' })
    await turn(second, 'second')
    await gen2.ctx.sessions.flush(second.session)

    const logged = headers(second.session.events)
    expect(logged.map(e => e.reason)).toEqual(['initial', 'resume'])
    expect(logged[1].header).toEqual(logged[0].header)
    const [gen2Request] = gen2.adapters.mock.requests
    expect(gen2Request.system).toBe(gen1Request.system)
    expect(gen2Request.tools).toEqual(gen1Request.tools)
    expect(gen2Request.messages.length).toBeGreaterThan(gen1Request.messages.length)
    expect(JSON.stringify(gen2Request.messages.slice(0, gen1Request.messages.length))).toBe(JSON.stringify(gen1Request.messages))
    expect(gen2Request.messages.map(textOf)).toEqual(['first', 'one', 'second'])
  })

  it('freezes the agent/request seed; a replacement config is used (45)', async () => {
    const h = await harness({ script: [textResponse('ok')] })
    const seen: { frozen: boolean; error: unknown; model: string }[] = []
    onRequest(h.agent.ctx, config => {
      let error: unknown
      try {
        ;(config as { model: string }).model = 'mutated'
      } catch (caught) {
        error = caught
      }
      seen.push({ frozen: Object.isFrozen(config), error, model: config.model })
      return { ...config, model: 'other-model' }
    })
    await turn(h.agent, 'go')
    expect(seen).toHaveLength(1)
    expect(seen[0].frozen).toBe(true)
    expect(seen[0].error).toBeInstanceOf(TypeError)
    expect(seen[0].model).toBe('mock')
    expect(h.adapter.requests[0].model).toBe('other-model')
    expect(foldRequestHeader(h.events())!.config.model).toBe('other-model')
  })

  it('keeps the header when a listener tries to mutate the delegated config (46)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const thrown: unknown[] = []
    onRequest(h.agent.ctx, config => {
      try {
        ;(config as { temperature?: number }).temperature = 0.9
      } catch (error) {
        thrown.push(error)
      }
      return config
    })
    await turn(h.agent, 'first')
    await turn(h.agent, 'second')
    expect(thrown).toHaveLength(2)
    expect(thrown.every(error => error instanceof TypeError)).toBe(true)
    expect(headers(h.events())).toHaveLength(1)
    const header = h.agent.session.requestHeader()!
    expect(Object.isFrozen(header)).toBe(true)
    expect(Object.isFrozen(header.config)).toBe(true)
    expect(header.config).toEqual({ provider: 'mock', model: 'mock' })
    expect(h.adapter.requests.map(r => r.temperature)).toEqual([undefined, undefined])
    expect(h.adapter.requests.some(r => 'temperature' in r)).toBe(false)
  })

  it('ends the turn with a clear error when no route is configured (47)', async () => {
    const h = await harness({ script: [textResponse('ok')], agent: {} })
    await turn(h.agent, 'go')
    expect(h.adapter.requests).toHaveLength(0)
    expect(turnEnds(h.events())).toEqual([
      {
        kind: 'error',
        error: {
          message: 'agent "a1" has no provider/model: set AgentOptions.provider and AgentOptions.model or supply both via the agent/request waterfall',
          code: 'UNKNOWN',
        },
      },
    ])

    onRequest(h.agent.ctx, config => ({ ...config, provider: 'mock', model: 'mock' }))
    await turn(h.agent, 'go again')
    expect(h.adapter.requests).toHaveLength(1)
    expect(h.adapter.requests[0]).toMatchObject({ provider: 'mock', model: 'mock' })
    expect(turnEnds(h.events()).map(r => r.kind)).toEqual(['error', 'completed'])
  })

  it('renders a model supplied late through the assemble waterfall (48)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      agent: {},
      prompt: { persona: 'You run on {{model}}.' },
      setup: ctx => {
        ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
          const assembly = await next()
          return { ...assembly, variables: { ...assembly.variables, provider: 'mock', model: 'mock' } }
        })
      },
    })
    onRequest(h.agent.ctx, config => ({ ...config, provider: 'mock', model: 'mock' }))
    await turn(h.agent, 'go')
    expect(h.adapter.requests.map(r => r.system)).toEqual([`${IDENTITY}\n\nYou run on mock.`])
  })

  it('materializes the adapter-default reasoning effort and restores only an explicit one (49)', async () => {
    const reasoning = {
      efforts: [
        { id: 'high', name: 'High' },
        { id: 'max', name: 'Max' },
      ],
      defaultEffort: 'high',
    }
    const logs: MemoryLogs = new Map()
    const gen1 = await host({ logs, providers: { mock: new MockAdapter([textResponse('one'), textResponse('two')], { reasoning }) } })
    const agent = gen1.ctx.agents.create('r1', { provider: 'mock', model: 'mock' })
    onRequest(agent.ctx, (config, { turn }) => (turn === 2 ? { ...config, reasoningEffort: 'max' } : config))
    await turn(agent, 'first')
    await turn(agent, 'second')

    expect(gen1.adapters.mock.requests.map(r => r.reasoningEffort)).toEqual(['high', 'max'])
    const logged = headers(agent.session.events)
    expect(logged.map(e => e.header.config.reasoningEffort)).toEqual(['high', 'max'])
    expect(logged.map(e => e.header.adapterDefaults)).toEqual([{ reasoningEffort: true }, undefined])
    expect(logged.map(e => e.reason)).toEqual(['initial', 'change'])
    await gen1.ctx.sessions.flush(agent.session)
    await agent.dispose()
    const copy = structuredClone(logs)

    // Same route: the explicit `max` is restored.
    const same = await host({ logs, providers: { mock: new MockAdapter([textResponse('three')], { reasoning }) } })
    const resumed = await same.ctx.agents.resume('r1', { provider: 'mock', model: 'mock' })
    await turn(resumed, 'third')
    await same.ctx.sessions.flush(resumed.session)
    expect(same.adapters.mock.requests.map(r => r.reasoningEffort)).toEqual(['max'])
    const sameHeader = headers(resumed.session.events).at(-1)!
    expect(sameHeader.reason).toBe('resume')
    expect(sameHeader.header.config.reasoningEffort).toBe('max')
    expect(sameHeader.header.adapterDefaults).toBeUndefined()

    // Another model: the route's own default.
    const other = await host({ logs: copy, providers: { mock: new MockAdapter([textResponse('three')], { reasoning }) } })
    const switched = await other.ctx.agents.resume('r1', { provider: 'mock', model: 'replacement' })
    await turn(switched, 'third')
    await other.ctx.sessions.flush(switched.session)
    expect(other.adapters.mock.requests.map(r => [r.model, r.reasoningEffort])).toEqual([['replacement', 'high']])
    const otherHeader = headers(switched.session.events).at(-1)!
    expect(otherHeader.reason).toBe('resume')
    expect(otherHeader.header.adapterDefaults).toEqual({ reasoningEffort: true })
  })

  it('a resumed agent starts and steps without reading its whole log (it reads events by type)', async () => {
    const logs: MemoryLogs = new Map()
    const first = await host({ logs, providers: { mock: new MockAdapter([textResponse('one'), textResponse('two')]) } })
    const agent = first.ctx.agents.create('long', { provider: 'mock', model: 'mock' })
    await turn(agent, 'first')
    agent.inbox.append('next-turn', userText('queued'))
    await first.ctx.sessions.flush(agent.session)
    await agent.dispose()

    const second = await host({ logs, providers: { mock: new MockAdapter([textResponse('three')]) } })
    const wholeLog = vi.spyOn(Session.prototype, 'events', 'get')
    try {
      const resumed = await second.ctx.agents.resume('long', { provider: 'mock', model: 'mock' })
      expect(resumed.inbox.nextTurn.map(textOf)).toEqual(['queued'])
      await turn(resumed, 'second')
      expect(wholeLog).not.toHaveBeenCalled()
      expect(second.adapters.mock.requests[0].messages.map(textOf).slice(0, 3)).toEqual(['first', 'one', 'queued'])
    } finally {
      wholeLog.mockRestore()
    }
  })

  it('materializes the adapter maxTokens default and marks it (50)', async () => {
    const h = await host({ providers: { mock: new MockAdapter([textResponse('ok')], { defaultMaxTokens: 256000 }) } })
    const agent = h.ctx.agents.create('a1', { provider: 'mock', model: 'mock' })
    await turn(agent, 'go')
    expect(h.adapters.mock.requests.map(r => r.maxTokens)).toEqual([256000])
    const [logged] = headers(agent.session.events)
    expect(logged.header.config.maxTokens).toBe(256000)
    expect(logged.header.adapterDefaults).toEqual({ maxTokens: true })
  })

  it('re-materializes the adapter default on a route switch (51)', async () => {
    const h = await host({
      providers: {
        deepseek: new MockAdapter([textResponse('one')], { defaultMaxTokens: 256000 }),
        other: new MockAdapter([textResponse('two')], { defaultMaxTokens: 8192 }),
      },
    })
    const agent = h.ctx.agents.create('a1', { provider: 'deepseek', model: 'mock' })
    onRequest(agent.ctx, (config, { turn }) => (turn === 2 ? { ...config, provider: 'other' } : config))
    await turn(agent, 'first')
    await turn(agent, 'second')
    const requests = [...h.adapters.deepseek.requests, ...h.adapters.other.requests]
    expect(requests.map(r => [r.provider, r.maxTokens])).toEqual([
      ['deepseek', 256000],
      ['other', 8192],
    ])
    const logged = headers(agent.session.events)
    expect(logged.map(e => e.header.config.maxTokens)).toEqual([256000, 8192])
    expect(logged.map(e => e.header.adapterDefaults)).toEqual([{ maxTokens: true }, { maxTokens: true }])
  })

  it('keeps an explicit maxTokens across a route switch (52)', async () => {
    const h = await host({
      providers: {
        deepseek: new MockAdapter([textResponse('one')], { defaultMaxTokens: 256000 }),
        other: new MockAdapter([textResponse('two')], { defaultMaxTokens: 8192 }),
      },
    })
    const agent = h.ctx.agents.create('a1', { provider: 'deepseek', model: 'mock', maxTokens: 4096 })
    onRequest(agent.ctx, (config, { turn }) => (turn === 2 ? { ...config, provider: 'other' } : config))
    await turn(agent, 'first')
    await turn(agent, 'second')
    const requests = [...h.adapters.deepseek.requests, ...h.adapters.other.requests]
    expect(requests.map(r => [r.provider, r.maxTokens])).toEqual([
      ['deepseek', 4096],
      ['other', 4096],
    ])
    const logged = headers(agent.session.events)
    expect(logged.map(e => e.header.config.maxTokens)).toEqual([4096, 4096])
    expect(logged.map(e => e.header.adapterDefaults)).toEqual([undefined, undefined])
  })

  it('refuses a maxTokens that is not a positive safe integer, creating nothing (53)', async () => {
    const h = await host()
    for (const maxTokens of [0, -1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
      let error: unknown
      try {
        h.ctx.agents.create('a1', { provider: 'mock', model: 'mock', maxTokens })
      } catch (caught) {
        error = caught
      }
      expect(error, String(maxTokens)).toBeInstanceOf(Error)
      expect((error as Error).message).toBe('agent maxTokens must be a positive safe integer')
      expect(h.ctx.agents.list()).toEqual([])
      expect(h.ctx.sessions.list()).toEqual([])
    }
  })

  it('logs request/context only when provider, model or capacity changes (54)', async () => {
    const contexts = (events: readonly SessionEvent[]) => ofType(events, 'request/context')

    // Two turns on one route with a known window: one record, not on the surface.
    const a = await host({ providers: { mock: new MockAdapter([textResponse('one'), textResponse('two')], { context: { contextWindow: 128000 } }) } })
    const agentA = a.ctx.agents.create('a1', { provider: 'mock', model: 'mock' })
    await turn(agentA, 'first')
    await turn(agentA, 'second')
    expect(contexts(agentA.session.events)).toStrictEqual([{ provider: 'mock', model: 'mock', contextWindow: 128000 }])
    const record = agentA.session.events.find(event => event.type === 'request/context')!
    expect(agentA.session.surface.nodes).not.toContain(record.seq)
    expect(a.adapters.mock.requests).toHaveLength(2)

    // A switch between windows.
    const b = await host({
      providers: {
        small: new MockAdapter([textResponse('one')], { context: { contextWindow: 64000 } }),
        big: new MockAdapter([textResponse('two')], { context: { contextWindow: 256000 } }),
      },
    })
    const agentB = b.ctx.agents.create('a1', { provider: 'small', model: 'mock' })
    onRequest(agentB.ctx, (config, { turn }) => (turn === 2 ? { ...config, provider: 'big' } : config))
    await turn(agentB, 'first')
    await turn(agentB, 'second')
    expect(contexts(agentB.session.events).map(c => c.contextWindow)).toEqual([64000, 256000])

    // No capacity: one record without the key.
    const c = await host({ providers: { mock: new MockAdapter([textResponse('one'), textResponse('two')]) } })
    const agentC = c.ctx.agents.create('a1', { provider: 'mock', model: 'mock' })
    await turn(agentC, 'first')
    await turn(agentC, 'second')
    expect(contexts(agentC.session.events)).toStrictEqual([{ provider: 'mock', model: 'mock' }])

    // Known capacity, then a model without one.
    const d = await host({
      providers: { mock: new TableAdapter([textResponse('one'), textResponse('two')], { known: { context: { contextWindow: 64000 } }, unknown: {} }) },
    })
    const agentD = d.ctx.agents.create('a1', { provider: 'mock', model: 'known' })
    onRequest(agentD.ctx, (config, { turn }) => (turn === 2 ? { ...config, model: 'unknown' } : config))
    await turn(agentD, 'first')
    await turn(agentD, 'second')
    expect(contexts(agentD.session.events)).toStrictEqual([
      { provider: 'mock', model: 'known', contextWindow: 64000 },
      { provider: 'mock', model: 'unknown' },
    ])
  })

  it('reconstructs every request from the log prefix before its first chunk (55)', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'noop', {}), textResponse('done'), textResponse('two')],
      prompt: { persona: 'Persona for {{model}}.' },
      setup: ctx => {
        ctx.tools.register(tool('noop'))
      },
    })
    onRequest(h.agent.ctx, (config, { turn, step }) => (turn === 1 && step === 1 ? config : { ...config, temperature: 0.5, maxTokens: 99, stop: ['<END>'] }))
    await turn(h.agent, 'use the tool')
    h.ctx.systemPrompt.section({ name: 'extra', order: 2, text: 'new guidance' })
    await turn(h.agent, 'again')

    const requests = h.adapter.requests
    expect(requests).toHaveLength(3)
    const events = h.events()
    expect(headers(events).map(e => e.reason)).toEqual(['initial', 'change', 'change'])
    expect(requests.map(r => [r.temperature, r.maxTokens, r.stop])).toEqual([
      [undefined, undefined, undefined],
      [0.5, 99, ['<END>']],
      [0.5, 99, ['<END>']],
    ])
    const steps = [
      { turn: 1, step: 1 },
      { turn: 1, step: 2 },
      { turn: 2, step: 1 },
    ]
    steps.forEach(({ turn, step }, i) => {
      const first = events.findIndex(
        event => event.type === 'assistant/chunk' && (event.data as { turn: number }).turn === turn && (event.data as { step: number }).step === step,
      )
      expect(first, `request ${i + 1}`).toBeGreaterThan(0)
      const prefix = events.slice(0, first)
      const request = requests[i]
      const derived = Session.create(`replay-${i}`, prefix).deriveMessages()
      expect(structuredClone(request.messages)).toEqual(derived)
      expect(JSON.stringify(request.messages)).toBe(JSON.stringify(derived))
      const folded = foldRequestHeader(prefix)!
      expect({
        model: request.model,
        reasoningEffort: request.reasoningEffort,
        system: request.system,
        tools: request.tools,
        temperature: request.temperature,
        maxTokens: request.maxTokens,
        stop: request.stop,
      }).toEqual({
        model: folded.config.model,
        reasoningEffort: folded.config.reasoningEffort,
        system: folded.system,
        tools: folded.tools,
        temperature: folded.config.temperature,
        maxTokens: folded.config.maxTokens,
        stop: folded.config.stop,
      })
    })
    expect(requests[2].system).toBe(`${IDENTITY}\n\nPersona for mock.\n\nnew guidance`)
  })

  it('hands llm/stream a frozen request: a listener that mutates it fails the turn (56)', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      setup: ctx => {
        ctx.on('llm/stream', (options: GenerateOptions, next: () => AsyncIterable<StreamChunk>) => {
          ;(options.messages as unknown[]).push(userText('smuggled'))
          return next()
        })
      },
    })
    await turn(h.agent, 'go')
    expect(h.adapter.requests).toHaveLength(0)
    const reasons = turnEnds(h.events())
    expect(reasons).toHaveLength(1)
    expect(reasons[0].kind).toBe('error')
    expect(reasons[0].error.message).toMatch(/not extensible|frozen|read only|readonly/i)
  })

  it('lets inject during agent/request join the next request, in the same turn (57)', async () => {
    const h = await harness({ script: [textResponse('one'), textResponse('two')] })
    const late = pluginText('[late context]')
    let injected = false
    onRequest(h.agent.ctx, config => {
      if (!injected) {
        injected = true
        h.agent.inject(late)
      }
      return config
    })
    await turn(h.agent, 'first')

    const [first, second] = h.adapter.requests
    expect(h.adapter.requests).toHaveLength(2)
    expect(first.messages.map(textOf)).toEqual(['first'])
    expect(
      h
        .events()
        .filter(e => e.type === 'user/message')
        .map(e => e.data),
    ).toContainEqual(late)
    expect(second.messages.map(textOf)).toEqual(['first', 'one', '[late context]'])
    expect(second.messages[2]).toEqual(late)
    expect(ofType(h.events(), 'turn/start')).toEqual([{ turn: 1 }])
    expect(ofType(h.events(), 'step/start')).toEqual([
      { turn: 1, step: 1 },
      { turn: 1, step: 2 },
    ])
    expect(turnEnds(h.events())).toEqual([{ kind: 'completed' }])
  })

  it('resends a compaction replacement without a new header (58)', async () => {
    const h = await harness({ script: [textResponse('ok'), textResponse('ok again')] })
    await turn(h.agent, 'hi')
    const nodes = h.agent.session.surface.nodes
    expect(nodes).toHaveLength(2)
    const [n0, n1] = nodes
    h.agent.session.append('user/message', pluginText('[summary of turn 1]', 'compaction'), {
      surfaceOp: { op: 'replace', start: n0, end: n1 },
      sourceEventSeqs: [n0, n1],
    })
    await turn(h.agent, 'again')

    const second = h.adapter.requests[1]
    expect(textOf(second.messages[0])).toContain('[summary of turn 1]')
    expect(second.messages.map(textOf)).toEqual(['[summary of turn 1]', 'again'])
    expect(headers(h.events())).toHaveLength(1)
  })
})

describe('Loom request rules', () => {
  it('ends the turn before any request when the persona reads a step-stable variable', async () => {
    const h = await harness({
      script: [textResponse('ok')],
      prompt: { persona: 'The time is {{now}}.' },
      setup: ctx => {
        ctx.systemPrompt.variable('now', () => '12:00', { stability: 'step' })
      },
    })
    const errors: unknown[] = []
    h.agent.ctx.on('agent/error', ({ error }: { error: unknown }) => {
      errors.push(error)
    })
    await turn(h.agent, 'what time is it?')

    const message =
      'prompt section "deployment:persona" (plugin "@loom/system-prompt") references step-stable variable "{{now}}" (plugin "test-host"); ' +
      'a value that changes between steps would break the cached system prefix, so use it in a runtime context (ctx.systemPrompt.context) instead'
    expect(h.adapter.requests).toHaveLength(0)
    expect(turnEnds(h.events())).toEqual([{ kind: 'error', error: { message, code: 'UNKNOWN' } }])
    expect((errors as Error[]).map(error => error.message)).toEqual([message])
    expect(h.types()).not.toContain('request/header')
    expect(h.types()).not.toContain('step/start')
  })

  it('logs identical request/header events whatever the load order of two tool providers', async () => {
    const providerA = {
      name: 'tools-a',
      inject: ['tools', 'systemPrompt'],
      apply(ctx: Context) {
        ctx.tools.register(tool('zulu'))
        ctx.systemPrompt.tools(() => ({ schemas: [{ name: 'beta', description: 'The beta tool.', parameters: PARAMETERS }] }))
      },
    }
    const providerB = {
      name: 'tools-b',
      inject: ['tools', 'systemPrompt'],
      apply(ctx: Context) {
        ctx.systemPrompt.tools(() => ({ schemas: [{ name: 'mike', description: 'The mike tool.', parameters: PARAMETERS }] }))
        ctx.tools.register(tool('alpha'))
      },
    }
    const runs: { header: string; tools: string }[] = []
    for (const order of [
      [providerA, providerB],
      [providerB, providerA],
    ]) {
      const h = await harness({
        script: [textResponse('ok')],
        setup: async ctx => {
          for (const plugin of order) await ctx.plugin(plugin)
        },
      })
      await turn(h.agent, 'go')
      const logged = headers(h.events())
      expect(logged).toHaveLength(1)
      expect(names(logged[0].header.tools)).toEqual(['alpha', 'beta', 'mike', 'zulu'])
      runs.push({ header: JSON.stringify(logged[0]), tools: JSON.stringify(h.adapter.requests[0].tools) })
    }
    expect(runs[1].header).toBe(runs[0].header)
    expect(runs[1].tools).toBe(runs[0].tools)
  })

  it("hands the agent's name to the prompt's providers; the name is an option, not recorded in the session", async () => {
    const logs: MemoryLogs = new Map()
    const role = (ctx: Context) => {
      ctx.systemPrompt.section({ name: 'role', order: 100, text: ({ agent }) => `Role: ${agent?.name ?? 'none'}.` })
    }
    const gen1 = await host({ logs, providers: { mock: new MockAdapter([textResponse('one')]) }, setup: role })
    const created = gen1.ctx.agents.create('s-20261129', { name: 'main', provider: 'mock', model: 'mock' })
    expect(created).toMatchObject({ id: 's-20261129', sessionId: 's-20261129', name: 'main' })
    await turn(created, 'first')
    await gen1.ctx.sessions.flush(created.session)
    await created.dispose()
    expect(gen1.adapters.mock.requests[0].system).toBe(`${IDENTITY}\n\nRole: main.`)

    const gen2 = await host({ logs, providers: { mock: new MockAdapter([textResponse('two')]) }, setup: role })
    const unnamed = await gen2.ctx.agents.resume('s-20261129')
    expect(unnamed.name).toBeUndefined()
    await unnamed.dispose()
    const resumed = await gen2.ctx.agents.resume('s-20261129', { name: 'main' })
    await turn(resumed, 'second')
    expect(gen2.adapters.mock.requests[0].system).toBe(`${IDENTITY}\n\nRole: main.`)
  })
})
