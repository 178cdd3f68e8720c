import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { untraced } from '@loom/scope'
import { DEFAULT_RETRY_POLICY, type GenerateOptions, type LlmAdapter, type LlmModelInfo, type ResolvedRetryPolicy } from './adapter.ts'
import { LlmError, toFailure } from './errors.ts'
import { deepFreeze } from './messages.ts'
import type { LlmCallConfig, LlmCallConfigAdapterDefaults, Message, StreamChunk } from './types.ts'

const PACKAGE = '@loom/llm'

declare module '@deepseek-ai/cordis' {
  interface Context {
    llm: Llm
  }
  interface Events {
    /**
     * Waterfall around every `ctx.llm.stream` and prepared-call stream. A listener
     * may wrap `next()`'s chunks or return its own; the innermost `next` routes the
     * request to its adapter and never throws (failures become a `finish` chunk).
     */
    'llm/stream'(options: GenerateOptions, next: () => AsyncIterable<StreamChunk>): AsyncIterable<StreamChunk>
    /** After every adapter registration, route replacement and removal. */
    'llm/adapters-updated'(): void
  }
}

/** The handle `registerAdapter` returns: disposes the registration, or moves its routes. */
export interface AdapterRegistration {
  (): void
  /** Swaps the routes of this registration, all-or-nothing. */
  replace(providers: readonly string[]): void
}

/** A call resolved against one adapter registration; `stream` may be called once. */
export interface PreparedLlmCall {
  /** The materialized config: a detached, deeply frozen clone. */
  readonly config: LlmCallConfig
  readonly retryPolicy: ResolvedRetryPolicy
  readonly context?: { contextWindow: number }
  /** The config fields the adapter filled in, each marked `true`. */
  readonly adapterDefaults: LlmCallConfigAdapterDefaults
  stream(options: GenerateOptions): AsyncIterable<StreamChunk>
}

interface Registration {
  readonly adapter: LlmAdapter
  readonly owner: string
  readonly providers: Set<string>
  active: boolean
}

/** The config fields, in the order a materialized config carries them. */
const CONFIG_FIELDS = ['provider', 'model', 'reasoningEffort', 'temperature', 'maxTokens', 'stop'] as const satisfies readonly (keyof LlmCallConfig)[]

const agentLoopRequests = new WeakSet<object>()

/** Marks a request as built by the agent loop (a process-local identity marker). */
export function markAgentLoopRequest<T extends object>(request: T): T {
  agentLoopRequests.add(request)
  return request
}

export function isAgentLoopRequest(request: unknown): boolean {
  return typeof request === 'object' && request !== null && agentLoopRequests.has(request)
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => sameValue(item, b[i]))
  return false
}

function checkProviders(providers: readonly string[]): string[] {
  if (!Array.isArray(providers)) throw new TypeError(`registerAdapter needs an array of provider ids, got ${describe(providers)}`)
  const seen = new Set<string>()
  for (const provider of providers) {
    if (typeof provider !== 'string' || provider === '') throw new TypeError(`provider ids must be non-empty strings, got ${describe(provider)}`)
    if (seen.has(provider)) throw new TypeError(`provider "${provider}" is listed twice`)
    seen.add(provider)
  }
  return [...seen]
}

/** The failure chunk a throw becomes: `aborted` when the request was aborted or the code says so. */
function terminalChunk(error: unknown, signal: AbortSignal | undefined): StreamChunk {
  const failure = toFailure(error)
  const kind = signal?.aborted || failure.code === 'ABORTED' ? 'aborted' : 'error'
  return { type: 'finish', reason: { kind, failure } }
}

/**
 * Materializes the adapter's defaults into a caller's config: `maxTokens` when
 * the caller omitted it, and the reasoning effort (the requested one or the
 * model's default), which must be one the model offers.
 */
function materialize(config: LlmCallConfig, info: LlmModelInfo) {
  const resolved: Partial<Record<keyof LlmCallConfig, unknown>> = {}
  for (const field of CONFIG_FIELDS) {
    if (config[field] !== undefined) resolved[field] = structuredClone(config[field])
  }
  const adapterDefaults: LlmCallConfigAdapterDefaults = {}
  const where = `model "${config.model}" of provider "${config.provider}"`

  if (config.maxTokens === undefined && info.defaultMaxTokens !== undefined) {
    resolved.maxTokens = info.defaultMaxTokens
    adapterDefaults.maxTokens = true
  }

  const requested = config.reasoningEffort
  if (!info.reasoning) {
    if (requested !== undefined) {
      throw new LlmError(`${where} does not support reasoning, but reasoning effort "${requested}" was requested`, 'UNSUPPORTED_REASONING_EFFORT')
    }
  } else {
    const effort = requested ?? info.reasoning.defaultEffort
    if (effort !== undefined) {
      const offered = info.reasoning.efforts.map(e => e.id)
      if (!offered.includes(effort)) {
        const whose = requested === undefined ? 'default reasoning effort' : 'reasoning effort'
        throw new LlmError(
          `${where} does not offer ${whose} "${effort}" (offered: ${offered.map(id => `"${id}"`).join(', ') || 'none'})`,
          'UNSUPPORTED_REASONING_EFFORT',
        )
      }
      resolved.reasoningEffort = effort
      if (requested === undefined) adapterDefaults.reasoningEffort = true
    }
  }

  // Canonical key order, whatever order the caller used.
  const ordered: Record<string, unknown> = {}
  for (const field of CONFIG_FIELDS) if (resolved[field] !== undefined) ordered[field] = resolved[field]
  return { config: deepFreeze(ordered as unknown as LlmCallConfig), adapterDefaults: Object.freeze(adapterDefaults) }
}

class PreparedCall implements PreparedLlmCall {
  readonly config: LlmCallConfig
  readonly retryPolicy: ResolvedRetryPolicy
  readonly adapterDefaults: LlmCallConfigAdapterDefaults
  private readonly dispatch: (options: GenerateOptions) => AsyncIterable<StreamChunk>
  declare readonly context?: { contextWindow: number }
  #used = false

  constructor(
    config: LlmCallConfig,
    retryPolicy: ResolvedRetryPolicy,
    adapterDefaults: LlmCallConfigAdapterDefaults,
    context: { contextWindow: number } | undefined,
    dispatch: (options: GenerateOptions) => AsyncIterable<StreamChunk>,
  ) {
    this.config = config
    this.retryPolicy = retryPolicy
    this.adapterDefaults = adapterDefaults
    this.dispatch = dispatch
    if (context !== undefined) this.context = context
  }

  stream(options: GenerateOptions): AsyncIterable<StreamChunk> {
    if (this.#used) throw new LlmError('a prepared call can be streamed only once; prepare a new call for another request', 'INVALID_PREPARED_CALL')
    const config = this.config as unknown as Record<string, unknown>
    for (const field of CONFIG_FIELDS) {
      if (!sameValue(config[field], (options as unknown as Record<string, unknown>)[field])) {
        throw new LlmError(
          `the request's ${field} (${describe(options[field])}) differs from the prepared call's config (${describe(config[field])}); stream the prepared config`,
          'INVALID_PREPARED_CALL',
        )
      }
    }
    this.#used = true
    return this.dispatch(options)
  }
}

/**
 * The model seam (ctx key `llm`). Adapters register routes (provider ids) as
 * effects on the caller's fiber; `stream` runs the `llm/stream` waterfall and
 * then the routed adapter, turning every failure into a terminal `finish` chunk.
 */
export class Llm extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = PACKAGE
  /** No settings (routes come from the adapter plugins): a key given to its row is refused as unknown. */
  static readonly Config = Schema.object({})
  private readonly routes = new Map<string, Registration>()
  private readonly home: Context
  /** Every call's `llm/stream` waterfall is dispatched through it: looked up once (see `untraced`). */
  private readonly events: Context['events']

  constructor(ctx: Context) {
    super(ctx, 'llm')
    this.home = ctx
    this.events = untraced(ctx.events)
  }

  /**
   * Routes `providers` to `adapter` until the calling plugin's fiber is disposed
   * or the returned handle is called. All-or-nothing: a provider that is already
   * routed throws `DUPLICATE_ADAPTER` and nothing is registered.
   */
  registerAdapter(providers: readonly string[], adapter: LlmAdapter): AdapterRegistration {
    const list = checkProviders(providers)
    if (typeof adapter !== 'object' || adapter === null || typeof adapter.stream !== 'function') {
      throw new TypeError(`registerAdapter needs an LlmAdapter (an object with a stream method) for ${describe(list)}`)
    }
    this.assertFree(list, undefined)
    const registration: Registration = { adapter, owner: this.ctx.fiber.name, providers: new Set(), active: true }
    const dispose = this.ctx.effect(() => {
      for (const provider of list) {
        this.routes.set(provider, registration)
        registration.providers.add(provider)
      }
      this.changed()
      return () => {
        registration.active = false
        for (const provider of registration.providers) {
          if (this.routes.get(provider) === registration) this.routes.delete(provider)
        }
        registration.providers.clear()
        this.changed()
      }
    }, 'llm.registerAdapter')
    const handle = () => {
      void dispose()
    }
    handle.replace = (next: readonly string[]) => {
      if (!registration.active) throw new Error(`cannot replace the providers of a disposed adapter registration (plugin "${registration.owner}")`)
      const nextList = checkProviders(next)
      this.assertFree(nextList, registration)
      for (const provider of registration.providers) {
        if (!nextList.includes(provider)) this.routes.delete(provider)
      }
      registration.providers.clear()
      for (const provider of nextList) {
        this.routes.set(provider, registration)
        registration.providers.add(provider)
      }
      this.changed()
    }
    return handle
  }

  /** The routed provider ids with their display info, sorted by id. */
  listProviders(): { id: string; name: string }[] {
    return [...this.routes.keys()].sort().map(provider => {
      const info = this.routes.get(provider)!.adapter.providerInfo(provider)
      return { id: info.id, name: info.name }
    })
  }

  /** The adapter that currently serves `provider`, if any. */
  adapterOf(provider: string): LlmAdapter | undefined {
    return this.routes.get(provider)?.adapter
  }

  async listModels(provider: string): Promise<readonly LlmModelInfo[]> {
    return this.route(provider).adapter.listModels(provider)
  }

  async resolveModelInfo(provider: string, model: string, signal?: AbortSignal): Promise<LlmModelInfo> {
    return this.route(provider).adapter.resolveModel(provider, model, signal)
  }

  /** The routed adapter's policy for `provider`, else the default one. */
  providerRetryPolicy(provider: string): ResolvedRetryPolicy {
    return this.routes.get(provider)?.adapter.providerRetryPolicy(provider) ?? DEFAULT_RETRY_POLICY
  }

  /**
   * Resolves `config` against the adapter that routes its provider and pins that
   * registration: the prepared call streams to it or fails, never to another.
   */
  async prepareCall(config: LlmCallConfig, signal?: AbortSignal): Promise<PreparedLlmCall> {
    if (typeof config !== 'object' || config === null) throw new TypeError(`prepareCall needs a call config, got ${describe(config)}`)
    if (typeof config.provider !== 'string') throw new TypeError(`call config provider must be a string, got ${describe(config.provider)}`)
    if (typeof config.model !== 'string') throw new TypeError(`call config model must be a string, got ${describe(config.model)}`)
    const registration = this.route(config.provider)
    const { adapter } = registration
    const info = await adapter.resolveModel(config.provider, config.model, signal)
    const { config: resolved, adapterDefaults } = materialize(config, info)
    const retryPolicy = adapter.providerRetryPolicy(config.provider) ?? DEFAULT_RETRY_POLICY
    const context = info.context === undefined ? undefined : Object.freeze({ contextWindow: info.context.contextWindow })
    return new PreparedCall(resolved, retryPolicy, adapterDefaults, context, options => this.run(options, registration))
  }

  /** Streams one call through the `llm/stream` waterfall to the adapter routing `options.provider`. */
  stream(options: GenerateOptions): AsyncIterable<StreamChunk> {
    return this.run(options, undefined)
  }

  markAgentLoopRequest<T extends object>(request: T): T {
    return markAgentLoopRequest(request)
  }

  isAgentLoopRequest(request: unknown): boolean {
    return isAgentLoopRequest(request)
  }

  private route(provider: string): Registration {
    const registration = this.routes.get(provider)
    if (!registration) throw new LlmError(`no adapter registered for provider "${provider}"`, 'NO_ADAPTER')
    return registration
  }

  private assertFree(providers: readonly string[], self: Registration | undefined) {
    for (const provider of providers) {
      const taken = this.routes.get(provider)
      if (taken && taken !== self) {
        throw new LlmError(`an adapter for provider "${provider}" is already registered (by plugin "${taken.owner}")`, 'DUPLICATE_ADAPTER')
      }
    }
  }

  private changed() {
    try {
      this.home.emit('llm/adapters-updated')
    } catch (error) {
      this.home.logger('llm').warn(error)
    }
  }

  /** The waterfall runs when the stream is first iterated; listener throws stay thrown. */
  private run(options: GenerateOptions, pinned: Registration | undefined): AsyncIterable<StreamChunk> {
    const { events } = this
    const inner = () => this.dispatch(options, pinned)
    return (async function* () {
      const result: unknown = events.waterfall('llm/stream', options, inner)
      if (typeof result !== 'object' || result === null || !(Symbol.asyncIterator in result || Symbol.iterator in result)) {
        throw new TypeError(`an "llm/stream" listener returned ${describe(result)} instead of an AsyncIterable of chunks`)
      }
      yield* result as AsyncIterable<StreamChunk>
    })()
  }

  /** The innermost `next`: picks the adapter and streams it. Never throws; stops after the first `finish`. */
  private async *dispatch(options: GenerateOptions, pinned: Registration | undefined): AsyncGenerator<StreamChunk, void, undefined> {
    let iterator: AsyncIterator<StreamChunk>
    try {
      const registration = pinned ? this.pinnedRoute(pinned, options.provider) : this.route(options.provider)
      const iterable = registration.adapter.stream(this.forwardable(options, registration.adapter))
      if (typeof iterable !== 'object' || iterable === null || typeof (iterable as AsyncIterable<StreamChunk>)[Symbol.asyncIterator] !== 'function') {
        throw new TypeError(`the adapter for provider "${options.provider}" returned ${describe(iterable)} from stream() instead of an AsyncIterable`)
      }
      iterator = iterable[Symbol.asyncIterator]()
    } catch (error) {
      yield terminalChunk(error, options.signal)
      return
    }
    let open = true
    try {
      while (true) {
        let step: IteratorResult<StreamChunk>
        try {
          step = await iterator.next()
        } catch (error) {
          open = false
          yield terminalChunk(error, options.signal)
          return
        }
        if (step.done) {
          open = false
          return
        }
        yield step.value
        if (step.value?.type === 'finish') return
      }
    } finally {
      if (open) {
        try {
          await iterator.return?.()
        } catch {
          // The adapter failed while closing a stream nobody reads any more.
        }
      }
    }
  }

  private pinnedRoute(pinned: Registration, provider: string): Registration {
    if (pinned.active && this.routes.get(provider) === pinned) return pinned
    const now = this.routes.get(provider)
    throw new LlmError(
      now
        ? `the adapter prepared for provider "${provider}" no longer serves it (now routed to plugin "${now.owner}"); prepare the call again`
        : `the adapter prepared for provider "${provider}" was unregistered; no adapter registered for provider "${provider}"`,
      'NO_ADAPTER',
    )
  }

  /**
   * The request as the adapter sees it: replay state of a historical assistant
   * message is kept only when its provider is served by this same adapter.
   */
  private forwardable(options: GenerateOptions, adapter: LlmAdapter): GenerateOptions {
    const foreign = (message: Message) => {
      const source = message.source
      return source?.kind === 'model' && source.replayState !== undefined && this.routes.get(source.provider)?.adapter !== adapter
    }
    // The common case touches nothing: no copy of a long history per call.
    if (!replayIndices(options.messages).some(index => foreign(options.messages[index]))) return options
    const messages = options.messages.map((message): Message => {
      if (!foreign(message)) return message
      const source = message.source as Extract<Message['source'], { kind: 'model' }>
      const reduced = { ...message, source: Object.freeze({ kind: 'model' as const, provider: source.provider, model: source.model }) }
      return Object.isFrozen(message) ? Object.freeze(reduced) : reduced
    })
    const request = { ...options, messages: Object.isFrozen(options.messages) ? Object.freeze(messages) : messages }
    if (Object.isFrozen(options)) Object.freeze(request)
    return isAgentLoopRequest(options) ? markAgentLoopRequest(request) : request
  }
}

/**
 * Where the replay state of a history was found, by the history's first message.
 * Consecutive calls of one conversation resend the same frozen messages plus a few
 * new ones; a message that was frozen when read cannot change, so its source is not
 * read again: a later call only copies the array and compares identities (a few
 * ns a message) and reads the new messages.
 */
const replayScans = new WeakMap<Message, { messages: readonly Message[]; frozen: number; replay: number[] }>()

/** Indices of the assistant messages that carry replay state. */
function replayIndices(history: readonly Message[]): number[] {
  if (history.length === 0) return []
  // A plain copy: V8 reads a frozen array element by element many times slower.
  const messages = [...history]
  const last = replayScans.get(messages[0])
  // The leading messages that are the very objects, frozen, found there last time.
  let i = 0
  if (last) {
    const known = Math.min(last.frozen, messages.length)
    while (i < known && messages[i] === last.messages[i]) i++
  }
  const replay = last ? last.replay.filter(index => index < i) : []
  let frozen = i
  for (; i < messages.length; i++) {
    const message = messages[i]
    const source = message.source
    if (message.role === 'assistant' && source?.kind === 'model' && source.replayState !== undefined) replay.push(i)
    if (frozen === i && Object.isFrozen(message) && Object.isFrozen(source)) frozen++
  }
  replayScans.set(messages[0], { messages, frozen, replay })
  return replay
}
