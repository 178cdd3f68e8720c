// The adapter inside the real agent loop, against the loopback server: the
// loop's retries by the route's policy, and DeepSeek's thinking-mode history rule.
import { Context } from '@deepseek-ai/cordis'
import AgentLoop, { type Agent } from '@loom/agent-loop'
import Llm, { userText } from '@loom/llm'
import SessionStore, { type SessionEvent, type SessionEventMap } from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import { afterEach, describe, expect, it } from 'vitest'
import * as plugin from '../src/index.ts'
import { REASONING_REQUIRED, startMockServer, type Behaviour, type MockServer, type MockServerOptions } from './mock-server.ts'

let cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  cleanups = []
})

async function host(script: Behaviour[], options: { server?: MockServerOptions; config?: Partial<plugin.Config> } = {}) {
  const server: MockServer = await startMockServer(script, options.server)
  const root = new Context()
  cleanups.push(() => server.close())
  await root.plugin(SystemPrompt, { persona: 'You are a test agent.' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  const loop = await root.plugin(AgentLoop, {})
  cleanups.push(() => loop.dispose())
  await root.plugin(plugin, {
    provider: 'deepseek',
    baseUrl: server.url,
    apiKey: 'sk-loop',
    reasoningEfforts: ['off', 'high'],
    reasoningEffort: 'high',
    ...options.config,
  })
  const fiber = await root.plugin({ name: 'test-host', inject: ['tools', 'agents'], apply() {} })
  fiber.ctx.tools.register(
    defineTool<{ path: string }>({
      name: 'read_file',
      description: 'Reads a file.',
      parameters: { type: 'object', properties: { path: { type: 'string' } } },
      execute: args => `contents of ${args.path}`,
    }),
  )
  const agent: Agent = fiber.ctx.agents.create('s1', { provider: 'deepseek', model: 'deepseek-flash' })
  const run = async (text: string) => {
    agent.followup(userText(text))
    await agent.idle()
  }
  return { server, agent, run, events: () => agent.session.events }
}

const ofType = <T extends keyof SessionEventMap>(events: readonly SessionEvent[], type: T) =>
  events.filter(event => event.type === type).map(event => event.data as SessionEventMap[T])
const lastEnd = (events: readonly SessionEvent[]) => ofType(events, 'turn/end').at(-1)!.reason

describe('retries by the route policy', () => {
  it('a reset mid-stream is retried; the partial attempt never reaches history', async () => {
    const { server, run, events } = await host(['reset_mid_stream', { type: 'success', text: 'recovered', reasoning: null }], {})
    await run('hello')
    expect(server.requests).toHaveLength(2)
    expect(lastEnd(events())).toEqual({ kind: 'completed' })
    const messages = ofType(events(), 'assistant/message')
    expect(messages).toHaveLength(1)
    expect(messages[0].message.content).toEqual([{ type: 'text', text: 'recovered' }])
    expect(ofType(events(), 'request/retry')).toMatchObject([{ retry: 1, maxRetries: 5, failure: { code: 'NETWORK' } }])
    // The second attempt is the identical request.
    expect(server.requests[1].body).toEqual(server.requests[0].body)
  })

  it.each([
    ['429', { type: 'rate_limit', retryAfter: null }],
    ['503 overloaded', 'service_unavailable'],
    ['500', 'server_error'],
    ['a reset before the stream', 'connection_reset'],
  ] as [string, Behaviour][])('%s is retried', async (_, failure) => {
    const { server, run, events } = await host([failure, { type: 'success', text: 'ok', reasoning: null }])
    await run('hello')
    expect(server.requests).toHaveLength(2)
    expect(lastEnd(events())).toEqual({ kind: 'completed' })
  })

  it('a stall aborts after idleTimeoutMs and is retried', async () => {
    // Long enough that the retry's first byte always comes within it, on a busy machine too.
    const { server, run, events } = await host(['stall', { type: 'success', text: 'ok', reasoning: null }], { config: { idleTimeoutMs: 500 } })
    await run('hello')
    expect(server.requests).toHaveLength(2)
    expect(ofType(events(), 'request/retry')[0].failure.code).toBe('TIMEOUT')
    expect(ofType(events(), 'assistant/message').map(data => data.message.content)).toEqual([[{ type: 'text', text: 'ok' }]])
  })

  it('honours Retry-After', async () => {
    const { run, events } = await host([
      { type: 'rate_limit', retryAfter: null, retryAfterMs: 250 },
      { type: 'success', text: 'ok', reasoning: null },
    ])
    await run('hello')
    expect(ofType(events(), 'request/retry')[0].delayMs).toBe(250)
  })

  it('gives up after maxRetries with the last failure', async () => {
    const { server, run, events } = await host(
      Array.from({ length: 4 }, () => 'server_error' as Behaviour),
      { config: { maxRetries: 2 } },
    )
    await run('hello')
    expect(server.requests).toHaveLength(3)
    expect(ofType(events(), 'request/retry').map(data => data.retry)).toEqual([1, 2])
    expect(lastEnd(events())).toMatchObject({ kind: 'error', error: { code: 'SERVER', status: 500 } })
  })

  it.each([
    ['401', 'auth_error', 'AUTH'],
    ['400', 'context_overflow', 'CONTEXT_OVERFLOW'],
  ] as [string, Behaviour, string][])('%s is not retried', async (_, failure, code) => {
    const { server, run, events } = await host([failure, 'success'])
    await run('hello')
    expect(server.requests).toHaveLength(1)
    expect(ofType(events(), 'request/retry')).toEqual([])
    expect(lastEnd(events())).toMatchObject({ kind: 'error', error: { code } })
  })

  it('a cancel during the backoff ends the turn at once', async () => {
    const { server, agent, events } = await host([{ type: 'rate_limit', retryAfter: '30' }, 'success'])
    agent.followup(userText('hello'))
    while (!ofType(events(), 'request/retry').length) await new Promise(resolve => setTimeout(resolve, 5))
    agent.cancel({ kind: 'user' })
    await agent.idle()
    expect(server.requests).toHaveLength(1)
    expect(lastEnd(events())).toEqual({ kind: 'aborted', reason: { kind: 'user' } })
  })
})

describe('DeepSeek thinking mode', () => {
  const toolLoop: Behaviour[] = [
    { type: 'tool_call', reasoning: 'I need the file first.', calls: [{ id: 'call_1', name: 'read_file', arguments: '{"path":"a.ts"}' }] },
    { type: 'tool_call', reasoning: '', calls: [{ id: 'call_2', name: 'read_file', arguments: '{"path":"b.ts"}' }] },
    { type: 'success', reasoning: 'Both read.', text: 'Done.' },
    { type: 'tool_call', reasoning: 'Once more.', calls: [{ id: 'call_3', name: 'read_file', arguments: '{"path":"c.ts"}' }] },
    { type: 'success', reasoning: 'Read.', text: 'Done again.' },
  ]

  it('a tool loop completes against a server that refuses tool calls without their reasoning', async () => {
    const { server, run, events } = await host(toolLoop, { server: { requireReasoningContent: true } })
    await run('read a and b')
    await run('and c')
    expect(server.requests).toHaveLength(5)
    expect(ofType(events(), 'turn/end').map(data => data.reason.kind)).toEqual(['completed', 'completed'])
    const last = server.requests[4].body.messages.filter((m: any) => m.role === 'assistant')
    expect(last.map((m: any) => m.reasoning_content)).toEqual(['I need the file first.', '', undefined, 'Once more.'])
    expect(server.requests[0].body).toMatchObject({ reasoning_effort: 'high' })
  })

  it('every request extends the previous one unchanged: prefix reuse stays 100% with thinking on', async () => {
    const { server, run } = await host(toolLoop, { server: { requireReasoningContent: true } })
    await run('read a and b')
    await run('and c')
    const bodies = server.requests.map(request => request.body)
    for (let i = 1; i < bodies.length; i++) {
      const before = bodies[i - 1].messages
      expect(bodies[i].messages.slice(0, before.length)).toEqual(before)
      expect(bodies[i].tools).toEqual(bodies[0].tools)
    }
  })

  it('without the rule the same server answers 400 on the second request', async () => {
    const { server, run, events } = await host(toolLoop, { server: { requireReasoningContent: true }, config: { reasoningHistory: 'none' } })
    await run('read a and b')
    expect(server.requests).toHaveLength(2)
    expect(lastEnd(events())).toMatchObject({ kind: 'error', error: { code: 'BAD_REQUEST', message: expect.stringContaining(REASONING_REQUIRED) } })
  })
})
