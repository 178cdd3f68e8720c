import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Agent } from '@loom/agent-loop'
import { withScope } from '@loom/scope'
import { PERSONA_SECTION } from '@loom/system-prompt'

export const name = '@loom/persona'
export const inject = ['systemPrompt', 'agents']

export const ORDER = 0

export interface Config {
  persona: string
  complete: boolean
  agents?: string[]
}

export const Config: Schema<Config> = Schema.object({
  persona: Schema.string()
    .required()
    .description('The persona text, a `{{var}}` template like the deployment persona. An empty text switches the persona off for the chosen agents.'),
  complete: Schema.boolean().default(false).description('Make the persona the whole system prompt of the chosen agents (every other section is left out).'),
  agents: Schema.array(Schema.string()).description(
    "Ids or names of the agents that get this persona (the `loom` CLI's agent is named `main`, its runner's `agentName`). Absent or empty: every agent.",
  ),
}) as Schema<Config>

/**
 * Gives agents their own `deployment:persona` section, registered in each agent's
 * scope layer (the global one belongs to the SystemPrompt service and is shadowed,
 * not replaced) but owned by this plugin's fiber. Agents that exist when the plugin
 * starts and agents created later are covered; the registrations go away with the
 * plugin (its fiber) and with each agent (`agent/disposed`).
 */
export function apply(ctx: Context, config: Config) {
  const persona = config.persona ?? ''
  const complete = config.complete === true
  const only = config.agents?.length ? new Set(config.agents) : undefined
  // By id (one session) or by name (a role across sessions, such as the CLI's `main`).
  const chosen = (agent: Agent) => !only || only.has(agent.id) || (agent.name !== undefined && only.has(agent.name))
  const registrations = new Map<Agent, () => void>()

  const applyTo = (agent: Agent) => {
    if (registrations.has(agent) || !chosen(agent)) return
    let dispose: () => void
    try {
      dispose = withScope(ctx, agent).systemPrompt.section({ name: PERSONA_SECTION, order: ORDER, text: persona, ...(complete && { complete: true }) })
    } catch (error) {
      throw new Error(`${name}: cannot set the persona of agent "${agent.id}": ${error instanceof Error ? error.message : String(error)}`, { cause: error })
    }
    registrations.set(agent, dispose)
  }

  ctx.on('agent/created', ({ agent }) => applyTo(agent))
  // The registration lives on this plugin's fiber, not the agent's: remove it when
  // the agent goes. Unloading the plugin removes all of them (fiber effects).
  ctx.on('agent/disposed', ({ agent }) => {
    registrations.get(agent)?.()
    registrations.delete(agent)
  })
  for (const agent of ctx.agents.list()) applyTo(agent)
}
