// The runner's config and the facts about stored sessions that commands need
// without booting an agent (`loom sessions list|show|stats` import this, not the
// runner, so they load no agent loop, tools or model adapters).
import Schema from '@deepseek-ai/schemastery'
import type { CachePrices } from '@loom/session'

/** A model's prices (configured, else its list price) and the route a log last ran on: shared with the inspector, in @loom/session. */
export { lastRoute, modelPrices } from '@loom/session'

export const name = '@loom/cli/runner'

export interface RunnerConfig {
  /** Route to use; default: the first of `preference` the deployment serves. */
  provider?: string
  /** Model to use; default: `models[provider]`, else the first model the provider lists. */
  model?: string
  preference: string[]
  models: Record<string, string>
  /** Per-turn budgets (flags win): model requests, input tokens, US dollars. */
  limits: { maxSteps?: number; maxInputTokens?: number; maxCostUsd?: number }
  /** USD per million tokens by `provider/model` or model id, over the built-in list prices. */
  prices: Record<string, CachePrices>
  /** The name of every agent the runner creates (`AgentRef.name`), which plugins select it by. */
  agentName: string
  /** The agents' `pinPrompt` option: the system text and tools stay those of the session's first request. */
  pinPrompt: boolean
}

const Prices = Schema.object({
  hit: Schema.number().min(0).required().description('Per million input tokens served from the prompt cache.'),
  miss: Schema.number().min(0).required().description('Per million input tokens not in the cache.'),
  output: Schema.number().min(0).required().description('Per million output tokens.'),
  write: Schema.number().min(0).description('Per million input tokens written to the prompt cache (default: the miss price).'),
})

export const Config: Schema<RunnerConfig> = Schema.object({
  provider: Schema.string().description('The provider route to use (flag --provider wins). Default: the first of `preference` that the deployment serves.'),
  model: Schema.string().description('The model to use (flag --model wins). Default: `models[provider]`, else the first model the provider lists.'),
  preference: Schema.array(Schema.string()).default(['deepseek', 'anthropic', 'openai', 'scripted']).description('Provider routes in order of preference.'),
  models: Schema.dict(Schema.string()).default({}).description('Default model per provider route.'),
  limits: Schema.object({
    maxSteps: Schema.natural().min(1).description("Model requests per turn (flag --max-steps); default: the agent loop's maxSteps (50)."),
    maxInputTokens: Schema.natural().min(1).description('Input tokens per turn, as the provider reports them (flag --max-input-tokens).'),
    maxCostUsd: Schema.number().min(0).description("US dollars per turn at the model's prices (flag --max-cost)."),
  })
    .default({})
    .description('Per-turn budgets: the turn ends, with that reason in the log, before the request that would pass one.'),
  prices: Schema.dict(Prices)
    .default({})
    .description(
      'USD per million tokens by `provider/model` or model id, for costs and --max-cost. Built in: the list prices of DeepSeek (`deepseek-flash`, `deepseek-v4-pro`, peak hours) and of Anthropic (Claude Fable, Opus, Sonnet and Haiku models, cache writes at their own rate); any other model has no price until it is set here.',
    ),
  agentName: Schema.string()
    .min(1)
    .default('main')
    .description("The name of the runner's agents (session ids change every run): what `@loom/persona`'s `agents` and other plugins select them by."),
  pinPrompt: Schema.boolean()
    .default(false)
    .description(
      "Pin each agent's system text and tools at its session's first request (a resumed session: at its latest logged header); a section that changes later (an edited AGENTS.md, a reloaded plugin) reaches new sessions only.",
    ),
})

export const NO_STORE =
  'this deployment stores no sessions: add a session persistence row (@loom/session-jsonl or @loom/session-postgres) to use `loom sessions`'

/** Why a cost limit cannot apply to a model with no price, and how to give it one. */
export function unknownPrice(provider: string, model: string): string {
  return `${provider}/${model} has no known price: set one in the runner row's prices (\`${provider}/${model}: { hit, miss, output }\`, US dollars per million tokens)`
}
