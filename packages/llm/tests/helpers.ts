import { Context } from '@deepseek-ai/cordis'
import Llm, { LlmAdapter, type GenerateOptions, type LlmModelInfo, type ResolvedRetryPolicy, type StreamChunk } from '@loom/llm'

export interface Host {
  root: Context
  /** A plugin context that injects `llm`. */
  ctx: Context
  llm: Llm
  /** Mounts a named plugin that injects `llm`; returns its fiber. */
  plugin(name: string): Promise<{ ctx: Context; dispose(): Promise<void> }>
}

export async function host(): Promise<Host> {
  const root = new Context()
  await root.plugin(Llm)
  const fiber = await root.plugin({ name: 'host', inject: ['llm'], apply() {} })
  return {
    root,
    ctx: fiber.ctx,
    llm: fiber.ctx.llm,
    async plugin(name) {
      const child = await fiber.ctx.plugin({ name, inject: ['llm'], apply() {} })
      return { ctx: child.ctx, dispose: () => child.dispose() }
    },
  }
}

export const textChunks = (text: string): StreamChunk[] => [
  { type: 'block-start', index: 0, blockType: 'text' },
  { type: 'text-delta', index: 0, text },
  { type: 'block-end', index: 0, block: { type: 'text', text } },
  { type: 'usage', usage: { inputTokens: 1, outputTokens: 1 } },
  { type: 'finish', reason: { kind: 'stop' } },
]

export interface FakeOptions {
  /** The chunks to yield, or a custom stream body. */
  chunks?: StreamChunk[] | ((request: GenerateOptions) => AsyncIterable<StreamChunk>)
  info?: Partial<LlmModelInfo>
  retryPolicy?: ResolvedRetryPolicy
}

/** An adapter that records its requests and answers with fixed chunks. */
export class FakeAdapter extends LlmAdapter {
  readonly options: FakeOptions
  readonly requests: GenerateOptions[] = []
  readonly resolved: { provider: string; model: string; signal?: AbortSignal }[] = []

  constructor(options: FakeOptions = {}) {
    super()
    this.options = options
  }

  override providerRetryPolicy(): ResolvedRetryPolicy | undefined {
    return this.options.retryPolicy
  }

  override async resolveModel(provider: string, model: string, signal?: AbortSignal): Promise<LlmModelInfo> {
    this.resolved.push({ provider, model, ...(signal && { signal }) })
    return { provider, id: model, name: model, ...this.options.info }
  }

  stream(request: GenerateOptions): AsyncIterable<StreamChunk> {
    this.requests.push(request)
    const chunks = this.options.chunks ?? textChunks('ok')
    if (typeof chunks === 'function') return chunks(request)
    return (async function* () {
      yield* chunks
    })()
  }
}

export async function collect(stream: AsyncIterable<StreamChunk>): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = []
  for await (const chunk of stream) chunks.push(chunk)
  return chunks
}

export const request = (provider = 'mock', extra: Partial<GenerateOptions> = {}): GenerateOptions => ({ provider, model: 'm', messages: [], ...extra })
