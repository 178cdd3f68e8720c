import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/llm'
import { ScriptedAdapter, type ScriptedConfig } from '@loom/llm/testing'

export const name = '@loom/llm-scripted'
export const inject = ['llm']

const ToolCall = Schema.object({
  id: Schema.string().description('Call id (default: scripted-<n>).'),
  name: Schema.string().required().description('Tool name.'),
  arguments: Schema.dict(Schema.any()).default({}).description('Tool arguments (a JSON object).'),
})

const Failure = Schema.object({
  error: Schema.object({
    code: Schema.string().required(),
    message: Schema.string().required(),
  })
    .required()
    .description('The call fails with this failure (finish kind "error").'),
})

const Reply = Schema.object({
  text: Schema.string(),
  reasoning: Schema.string(),
  toolCalls: Schema.array(ToolCall),
})

const Entry = Schema.union([
  Schema.string().description('A text reply.'),
  Failure,
  Schema.array(Schema.any()).description('Stream chunks, verbatim.'),
  Schema.function().description('A function of the request (programmatic use).'),
  Reply,
])

export const Config: Schema<ScriptedConfig> = Schema.object({
  provider: Schema.string().default('scripted').description('Provider id the scripted model is routed under.'),
  model: Schema.string().description('Model id reported by listModels (every model id is served).'),
  script: Schema.array(Entry).default([]).description('The answers, one per call, in order.'),
  replay: Schema.string().description('A session log (.jsonl) whose recorded assistant messages are answered first.'),
  loop: Schema.boolean().default(false).description('Start over when the answers run out (else the call fails with SCRIPT_EXHAUSTED).'),
}) as unknown as Schema<ScriptedConfig>

/** Registers a ScriptedAdapter for `config.provider`; it lives as long as this plugin. */
export function apply(ctx: Context, config: ScriptedConfig) {
  const replay = config.replay !== undefined && ctx.baseUrl && !isAbsolute(config.replay) ? fileURLToPath(new URL(config.replay, ctx.baseUrl)) : config.replay
  const adapter = new ScriptedAdapter({ ...config, ...(replay !== undefined && { replay }) })
  ctx.llm.registerAdapter([adapter.provider], adapter)
}

/** The scripted adapter routed under `provider`, if that is what serves it. */
export function scriptedAdapterOf(ctx: Context, provider = 'scripted'): ScriptedAdapter | undefined {
  const adapter = ctx.llm.adapterOf(provider)
  return adapter instanceof ScriptedAdapter ? adapter : undefined
}

// The adapter itself lives in the core testing entry point; the plugin only routes it.
export * from '@loom/llm/testing'
