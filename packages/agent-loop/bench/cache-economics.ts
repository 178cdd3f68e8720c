// Cache economics: one 30-step coding session (29 tool calls, then an answer),
// with a clock that changes every step and a git state that changes every 5
// steps, sent two ways:
//
// - loom: the requests exactly as the agent loop builds them. The system text and
//   tools are static; the clock and git state travel as runtime-context snapshots
//   appended to the history.
// - naive: the pattern of a harness that rebuilds one system string every step
//   (identity, tool guidance, ..., "Current time: ...", the git state, then a
//   catalog section) and sends the plain message history.
//
// Each request is serialized in the provider's prefix order (tools, system,
// messages; `serializeRequest`), the part that repeats the previous request is
// priced as a cache hit and the rest as a miss (tokens ~ chars / 4). The figure is
// the ratio of the two input costs.
import { Context } from '@deepseek-ai/cordis'
import Llm, { estimateMessage, LlmAdapter, userText, type GenerateOptions, type Message, type StreamChunk, type ToolSchema } from '@loom/llm'
import SessionStore, { DEFAULT_CACHE_PRICES, requestEconomics, type CachePrices, type SessionEconomics, type SessionEvent } from '@loom/session'
import SystemPrompt, { type SystemPromptConfig } from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import AgentLoop from '@loom/agent-loop'

export interface CacheEconomicsFigure {
  bench: 'cache-economics'
  assembly: 'loom' | 'naive'
  requests: number
  mean_reuse: number
  min_reuse: number
  input_tokens: number
  hit_tokens: number
  miss_tokens: number
  input_cost_usd: number
  uncached_input_cost_usd: number
  /** Estimated tokens of runtime-context snapshots the session logged, per step (this bench's clock ticks every step). */
  snapshot_tokens_per_step?: number
}

export interface CacheEconomicsRatio {
  bench: 'cache-economics ratio'
  /** Naive input cost over Loom's: how many times more the naive assembly pays. */
  naive_over_loom_input_cost: number
  prices_per_million: CachePrices
}

/** The fixed part of the system prompt, shared by both assemblies: (name, text) in order. */
const SECTIONS: [string, string][] = [
  ['identity', "You are a coding agent. You work in the user's repository, read before you edit, and keep changes small and tested."],
  ['tools', 'Use `read` to look at a file before changing it. Prefer reading the smallest part that answers the question. Report what you found, with paths.'],
  ['tasks', 'Break long work into steps. After each tool result, decide whether you know enough to answer; if not, make the next call.'],
  ['workspace', 'The workspace is a TypeScript monorepo. Sources live in src/, tests in tests/. Never write outside the workspace.'],
  ['memory', 'Durable notes live in MEMORY.md; read it when the user refers to earlier work. Do not copy secrets into notes.'],
  ['compaction', 'Old tool results may be summarized when the conversation grows long; re-read a file if you need its exact text again.'],
]
/** The section the naive assembly puts after the dynamic facts (seed 004: the skills catalog). */
const CATALOG =
  'Skills catalog:\n- refactor: rename and move code safely\n- test: write and run focused tests\n- review: check a diff for regressions\nUse load_skill(name) when a skill is relevant.'

export const STEPS = 30
const time = (step: number) => `2026-01-01T10:${String(step).padStart(2, '0')}:00Z`
const git = (step: number) => `branch main, ${Math.floor(step / 5)} commit(s) ahead of origin, ${step % 5} file(s) modified`
/** A deterministic file body of about 1.5k characters. */
const fileBody = (path: string) =>
  Array.from({ length: 30 }, (_, i) => `${String(i + 1).padStart(4)}\texport const value${i} = '${path}:${i}' // line ${i + 1}`).join('\n')

/** The model's answer at `step` (1-based): a `read` of the next module, and a summary at the last step. */
export function answerChunks(step: number): StreamChunk[] {
  if (step === STEPS) {
    const text = 'I read every module; the values are consistent across the 29 files.'
    return [
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text },
      { type: 'block-end', index: 0, block: { type: 'text', text } },
      { type: 'finish', reason: { kind: 'stop' } },
    ]
  }
  const args = JSON.stringify({ path: `src/module-${step}.ts` })
  const id = `call-${step}`
  return [
    { type: 'block-start', index: 0, blockType: 'tool-call' },
    { type: 'tool-call-delta', index: 0, id, name: 'read', argumentsDelta: args },
    { type: 'block-end', index: 0, block: { type: 'tool-call', id, name: 'read', arguments: args } },
    { type: 'finish', reason: { kind: 'tool-calls' } },
  ]
}

/** Plays the 30 steps and records every request the loop sends. */
class ScriptedSession extends LlmAdapter {
  readonly requests: GenerateOptions[] = []
  async *stream(request: GenerateOptions) {
    this.requests.push(request)
    yield* answerChunks(this.requests.length)
  }
}

/**
 * The 30-step session on a fresh host: the sections, the clock and git contexts,
 * the `read` tool, and `register(ctx)` for the model route (and any other
 * plugin). `step()` is the number of the request about to be sent; `prompt`
 * configures the prompt row (its budgets, say). Returns the agent's session log.
 */
export async function playSession(
  route: { provider: string; model: string },
  step: () => number,
  register: (ctx: Context) => void | Promise<void>,
  prompt: SystemPromptConfig = { persona: '' },
): Promise<readonly SessionEvent[]> {
  const root = new Context()
  await root.plugin(SystemPrompt, prompt)
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  const loop = await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  await register(root)
  const host = await root.plugin({ name: 'cache-economics', inject: ['llm', 'agents', 'systemPrompt', 'tools'], apply() {} })
  const ctx = host.ctx
  SECTIONS.forEach(([name, text], i) => ctx.systemPrompt.section({ name, order: 100 + i, text, literal: true }))
  ctx.systemPrompt.section({ name: 'skills', order: 200, text: CATALOG, literal: true })
  ctx.systemPrompt.context({ name: 'time', order: 0, stability: 'step', literal: true, text: () => `Current time: ${time(step())}` })
  ctx.systemPrompt.context({ name: 'git', order: 1, stability: 'step', literal: true, text: () => `Git: ${git(step())}` })
  ctx.tools.register(
    defineTool<{ path: string }>({
      name: 'read',
      description: 'Reads a file of the workspace and returns it with line numbers.',
      parameters: { type: 'object', properties: { path: { type: 'string', description: 'Path relative to the workspace.' } }, required: ['path'] },
      execute: ({ path }) => fileBody(path),
    }),
  )
  const agent = ctx.agents.create('cache-economics', route)
  agent.followup(userText('Read every module under src/ and check that their values are consistent.'))
  await agent.idle()
  const events = agent.session.events
  await loop.dispose()
  return events
}

async function runLoom(): Promise<{ requests: GenerateOptions[]; tools: ToolSchema[]; snapshotTokens: number }> {
  const adapter = new ScriptedSession()
  const events = await playSession(
    { provider: 'scripted-session', model: 'm' },
    () => adapter.requests.length + 1,
    root => {
      root.llm.registerAdapter(['scripted-session'], adapter)
    },
  )
  const requests = adapter.requests.slice()
  if (requests.length !== STEPS) throw new Error(`cache-economics: expected ${STEPS} requests, the loop sent ${requests.length}`)
  const snapshotTokens = events.reduce((sum, event) => (event.type === 'user/message' && isSnapshot(event.data) ? sum + estimateMessage(event.data) : sum), 0)
  return { requests, tools: requests[0].tools ? [...requests[0].tools] : [], snapshotTokens }
}

const isSnapshot = (message: Message) => message.source.kind === 'plugin' && (message.source as { form?: string }).form === 'snapshot'

/**
 * The naive assembly of the same steps: one system string rebuilt every step with
 * the time and git state inside it, and the plain history (the same user, assistant
 * and tool messages, without runtime-context snapshots).
 */
function naiveRequests(loom: GenerateOptions[], tools: ToolSchema[]) {
  return loom.map((request, i) => ({
    tools,
    system: [...SECTIONS.map(([, text]) => text), `Current time: ${time(i + 1)}`, `Git state: ${git(i + 1)}`, CATALOG].join('\n\n'),
    messages: request.messages.filter(message => !isSnapshot(message)),
  }))
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits

function figure(assembly: 'loom' | 'naive', economics: SessionEconomics): CacheEconomicsFigure {
  const { totals } = economics
  return {
    bench: 'cache-economics',
    assembly,
    requests: totals.requests,
    mean_reuse: round(totals.meanReuse ?? 1, 4),
    min_reuse: round(totals.minReuse ?? 1, 4),
    input_tokens: totals.hitTokens + totals.missTokens,
    hit_tokens: totals.hitTokens,
    miss_tokens: totals.missTokens,
    input_cost_usd: round(totals.inputCost, 6),
    uncached_input_cost_usd: round(totals.uncachedInputCost, 6),
  }
}

export async function benchCacheEconomics(
  prices: CachePrices = DEFAULT_CACHE_PRICES,
): Promise<[CacheEconomicsFigure, CacheEconomicsFigure, CacheEconomicsRatio]> {
  const { requests, tools, snapshotTokens } = await runLoom()
  const loom = requestEconomics(requests, prices)
  const naive = requestEconomics(naiveRequests(requests, tools), prices)
  return [
    { ...figure('loom', loom), snapshot_tokens_per_step: round(snapshotTokens / STEPS, 1) },
    figure('naive', naive),
    { bench: 'cache-economics ratio', naive_over_loom_input_cost: round(naive.totals.inputCost / loom.totals.inputCost, 2), prices_per_million: { ...prices } },
  ]
}
