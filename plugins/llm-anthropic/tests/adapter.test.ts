import { Context } from '@deepseek-ai/cordis'
import Llm, {
  BlockAssembler,
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
import { afterEach, describe, expect, it } from 'vitest'
import { AnthropicAdapter, VERSION, type AnthropicOptions } from '../src/adapter.ts'
import * as plugin from '../src/index.ts'
import { breakpointsOf, mapMessages, toolInput } from '../src/request.ts'
import { DEFAULT_TEXT, startMockServer, type Behaviour, type MockBlock, type MockServer, type MockServerOptions } from './mock-server.ts'

const KEY = 'sk-ant-test'

let servers: MockServer[] = []
afterEach(async () => {
  await Promise.all(servers.map(server => server.close()))
  servers = []
})

async function serve(script: Behaviour[] | ((request: any, index: number) => Behaviour), options?: MockServerOptions): Promise<MockServer> {
  const server = await startMockServer(script, options)
  servers.push(server)
  return server
}

function adapterFor(server: MockServer, options: AnthropicOptions = {}) {
  return new AnthropicAdapter({ baseUrl: server.url, apiKey: KEY, apiKeyEnv: 'ANTHROPIC_API_KEY', ...options })
}

const call = (overrides: Partial<GenerateOptions> = {}): GenerateOptions => ({
  provider: 'anthropic',
  model: 'claude-sonnet-5-5',
  messages: [userText('Hi')],
  ...overrides,
})

interface Outcome {
  chunks: StreamChunk[]
  error?: LlmError
}

async function collect(adapter: AnthropicAdapter, options: GenerateOptions = call(), onChunk?: (chunk: StreamChunk) => void | Promise<void>): Promise<Outcome> {
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

/** What the agent loop makes of a stream: the assistant message, with the replay state. */
function answerOf(chunks: StreamChunk[], model = 'claude-sonnet-5-5'): Message {
  const assembler = new BlockAssembler()
  for (const chunk of chunks) assembler.push(chunk)
  const replayState = assembler.replayState
  return createAssistantMessage({ content: assembler.blocks(), source: { provider: 'anthropic', model, ...(replayState !== undefined && { replayState }) } })
}

const texts = (chunks: StreamChunk[], type: 'text-delta' | 'reasoning-delta') => chunks.flatMap(chunk => (chunk.type === type ? [chunk.text] : [])).join('')
const finishOf = (chunks: StreamChunk[]) => chunks.find(chunk => chunk.type === 'finish')
const withoutMarkers = (value: unknown) => JSON.parse(JSON.stringify(value, (key, v) => (key === 'cache_control' ? undefined : v)))

const TOOLS = [
  { name: 'grep', description: 'Searches files.', parameters: { type: 'object', properties: { pattern: { type: 'string' } } } },
  { name: 'read_file', description: 'Reads a file.', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
]

// ---------------------------------------------------------------------------

describe('request', () => {
  it('posts to /v1/messages with the Anthropic headers and maps system, tools and messages', async () => {
    const server = await serve([{ type: 'message' }])
    const messages: Message[] = [
      userText('Read the file'),
      createAssistantMessage({
        source: { provider: 'anthropic', model: 'claude-sonnet-5-5' },
        content: [
          { type: 'text', text: 'Reading.' },
          { type: 'tool-call', id: 'toolu_a', name: 'read_file', arguments: '{"path":"a.ts"}' },
          { type: 'tool-call', id: 'toolu_b', name: 'grep', arguments: '' },
        ],
      }),
      createToolResultMessage({ callId: 'toolu_a', content: [{ type: 'text', text: 'export {}' }] }),
      createToolResultMessage({ callId: 'toolu_b', content: [{ type: 'text', text: 'bad pattern' }], isError: true }),
      // A runtime-context snapshot after the tool results: merged into the same user turn.
      createUserMessage({ source: { kind: 'plugin', plugin: 'context-time' }, content: [{ type: 'text', text: '<context>now</context>' }] }),
      { id: 's1', role: 'system', content: [{ type: 'text', text: 'Project notes.' }], source: { kind: 'plugin', plugin: 'notes' } },
    ]
    const { error } = await collect(
      adapterFor(server),
      call({ system: 'You are Loom.', tools: TOOLS, messages, maxTokens: 512, temperature: 0.2, stop: ['END'] }),
    )
    expect(error).toBeUndefined()
    const [request] = server.requests
    expect(request.outcome).toBe('message')
    expect(request.method).toBe('POST')
    expect(request.path).toBe('/v1/messages')
    expect(request.headers['x-api-key']).toBe(KEY)
    expect(request.headers['anthropic-version']).toBe('2023-06-01')
    expect(request.headers['content-type']).toBe('application/json')
    expect(request.headers.accept).toBe('text/event-stream')
    expect(request.headers['user-agent']).toBe(`loom/${VERSION}`)
    expect(request.headers.authorization).toBeUndefined()
    expect(request.body).toEqual({
      model: 'claude-sonnet-5-5',
      max_tokens: 512,
      stream: true,
      system: [{ type: 'text', text: 'You are Loom.', cache_control: { type: 'ephemeral' } }],
      tools: [
        { name: 'grep', description: 'Searches files.', input_schema: TOOLS[0].parameters },
        { name: 'read_file', description: 'Reads a file.', input_schema: TOOLS[1].parameters, cache_control: { type: 'ephemeral' } },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Read the file', cache_control: { type: 'ephemeral' } }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Reading.' },
            { type: 'tool_use', id: 'toolu_a', name: 'read_file', input: { path: 'a.ts' } },
            { type: 'tool_use', id: 'toolu_b', name: 'grep', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_a', content: [{ type: 'text', text: 'export {}' }] },
            { type: 'tool_result', tool_use_id: 'toolu_b', content: [{ type: 'text', text: 'bad pattern' }], is_error: true },
            { type: 'text', text: '<context>now</context>' },
            { type: 'text', text: 'Project notes.', cache_control: { type: 'ephemeral' } },
          ],
        },
      ],
      temperature: 0.2,
      stop_sequences: ['END'],
    })
  })

  it('uses the route maxTokens when the call sets none, and sends no thinking or effort by default', async () => {
    const server = await serve([{ type: 'message' }])
    await collect(adapterFor(server, { maxTokens: 4096 }))
    expect(Object.keys(server.requests[0].body)).toEqual(['model', 'max_tokens', 'stream', 'messages'])
    expect(server.requests[0].body.max_tokens).toBe(4096)
  })

  it('maps the thinking modes and reasoning efforts', async () => {
    const server = await serve(() => ({ type: 'message' }))
    const bodies = async (options: AnthropicOptions, overrides: Partial<GenerateOptions> = {}) => {
      const { error } = await collect(adapterFor(server, options), call({ maxTokens: 16_000, ...overrides }))
      expect(error).toBeUndefined()
      const { thinking, output_config } = server.requests.at(-1)!.body
      return { thinking, output_config }
    }
    expect(await bodies({ thinking: 'adaptive' })).toEqual({ thinking: { type: 'adaptive' }, output_config: undefined })
    expect(await bodies({ thinking: 'enabled', thinkingBudgetTokens: 4000 })).toEqual({
      thinking: { type: 'enabled', budget_tokens: 4000 },
      output_config: undefined,
    })
    expect(await bodies({ thinking: 'disabled' })).toEqual({ thinking: { type: 'disabled' }, output_config: undefined })
    expect(await bodies({ thinking: 'adaptive' }, { reasoningEffort: 'high' })).toEqual({ thinking: { type: 'adaptive' }, output_config: { effort: 'high' } })
    expect(await bodies({}, { reasoningEffort: 'low' })).toEqual({ thinking: undefined, output_config: { effort: 'low' } })
    expect(await bodies({ thinking: 'adaptive' }, { reasoningEffort: 'off' })).toEqual({ thinking: { type: 'disabled' }, output_config: undefined })
    expect(await bodies({ thinking: 'adaptive', prefixMismatchBehavior: 'drop_block' })).toEqual({
      thinking: { type: 'adaptive', block_binding: { prefix_mismatch_behavior: 'drop_block' } },
      output_config: undefined,
    })
  })

  it('refuses a thinking budget that is not below max_tokens before sending anything', async () => {
    const server = await serve([])
    const { error, chunks } = await collect(adapterFor(server, { thinking: 'enabled', thinkingBudgetTokens: 8000 }), call({ maxTokens: 8000 }))
    expect(error?.code).toBe('BAD_REQUEST')
    expect(error?.message).toMatch(/thinkingBudgetTokens \(8000\) must be less than max_tokens \(8000\)/)
    expect(chunks).toEqual([])
    expect(server.requests).toHaveLength(0)
  })

  it('resolves the key and base URL from the environment on every call; a missing key names the variable', async () => {
    const server = await serve([{ type: 'message' }])
    const env: Record<string, string | undefined> = {}
    const adapter = new AnthropicAdapter({
      apiKeyEnv: 'ANTHROPIC_API_KEY',
      baseUrlEnv: 'ANTHROPIC_BASE_URL',
      defaultBaseUrl: 'http://127.0.0.1:9',
      env: () => env,
    })
    const missing = await collect(adapter)
    expect(missing.error?.code).toBe('MISSING_CREDENTIAL')
    expect(missing.error?.message).toBe('no API key for provider "anthropic": set the ANTHROPIC_API_KEY environment variable or the apiKey option')
    expect(server.requests).toHaveLength(0)

    env.ANTHROPIC_API_KEY = KEY
    env.ANTHROPIC_BASE_URL = `${server.url}/v1/` // a trailing /v1 is accepted
    const { error } = await collect(adapter)
    expect(error).toBeUndefined()
    expect(server.requests[0].path).toBe('/v1/messages')
  })

  it('tool-call arguments: JSON objects as themselves, empty as {}, anything else wrapped raw', () => {
    expect(toolInput('{"a":[1,2],"b":{"c":null}}')).toEqual({ a: [1, 2], b: { c: null } })
    expect(toolInput('  ')).toEqual({})
    expect(toolInput('{"path": "a.ts"')).toEqual({ _raw_arguments: '{"path": "a.ts"' })
    expect(toolInput('[1,2]')).toEqual({ _raw_arguments: '[1,2]' })
  })

  it('drops reasoning without provider data, empty text and empty messages; merges same-role turns', () => {
    const foreign = createAssistantMessage({
      source: { provider: 'deepseek', model: 'deepseek-chat' },
      content: [
        { type: 'reasoning', text: 'no signature' },
        { type: 'text', text: '' },
        { type: 'text', text: 'Hi.' },
      ],
    })
    const empty = createAssistantMessage({ source: { provider: 'anthropic', model: 'm' }, content: [] })
    const wire = mapMessages([userText('a'), empty, userText('b'), foreign, userText('c')], { breakpoints: false })
    expect(wire).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }] },
      { role: 'user', content: [{ type: 'text', text: 'c' }] },
    ])
  })

  it('reports models, context window, default max tokens, efforts and the retry policy', async () => {
    const adapter = new AnthropicAdapter({
      models: ['claude-haiku-4-5'],
      contextWindow: 64_000,
      maxTokens: 8_000,
      maxRetries: 3,
      reasoningEfforts: ['off', 'high'],
      reasoningEffort: 'high',
    })
    expect(await adapter.listModels('anthropic')).toEqual([
      {
        provider: 'anthropic',
        id: 'claude-haiku-4-5',
        name: 'claude-haiku-4-5',
        context: { contextWindow: 64_000 },
        defaultMaxTokens: 8_000,
        reasoning: {
          efforts: [
            { id: 'off', name: 'off' },
            { id: 'high', name: 'high' },
          ],
          defaultEffort: 'high',
        },
      },
    ])
    expect(await new AnthropicAdapter({ reasoningEfforts: [] }).resolveModel('anthropic', 'x')).toEqual({
      provider: 'anthropic',
      id: 'x',
      name: 'x',
      context: { contextWindow: 200_000 },
      defaultMaxTokens: 32_000,
    })
    expect(adapter.providerRetryPolicy('anthropic')).toEqual({
      mode: 'normal',
      maxRetries: 3,
      retryableCodes: ['RATE_LIMIT', 'SERVER', 'SERVICE_UNAVAILABLE', 'TIMEOUT', 'NETWORK', 'UNREACHABLE'],
      initialDelayMs: 500,
      maxDelayMs: 10_000,
      jitterRatio: 0.1,
    })
    expect(VERSION).toBe(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version)
  })
})

describe('stream mapping', () => {
  it('a text answer: block chunks, usage with cache buckets, stop', async () => {
    const server = await serve([{ type: 'message', splitWrites: true, usage: { input: 12, output: 34, cacheRead: 5000, cacheWrite: 700 } }])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    const deltas = chunks.filter(chunk => chunk.type === 'text-delta')
    expect(deltas.length).toBeGreaterThan(1)
    expect(chunks).toEqual([
      { type: 'block-start', index: 0, blockType: 'text' },
      ...deltas,
      { type: 'block-end', index: 0, block: { type: 'text', text: DEFAULT_TEXT } },
      // input_tokens already excludes cache reads and writes: the buckets are disjoint.
      { type: 'usage', usage: { inputTokens: 12, outputTokens: 34, cacheReadTokens: 5000, cacheWriteTokens: 700 } },
      { type: 'finish', reason: { kind: 'stop' } },
    ])
    expect(texts(chunks, 'text-delta')).toBe(DEFAULT_TEXT)
  })

  it('usage without cache fields has no cache buckets; max_tokens finishes with max-tokens', async () => {
    const server = await serve([{ type: 'message', stopReason: 'max_tokens', usage: { input: 7, output: 9 } }])
    const { chunks } = await collect(adapterFor(server))
    expect(chunks.filter(chunk => chunk.type === 'usage' || chunk.type === 'finish')).toEqual([
      { type: 'usage', usage: { inputTokens: 7, outputTokens: 9 } },
      { type: 'finish', reason: { kind: 'max-tokens' } },
    ])
  })

  it('thinking, text and tool use: reasoning and tool-call blocks, signatures in the replay state', async () => {
    const blocks: MockBlock[] = [
      { type: 'thinking', thinking: 'I should grep first.' },
      { type: 'redacted_thinking' },
      { type: 'text', text: 'Searching.' },
      { type: 'tool_use', id: 'toolu_1', name: 'grep', input: { pattern: 'TODO', paths: ['src'] } },
    ]
    const server = await serve([{ type: 'message', blocks }])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    const ends = chunks.flatMap(chunk => (chunk.type === 'block-end' ? [chunk] : []))
    expect(ends.map(end => [end.index, end.block])).toEqual([
      [0, { type: 'reasoning', text: 'I should grep first.' }],
      [1, { type: 'reasoning', text: '' }],
      [2, { type: 'text', text: 'Searching.' }],
      [3, { type: 'tool-call', id: 'toolu_1', name: 'grep', arguments: '{"pattern":"TODO","paths":["src"]}' }],
    ])
    expect(texts(chunks, 'reasoning-delta')).toBe('I should grep first.')
    const toolDeltas = chunks.filter(chunk => chunk.type === 'tool-call-delta')
    expect(toolDeltas[0]).toEqual({ type: 'tool-call-delta', index: 3, id: 'toolu_1', name: 'grep', argumentsDelta: '' })
    expect(toolDeltas.map(d => (d as any).argumentsDelta).join('')).toBe('{"pattern":"TODO","paths":["src"]}')
    const finish = finishOf(chunks) as Extract<StreamChunk, { type: 'finish' }>
    expect(finish.reason).toEqual({ kind: 'tool-calls' })
    expect(finish.replayState).toEqual({
      response: { id: 'msg_mock_1' },
      blocks: [
        { type: 'thinking', signature: expect.stringMatching(/^sig_/) },
        { type: 'redacted_thinking', data: expect.stringMatching(/^redacted_/) },
        null,
        null,
      ],
    })
  })

  it('an empty thinking block (display omitted) is still a block, passed back with its signature', async () => {
    const server = await serve([
      {
        type: 'message',
        blocks: [
          { type: 'thinking', thinking: '' },
          { type: 'tool_use', id: 'toolu_e', name: 'grep', input: {} },
        ],
      },
      { type: 'message' },
    ])
    const first = await collect(adapterFor(server))
    const answer = answerOf(first.chunks)
    expect(answer.content[0]).toEqual({ type: 'reasoning', text: '' })
    const second = await collect(
      adapterFor(server),
      call({
        messages: [userText('go'), answer, createToolResultMessage({ callId: 'toolu_e', content: [{ type: 'text', text: 'none' }] })],
      }),
    )
    expect(second.error).toBeUndefined()
    expect(server.requests[1].body.messages[1].content[0]).toMatchObject({ type: 'thinking', thinking: '', signature: expect.stringMatching(/^sig_/) })
  })

  it('ignores ping, unknown events and unknown block types', async () => {
    const server = await serve([
      {
        type: 'raw',
        status: 200,
        contentType: 'text/event-stream',
        body: [
          'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
          'event: ping\ndata: {"type":"ping"}\n\n',
          'event: brand_new\ndata: {"type":"brand_new","x":1}\n\n',
          'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}}\n\n',
          'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}\n\n',
          'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
          'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}\n\n',
          'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"ok"}}\n\n',
          'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n',
          'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\n',
          'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        ].join(''),
      },
    ])
    const { chunks, error } = await collect(adapterFor(server))
    expect(error).toBeUndefined()
    expect(chunks).toEqual([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text: 'ok' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'ok' } },
      { type: 'usage', usage: { inputTokens: 3, outputTokens: 2 } },
      { type: 'finish', reason: { kind: 'stop' } },
    ])
  })

  it('a max_tokens answer: the loop drops its tool calls, and the replay state stays aligned with what is left', async () => {
    const server = await serve([
      {
        type: 'message',
        stopReason: 'max_tokens',
        blocks: [
          { type: 'thinking', thinking: 'Plan.' },
          { type: 'tool_use', id: 'toolu_x', name: 'grep', input: { pattern: 'a' } },
          { type: 'text', text: 'Cut' },
        ],
      },
    ])
    const { chunks } = await collect(adapterFor(server))
    expect(finishOf(chunks)).toMatchObject({ reason: { kind: 'max-tokens' } })
    const answer = answerOf(chunks)
    expect(answer.content.map(block => block.type)).toEqual(['reasoning', 'text'])
    expect(mapMessages([userText('a'), answer, userText('go on')], { breakpoints: false })[1].content).toEqual([
      { type: 'thinking', thinking: 'Plan.', signature: expect.stringMatching(/^sig_/) },
      { type: 'text', text: 'Cut' },
    ])
  })

  it('a replay state that does not match the content is not used', () => {
    const answer = createAssistantMessage({
      content: [
        { type: 'reasoning', text: 'x' },
        { type: 'text', text: 'y' },
      ],
      source: { provider: 'anthropic', model: 'm', replayState: { response: null, blocks: [{ type: 'thinking', signature: 's' }] } },
    })
    expect(mapMessages([userText('a'), answer], { breakpoints: false })[1].content).toEqual([{ type: 'text', text: 'y' }])
  })

  it('a refusal fails with BAD_REQUEST', async () => {
    const server = await serve([{ type: 'message', stopReason: 'refusal' }])
    const { error } = await collect(adapterFor(server))
    expect(error?.code).toBe('BAD_REQUEST')
    expect(error?.message).toMatch(/refusal/)
  })
})

describe('round trips', () => {
  it('tool use: the next request carries the tool_use and the tool_result right after it', async () => {
    const server = await serve([
      {
        type: 'message',
        blocks: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'README.md' } },
        ],
      },
      { type: 'message', blocks: [{ type: 'text', text: 'It is a README.' }] },
    ])
    const adapter = adapterFor(server)
    const history: Message[] = [userText('What is in README.md?')]
    const first = await collect(adapter, call({ tools: TOOLS, messages: history }))
    expect(finishOf(first.chunks)).toEqual({ type: 'finish', reason: { kind: 'tool-calls' } })
    history.push(answerOf(first.chunks), createToolResultMessage({ callId: 'toolu_1', content: [{ type: 'text', text: '# Loom' }] }))
    const second = await collect(adapter, call({ tools: TOOLS, messages: history }))
    expect(second.error).toBeUndefined()
    expect(texts(second.chunks, 'text-delta')).toBe('It is a README.')
    expect(withoutMarkers(server.requests[1].body.messages)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'What is in README.md?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'README.md' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '# Loom' }] }] },
    ])
  })

  it('thinking with tool use: the thinking block goes back with its signature, unchanged', async () => {
    const server = await serve([
      {
        type: 'message',
        blocks: [
          { type: 'thinking', thinking: 'The user wants the README.' },
          { type: 'tool_use', id: 'toolu_t', name: 'read_file', input: { path: 'README.md' } },
        ],
      },
      {
        type: 'message',
        blocks: [
          { type: 'thinking', thinking: 'Now answer.' },
          { type: 'text', text: 'Done.' },
        ],
      },
      { type: 'message' },
      { type: 'message' },
    ])
    const adapter = adapterFor(server, { thinking: 'adaptive' })
    const first = await collect(adapter, call({ tools: TOOLS }))
    const answer = answerOf(first.chunks)
    const signature = (first.chunks.find(c => c.type === 'finish') as any).replayState.blocks[0].signature
    const history = [userText('Hi'), answer, createToolResultMessage({ callId: 'toolu_t', content: [{ type: 'text', text: '# Loom' }] })]
    const second = await collect(adapter, call({ tools: TOOLS, messages: history }))
    expect(second.error).toBeUndefined()
    expect(server.requests[1].outcome).toBe('message')
    expect(server.requests[1].body.messages[1].content).toEqual([
      { type: 'thinking', thinking: 'The user wants the README.', signature },
      { type: 'tool_use', id: 'toolu_t', name: 'read_file', input: { path: 'README.md' } },
    ])

    // A changed signature is refused like the real API refuses it.
    const tampered = createAssistantMessage({
      content: answer.content,
      source: {
        provider: 'anthropic',
        model: 'claude-sonnet-5-5',
        replayState: { response: null, blocks: [{ type: 'thinking', signature: `${signature}x` }, null] },
      },
    })
    const third = await collect(adapter, call({ tools: TOOLS, messages: [history[0], tampered, history[2]] }))
    expect(third.error?.code).toBe('BAD_REQUEST')
    expect(third.error?.message).toMatch(/HTTP 400: .*Invalid `signature` in `thinking` block \(invalid_request_error\)/)

    // Without its replay state the thinking block cannot go back: the turn lacks it, and the API refuses.
    const bare = createAssistantMessage({ content: answer.content, source: { provider: 'anthropic', model: 'claude-sonnet-5-5' } })
    const fourth = await collect(adapter, call({ tools: TOOLS, messages: [history[0], bare, history[2]] }))
    expect(fourth.error?.code).toBe('BAD_REQUEST')
    expect(server.requests[3].refusal).toMatch(/Expected `thinking` or `redacted_thinking`/)
  })

  it('redacted thinking goes back with its data', async () => {
    const server = await serve([
      {
        type: 'message',
        blocks: [
          { type: 'redacted_thinking' },
          { type: 'thinking', thinking: 'Readable part.' },
          { type: 'tool_use', id: 'toolu_r', name: 'grep', input: { pattern: 'x' } },
        ],
      },
      { type: 'message' },
    ])
    const adapter = adapterFor(server, { thinking: 'enabled', thinkingBudgetTokens: 2048, maxTokens: 4096 })
    const first = await collect(adapter)
    const data = (finishOf(first.chunks) as any).replayState.blocks[0].data
    const second = await collect(
      adapter,
      call({
        messages: [userText('Hi'), answerOf(first.chunks), createToolResultMessage({ callId: 'toolu_r', content: [{ type: 'text', text: 'x' }] })],
      }),
    )
    expect(second.error).toBeUndefined()
    expect(server.requests[1].body.messages[1].content).toEqual([
      { type: 'redacted_thinking', data },
      { type: 'thinking', thinking: 'Readable part.', signature: expect.stringMatching(/^sig_/) },
      { type: 'tool_use', id: 'toolu_r', name: 'grep', input: { pattern: 'x' } },
    ])
  })
})

describe('cache breakpoints', () => {
  it('two consecutive requests of a tool loop: at most 4 breakpoints, in the documented places; past turns unchanged', async () => {
    const server = await serve([
      {
        type: 'message',
        blocks: [
          { type: 'thinking', thinking: 'Plan.' },
          { type: 'tool_use', id: 'toolu_1', name: 'grep', input: { pattern: 'a' } },
        ],
      },
      {
        type: 'message',
        blocks: [
          { type: 'thinking', thinking: 'More.' },
          { type: 'tool_use', id: 'toolu_2', name: 'read_file', input: { path: 'b' } },
        ],
      },
      { type: 'message', blocks: [{ type: 'text', text: 'Done.' }] },
    ])
    const adapter = adapterFor(server, { thinking: 'adaptive' })
    const options = (messages: Message[]) => call({ system: 'You are Loom.', tools: TOOLS, messages })
    const snapshot = (n: number) =>
      createUserMessage({ source: { kind: 'plugin', plugin: 'context-time' }, content: [{ type: 'text', text: `<context>step ${n}</context>` }] })
    const history: Message[] = [userText('Find a'), snapshot(1)]
    for (const [n, callId] of [
      [2, 'toolu_1'],
      [3, 'toolu_2'],
    ] as const) {
      const { chunks, error } = await collect(adapter, options(history))
      expect(error).toBeUndefined()
      history.push(answerOf(chunks), createToolResultMessage({ callId, content: [{ type: 'text', text: `result ${n}` }] }), snapshot(n))
    }
    const { error } = await collect(adapter, options(history))
    expect(error).toBeUndefined()
    const [first, second, third] = server.requests.map(request => request.body)
    for (const body of [first, second, third]) expect(breakpointsOf(body).length).toBeLessThanOrEqual(4)
    // Request 1: last tool, system, and the end of the only turn.
    expect(breakpointsOf(first)).toEqual(['tools.1', 'system.0', 'messages.0.content.1'])
    // Request 2: the previous request's last block again (an exact cache hit), and the new end.
    expect(breakpointsOf(second)).toEqual(['tools.1', 'system.0', 'messages.0.content.1', 'messages.2.content.1'])
    // Request 3: the marker on turn 0 is gone; turn 2 keeps its marker (previous end), turn 4 gets the new one.
    expect(breakpointsOf(third)).toEqual(['tools.1', 'system.0', 'messages.2.content.1', 'messages.4.content.1'])
    // The previous request's whole body is, marker for marker, the prefix of the next one.
    expect(second.messages.slice(0, first.messages.length)).toEqual(first.messages)
    expect(third.messages.slice(0, second.messages.length).slice(1)).toEqual(second.messages.slice(1))
    expect(withoutMarkers(third.messages.slice(0, second.messages.length))).toEqual(withoutMarkers(second.messages))
    expect(third.system).toEqual(first.system)
    expect(third.tools).toEqual(first.tools)
  })

  it('never marks a thinking block; a turn ending in thinking is marked on its last other block', () => {
    const answer = createAssistantMessage({
      content: [
        { type: 'text', text: 'Hmm.' },
        { type: 'reasoning', text: 'think' },
      ],
      source: { provider: 'anthropic', model: 'm', replayState: { response: null, blocks: [null, { type: 'thinking', signature: 's' }] } },
    })
    const wire = mapMessages([userText('a'), answer])
    expect(wire[1].content).toEqual([
      { type: 'text', text: 'Hmm.', cache_control: { type: 'ephemeral' } },
      { type: 'thinking', thinking: 'think', signature: 's' },
    ])
    expect(wire[0].content).toEqual([{ type: 'text', text: 'a', cache_control: { type: 'ephemeral' } }])
  })
})

describe('errors', () => {
  const httpCases: [string, string, Behaviour, number][] = [
    ['401', 'AUTH', { type: 'http_error', status: 401, errorType: 'authentication_error', message: 'invalid x-api-key' }, 401],
    [
      '403',
      'AUTH',
      { type: 'http_error', status: 403, errorType: 'permission_error', message: 'Your API key does not have permission to use the specified resource.' },
      403,
    ],
    [
      '429',
      'RATE_LIMIT',
      {
        type: 'http_error',
        status: 429,
        errorType: 'rate_limit_error',
        message: 'Number of request tokens has exceeded your per-minute rate limit',
        headers: { 'retry-after': '7' },
      },
      429,
    ],
    ['529', 'SERVICE_UNAVAILABLE', { type: 'http_error', status: 529, errorType: 'overloaded_error', message: 'Overloaded' }, 529],
    ['503', 'SERVICE_UNAVAILABLE', { type: 'http_error', status: 503, errorType: 'api_error', message: 'Service Unavailable' }, 503],
    ['500', 'SERVER', { type: 'http_error', status: 500, errorType: 'api_error', message: 'Internal server error' }, 500],
    ['400', 'BAD_REQUEST', { type: 'http_error', status: 400, errorType: 'invalid_request_error', message: 'messages: field required' }, 400],
    [
      '400 prompt too long',
      'CONTEXT_OVERFLOW',
      { type: 'http_error', status: 400, errorType: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' },
      400,
    ],
    [
      '400 credit balance',
      'QUOTA',
      { type: 'http_error', status: 400, errorType: 'invalid_request_error', message: 'Your credit balance is too low to access the Anthropic API.' },
      400,
    ],
    [
      '413',
      'CONTEXT_OVERFLOW',
      { type: 'http_error', status: 413, errorType: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' },
      413,
    ],
    ['408', 'TIMEOUT', { type: 'http_error', status: 408, errorType: 'timeout_error', message: 'Request timed out' }, 408],
  ]

  it.each(httpCases)('HTTP %s → %s, one attempt', async (_, code, behaviour, status) => {
    const server = await serve([behaviour])
    const { error, chunks } = await collect(adapterFor(server))
    expect(error?.code).toBe(code)
    expect(error?.failure.status).toBe(status)
    expect(error?.failure.requestId).toBe('req_mock_error')
    expect(chunks).toEqual([])
    expect(server.requests).toHaveLength(1) // the loop retries, not the adapter
  })

  it("401 says what to check: the route, the env var, and the provider's own text", async () => {
    const server = await serve([], { apiKey: 'sk-ant-the-right-one' })
    const adapter = new AnthropicAdapter({ baseUrl: server.url, apiKeyEnv: 'ANTHROPIC_API_KEY', env: () => ({ ANTHROPIC_API_KEY: KEY }) })
    const { error } = await collect(adapter)
    expect(error?.message).toBe('anthropic: HTTP 401: invalid x-api-key — check ANTHROPIC_API_KEY (route "anthropic")')
  })

  it('429 carries Retry-After', async () => {
    const server = await serve([{ type: 'http_error', status: 429, errorType: 'rate_limit_error', message: 'slow down', headers: { 'retry-after': '7' } }])
    const { error } = await collect(adapterFor(server))
    expect(error?.failure.providerRetryAfterMs).toBe(7000)
  })

  it.each([
    ['overloaded_error', 'SERVICE_UNAVAILABLE'],
    ['rate_limit_error', 'RATE_LIMIT'],
    ['api_error', 'SERVER'],
    ['invalid_request_error', 'BAD_REQUEST'],
    ['authentication_error', 'AUTH'],
    ['permission_error', 'AUTH'],
    ['something_new', 'SERVER'],
  ])('an `error` event mid-stream (%s) → %s', async (errorType, code) => {
    const server = await serve([{ type: 'error_event', errorType, message: 'It failed' }])
    const { error, chunks } = await collect(adapterFor(server))
    expect(error?.code).toBe(code)
    expect(error?.message).toContain(`anthropic: error in the event stream: ${errorType}: It failed`)
    expect(texts(chunks, 'text-delta')).toBe('Partial')
    expect(finishOf(chunks)).toBeUndefined()
  })

  it('an `error` event saying the prompt is too long → CONTEXT_OVERFLOW', async () => {
    const server = await serve([{ type: 'error_event', errorType: 'invalid_request_error', message: 'prompt is too long: 201000 tokens > 200000 maximum' }])
    expect((await collect(adapterFor(server))).error?.code).toBe('CONTEXT_OVERFLOW')
  })

  it('a connection reset mid-stream → NETWORK', async () => {
    const server = await serve([{ type: 'reset_mid_stream' }])
    const { error, chunks } = await collect(adapterFor(server))
    expect(error?.code).toBe('NETWORK')
    expect(texts(chunks, 'text-delta')).toBe('This will be cut')
  })

  it('a stream that ends before message_stop → NETWORK', async () => {
    const server = await serve([{ type: 'truncated' }])
    const { error } = await collect(adapterFor(server))
    expect(error?.code).toBe('NETWORK')
    expect(error?.message).toBe('anthropic: the stream ended before the response finished')
  })

  it('a stall → TIMEOUT after idleTimeoutMs', async () => {
    // The server never sends another byte, no requestTimeoutMs is set, and the
    // default idle timeout (300 s) outlasts the test's own: only the configured
    // 150 ms can end this request in time.
    const server = await serve([{ type: 'stall' }])
    const { error } = await collect(adapterFor(server, { idleTimeoutMs: 150 }))
    expect(error?.code).toBe('TIMEOUT')
    expect(error?.message).toBe('anthropic: no data from the provider for 150 ms')
    expect(await server.requests[0].closed).toEqual({ early: true })
  })

  it('an answer larger than maxResponseBytes → RESPONSE_TOO_LARGE, and reading stops', async () => {
    const server = await serve([{ type: 'huge', bytes: 4 * 1024 * 1024 }])
    const { error } = await collect(adapterFor(server, { maxResponseBytes: 256 * 1024 }))
    expect(error?.code).toBe('RESPONSE_TOO_LARGE')
    expect(await server.requests[0].closed).toEqual({ early: true })
  })

  it('a 200 that is not an event stream → PROTOCOL', async () => {
    const server = await serve([{ type: 'raw', status: 200, contentType: 'text/html', body: '<html>login</html>' }])
    expect((await collect(adapterFor(server))).error?.code).toBe('PROTOCOL')
  })

  it('the key never appears in an error message, even when the server echoes it', async () => {
    const secret = 'sk-ant-api03-SECRET-value-1234567890'
    const server = await serve(
      [
        { type: 'http_error', status: 401, errorType: 'authentication_error', message: 'invalid x-api-key', echoKey: true },
        { type: 'http_error', status: 400, errorType: 'invalid_request_error', message: 'bad request Authorization: Bearer abc.def.ghi', echoKey: true },
        { type: 'error_event', errorType: 'api_error', message: 'boom', echoKey: true },
      ],
      { apiKey: secret },
    )
    const adapter = adapterFor(server, { apiKey: secret })
    const errors: LlmError[] = []
    for (let i = 0; i < 3; i++) errors.push((await collect(adapter)).error!)
    expect(errors.map(e => e.code)).toEqual(['AUTH', 'BAD_REQUEST', 'SERVER'])
    for (const error of errors) {
      expect(error.message).not.toContain(secret)
      expect(JSON.stringify(error.failure)).not.toContain(secret)
      expect(error.message).toContain('[REDACTED]')
    }
    expect(errors[0].message).toContain(`check the apiKey option (route "anthropic")`)
    expect(errors[1].message).not.toContain('abc.def.ghi')
    // A refused connection carries no key either.
    const closed = adapterFor({ url: 'http://127.0.0.1:9', requests: [], close: async () => {} }, { apiKey: secret })
    const refused = await collect(closed)
    expect(refused.error?.code).toBe('UNREACHABLE')
    expect(refused.error?.message).not.toContain(secret)
  })
})

describe('abort', () => {
  it('an abort mid-stream ends with ABORTED and closes the connection', async () => {
    const server = await serve([{ type: 'message', delayMs: 50, blocks: [{ type: 'text', text: 'a long answer that streams slowly' }] }])
    const controller = new AbortController()
    const { chunks, error } = await collect(adapterFor(server), call({ signal: controller.signal }), chunk => {
      if (chunk.type === 'text-delta') controller.abort()
    })
    expect(error?.code).toBe('ABORTED')
    expect(finishOf(chunks)).toBeUndefined()
    expect(await server.requests[0].closed).toEqual({ early: true })
  })

  it('a consumer that stops early closes the connection', async () => {
    const server = await serve([{ type: 'message', delayMs: 30 }])
    for await (const chunk of adapterFor(server).stream(call())) {
      if (chunk.type === 'text-delta') break
    }
    expect(await server.requests[0].closed).toEqual({ early: true })
  })

  it('an already aborted signal sends nothing', async () => {
    const server = await serve([])
    const { error } = await collect(adapterFor(server), call({ signal: AbortSignal.abort() }))
    expect(error?.code).toBe('ABORTED')
    expect(server.requests).toHaveLength(0)
  })
})

describe('plugin', () => {
  it('registers the adapter for its route on ctx.llm, for the life of the plugin', async () => {
    const server = await serve([{ type: 'message' }])
    const root = new Context()
    await root.plugin(Llm)
    const fiber = await root.plugin(plugin, { baseUrl: server.url, apiKey: KEY, contextWindow: 1_000_000 })
    expect(root.llm.listProviders()).toEqual([{ id: 'anthropic', name: 'anthropic' }])
    expect(await root.llm.resolveModelInfo('anthropic', 'claude-sonnet-5-5')).toMatchObject({ context: { contextWindow: 1_000_000 }, defaultMaxTokens: 32_000 })
    expect((await root.llm.listModels('anthropic')).map(model => model.id)).toEqual([
      'claude-sonnet-5-5',
      'claude-opus-5-5',
      'claude-fable-5-1',
      'claude-haiku-4-5',
    ])
    expect(root.llm.providerRetryPolicy('anthropic')).toMatchObject({ mode: 'normal', maxRetries: 5 })

    const chunks: StreamChunk[] = []
    for await (const chunk of root.llm.stream(call())) chunks.push(chunk)
    expect(texts(chunks, 'text-delta')).toBe(DEFAULT_TEXT)
    expect(finishOf(chunks)).toEqual({ type: 'finish', reason: { kind: 'stop' } })

    await fiber.dispose()
    expect(root.llm.listProviders()).toEqual([])
  })

  it('has the Anthropic defaults', () => {
    expect(plugin.Config({})).toEqual({
      provider: 'anthropic',
      baseUrlEnv: 'ANTHROPIC_BASE_URL',
      apiKeyEnv: 'ANTHROPIC_API_KEY',
      defaultBaseUrl: 'https://api.anthropic.com',
      models: ['claude-sonnet-5-5', 'claude-opus-5-5', 'claude-fable-5-1', 'claude-haiku-4-5'],
      contextWindow: 200_000,
      maxTokens: 32_000,
      thinking: 'auto',
      thinkingBudgetTokens: 8_000,
      reasoningEfforts: ['off', 'low', 'medium', 'high', 'xhigh', 'max'],
      idleTimeoutMs: 300_000,
      maxResponseBytes: 32 * 1024 * 1024,
      maxRetries: 5,
    })
  })

  it('refuses a thinking budget that is not below maxTokens at startup', async () => {
    const root = new Context()
    await root.plugin(Llm)
    expect(() => plugin.apply(root, plugin.Config({ thinking: 'enabled', thinkingBudgetTokens: 40_000 }))).toThrow(
      /thinkingBudgetTokens \(40000\) must be less than maxTokens \(32000\)/,
    )
  })
})
