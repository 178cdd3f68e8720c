import { Context } from '@deepseek-ai/cordis'
import Llm, {
  createAssistantMessage,
  createToolResultMessage,
  createUserMessage,
  LlmError,
  userText,
  type GenerateOptions,
  type Message,
  type StreamChunk,
} from '@loom/llm'
import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { httpError, OpenAICompatibleAdapter, mapMessages, mapUsage, VERSION, type OpenAICompatibleOptions } from '../src/adapter.ts'
import * as plugin from '../src/index.ts'
import { DEFAULT_CALLS, DEFAULT_REASONING, DEFAULT_TEXT, startMockServer, type Behaviour, type MockServer } from './mock-server.ts'

let servers: MockServer[] = []
afterEach(async () => {
  await Promise.all(servers.map(server => server.close()))
  servers = []
})

async function serve(script: Behaviour[] | Parameters<typeof startMockServer>[0]): Promise<MockServer> {
  const server = await startMockServer(script)
  servers.push(server)
  return server
}

function adapterFor(server: MockServer, options: OpenAICompatibleOptions = {}) {
  return new OpenAICompatibleAdapter({
    baseUrl: server.url,
    apiKey: 'sk-test',
    ...options,
  })
}

const call = (overrides: Partial<GenerateOptions> = {}): GenerateOptions => ({
  provider: 'deepseek',
  model: 'deepseek-chat',
  messages: [userText('Hi')],
  ...overrides,
})

interface Outcome {
  chunks: StreamChunk[]
  error?: LlmError
}

async function collect(
  adapter: OpenAICompatibleAdapter,
  options: GenerateOptions = call(),
  onChunk?: (chunk: StreamChunk) => void | Promise<void>,
): Promise<Outcome> {
  const chunks: StreamChunk[] = []
  try {
    for await (const chunk of adapter.stream(options)) {
      chunks.push(chunk)
      await onChunk?.(chunk)
    }
    return { chunks }
  } catch (error) {
    if (!(error instanceof LlmError)) throw error
    return { chunks, error }
  }
}

const texts = (chunks: StreamChunk[], type: 'text-delta' | 'reasoning-delta') => chunks.flatMap(chunk => (chunk.type === type ? [chunk.text] : [])).join('')

const finishOf = (chunks: StreamChunk[]) => chunks.find(chunk => chunk.type === 'finish')

// ---------------------------------------------------------------------------

describe('request', () => {
  it('a failed tool result reads `Error: …` once, whether or not its text already says so', () => {
    const wire = mapMessages([
      createToolResultMessage({ callId: 'a', content: [{ type: 'text', text: 'Error: ENOENT: no such file' }], isError: true }),
      createToolResultMessage({ callId: 'b', content: [{ type: 'text', text: 'no such dir' }], isError: true }),
      createToolResultMessage({ callId: 'c', content: [{ type: 'text', text: 'Error: is only text here' }] }),
    ])
    expect(wire.map(message => message.content)).toEqual(['Error: ENOENT: no such file', 'Error: no such dir', 'Error: is only text here'])
  })

  it('maps messages, tools and call options onto the chat-completions body', async () => {
    const server = await serve(['success'])
    const messages: Message[] = [
      { id: 's1', role: 'system', content: [{ type: 'text', text: 'Project notes.' }], source: { kind: 'plugin', plugin: 'notes' } },
      userText('Read the file'),
      createAssistantMessage({
        source: { provider: 'deepseek', model: 'deepseek-chat' },
        content: [
          { type: 'reasoning', text: 'I should read it.' },
          { type: 'text', text: 'Reading.' },
          { type: 'tool-call', id: 'call_a', name: 'read_file', arguments: '{"path":"a.ts"}' },
          { type: 'tool-call', id: 'call_b', name: 'list', arguments: '' },
        ],
      }),
      createToolResultMessage({ callId: 'call_a', content: [{ type: 'text', text: 'export {}' }] }),
      createToolResultMessage({ callId: 'call_b', content: [{ type: 'text', text: 'no such dir' }], isError: true }),
      createUserMessage({
        source: { kind: 'user' },
        content: [
          { type: 'text', text: 'Thanks.' },
          { type: 'text', text: 'Now summarise.' },
        ],
      }),
    ]
    const tools = [{ name: 'read_file', description: 'Reads a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } }]
    const { error } = await collect(
      adapterFor(server),
      call({
        system: 'You are Loom.',
        messages,
        tools,
        maxTokens: 512,
        temperature: 0.2,
        stop: ['END'],
        reasoningEffort: 'high',
      }),
    )
    expect(error).toBeUndefined()
    const [request] = server.requests
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe('Bearer sk-test')
    expect(request.headers['user-agent']).toBe(`loom/${VERSION}`)
    expect(request.headers['content-type']).toBe('application/json')
    expect(request.headers.accept).toBe('text/event-stream')
    expect(request.body).toEqual({
      model: 'deepseek-chat',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'You are Loom.' },
        { role: 'system', content: 'Project notes.' },
        { role: 'user', content: 'Read the file' },
        {
          role: 'assistant',
          content: 'Reading.',
          reasoning_content: 'I should read it.',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } },
            { id: 'call_b', type: 'function', function: { name: 'list', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'export {}' },
        { role: 'tool', tool_call_id: 'call_b', content: 'Error: no such dir' },
        { role: 'user', content: 'Thanks.\nNow summarise.' },
      ],
      tools: [{ type: 'function', function: tools[0] }],
      max_tokens: 512,
      temperature: 0.2,
      stop: ['END'],
      reasoning_effort: 'high',
    })
  })

  it('omits unset options and maps reasoning effort "off" and the thinking switch', async () => {
    const server = await serve(['success', 'success', 'success'])
    await collect(adapterFor(server), call())
    await collect(adapterFor(server, { thinking: 'enabled' }), call({ reasoningEffort: 'max' }))
    await collect(adapterFor(server, { thinking: 'enabled' }), call({ reasoningEffort: 'off' }))
    const [plain, thinking, off] = server.requests.map(request => request.body)
    expect(Object.keys(plain).sort()).toEqual(['messages', 'model', 'stream', 'stream_options'])
    expect(thinking).toMatchObject({ thinking: { type: 'enabled' }, reasoning_effort: 'max' })
    expect(off.thinking).toEqual({ type: 'disabled' })
    expect(off).not.toHaveProperty('reasoning_effort')
  })

  it('resolves the API key and base URL from the environment on every call', async () => {
    const server = await serve(['success'])
    const env: Record<string, string | undefined> = {}
    const adapter = new OpenAICompatibleAdapter({
      apiKeyEnv: 'LOOM_TEST_KEY',
      baseUrlEnv: 'LOOM_TEST_BASE',
      defaultBaseUrl: 'http://127.0.0.1:9',
      env: () => env,
    })
    const missing = await collect(adapter)
    expect(missing.error?.code).toBe('MISSING_CREDENTIAL')
    expect(missing.error?.message).toContain('LOOM_TEST_KEY')
    expect(missing.chunks).toEqual([])
    expect(server.requests).toHaveLength(0)

    env.LOOM_TEST_KEY = 'sk-late'
    env.LOOM_TEST_BASE = `${server.url}/`
    const { error } = await collect(adapter)
    expect(error).toBeUndefined()
    expect(server.requests[0].headers.authorization).toBe('Bearer sk-late')
  })

  it('reports the configured models with the context window', async () => {
    const adapter = new OpenAICompatibleAdapter({ models: ['deepseek-chat'], contextWindow: 64_000 })
    expect(await adapter.listModels('deepseek')).toEqual([
      { provider: 'deepseek', id: 'deepseek-chat', name: 'deepseek-chat', context: { contextWindow: 64_000 } },
    ])
    expect(await adapter.resolveModel('deepseek', 'unlisted')).toMatchObject({ id: 'unlisted', context: { contextWindow: 64_000 } })
    expect(VERSION).toBe(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version)
  })
})

describe('stream mapping', () => {
  it('maps reasoning, text, usage and stop onto chunks with stable indexes', async () => {
    const server = await serve([{ type: 'success', splitWrites: true }])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    const reasoningDeltas = chunks.filter(chunk => chunk.type === 'reasoning-delta')
    const textDeltas = chunks.filter(chunk => chunk.type === 'text-delta')
    expect(reasoningDeltas.length).toBeGreaterThan(1)
    expect(textDeltas.length).toBeGreaterThan(1)
    expect(chunks).toEqual([
      { type: 'block-start', index: 0, blockType: 'reasoning' },
      ...reasoningDeltas.map(delta => ({ ...delta, index: 0 })),
      { type: 'block-end', index: 0, block: { type: 'reasoning', text: DEFAULT_REASONING } },
      { type: 'block-start', index: 1, blockType: 'text' },
      ...textDeltas.map(delta => ({ ...delta, index: 1 })),
      { type: 'block-end', index: 1, block: { type: 'text', text: DEFAULT_TEXT } },
      { type: 'usage', usage: { inputTokens: 20, outputTokens: 40, cacheReadTokens: 100, reasoningTokens: 12 } },
      { type: 'finish', reason: { kind: 'stop' } },
    ])
    expect(texts(chunks, 'reasoning-delta')).toBe(DEFAULT_REASONING)
    expect(texts(chunks, 'text-delta')).toBe(DEFAULT_TEXT)
  })

  it('streams tool calls with split arguments as tool-call blocks', async () => {
    const calls = [...DEFAULT_CALLS, { id: 'call_2', name: 'grep', arguments: '{"pattern":"TODO"}' }]
    const server = await serve([{ type: 'tool_call', text: 'Let me look.', calls }])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    const starts = chunks.filter(chunk => chunk.type === 'block-start')
    expect(starts).toEqual([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'block-start', index: 1, blockType: 'tool-call' },
      { type: 'block-start', index: 2, blockType: 'tool-call' },
    ])
    for (const [i, expected] of calls.entries()) {
      const deltas = chunks.filter(chunk => chunk.type === 'tool-call-delta' && chunk.index === i + 1)
      expect(deltas.length).toBeGreaterThan(2)
      expect(deltas.every(delta => delta.type === 'tool-call-delta' && delta.id === expected.id)).toBe(true)
      expect(deltas.filter(delta => delta.type === 'tool-call-delta' && delta.name !== undefined)).toEqual([expect.objectContaining({ name: expected.name })])
      expect(deltas.map(delta => (delta.type === 'tool-call-delta' ? delta.argumentsDelta : '')).join('')).toBe(expected.arguments)
    }
    expect(chunks.filter(chunk => chunk.type === 'block-end').map(chunk => chunk.type === 'block-end' && chunk.block)).toEqual([
      { type: 'text', text: 'Let me look.' },
      { type: 'tool-call', ...calls[0] },
      { type: 'tool-call', ...calls[1] },
    ])
    // Block ends come in order and before usage/finish.
    const tail = chunks.slice(-2)
    expect(tail).toEqual([
      { type: 'usage', usage: { inputTokens: 50, outputTokens: 20 } },
      { type: 'finish', reason: { kind: 'tool-calls' } },
    ])
  })

  it('maps finish_reason length to max-tokens', async () => {
    const server = await serve(['max_tokens'])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    expect(texts(chunks, 'text-delta')).toBe('This answer is cut')
    expect(finishOf(chunks)).toEqual({ type: 'finish', reason: { kind: 'max-tokens' } })
  })

  it('maps usage from both DeepSeek and OpenAI field names into disjoint buckets', () => {
    expect(mapUsage({ prompt_tokens: 100, completion_tokens: 30, prompt_cache_hit_tokens: 60, prompt_cache_miss_tokens: 40 })).toEqual({
      inputTokens: 40,
      outputTokens: 30,
      cacheReadTokens: 60,
    })
    expect(
      mapUsage({
        prompt_tokens: 100,
        completion_tokens: 30,
        prompt_tokens_details: { cached_tokens: 50, cache_write_tokens: 20 },
        completion_tokens_details: { reasoning_tokens: 10 },
      }),
    ).toEqual({ inputTokens: 30, outputTokens: 30, cacheReadTokens: 50, cacheWriteTokens: 20, reasoningTokens: 10 })
    expect(mapUsage({ prompt_tokens: 7, completion_tokens: 3 })).toEqual({ inputTokens: 7, outputTokens: 3 })
  })

  it('does not count the time the consumer holds a chunk as idle', async () => {
    const server = await serve(['success'])
    // Fake time passes only when the test says: holding each chunk passes ten idle timeouts, and no network wait
    // is ever cut short, however slow the machine. An idle timer left running while a chunk is held would fire.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const { chunks, error } = await collect(adapterFor(server, { idleTimeoutMs: 100 }), call(), () => {
        vi.advanceTimersByTime(1000)
      })
      expect(error).toBeUndefined()
      expect(texts(chunks, 'text-delta')).toBe(DEFAULT_TEXT)
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('errors', () => {
  it.each([
    ['auth_error', 'AUTH', 401],
    ['quota', 'QUOTA', 402],
    [{ type: 'rate_limit', message: 'You exceeded your current quota' }, 'QUOTA', 429],
    ['context_overflow', 'CONTEXT_OVERFLOW', 400],
    [{ type: 'context_overflow', message: 'Invalid value for temperature' }, 'BAD_REQUEST', 400],
    ['wrong_content_type', 'PROTOCOL', 200],
    ['empty', 'EMPTY_RESPONSE', undefined],
  ] as [Behaviour, string, number | undefined][])('%o → %s without retrying', async (behaviour, code, status) => {
    const server = await serve([behaviour, 'success'])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error?.code).toBe(code)
    expect(error?.failure.status).toBe(status)
    expect(chunks).toEqual([])
    expect(server.requests).toHaveLength(1)
  })

  it.each([
    ['rate_limit', 'RATE_LIMIT', 429],
    ['server_error', 'SERVER', 500],
    ['service_unavailable', 'SERVICE_UNAVAILABLE', 503],
    ['connection_reset', 'NETWORK', undefined],
    ['stall', 'TIMEOUT', undefined],
  ] as [Behaviour, string, number | undefined][])('%o → %s in one attempt (the agent loop retries)', async (behaviour, code, status) => {
    const server = await serve([behaviour, 'success'])
    // Only a stall needs a short idle timeout; the others must not meet one on a slow machine.
    const { error } = await collect(adapterFor(server, behaviour === 'stall' ? { idleTimeoutMs: 100 } : {}))
    expect(error?.code).toBe(code)
    expect(error?.failure.status).toBe(status)
    expect(server.requests).toHaveLength(1)
  })

  it('carries the request id, status and Retry-After into the failure', async () => {
    const server = await serve([{ type: 'rate_limit', retryAfter: '1' }])
    const { error } = await collect(adapterFor(server))
    expect(error?.failure).toEqual({
      code: 'RATE_LIMIT',
      status: 429,
      providerRetryAfterMs: 1000,
      requestId: 'req-mock',
      message: 'deepseek: HTTP 429: Rate limit reached for requests',
    })
  })

  it('malformed JSON after output → PROTOCOL, keeping the output', async () => {
    const server = await serve(['malformed_json', 'success'])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error?.code).toBe('PROTOCOL')
    expect(texts(chunks, 'text-delta')).toBe('ok')
    expect(server.requests).toHaveLength(1)
  })

  it('a reset mid-stream → NETWORK, never retried after output', async () => {
    const server = await serve(['reset_mid_stream', 'success'])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error?.code).toBe('NETWORK')
    expect(texts(chunks, 'text-delta')).toBe('This will be cut')
    expect(finishOf(chunks)).toBeUndefined()
    expect(server.requests).toHaveLength(1)
  })

  it('a stalled stream → TIMEOUT once idleTimeoutMs passes without data, not before', async () => {
    const server = await serve(['stall'])
    // Fake time: the request and the first chunk are never cut short by a slow machine; the stall lasts exactly
    // as long as the test advances the clock.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      let settled = false
      let stalled!: () => void
      const waiting = new Promise<void>(resolve => {
        stalled = resolve
      })
      const outcome = collect(adapterFor(server, { idleTimeoutMs: 150 }), call(), chunk => {
        // Once the consumer returns, the adapter goes back to the network for more (no I/O before it does).
        if (chunk.type === 'text-delta') setImmediate(stalled)
      }).finally(() => {
        settled = true
      })
      await waiting
      vi.advanceTimersByTime(149)
      for (let i = 0; i < 10; i++) await new Promise(resolve => setImmediate(resolve))
      expect(settled, 'no timeout before idleTimeoutMs').toBe(false)
      vi.advanceTimersByTime(1)
      const { chunks, error } = await outcome
      expect(error?.code).toBe('TIMEOUT')
      expect(error?.message).toContain('no data from the provider for 150 ms')
      expect(texts(chunks, 'text-delta')).toBe('Hel')
    } finally {
      vi.useRealTimers()
    }
    expect(await server.requests[0].closed).toEqual({ early: true })
  })

  it('requestTimeoutMs bounds one attempt → TIMEOUT', async () => {
    const server = await serve(['stall'])
    const { error } = await collect(adapterFor(server, { requestTimeoutMs: 100 }))
    expect(error?.code).toBe('TIMEOUT')
    expect(error?.message).toContain('100 ms')
  })

  it('a server that is gone (connection refused) → UNREACHABLE, naming its address and the baseUrl to check', async () => {
    const server = await serve([])
    await server.close()
    const { error } = await collect(adapterFor(server))
    expect(error?.code).toBe('UNREACHABLE')
    expect(error?.message).toContain(`cannot reach ${new URL(server.url).origin}: connection refused (ECONNREFUSED)`)
    expect(error?.message).toContain("check the route's baseUrl")
  })

  it('401 names the route and the variable the key came from, never the key', async () => {
    const server = await serve([{ type: 'auth_error', message: 'Authentication Fails, key sk-secret-123 (Authorization: Bearer sk-secret-123) is invalid' }])
    const adapter = new OpenAICompatibleAdapter({ baseUrl: server.url, apiKeyEnv: 'DEEPSEEK_API_KEY', env: () => ({ DEEPSEEK_API_KEY: 'sk-secret-123' }) })
    const { error } = await collect(adapter)
    expect(error?.code).toBe('AUTH')
    expect(error?.message).toContain('route "deepseek": check DEEPSEEK_API_KEY')
    expect(error?.message).toContain('Authentication Fails')
    expect(error?.message).not.toContain('sk-secret-123')
  })

  it('408 → TIMEOUT, so the loop retries it', async () => {
    expect(httpError('deepseek', 408, '{"error":{"message":"Request Timeout"}}', new Headers()).code).toBe('TIMEOUT')
  })

  it('a response larger than maxResponseBytes → RESPONSE_TOO_LARGE, read no further', async () => {
    const server = await serve([{ type: 'success', text: 'x'.repeat(200_000), reasoning: null }])
    const { error } = await collect(adapterFor(server, { maxResponseBytes: 50_000 }))
    expect(error?.code).toBe('RESPONSE_TOO_LARGE')
    expect(error?.message).toContain('50000 bytes')
  })

  it('one SSE line larger than maxResponseBytes is refused before it is buffered whole', async () => {
    const server = await serve([{ type: 'success', text: 'y'.repeat(300_000), reasoning: null, oneChunk: true }])
    const { chunks, error } = await collect(adapterFor(server, { maxResponseBytes: 100_000 }))
    expect(error?.code).toBe('RESPONSE_TOO_LARGE')
    expect(texts(chunks, 'text-delta')).toBe('')
  })
})

describe('thinking mode', () => {
  const reasoningOf = (message: any) => message.reasoning_content

  it('sends back the reasoning of assistant messages that called tools, and only theirs', () => {
    const call = createAssistantMessage({
      content: [
        { type: 'reasoning', text: 'I should read it.' },
        { type: 'tool-call', id: 'c1', name: 'read', arguments: '{}' },
      ],
      source: { provider: 'deepseek', model: 'deepseek-flash' },
    })
    const answer = createAssistantMessage({
      content: [
        { type: 'reasoning', text: 'Now answer.' },
        { type: 'text', text: 'Done.' },
      ],
      source: { provider: 'deepseek', model: 'deepseek-flash' },
    })
    const wire = mapMessages([
      userText('go'),
      call,
      createToolResultMessage({ callId: 'c1', content: [{ type: 'text', text: 'x' }] }),
      answer,
      userText('more'),
    ])
    expect(wire.map(reasoningOf)).toEqual([undefined, 'I should read it.', undefined, undefined, undefined])
    expect(mapMessages([call], undefined, 'none').map(reasoningOf)).toEqual([undefined])
  })

  it('a tool call with empty reasoning in thinking mode still carries reasoning_content: ""', async () => {
    const server = await serve([{ type: 'tool_call', reasoning: '' }])
    const { chunks } = await collect(adapterFor(server))
    const ends = chunks.flatMap(chunk => (chunk.type === 'block-end' ? [chunk.block] : []))
    expect(ends).toContainEqual({ type: 'reasoning', text: '' })
    const message = createAssistantMessage({ content: ends, source: { provider: 'deepseek', model: 'deepseek-flash' } })
    expect(mapMessages([message])[0]).toMatchObject({ reasoning_content: '', tool_calls: [{ id: 'call_1' }] })
  })

  it('offers the configured reasoning efforts with a default', async () => {
    const adapter = new OpenAICompatibleAdapter({ reasoningEfforts: ['off', 'low', 'high', 'max'], reasoningEffort: 'high' })
    expect((await adapter.resolveModel('deepseek', 'deepseek-flash')).reasoning).toEqual({
      efforts: ['off', 'low', 'high', 'max'].map(id => ({ id, name: id })),
      defaultEffort: 'high',
    })
    expect((await new OpenAICompatibleAdapter().resolveModel('openai', 'gpt')).reasoning).toBeUndefined()
  })
})

describe('abort', () => {
  it('an abort mid-stream ends it with ABORTED without waiting for the server, and closes the connection', async () => {
    // The server sends a first chunk and then nothing, ever (the idle timeout is five minutes): only the abort can end it.
    const server = await serve(['stall'])
    const controller = new AbortController()
    const { chunks, error } = await collect(adapterFor(server), call({ signal: controller.signal }), chunk => {
      if (chunk.type === 'text-delta') controller.abort()
    })
    expect(error?.code).toBe('ABORTED')
    expect(texts(chunks, 'text-delta')).toBe('Hel')
    expect(finishOf(chunks)).toBeUndefined()
    expect(await server.requests[0].closed).toEqual({ early: true })
    expect(server.requests).toHaveLength(1)
  })

  it('an already aborted signal sends nothing', async () => {
    const server = await serve(['success'])
    const { error } = await collect(adapterFor(server), call({ signal: AbortSignal.abort() }))
    expect(error?.code).toBe('ABORTED')
    expect(server.requests).toHaveLength(0)
  })

  it('a consumer that stops early closes the connection', async () => {
    // A stream that never ends by itself: the connection can only close early because the consumer left.
    const server = await serve(['stall'])
    for await (const chunk of adapterFor(server).stream(call())) {
      if (chunk.type === 'text-delta') break
    }
    expect(await server.requests[0].closed).toEqual({ early: true })
  })
})

describe('plugin', () => {
  it('registers the adapter for its provider on ctx.llm, for the life of the plugin', async () => {
    const server = await serve(['success'])
    const root = new Context()
    await root.plugin(Llm)
    const fiber = await root.plugin(plugin, { provider: 'openai', baseUrl: server.url, apiKey: 'sk-plugin', contextWindow: 32_000 })
    expect(root.llm.listProviders()).toEqual([{ id: 'openai', name: 'openai' }])
    expect(await root.llm.resolveModelInfo('openai', 'deepseek-chat')).toMatchObject({ context: { contextWindow: 32_000 } })
    expect((await root.llm.listModels('openai')).map(model => model.id)).toEqual(['deepseek-flash', 'deepseek-v4-pro'])

    const chunks: StreamChunk[] = []
    for await (const chunk of root.llm.stream(call({ provider: 'openai' }))) chunks.push(chunk)
    expect(texts(chunks, 'text-delta')).toBe(DEFAULT_TEXT)
    expect(finishOf(chunks)).toEqual({ type: 'finish', reason: { kind: 'stop' } })
    expect(server.requests[0].headers.authorization).toBe('Bearer sk-plugin')

    await fiber.dispose()
    expect(root.llm.listProviders()).toEqual([])
  })

  it('uses the DeepSeek defaults', () => {
    expect(plugin.Config({})).toEqual({
      provider: 'deepseek',
      baseUrlEnv: 'DEEPSEEK_BASE_URL',
      apiKeyEnv: 'DEEPSEEK_API_KEY',
      defaultBaseUrl: 'https://api.deepseek.com',
      models: ['deepseek-flash', 'deepseek-v4-pro'],
      contextWindow: 128_000,
      maxRetries: 5,
      idleTimeoutMs: 300_000,
      maxResponseBytes: 32 * 1024 * 1024,
      reasoningEfforts: [],
      reasoningHistory: 'tool-calls',
    })
  })
})
