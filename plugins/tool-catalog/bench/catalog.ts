// Tools on demand: a deployment of 100 tools (6 first-party ones kept in the
// request, 94 generated ones with realistic schemas of varied size) and one
// 20-step session in which the model uses 5 of the generated tools (and read
// and bash), sent three ways:
//
// - all-in: every schema in every request's `tools`.
// - on-demand: this plugin loaded; the model loads each tool's schema with
//   `tool_schema` before its first use (one more step per tool) and runs it with
//   `call_tool`. The loaded schemas enter the history.
// - on-demand, schemas in tools: the same steps, but each loaded schema is added
//   to the request's `tools` (what a harness that grows the tools array does):
//   the cached prefix breaks at every load.
//
// Requests are the ones the agent loop really sends (recorded by a scripted
// adapter). Prompt tokens use the repo's heuristic (`estimateHeader` +
// `estimateMessage`, chars / 4); prefix reuse, hit and miss tokens and cost come
// from `requestEconomics` of @loom/session (the serialization cache-economics uses).
import { Context } from '@deepseek-ai/cordis'
import AgentLoop from '@loom/agent-loop'
import Llm, { estimateHeader, estimateMessage, LlmAdapter, userText, type GenerateOptions, type StreamChunk, type ToolSchema } from '@loom/llm'
import SessionStore, { DEFAULT_CACHE_PRICES, requestEconomics, type SessionEconomics } from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import * as catalog from '../src/index.ts'

export type CatalogMode = 'all-in' | 'on-demand' | 'on-demand, schemas in tools'

export interface CatalogFigure {
  bench: 'tool-catalog/on-demand'
  mode: CatalogMode
  /** Tools registered in the deployment; schemas in the first request's `tools`. */
  tools: number
  tools_in_request: number
  requests: number
  /** System text plus tools of the first request, in tokens. */
  header_tokens: number
  prompt_tokens_first: number
  prompt_tokens_mean: number
  prompt_tokens_last: number
  /** The sum of every request's prompt tokens. */
  input_tokens: number
  mean_reuse: number
  min_reuse: number
  hit_tokens: number
  miss_tokens: number
  input_cost_usd: number
}

export interface CatalogRatio {
  bench: 'tool-catalog/on-demand ratio'
  all_in_over_on_demand_input_tokens: number
  all_in_over_on_demand_header_tokens: number
  all_in_over_on_demand_input_cost: number
}

/** A small deterministic generator (mulberry32), so every run builds the same deployment. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const DOMAINS: [string, string][] = [
  ['issue', 'an issue of the tracker'],
  ['repo', 'a source repository'],
  ['pull', 'a pull request'],
  ['pipeline', 'a CI pipeline run'],
  ['deploy', 'a deployment of a service'],
  ['db', 'a database table row'],
  ['bucket', 'an object in a storage bucket'],
  ['queue', 'a message of a queue'],
  ['chat', 'a chat message'],
  ['calendar', 'a calendar event'],
  ['doc', 'a wiki page'],
  ['metric', 'a metric time series'],
  ['alert', 'a monitoring alert'],
  ['user', 'a user account'],
  ['secret', 'a secret of the vault'],
  ['cluster', 'a Kubernetes workload'],
]
const VERBS = ['list', 'get', 'create', 'update', 'delete', 'search'] as const

const FILLER = [
  'Results are paginated; pass the cursor of the previous page to continue.',
  'Timestamps are ISO 8601 in UTC.',
  'The caller needs the matching scope on the connected account; a missing scope is an error that names it.',
  'Rate limits apply per workspace: a limited call fails with the time to wait.',
  'Fields not requested are omitted from the output to keep it short.',
  'Archived items are skipped unless include_archived is true.',
]

/** One generated tool: schema size grows with the verb and a random number of extra fields. */
function generatedTool(domain: string, what: string, verb: (typeof VERBS)[number], next: () => number): ToolSchema {
  const properties: Record<string, unknown> = {}
  const required: string[] = []
  const field = (name: string, schema: Record<string, unknown>, isRequired = false) => {
    properties[name] = schema
    if (isRequired) required.push(name)
  }
  const extras = Math.floor(next() * 6)
  if (verb === 'list' || verb === 'search') {
    if (verb === 'search')
      field('query', { type: 'string', description: `Full-text query over ${what}s; quotes match a phrase, a leading - excludes a word.` }, true)
    field('limit', { type: 'integer', minimum: 1, maximum: 100, description: 'Items per page (default 20).' })
    field('cursor', { type: 'string', description: 'The cursor of the previous page, to continue.' })
    field('sort', { type: 'string', enum: ['created', 'updated', 'name', 'relevance'], description: 'Sort key (default updated, newest first).' })
    field('fields', { type: 'array', items: { type: 'string' }, description: 'Fields to return; all when absent.' })
    for (let i = 0; i < extras; i++)
      field(`filter_${i}`, { type: 'string', description: `Only items whose attribute ${i} equals this value (exact, case-sensitive).` })
  } else if (verb === 'get' || verb === 'delete') {
    field('id', { type: 'string', description: `The id of ${what}.` }, true)
    if (verb === 'delete') {
      field('force', { type: 'boolean', description: 'Delete even when other items refer to it.' })
      field('reason', { type: 'string', maxLength: 500, description: 'Why, for the audit log.' })
    } else {
      field('fields', { type: 'array', items: { type: 'string' }, description: 'Fields to return; all when absent.' })
    }
  } else {
    if (verb === 'update') field('id', { type: 'string', description: `The id of ${what}.` }, true)
    field('title', { type: 'string', minLength: 1, maxLength: 200, description: 'A short title, shown in lists.' }, verb === 'create')
    field('body', { type: 'string', description: 'The full text, Markdown.' })
    field('labels', { type: 'array', items: { type: 'string' }, uniqueItems: true, description: 'Labels to set; existing labels not listed are removed.' })
    field('owner', {
      type: 'object',
      properties: { id: { type: 'string' }, team: { type: 'string' }, notify: { type: 'boolean', description: 'Send a notification to the owner.' } },
      required: ['id'],
      additionalProperties: false,
      description: 'Who is responsible for it.',
    })
    field('visibility', { type: 'string', enum: ['private', 'team', 'organization', 'public'], description: 'Who can see it (default team).' })
    for (let i = 0; i < extras * 2; i++) {
      field(`attribute_${i}`, {
        type: i % 3 === 0 ? 'number' : 'string',
        description: `Custom attribute ${i} of ${what}, as configured by the workspace administrator.`,
      })
    }
  }
  const sentences = 1 + Math.floor(next() * 3)
  const description = [
    `${verb[0].toUpperCase()}${verb.slice(1)}s ${verb === 'list' || verb === 'search' ? `${what}s` : what}.`,
    ...Array.from({ length: sentences }, () => FILLER[Math.floor(next() * FILLER.length)]),
  ].join(' ')
  return { name: `${domain}_${verb}`, description, parameters: { type: 'object', properties, required, additionalProperties: false } }
}

/** The six first-party tools the catalogue keeps by default, with schemas of their size. */
const CORE: ToolSchema[] = [
  ['read', 'Reads a text file of the workspace and returns it with line numbers; offset and limit select lines.', ['path', 'offset', 'limit']],
  ['write', 'Writes a file of the workspace, replacing it; parent directories are created.', ['path', 'content']],
  [
    'edit',
    'Replaces an exact string in a file of the workspace; old_string must match once unless replace_all.',
    ['path', 'old_string', 'new_string', 'replace_all'],
  ],
  ['glob', 'Lists the workspace files whose path matches a glob pattern, newest first, at most 100.', ['pattern', 'path', 'hidden', 'no_ignore']],
  ['grep', 'Searches text files of the workspace for a regular expression and returns matching lines.', ['pattern', 'path', 'glob', 'ignore_case']],
  ['bash', 'Runs a shell command in the workspace and returns its output and exit code.', ['command', 'timeout_ms', 'description']],
].map(([name, description, fields]) => ({
  name: name as string,
  description: description as string,
  parameters: {
    type: 'object',
    properties: Object.fromEntries((fields as string[]).map(field => [field, { type: 'string', description: `The ${field.replaceAll('_', ' ')}.` }])),
    required: [(fields as string[])[0]],
    additionalProperties: false,
  },
}))

/** 100 tools: the six core ones and 94 generated ones. */
export function deploymentTools(): ToolSchema[] {
  const next = random(16)
  const generated = DOMAINS.flatMap(([domain, what]) => VERBS.map(verb => generatedTool(domain, what, verb, next)))
  return [...CORE, ...generated.slice(0, 100 - CORE.length)]
}

/** The 5 generated tools the session uses, and the 19 calls of its steps (the 20th answers). */
const USED = ['issue_search', 'issue_update', 'pull_get', 'pipeline_list', 'deploy_create']
const CALLS = [
  'read',
  'issue_search',
  'issue_search',
  'read',
  'issue_update',
  'pull_get',
  'bash',
  'pull_get',
  'pipeline_list',
  'read',
  'pipeline_list',
  'bash',
  'issue_update',
  'deploy_create',
  'read',
  'pipeline_list',
  'deploy_create',
  'bash',
  'issue_search',
]
export const STEPS = CALLS.length + 1

/** Arguments for a call: the required fields filled. */
function argumentsOf(tool: ToolSchema, step: number): Record<string, unknown> {
  const parameters = tool.parameters as { required?: string[] }
  return Object.fromEntries((parameters.required ?? []).map(name => [name, `${name}-${step}`]))
}

/** A tool's output: about 700 characters, different per call. */
const output = (name: string, args: unknown) =>
  Array.from({ length: 10 }, (_, i) => `${name} ${i + 1}: ${JSON.stringify(args)} → item ${i + 1} of the result, status ok`).join('\n')

type Call = { name: string; arguments: Record<string, unknown> }

/** The model's steps: each a list of tool calls, then the answer. */
function plan(mode: CatalogMode, tools: Map<string, ToolSchema>): Call[][] {
  const steps: Call[][] = []
  const loaded = new Set<string>()
  CALLS.forEach((name, i) => {
    const args = argumentsOf(tools.get(name)!, i + 1)
    if (mode === 'all-in' || !USED.includes(name)) {
      steps.push([{ name, arguments: args }])
      return
    }
    if (!loaded.has(name)) {
      loaded.add(name)
      steps.push([{ name: catalog.SCHEMA_TOOL, arguments: { names: [name] } }])
    }
    steps.push([{ name: catalog.CALL_TOOL, arguments: { name, arguments: args } }])
  })
  return steps
}

function chunksOf(calls: Call[] | undefined, step: number): StreamChunk[] {
  if (!calls) {
    const text = 'The issues are updated, the pipeline is green and the service is deployed.'
    return [
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text },
      { type: 'block-end', index: 0, block: { type: 'text', text } },
      { type: 'finish', reason: { kind: 'stop' } },
    ]
  }
  return [
    ...calls.flatMap((call, index): StreamChunk[] => {
      const id = `call-${step}-${index}`
      const args = JSON.stringify(call.arguments)
      return [
        { type: 'block-start', index, blockType: 'tool-call' },
        { type: 'tool-call-delta', index, id, name: call.name, argumentsDelta: args },
        { type: 'block-end', index, block: { type: 'tool-call', id, name: call.name, arguments: args } },
      ]
    }),
    { type: 'finish', reason: { kind: 'tool-calls' } },
  ]
}

class ScriptedSession extends LlmAdapter {
  readonly requests: GenerateOptions[] = []
  private readonly steps: Call[][]
  constructor(steps: Call[][]) {
    super()
    this.steps = steps
  }
  async *stream(request: GenerateOptions) {
    this.requests.push(request)
    yield* chunksOf(this.steps[this.requests.length - 1], this.requests.length)
  }
}

/** Plays the session on a fresh host and returns the requests the loop sent. */
async function play(mode: CatalogMode, tools: ToolSchema[]): Promise<GenerateOptions[]> {
  const adapter = new ScriptedSession(plan(mode, new Map(tools.map(tool => [tool.name, tool]))))
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: 'You are a release engineer. Work through the tools; say what you changed.' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  const loop = await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  root.llm.registerAdapter(['bench'], adapter)
  const host = await root.plugin({ name: 'tool-catalog-bench', inject: ['agents', 'tools'], apply() {} })
  for (const tool of tools) host.ctx.tools.register(defineTool({ ...tool, execute: args => output(tool.name, args) }))
  if (mode !== 'all-in') await root.plugin(catalog, { onDemand: ['*'], keep: catalog.DEFAULT_KEEP, maxDescriptionChars: 200 })
  const agent = host.ctx.agents.create('tool-catalog-bench', { provider: 'bench', model: 'm' })
  agent.followup(userText('Triage the open release issues, fix the pipeline and deploy the service.'))
  await agent.idle()
  await loop.dispose()
  return adapter.requests.slice()
}

/** The naive variant: every schema loaded so far joins the request's tools (sorted by name). */
function schemasInTools(requests: GenerateOptions[], tools: Map<string, ToolSchema>): GenerateOptions[] {
  const loaded = new Map<string, ToolSchema>()
  return requests.map(request => {
    for (const message of request.messages) {
      for (const block of message.content) {
        if (block.type !== 'tool-call' || block.name !== catalog.SCHEMA_TOOL) continue
        for (const name of (JSON.parse(block.arguments) as { names: string[] }).names) loaded.set(name, tools.get(name)!)
      }
    }
    const all = [...(request.tools ?? []), ...loaded.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    return { ...request, tools: all }
  })
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits
const promptTokens = (request: GenerateOptions) =>
  estimateHeader({ system: request.system, tools: request.tools }) + request.messages.reduce((sum, message) => sum + estimateMessage(message), 0)

function figure(mode: CatalogMode, tools: number, requests: GenerateOptions[], economics: SessionEconomics): CatalogFigure {
  const tokens = requests.map(promptTokens)
  const { totals } = economics
  return {
    bench: 'tool-catalog/on-demand',
    mode,
    tools,
    tools_in_request: requests[0].tools?.length ?? 0,
    requests: requests.length,
    header_tokens: estimateHeader({ system: requests[0].system, tools: requests[0].tools }),
    prompt_tokens_first: tokens[0],
    prompt_tokens_mean: Math.round(tokens.reduce((a, b) => a + b, 0) / tokens.length),
    prompt_tokens_last: tokens[tokens.length - 1],
    input_tokens: tokens.reduce((a, b) => a + b, 0),
    mean_reuse: round(totals.meanReuse ?? 1, 4),
    min_reuse: round(totals.minReuse ?? 1, 4),
    hit_tokens: totals.hitTokens,
    miss_tokens: totals.missTokens,
    input_cost_usd: round(totals.inputCost, 6),
  }
}

/** The three figures and their ratio, at DeepSeek's list prices (`DEFAULT_CACHE_PRICES`). */
export async function benchToolCatalog(): Promise<[CatalogFigure, CatalogFigure, CatalogFigure, CatalogRatio]> {
  const tools = deploymentTools()
  const byName = new Map(tools.map(tool => [tool.name, tool]))
  const allIn = await play('all-in', tools)
  const onDemand = await play('on-demand', tools)
  if (allIn.length !== STEPS) throw new Error(`tool-catalog bench: expected ${STEPS} requests all-in, the loop sent ${allIn.length}`)
  if (onDemand.length !== STEPS + USED.length)
    throw new Error(`tool-catalog bench: expected ${STEPS + USED.length} requests on demand, the loop sent ${onDemand.length}`)
  const grown = schemasInTools(onDemand, byName)
  const figures = [
    figure('all-in', tools.length, allIn, requestEconomics(allIn, DEFAULT_CACHE_PRICES)),
    figure('on-demand', tools.length, onDemand, requestEconomics(onDemand, DEFAULT_CACHE_PRICES)),
    figure('on-demand, schemas in tools', tools.length, grown, requestEconomics(grown, DEFAULT_CACHE_PRICES)),
  ] as const
  const [a, b] = figures
  return [
    ...figures,
    {
      bench: 'tool-catalog/on-demand ratio',
      all_in_over_on_demand_input_tokens: round(a.input_tokens / b.input_tokens, 2),
      all_in_over_on_demand_header_tokens: round(a.header_tokens / b.header_tokens, 2),
      all_in_over_on_demand_input_cost: round(a.input_cost_usd / b.input_cost_usd, 2),
    },
  ]
}
