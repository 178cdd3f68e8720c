// Provider-reported cache hits: the 30-step session of `cache-economics` sent
// through the real adapters (DeepSeek over the OpenAI-compatible protocol, and
// Anthropic's Messages API) to loopback servers that keep a prompt cache the way
// each provider documents it, and report its hits in their usage fields:
//
// - DeepSeek caches any repeated prefix of the request, in units of 64 tokens
//   (`prompt_cache_hit_tokens`).
// - Anthropic caches the prefix ending at each `cache_control` breakpoint when it is
//   written, and a later request reads the longest cached prefix that ends at a
//   block boundary within 20 blocks before one of its breakpoints
//   (`cache_read_input_tokens`, `cache_creation_input_tokens`).
//
// Tokens are characters / 4 of each block's JSON. The figure is the share of input
// tokens the provider served from its cache, as `loom sessions stats` reads it.
import * as anthropic from '../plugins/llm-anthropic/src/index.ts'
import { startMockServer as startAnthropic, type Behaviour as AnthropicBehaviour } from '../plugins/llm-anthropic/tests/mock-server.ts'
import * as openai from '../plugins/llm-openai/src/index.ts'
import { startMockServer as startOpenAI, type Behaviour as OpenAIBehaviour } from '../plugins/llm-openai/tests/mock-server.ts'
import { DEFAULT_CACHE_PRICES, reconstructRequests, requestEconomics } from '../packages/session/src/index.ts'
import { answerChunks, playSession, STEPS } from '../packages/agent-loop/bench/cache-economics.ts'

export interface ProviderCacheFigure {
  bench: 'cache-economics provider'
  adapter: 'deepseek' | 'anthropic'
  requests: number
  reported_input_tokens: number
  reported_hit_tokens: number
  reported_hit_share: number
  reported_input_cost_usd: number
}

const tokens = (text: string) => Math.ceil(text.length / 4)

/** The tool call (or final text) of step `step`, as the scripted session answers it. */
function answerOf(step: number): { call?: { id: string; name: string; arguments: string }; text?: string } {
  for (const chunk of answerChunks(step)) {
    if (chunk.type === 'block-end' && chunk.block.type === 'tool-call')
      return { call: { id: chunk.block.id, name: chunk.block.name, arguments: chunk.block.arguments } }
    if (chunk.type === 'block-end' && chunk.block.type === 'text') return { text: chunk.block.text }
  }
  throw new Error(`provider-cache: no answer at step ${step}`)
}

/** DeepSeek: the common prefix with the previous request, in 64-token units. */
function deepseekCache() {
  let previous = ''
  return (body: any) => {
    const text = [JSON.stringify(body.tools ?? []), ...body.messages.map((message: unknown) => JSON.stringify(message))].join('\n')
    let same = 0
    const n = Math.min(previous.length, text.length)
    while (same < n && previous.charCodeAt(same) === text.charCodeAt(same)) same++
    previous = text
    const prompt = tokens(text)
    return { prompt, cacheHit: Math.min(prompt, Math.floor(tokens(text.slice(0, same)) / 64) * 64) }
  }
}

/** Anthropic: breakpoint prefixes are written; reads look back 20 blocks from each breakpoint. */
function anthropicCache() {
  const written = new Set<string>()
  return (body: any) => {
    const strip = ({ cache_control, ...block }: any) => JSON.stringify(block)
    const blocks: { text: string; breakpoint: boolean }[] = [
      ...(body.tools ?? []).map((tool: any) => ({ text: strip(tool), breakpoint: Boolean(tool.cache_control) })),
      ...(body.system ?? []).map((block: any) => ({ text: strip(block), breakpoint: Boolean(block.cache_control) })),
      ...body.messages.flatMap((message: any) =>
        message.content.map((block: any) => ({ text: message.role + strip(block), breakpoint: Boolean(block.cache_control) })),
      ),
    ]
    const prefixes: string[] = []
    let prefix = ''
    for (const block of blocks) prefixes.push((prefix += block.text))
    const breakpoints = blocks.flatMap((block, i) => (block.breakpoint ? [i] : []))
    let read = -1
    for (const at of breakpoints) {
      for (let i = at; i >= Math.max(0, at - 20); i--) if (i > read && written.has(prefixes[i])) read = i
    }
    const last = breakpoints.at(-1) ?? -1
    for (const at of breakpoints) written.add(prefixes[at])
    const total = tokens(prefix)
    const cacheRead = read < 0 ? 0 : tokens(prefixes[read])
    const cacheWrite = last > read ? tokens(prefixes[last]) - cacheRead : 0
    return { input: total - cacheRead - cacheWrite, cacheRead, cacheWrite }
  }
}

/** The session through the DeepSeek adapter; `prompt` and `register` as `playSession` takes them (a budget, another plugin). */
export async function deepseekRun(prompt?: Parameters<typeof playSession>[3], register?: Parameters<typeof playSession>[2]) {
  const cache = deepseekCache()
  const server = await startOpenAI(({ body }, index): OpenAIBehaviour => {
    const usage = { ...cache(body), completion: 20 }
    const { call, text } = answerOf(index + 1)
    return call ? { type: 'tool_call', calls: [call], usage } : { type: 'success', text, reasoning: null, usage }
  })
  try {
    return await playSession(
      { provider: 'deepseek', model: 'deepseek-flash' },
      () => server.requests.length + 1,
      async root => {
        await root.plugin(openai, { provider: 'deepseek', baseUrl: server.url, apiKey: 'sk-bench' })
        await register?.(root)
      },
      prompt,
    )
  } finally {
    await server.close()
  }
}

async function anthropicRun() {
  const cache = anthropicCache()
  const server = await startAnthropic(
    ({ body }, index): AnthropicBehaviour => {
      const usage = { ...cache(body), output: 20 }
      const { call, text } = answerOf(index + 1)
      return call
        ? { type: 'message', blocks: [{ type: 'tool_use', id: call.id, name: call.name, input: JSON.parse(call.arguments) }], stopReason: 'tool_use', usage }
        : { type: 'message', blocks: [{ type: 'text', text: text! }], stopReason: 'end_turn', usage }
    },
    { apiKey: 'sk-ant-bench' },
  )
  try {
    return await playSession(
      { provider: 'anthropic', model: 'claude-sonnet-5-5' },
      () => server.requests.length + 1,
      async root => {
        await root.plugin(anthropic, { provider: 'anthropic', baseUrl: server.url, apiKey: 'sk-ant-bench' })
      },
    )
  } finally {
    await server.close()
  }
}

export async function benchProviderCache(): Promise<ProviderCacheFigure[]> {
  const figures: ProviderCacheFigure[] = []
  for (const [adapter, run] of [
    ['deepseek', deepseekRun],
    ['anthropic', anthropicRun],
  ] as const) {
    const events = await run()
    const { totals } = requestEconomics(reconstructRequests(events), DEFAULT_CACHE_PRICES)
    const reported = totals.reported
    if (!reported || reported.requests !== STEPS)
      throw new Error(`provider-cache: ${adapter} reported usage for ${reported?.requests ?? 0} of ${STEPS} requests`)
    figures.push({
      bench: 'cache-economics provider',
      adapter,
      requests: reported.requests,
      reported_input_tokens: reported.inputTokens,
      reported_hit_tokens: reported.hitTokens,
      reported_hit_share: Math.round((reported.hitShare ?? 0) * 10_000) / 10_000,
      reported_input_cost_usd: Math.round(reported.inputCost * 1e6) / 1e6,
    })
  }
  return figures
}
