import { describe, expect, it } from 'vitest'
import Llm, {
  createAssistantMessage,
  DEFAULT_RETRY_POLICY,
  deepFreeze,
  isAgentLoopRequest,
  LlmError,
  markAgentLoopRequest,
  userText,
  type GenerateOptions,
  type ResolvedRetryPolicy,
  type StreamChunk,
} from '@loom/llm'
import { collect, FakeAdapter, host, request, textChunks } from './helpers.ts'

const finishOf = (chunks: StreamChunk[]) => chunks.filter(chunk => chunk.type === 'finish')

async function failureOf(promise: Promise<unknown>): Promise<LlmError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(LlmError)
  return error as LlmError
}

function thrown(fn: () => unknown): LlmError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(LlmError)
    return error as LlmError
  }
  throw new Error('expected a throw')
}

describe('the service', () => {
  it('is the default export, provided as ctx.llm under the package name', async () => {
    const h = await host()
    expect(h.llm).toBeInstanceOf(Llm)
    expect(Llm.name).toBe('@loom/llm')
  })
})

describe('registerAdapter', () => {
  it('routes providers to the adapter and lists them sorted with their info', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['zeta', 'alpha'], adapter)
    expect(h.llm.listProviders()).toEqual([
      { id: 'alpha', name: 'alpha' },
      { id: 'zeta', name: 'zeta' },
    ])
    expect(h.llm.adapterOf('zeta')).toBe(adapter)
    expect(await collect(h.llm.stream(request('zeta')))).toEqual(textChunks('ok'))
    expect(adapter.requests).toHaveLength(1)
  })

  it('dies with the registering fiber', async () => {
    const h = await host()
    const plugin = await h.plugin('adapter-plugin')
    const adapter = new FakeAdapter()
    plugin.ctx.llm.registerAdapter(['mock'], adapter)
    expect(h.llm.listProviders()).toEqual([{ id: 'mock', name: 'mock' }])
    await plugin.dispose()
    expect(h.llm.listProviders()).toEqual([])
    expect(h.llm.adapterOf('mock')).toBeUndefined()
    // The route is free again.
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    expect(h.llm.listProviders()).toHaveLength(1)
  })

  it('refuses a registration through a disposed fiber', async () => {
    const h = await host()
    const plugin = await h.plugin('gone')
    await plugin.dispose()
    expect(() => plugin.ctx.llm.registerAdapter(['mock'], new FakeAdapter())).toThrow()
    expect(h.llm.listProviders()).toEqual([])
  })

  it('the handle disposes the registration, once', async () => {
    const h = await host()
    const dispose = h.llm.registerAdapter(['mock'], new FakeAdapter())
    dispose()
    expect(h.llm.listProviders()).toEqual([])
    const other = new FakeAdapter()
    h.llm.registerAdapter(['mock'], other)
    dispose()
    expect(h.llm.adapterOf('mock')).toBe(other)
  })

  it('is all-or-nothing: a taken route throws DUPLICATE_ADAPTER and nothing is registered', async () => {
    const h = await host()
    const plugin = await h.plugin('first-plugin')
    const first = new FakeAdapter()
    plugin.ctx.llm.registerAdapter(['b'], first)
    const error = thrown(() => h.llm.registerAdapter(['a', 'b'], new FakeAdapter()))
    expect(error.code).toBe('DUPLICATE_ADAPTER')
    expect(error.message).toContain('already registered')
    expect(error.message).toContain('"b"')
    expect(error.message).toContain('first-plugin')
    expect(h.llm.listProviders().map(p => p.id)).toEqual(['b'])
    expect(h.llm.adapterOf('b')).toBe(first)
    // Registering the same adapter twice for one route is refused as well.
    expect(thrown(() => h.llm.registerAdapter(['b'], first)).code).toBe('DUPLICATE_ADAPTER')
  })

  it('rejects malformed arguments before registering anything', async () => {
    const h = await host()
    expect(() => h.llm.registerAdapter(['a', 'a'], new FakeAdapter())).toThrow(/listed twice/)
    expect(() => h.llm.registerAdapter(['a', ''], new FakeAdapter())).toThrow(TypeError)
    expect(() => h.llm.registerAdapter('a' as unknown as string[], new FakeAdapter())).toThrow(TypeError)
    expect(() => h.llm.registerAdapter(['a'], {} as FakeAdapter)).toThrow(TypeError)
    expect(h.llm.listProviders()).toEqual([])
  })

  it('replace swaps the routes, keeping its own and freeing the others', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    const handle = h.llm.registerAdapter(['a', 'b'], adapter)
    handle.replace(['b', 'c'])
    expect(h.llm.listProviders().map(p => p.id)).toEqual(['b', 'c'])
    expect(h.llm.adapterOf('c')).toBe(adapter)
    // 'a' is free for someone else now.
    h.llm.registerAdapter(['a'], new FakeAdapter())
    handle.replace([])
    expect(h.llm.listProviders().map(p => p.id)).toEqual(['a'])
    handle.replace(['d'])
    handle()
    expect(h.llm.listProviders().map(p => p.id)).toEqual(['a'])
  })

  it('replace is all-or-nothing', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    const handle = h.llm.registerAdapter(['a'], adapter)
    const other = new FakeAdapter()
    h.llm.registerAdapter(['taken'], other)
    expect(thrown(() => handle.replace(['x', 'taken'])).code).toBe('DUPLICATE_ADAPTER')
    expect(() => handle.replace(['x', 'x'])).toThrow(TypeError)
    expect(h.llm.listProviders().map(p => p.id)).toEqual(['a', 'taken'])
    expect(h.llm.adapterOf('a')).toBe(adapter)
    expect(h.llm.adapterOf('taken')).toBe(other)
  })

  it('replace after disposal throws; fiber disposal removes the replaced routes', async () => {
    const h = await host()
    const plugin = await h.plugin('p')
    const handle = plugin.ctx.llm.registerAdapter(['a'], new FakeAdapter())
    handle.replace(['b'])
    await plugin.dispose()
    expect(h.llm.listProviders()).toEqual([])
    expect(() => handle.replace(['c'])).toThrow(/disposed/)
    expect(h.llm.listProviders()).toEqual([])
  })

  it('emits llm/adapters-updated on every change', async () => {
    const h = await host()
    let count = 0
    h.ctx.on('llm/adapters-updated', () => {
      count++
    })
    const handle = h.llm.registerAdapter(['a'], new FakeAdapter())
    expect(count).toBe(1)
    handle.replace(['b'])
    expect(count).toBe(2)
    handle()
    expect(count).toBe(3)
    expect(() => h.llm.registerAdapter(['x', 'x'], new FakeAdapter())).toThrow()
    expect(count).toBe(3)
  })
})

describe('stream', () => {
  it('a throw from the adapter stream() call becomes one terminal finish error', async () => {
    const h = await host()
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: () => {
          throw new Error('MockAdapter: script exhausted')
        },
      }),
    )
    expect(await collect(h.llm.stream(request()))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: 'MockAdapter: script exhausted', code: 'UNKNOWN' } } },
    ])
  })

  it('a throw during iteration follows the chunks already yielded with one finish', async () => {
    const h = await host()
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: async function* () {
          yield { type: 'block-start', index: 0, blockType: 'text' }
          yield { type: 'text-delta', index: 0, text: 'partial' }
          throw new LlmError('server overloaded', 'SERVICE_UNAVAILABLE', { status: 503, requestId: 'r-1' })
        },
      }),
    )
    const chunks = await collect(h.llm.stream(request()))
    expect(chunks).toHaveLength(3)
    expect(chunks[2]).toEqual({
      type: 'finish',
      reason: { kind: 'error', failure: { message: 'server overloaded', code: 'SERVICE_UNAVAILABLE', status: 503, requestId: 'r-1' } },
    })
  })

  it('a throw from the iterator factory or a rejected next() becomes a finish', async () => {
    const h = await host()
    h.llm.registerAdapter(
      ['factory'],
      new FakeAdapter({
        chunks: () => ({
          [Symbol.asyncIterator]() {
            throw new Error('factory failed')
          },
        }),
      }),
    )
    h.llm.registerAdapter(
      ['next'],
      new FakeAdapter({
        chunks: () => ({ [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('next failed')) }) }),
      }),
    )
    h.llm.registerAdapter(['not-iterable'], new FakeAdapter({ chunks: () => [] as unknown as AsyncIterable<StreamChunk> }))
    expect(finishOf(await collect(h.llm.stream(request('factory'))))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: 'factory failed', code: 'UNKNOWN' } } },
    ])
    expect(finishOf(await collect(h.llm.stream(request('next'))))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: 'next failed', code: 'UNKNOWN' } } },
    ])
    const [finish] = await collect(h.llm.stream(request('not-iterable')))
    expect(finish).toMatchObject({ type: 'finish', reason: { kind: 'error', failure: { code: 'UNKNOWN' } } })
  })

  it('a missing route becomes one NO_ADAPTER finish error', async () => {
    const h = await host()
    expect(await collect(h.llm.stream(request('nope')))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: 'no adapter registered for provider "nope"', code: 'NO_ADAPTER' } } },
    ])
  })

  it('a non-Error throw becomes its String() with code UNKNOWN', async () => {
    const h = await host()
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: () => {
          throw { code: 500 }
        },
      }),
    )
    expect(await collect(h.llm.stream(request()))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: '[object Object]', code: 'UNKNOWN' } } },
    ])
  })

  it('is aborted when the request signal was aborted, or the code is ABORTED; else error', async () => {
    const h = await host()
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: async function* (req) {
          req.signal?.throwIfAborted()
          throw new LlmError('model stream aborted', 'ABORTED')
        },
      }),
    )
    const controller = new AbortController()
    controller.abort()
    const [aborted] = await collect(h.llm.stream(request('mock', { signal: controller.signal })))
    expect(aborted).toMatchObject({ type: 'finish', reason: { kind: 'aborted' } })
    expect((aborted as { reason: { failure: { message: string } } }).reason.failure.message).toMatch(/abort/i)
    expect(await collect(h.llm.stream(request()))).toEqual([
      { type: 'finish', reason: { kind: 'aborted', failure: { message: 'model stream aborted', code: 'ABORTED' } } },
    ])
    // NO_ADAPTER with an aborted signal is aborted too.
    const [noRoute] = await collect(h.llm.stream(request('nope', { signal: controller.signal })))
    expect(noRoute).toMatchObject({ type: 'finish', reason: { kind: 'aborted', failure: { code: 'NO_ADAPTER' } } })
  })

  it('stops after the first finish chunk and closes the adapter stream', async () => {
    const h = await host()
    let closed = false
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: async function* () {
          try {
            yield* textChunks('ok')
            yield { type: 'text-delta', index: 0, text: 'after finish' }
            throw new Error('after finish')
          } finally {
            closed = true
          }
        },
      }),
    )
    expect(await collect(h.llm.stream(request()))).toEqual(textChunks('ok'))
    expect(closed).toBe(true)
  })

  it('a consumer that stops early closes the adapter stream', async () => {
    const h = await host()
    let closed = false
    h.llm.registerAdapter(
      ['mock'],
      new FakeAdapter({
        chunks: async function* () {
          try {
            yield* textChunks('ok')
          } finally {
            closed = true
          }
        },
      }),
    )
    for await (const chunk of h.llm.stream(request())) {
      expect(chunk.type).toBe('block-start')
      break
    }
    expect(closed).toBe(true)
  })

  it('does nothing until iterated', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['mock'], adapter)
    let calls = 0
    h.ctx.on('llm/stream', (_options, next) => {
      calls++
      return next()
    })
    const stream = h.llm.stream(request())
    expect(calls).toBe(0)
    expect(adapter.requests).toHaveLength(0)
    await collect(stream)
    expect(calls).toBe(1)
    expect(adapter.requests).toHaveLength(1)
  })
})

describe('the llm/stream waterfall', () => {
  it('a listener sees the options and can wrap the stream', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const seen: GenerateOptions[] = []
    h.ctx.on('llm/stream', async function* (options, next) {
      seen.push(options)
      for await (const chunk of next()) {
        yield chunk.type === 'text-delta' ? { ...chunk, text: chunk.text.toUpperCase() } : chunk
      }
    })
    const req = request()
    const chunks = await collect(h.llm.stream(req))
    expect(seen).toEqual([req])
    expect(seen[0]).toBe(req)
    expect(chunks.find(c => c.type === 'text-delta')).toEqual({ type: 'text-delta', index: 0, text: 'OK' })
  })

  it('a listener can replace the stream without calling the adapter', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['mock'], adapter)
    h.ctx.on('llm/stream', () =>
      (async function* () {
        yield* textChunks('from the listener')
      })(),
    )
    expect(await collect(h.llm.stream(request()))).toEqual(textChunks('from the listener'))
    expect(adapter.requests).toHaveLength(0)
    // A listener may serve a provider no adapter routes.
    expect(await collect(h.llm.stream(request('unrouted')))).toEqual(textChunks('from the listener'))
  })

  it('a listener may answer with a plain array of chunks', async () => {
    const h = await host()
    h.ctx.on('llm/stream', (() => textChunks('array')) as never)
    expect(await collect(h.llm.stream(request('unrouted')))).toEqual(textChunks('array'))
  })

  it('listeners run outermost first; a prepended listener is outermost', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const order: string[] = []
    h.ctx.on('llm/stream', (_o, next) => {
      order.push('a')
      return next()
    })
    h.ctx.on(
      'llm/stream',
      (_o, next) => {
        order.push('first')
        return next()
      },
      { prepend: true },
    )
    await collect(h.llm.stream(request()))
    expect(order).toEqual(['first', 'a'])
  })

  it('a listener throw stays thrown, synchronous or during iteration', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const dispose = h.ctx.on('llm/stream', () => {
      throw new LlmError('middleware failed', 'MIDDLEWARE')
    })
    await expect(collect(h.llm.stream(request()))).rejects.toThrow('middleware failed')
    dispose()
    h.ctx.on('llm/stream', async function* (_o, next) {
      yield* next()
      throw new Error('late listener failure')
    })
    await expect(collect(h.llm.stream(request()))).rejects.toThrow('late listener failure')
  })

  it('a listener that returns no iterable is a TypeError', async () => {
    const h = await host()
    h.ctx.on('llm/stream', (() => undefined) as never)
    await expect(collect(h.llm.stream(request()))).rejects.toThrow(/llm\/stream.*AsyncIterable/)
  })

  it('a listener removed with its fiber no longer runs', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const plugin = await h.plugin('middleware')
    let calls = 0
    plugin.ctx.on('llm/stream', (_o, next) => {
      calls++
      return next()
    })
    await collect(h.llm.stream(request()))
    await plugin.dispose()
    await collect(h.llm.stream(request()))
    expect(calls).toBe(1)
  })
})

describe('replay state', () => {
  const withReplay = (provider: string) =>
    createAssistantMessage({
      content: [{ type: 'text', text: 'earlier' }],
      source: { provider, model: 'old', replayState: { response: { id: 'resp-1' } } },
    })

  it('is forwarded when the historical provider is served by the same adapter instance', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['a', 'b'], adapter)
    const history = withReplay('b')
    const req = deepFreeze(request('a', { messages: [userText('hi'), history] }))
    await collect(h.llm.stream(req))
    expect(adapter.requests[0]).toBe(req)
    expect(adapter.requests[0].messages[1]).toBe(history)
  })

  it('is stripped when another adapter (or none) serves the historical provider', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['a'], adapter)
    h.llm.registerAdapter(['other'], new FakeAdapter())
    const user = userText('hi')
    const fromOther = withReplay('other')
    const fromGone = withReplay('gone')
    const req = markAgentLoopRequest(deepFreeze(request('a', { messages: [user, fromOther, fromGone], system: 'sys' })))
    await collect(h.llm.stream(req))
    const sent = adapter.requests[0]
    expect(sent).not.toBe(req)
    expect(sent.system).toBe('sys')
    expect(sent.messages[0]).toBe(user)
    expect(sent.messages[1]).toEqual({ ...fromOther, source: { kind: 'model', provider: 'other', model: 'old' } })
    expect(sent.messages[2].source).toEqual({ kind: 'model', provider: 'gone', model: 'old' })
    expect(Object.keys(sent.messages[1].source)).toEqual(['kind', 'provider', 'model'])
    // The copy keeps the request's guarantees; the history is untouched.
    expect(Object.isFrozen(sent)).toBe(true)
    expect(Object.isFrozen(sent.messages)).toBe(true)
    expect(Object.isFrozen(sent.messages[1])).toBe(true)
    expect(isAgentLoopRequest(sent)).toBe(true)
    expect(fromOther.source.replayState).toEqual({ response: { id: 'resp-1' } })
  })

  it('a history resent with more messages is judged again: routes, new messages and unfrozen ones are re-read', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['a'], adapter)
    const user = userText('hi')
    const fromB = withReplay('b')
    const history = [user, fromB]
    await collect(h.llm.stream(request('a', { messages: history })))
    expect(adapter.requests[0].messages[1].source).toEqual({ kind: 'model', provider: 'b', model: 'old' })

    // Provider b is now served by the same adapter: the same message is forwarded whole.
    h.llm.registerAdapter(['b'], adapter)
    const later = withReplay('gone')
    await collect(h.llm.stream(request('a', { messages: [...history, later] })))
    expect(adapter.requests[1].messages[1]).toBe(fromB)
    expect(adapter.requests[1].messages[2].source).toEqual({ kind: 'model', provider: 'gone', model: 'old' })

    // An unfrozen message may change between calls: it is read every time.
    const mutable = { id: 'm', role: 'assistant' as const, content: [], source: { kind: 'model' as const, provider: 'elsewhere', model: 'm' } }
    await collect(h.llm.stream(request('a', { messages: [user, mutable] })))
    expect(adapter.requests[2].messages[1]).toBe(mutable)
    ;(mutable.source as { replayState?: unknown }).replayState = { response: 1 }
    await collect(h.llm.stream(request('a', { messages: [user, mutable] })))
    expect(adapter.requests[3].messages[1].source).toEqual({ kind: 'model', provider: 'elsewhere', model: 'm' })
  })

  it('leaves messages without replay state alone', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    h.llm.registerAdapter(['a'], adapter)
    const plain = createAssistantMessage({ content: [], source: { provider: 'elsewhere', model: 'm' } })
    const req = request('a', { messages: [plain] })
    await collect(h.llm.stream(req))
    expect(adapter.requests[0]).toBe(req)
  })
})

describe('prepareCall', () => {
  it('rejects with NO_ADAPTER when nothing routes the provider', async () => {
    const h = await host()
    const error = await failureOf(h.llm.prepareCall({ provider: 'nope', model: 'm' }))
    expect(error.code).toBe('NO_ADAPTER')
    expect(error.message).toBe('no adapter registered for provider "nope"')
  })

  it('resolves the model with the signal and pins the retry policy and context', async () => {
    const h = await host()
    const policy: ResolvedRetryPolicy = { mode: 'always', initialDelayMs: 1, maxDelayMs: 2, jitterRatio: 0 }
    const adapter = new FakeAdapter({ info: { context: { contextWindow: 128000 } }, retryPolicy: policy })
    h.llm.registerAdapter(['mock'], adapter)
    const signal = new AbortController().signal
    const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' }, signal)
    expect(adapter.resolved).toEqual([{ provider: 'mock', model: 'm', signal }])
    expect(prepared.retryPolicy).toBe(policy)
    expect(prepared.context).toEqual({ contextWindow: 128000 })
    expect(prepared.config).toEqual({ provider: 'mock', model: 'm' })
    expect(prepared.adapterDefaults).toEqual({})
  })

  it('defaults to the runtime retry policy and carries no context key without capacity', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
    expect(prepared.retryPolicy).toBe(DEFAULT_RETRY_POLICY)
    expect('context' in prepared).toBe(false)
  })

  it('materializes maxTokens only when the caller omitted it', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { defaultMaxTokens: 256000 } }))
    const defaulted = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
    expect(defaulted.config.maxTokens).toBe(256000)
    expect(defaulted.adapterDefaults).toEqual({ maxTokens: true })
    const explicit = await h.llm.prepareCall({ provider: 'mock', model: 'm', maxTokens: 4096 })
    expect(explicit.config.maxTokens).toBe(4096)
    expect(explicit.adapterDefaults).toEqual({})
  })

  it('leaves maxTokens absent when the model has no default', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter())
    const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
    expect('maxTokens' in prepared.config).toBe(false)
  })

  describe('reasoning effort', () => {
    const efforts = [
      { id: 'high', name: 'High' },
      { id: 'max', name: 'Max' },
    ]

    it('rejects an explicit effort when the model advertises no reasoning', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter())
      const error = await failureOf(h.llm.prepareCall({ provider: 'mock', model: 'm', reasoningEffort: 'high' }))
      expect(error.code).toBe('UNSUPPORTED_REASONING_EFFORT')
      const none = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      expect('reasoningEffort' in none.config).toBe(false)
    })

    it('uses the default effort and marks it', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { reasoning: { efforts, defaultEffort: 'high' } } }))
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      expect(prepared.config.reasoningEffort).toBe('high')
      expect(prepared.adapterDefaults).toEqual({ reasoningEffort: true })
    })

    it('keeps an offered explicit effort unmarked', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { reasoning: { efforts, defaultEffort: 'high' } } }))
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm', reasoningEffort: 'max' })
      expect(prepared.config.reasoningEffort).toBe('max')
      expect(prepared.adapterDefaults).toEqual({})
    })

    it('rejects an effort the model does not offer, without clamping', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { reasoning: { efforts, defaultEffort: 'high' } } }))
      const error = await failureOf(h.llm.prepareCall({ provider: 'mock', model: 'm', reasoningEffort: 'low' }))
      expect(error.code).toBe('UNSUPPORTED_REASONING_EFFORT')
      expect(error.message).toContain('"low"')
    })

    it('rejects a default effort that is not offered', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { reasoning: { efforts, defaultEffort: 'medium' } } }))
      expect((await failureOf(h.llm.prepareCall({ provider: 'mock', model: 'm' }))).code).toBe('UNSUPPORTED_REASONING_EFFORT')
    })

    it('without a default effort, leaves it absent', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { reasoning: { efforts } } }))
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      expect('reasoningEffort' in prepared.config).toBe(false)
      expect(prepared.adapterDefaults).toEqual({})
    })
  })

  it('returns a detached, deeply frozen config in canonical key order, with config fields only', async () => {
    const h = await host()
    h.llm.registerAdapter(['mock'], new FakeAdapter({ info: { defaultMaxTokens: 100 } }))
    const input = { stop: ['<END>'], temperature: 0.5, model: 'm', provider: 'mock', messages: [], extra: 1 } as unknown as GenerateOptions
    const prepared = await h.llm.prepareCall(input)
    expect(Object.keys(prepared.config)).toEqual(['provider', 'model', 'temperature', 'maxTokens', 'stop'])
    expect(Object.isFrozen(prepared.config)).toBe(true)
    expect(Object.isFrozen(prepared.config.stop)).toBe(true)
    expect(Object.isFrozen(prepared.adapterDefaults)).toBe(true)
    input.stop!.push('<MORE>')
    expect(prepared.config.stop).toEqual(['<END>'])
  })

  it('rejects a config without a provider or model string', async () => {
    const h = await host()
    await expect(h.llm.prepareCall({ model: 'm' } as never)).rejects.toThrow(TypeError)
    await expect(h.llm.prepareCall({ provider: 'mock' } as never)).rejects.toThrow(TypeError)
  })

  it('propagates a failing resolveModel', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    adapter.resolveModel = async () => {
      throw new LlmError('unknown model', 'BAD_REQUEST')
    }
    h.llm.registerAdapter(['mock'], adapter)
    expect((await failureOf(h.llm.prepareCall({ provider: 'mock', model: 'x' }))).code).toBe('BAD_REQUEST')
  })

  describe('the prepared stream', () => {
    it('streams the prepared config through the waterfall to the pinned adapter', async () => {
      const h = await host()
      const adapter = new FakeAdapter({ info: { defaultMaxTokens: 10 } })
      h.llm.registerAdapter(['mock'], adapter)
      let seen: GenerateOptions | undefined
      h.ctx.on('llm/stream', (options, next) => {
        seen = options
        return next()
      })
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      const req = { ...prepared.config, messages: [userText('hi')] }
      expect(await collect(prepared.stream(req))).toEqual(textChunks('ok'))
      expect(seen).toBe(req)
      expect(adapter.requests).toEqual([req])
    })

    it('is single use', async () => {
      const h = await host()
      h.llm.registerAdapter(['mock'], new FakeAdapter())
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      prepared.stream({ ...prepared.config, messages: [] })
      const error = thrown(() => prepared.stream({ ...prepared.config, messages: [] }))
      expect(error.code).toBe('INVALID_PREPARED_CALL')
    })

    it.each([
      ['provider', { provider: 'other' }],
      ['model', { model: 'other' }],
      ['an added temperature', { temperature: 0.2 }],
      ['a dropped maxTokens', { maxTokens: undefined }],
      ['a changed stop', { stop: ['x', 'y'] }],
      ['an added reasoning effort', { reasoningEffort: 'high' }],
    ])('rejects a request whose %s differs from the config, and stays usable', async (_, change) => {
      const h = await host()
      h.llm.registerAdapter(['mock', 'other'], new FakeAdapter({ info: { defaultMaxTokens: 10 } }))
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm', stop: ['x'] })
      const error = thrown(() => prepared.stream({ ...prepared.config, messages: [], ...change }))
      expect(error.code).toBe('INVALID_PREPARED_CALL')
      expect(await collect(prepared.stream({ ...prepared.config, messages: [], stop: ['x'] }))).toEqual(textChunks('ok'))
    })

    it('fails with NO_ADAPTER when its registration is gone, even if another adapter took the route', async () => {
      const h = await host()
      const first = new FakeAdapter()
      const dispose = h.llm.registerAdapter(['mock'], first)
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      const again = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      dispose()
      const [finish] = await collect(prepared.stream({ ...prepared.config, messages: [] }))
      expect(finish).toMatchObject({ type: 'finish', reason: { kind: 'error', failure: { code: 'NO_ADAPTER' } } })
      const second = new FakeAdapter()
      h.llm.registerAdapter(['mock'], second)
      const chunks = await collect(again.stream({ ...again.config, messages: [] }))
      expect(chunks).toHaveLength(1)
      expect(chunks[0]).toMatchObject({ type: 'finish', reason: { kind: 'error', failure: { code: 'NO_ADAPTER' } } })
      expect(first.requests).toHaveLength(0)
      expect(second.requests).toHaveLength(0)
    })

    it('fails with NO_ADAPTER when replace moved the route away', async () => {
      const h = await host()
      const handle = h.llm.registerAdapter(['mock'], new FakeAdapter())
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      handle.replace(['elsewhere'])
      const [finish] = await collect(prepared.stream({ ...prepared.config, messages: [] }))
      expect(finish).toMatchObject({ type: 'finish', reason: { kind: 'error', failure: { code: 'NO_ADAPTER' } } })
    })

    it('turns adapter failures into one terminal finish as well', async () => {
      const h = await host()
      h.llm.registerAdapter(
        ['mock'],
        new FakeAdapter({
          chunks: () => {
            throw new LlmError('slow down', 'RATE_LIMIT', { providerRetryAfterMs: 1000 })
          },
        }),
      )
      const prepared = await h.llm.prepareCall({ provider: 'mock', model: 'm' })
      expect(await collect(prepared.stream({ ...prepared.config, messages: [] }))).toEqual([
        { type: 'finish', reason: { kind: 'error', failure: { message: 'slow down', code: 'RATE_LIMIT', providerRetryAfterMs: 1000 } } },
      ])
    })
  })
})

describe('provider queries', () => {
  it('providerRetryPolicy is the adapter policy, else the default', async () => {
    const h = await host()
    const policy: ResolvedRetryPolicy = { ...DEFAULT_RETRY_POLICY, maxRetries: 1 } as ResolvedRetryPolicy
    h.llm.registerAdapter(['custom'], new FakeAdapter({ retryPolicy: policy }))
    h.llm.registerAdapter(['plain'], new FakeAdapter())
    expect(h.llm.providerRetryPolicy('custom')).toBe(policy)
    expect(h.llm.providerRetryPolicy('plain')).toBe(DEFAULT_RETRY_POLICY)
    expect(h.llm.providerRetryPolicy('unrouted')).toBe(DEFAULT_RETRY_POLICY)
  })

  it('resolveModelInfo and listModels ask the routed adapter', async () => {
    const h = await host()
    const adapter = new FakeAdapter({ info: { context: { contextWindow: 64000 } } })
    adapter.listModels = async provider => [{ provider, id: 'm1', name: 'Model 1' }]
    h.llm.registerAdapter(['mock'], adapter)
    expect(await h.llm.resolveModelInfo('mock', 'm1')).toEqual({ provider: 'mock', id: 'm1', name: 'm1', context: { contextWindow: 64000 } })
    expect(await h.llm.listModels('mock')).toEqual([{ provider: 'mock', id: 'm1', name: 'Model 1' }])
    expect((await failureOf(h.llm.resolveModelInfo('nope', 'm'))).code).toBe('NO_ADAPTER')
    expect((await failureOf(h.llm.listModels('nope'))).code).toBe('NO_ADAPTER')
  })

  it('listProviders uses providerInfo', async () => {
    const h = await host()
    const adapter = new FakeAdapter()
    adapter.providerInfo = provider => ({ id: provider, name: `Provider ${provider}` })
    h.llm.registerAdapter(['x'], adapter)
    expect(h.llm.listProviders()).toEqual([{ id: 'x', name: 'Provider x' }])
  })
})

describe('agent-loop request marker', () => {
  it('marks by identity', async () => {
    const req = request()
    expect(isAgentLoopRequest(req)).toBe(false)
    expect(markAgentLoopRequest(req)).toBe(req)
    expect(isAgentLoopRequest(req)).toBe(true)
    expect(isAgentLoopRequest({ ...req })).toBe(false)
    expect(isAgentLoopRequest(undefined)).toBe(false)
    expect(isAgentLoopRequest('x')).toBe(false)
  })

  it('is shared with the service methods', async () => {
    const h = await host()
    const req = h.llm.markAgentLoopRequest(request())
    expect(isAgentLoopRequest(req)).toBe(true)
    expect(h.llm.isAgentLoopRequest(markAgentLoopRequest(request()))).toBe(true)
  })
})
