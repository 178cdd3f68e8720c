// The adapter inside the real agent loop, against the loopback server: a tool
// loop with thinking on (signatures passed back, checked by the server as the
// real API checks them), the loop's retry of a 529 by the route's policy, and
// the cache breakpoints of the requests the loop builds.
import { Context } from '@deepseek-ai/cordis'
import AgentLoop, { type Agent } from '@loom/agent-loop'
import Llm, { userText } from '@loom/llm'
import SessionStore, { type SessionEvent, type SessionEventMap } from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import { afterEach, describe, expect, it } from 'vitest'
import * as plugin from '../src/index.ts'
import { breakpointsOf } from '../src/request.ts'
import { startMockServer, type Behaviour, type MockServer } from './mock-server.ts'

let cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
  cleanups = []
})

async function host(script: Behaviour[], config: Partial<plugin.Config> = {}) {
  const server: MockServer = await startMockServer(script)
  const root = new Context()
  let loop: Awaited<ReturnType<typeof root.plugin>> | undefined
  cleanups.push(async () => {
    await loop?.dispose()
    await server.close()
  })
  await root.plugin(SystemPrompt, { persona: 'You are a test agent.' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  loop = await root.plugin(AgentLoop, {})
  await root.plugin(plugin, { baseUrl: server.url, apiKey: 'sk-ant-test', ...config })
  const fiber = await root.plugin({ name: 'test-host', inject: ['tools', 'agents', 'systemPrompt'], apply() {} })
  // A runtime context that changes every step: its snapshot follows the tool results in the same user turn.
  let step = 0
  fiber.ctx.systemPrompt.context({ name: 'step', order: 20, text: () => `Step ${++step}` })
  fiber.ctx.tools.register(
    defineTool<{ city: string }>({
      name: 'weather',
      description: 'The weather in a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      execute: args => `sunny in ${args.city}`,
    }),
  )
  const agent: Agent = fiber.ctx.agents.create('a1', { provider: 'anthropic', model: 'claude-sonnet-5-5' })
  const run = async (text: string) => {
    agent.followup(userText(text))
    await agent.idle()
  }
  return { server, agent, run, events: () => agent.session.events }
}

const ofType = <T extends keyof SessionEventMap>(events: readonly SessionEvent[], type: T) =>
  events.filter(event => event.type === type).map(event => event.data as SessionEventMap[T])

describe('in the agent loop', () => {
  it('runs a tool loop with thinking on; the signed thinking goes back unchanged; a 529 is retried', async () => {
    const { server, run, events } = await host(
      [
        { type: 'http_error', status: 529, errorType: 'overloaded_error', message: 'Overloaded' },
        {
          type: 'message',
          blocks: [
            { type: 'thinking', thinking: 'I need the weather in Paris.' },
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_w1', name: 'weather', input: { city: 'Paris' } },
          ],
          usage: { input: 50, output: 20, cacheWrite: 900 },
        },
        {
          type: 'message',
          blocks: [
            { type: 'thinking', thinking: 'It is sunny.' },
            { type: 'text', text: 'It is sunny in Paris.' },
          ],
          usage: { input: 30, output: 10, cacheRead: 900, cacheWrite: 60 },
        },
      ],
      { thinking: 'enabled', thinkingBudgetTokens: 2048, maxTokens: 4096 },
    )
    await run('What is the weather in Paris?')

    expect(server.requests.map(request => request.outcome)).toEqual(['http_error', 'message', 'message'])
    expect(ofType(events(), 'turn/end').at(-1)!.reason).toEqual({ kind: 'completed' })
    expect(ofType(events(), 'request/retry')).toMatchObject([{ retry: 1, maxRetries: 5, failure: { code: 'SERVICE_UNAVAILABLE', status: 529 } }])

    // The retry is the identical request; every request has the materialized max_tokens and the thinking budget.
    const bodies = server.requests.map(request => request.body)
    expect(bodies[1]).toEqual(bodies[0])
    for (const body of bodies) {
      expect(body).toMatchObject({ model: 'claude-sonnet-5-5', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 } })
      expect(breakpointsOf(body).length).toBeLessThanOrEqual(4)
    }
    expect(bodies[0].tools).toEqual([
      {
        name: 'weather',
        description: 'The weather in a city.',
        input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        cache_control: { type: 'ephemeral' },
      },
    ])
    expect(bodies[0].system[0]).toMatchObject({ type: 'text', cache_control: { type: 'ephemeral' } })

    // The second model request: the assistant turn as the API returned it, then the tool result first.
    const third = bodies[2]
    const assistant = third.messages[1]
    expect(assistant.role).toBe('assistant')
    expect(assistant.content).toEqual([
      { type: 'thinking', thinking: 'I need the weather in Paris.', signature: expect.stringMatching(/^sig_/) },
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'toolu_w1', name: 'weather', input: { city: 'Paris' } },
    ])
    expect(third.messages[2].role).toBe('user')
    expect(third.messages[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_w1', content: [{ type: 'text', text: 'sunny in Paris' }] })
    // The runtime-context snapshot of the step comes after the tool result, in the same user turn.
    expect(third.messages[2].content.slice(1)).toEqual([{ type: 'text', text: expect.stringContaining('Step '), cache_control: { type: 'ephemeral' } }])
    expect(third.messages[0].content.at(-1).text).toContain('Step ')
    // The previous request's last block is marked again: its prefix is read back from the cache.
    expect(breakpointsOf(third)).toEqual([
      'tools.0',
      'system.0',
      `messages.0.content.${third.messages[0].content.length - 1}`,
      `messages.2.content.${third.messages[2].content.length - 1}`,
    ])
    expect(third.messages[0]).toEqual(bodies[1].messages[0])

    // The log: the answer with its replay state, and the usage buckets.
    const answers = ofType(events(), 'assistant/message')
    expect(answers.map(answer => answer.message.content.map(block => block.type))).toEqual([
      ['reasoning', 'text', 'tool-call'],
      ['reasoning', 'text'],
    ])
    expect(answers[0].message.source).toMatchObject({ provider: 'anthropic', replayState: { blocks: [{ type: 'thinking' }, null, null] } })
    expect(answers.map(answer => answer.usage)).toEqual([
      { inputTokens: 50, outputTokens: 20, cacheWriteTokens: 900 },
      { inputTokens: 30, outputTokens: 10, cacheReadTokens: 900, cacheWriteTokens: 60 },
    ])
    expect(answers[1].message.content.at(-1)).toEqual({ type: 'text', text: 'It is sunny in Paris.' })
  })

  it('a failure that is not retryable ends the turn with its error after one attempt', async () => {
    const { server, run, events } = await host([
      { type: 'http_error', status: 400, errorType: 'invalid_request_error', message: 'prompt is too long: 300000 tokens > 200000 maximum' },
    ])
    await run('hello')
    expect(server.requests).toHaveLength(1)
    expect(ofType(events(), 'turn/end').at(-1)!.reason).toMatchObject({ kind: 'error', error: { code: 'CONTEXT_OVERFLOW', status: 400 } })
  })
})
