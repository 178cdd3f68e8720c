import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Agent } from '@loom/agent-loop'
import { HarnessError, userText } from '@loom/llm'
import { withScope } from '@loom/scope'
import type { Session, TurnEndReason } from '@loom/session'
import type { AssembleContext } from '@loom/system-prompt'
import { defineTool, type ToolRunContext } from '@loom/tools'
import { randomBytes } from 'node:crypto'

export const name = '@loom/subagents'
export const inject = ['systemPrompt', 'tools', 'agents', 'sessions']

export const TOOL = 'task'
/** First-party tool guidance band (100..149): after read..bash (100-105), web_fetch (111). */
export const SECTION_NAME = 'tool:task'
export const SECTION_ORDER = 112
/** What a subagent is told about its role, in its own scope only. */
export const ROLE_SECTION = 'subagents:role'
export const ROLE_ORDER = 113
/** The children running for an agent, a runtime context of that agent only. */
export const CONTEXT_NAME = 'subagents:active'
export const CONTEXT_ORDER = 70
/** The name (`AgentOptions.name`) of every child agent: plugins select subagents by it. */
export const AGENT_NAME = 'subagent'

export interface Config {
  /** Model requests a child's turn may make. */
  maxSteps: number
  /** Input tokens a child's turn may use, as the provider reports them. */
  maxInputTokens?: number
  /** Delegation levels: 1 lets top-level agents delegate and no child delegate further. */
  maxDepth: number
}

export const Config: Schema<Config> = Schema.object({
  maxSteps: Schema.natural().min(1).default(20).description('Model requests a subagent may make for its task; past it the task fails with SUBAGENT_LIMIT.'),
  maxInputTokens: Schema.natural()
    .min(1)
    .description('Input tokens (cache reads included) a subagent may use for its task, as the provider reports them; absent: no limit.'),
  maxDepth: Schema.natural()
    .min(1)
    .default(1)
    .description('How deep delegation may go: 1 lets top-level agents delegate and hides `task` from their subagents; 2 lets subagents delegate once more.'),
}) as Schema<Config>

export interface TaskArgs {
  description: string
  prompt: string
  tools?: string[]
}

/** What a finished task reports besides its text (the tool result's `meta`): `loom sessions show` prints `childSession`. */
export interface TaskMeta {
  childSession: string
  steps: number
  inputTokens: number
  outputTokens: number
}

/** A task that could not run or did not finish; the message names the child session when there is one. */
export class SubagentError extends HarnessError {}

interface Running {
  description: string
  agent: Agent
}

export function guidance(config: Pick<Config, 'maxSteps'>): string {
  return [
    `Use \`${TOOL}\` to hand a self-contained piece of work to a subagent: a fresh agent that sees none of this conversation, works on its own with the tools it is given, and returns only its final answer.`,
    'Delegate work that is broad or noisy for the size of its result (searching a codebase, reading many files, trying out commands), so that your own context keeps just the conclusion; independent tasks given as several `task` calls in one step run in parallel.',
    'Write `prompt` as a complete brief: the goal, what you already know, where to look, and what exactly to report back. Do not delegate what one or two calls of your own can answer, nor anything that needs the user.',
    `\`tools\` narrows the tools the subagent may use (default: all of yours except \`${TOOL}\`). A subagent has ${config.maxSteps} model requests; if it fails or runs out, the result is an error naming its session.`,
  ].join(' ')
}

export const ROLE =
  'You are a subagent: another agent delegated the task in the user message to you. Work on it on your own with your tools; nobody can answer questions. Your final message is all the delegating agent receives: make it a complete, self-contained report (specific findings, file paths, commands and their outcome), and say plainly what you could not do.'

/** The runtime context text for an agent's running children ('' when none). */
export function activeText(children: readonly Running[]): string {
  if (!children.length) return ''
  const lines = children.map(({ description, agent }) => `- ${description} (session ${agent.id}): ${plural(countSteps(agent.session), 'step')} so far`)
  return [`Subagents working for you now (each answers as the result of its \`${TOOL}\` call):`, ...lines].join('\n')
}

/**
 * Registers the `task` tool: each call runs one turn of a child agent on a session
 * of its own (header `origin: 'subagent'`, `parentSession`, `delegationDepth`), with
 * the caller's route and cwd, this plugin's budget and a restricted tool set, and
 * returns the child's final answer. The children belong to this plugin.
 */
export function apply(ctx: Context, config: Config) {
  const logger = ctx.logger('subagents')
  /** Parent agent id → its running children by session id. */
  const running = new Map<string, Map<string, Running>>()

  /** The tools a child at `depth` gets: the parent's, minus `task` past maxDepth, narrowed by `requested`. */
  const childTools = (parent: Agent, requested: readonly string[] | undefined, depth: number): string[] => {
    const visible = ctx.tools.schemas(parent).map(tool => tool.name)
    const delegates = depth < config.maxDepth
    const offered = visible.filter(tool => tool !== TOOL || delegates)
    if (requested === undefined) return offered
    const unknown = requested.filter(tool => !visible.includes(tool))
    if (unknown.length) {
      const list = unknown.map(tool => `"${tool}"`).join(', ')
      throw new SubagentError(`"tools" names ${list}, which you do not have; the tools a subagent can get: ${offered.join(', ') || 'none'}`, 'SUBAGENT_TOOLS')
    }
    if (requested.includes(TOOL) && !delegates) {
      throw new SubagentError(
        `a subagent at depth ${depth} may not delegate further (maxDepth ${config.maxDepth}): leave "${TOOL}" out of "tools"`,
        'SUBAGENT_DEPTH',
      )
    }
    return [...new Set(requested)]
  }

  const runTask = async (args: TaskArgs, exec: ToolRunContext) => {
    const parent = exec.agent && ctx.agents.get(exec.agent.id)
    if (!parent) throw new SubagentError(`"${TOOL}" runs only for an agent of this host`, 'SUBAGENT_NO_AGENT')
    const depth = (parent.session.header.delegationDepth ?? 0) + 1
    if (depth > config.maxDepth) {
      throw new SubagentError(
        `agent "${parent.id}" is itself a subagent at depth ${depth - 1}; maxDepth ${config.maxDepth} allows no deeper delegation`,
        'SUBAGENT_DEPTH',
      )
    }
    const tools = childTools(parent, args.tools, depth)
    // The route the parent's requests use now (an agent/request listener may have changed it).
    const route = parent.session.requestHeader()?.config
    exec.signal.throwIfAborted()
    const child = ctx.agents.create(`${parent.id}-task-${randomBytes(3).toString('hex')}`, {
      name: AGENT_NAME,
      provider: route?.provider ?? parent.options.provider,
      model: route?.model ?? parent.options.model,
      ...(parent.cwd !== undefined && { cwd: parent.cwd }),
      parentSession: parent.session.id,
      origin: 'subagent',
      delegationDepth: depth,
      limits: { maxSteps: config.maxSteps, ...(config.maxInputTokens !== undefined && { maxInputTokens: config.maxInputTokens }) },
    })
    const siblings = running.get(parent.id) ?? new Map<string, Running>()
    running.set(parent.id, siblings)
    // One line in the runtime context, whatever the model wrote.
    siblings.set(child.id, { description: args.description.replace(/\s+/g, ' ').trim(), agent: child })
    const onAbort = () => child.cancel({ kind: 'parent' })
    const scoped: (() => void)[] = []
    try {
      // Owned by this plugin, in the child's layer: the manifest attributes them here.
      const scope = withScope(ctx, child)
      scoped.push(scope.tools.restrict(tools), scope.systemPrompt.section({ name: ROLE_SECTION, order: ROLE_ORDER, text: ROLE }))
      if (!tools.includes(TOOL)) scoped.push(scope.systemPrompt.section({ name: SECTION_NAME, order: SECTION_ORDER, text: '' }))
      exec.signal.addEventListener('abort', onAbort, { once: true })
      child.followup(userText(args.prompt))
      await child.idle()
      return outcome(child)
    } finally {
      exec.signal.removeEventListener('abort', onAbort)
      siblings.delete(child.id)
      if (!siblings.size && running.get(parent.id) === siblings) running.delete(parent.id)
      // Every event of the child on disk before its session is detached.
      await ctx.sessions.flush(child.session).catch(error => logger.warn(`cannot flush subagent session "${child.id}":`, error))
      await child.dispose()
      for (const dispose of scoped) dispose()
    }
  }

  ctx.systemPrompt.section({ name: SECTION_NAME, order: SECTION_ORDER, text: guidance(config) })
  // Descriptions are the model's text: literal, never interpolated.
  ctx.systemPrompt.context({
    name: CONTEXT_NAME,
    order: CONTEXT_ORDER,
    stability: 'step',
    literal: true,
    text: (context: AssembleContext) => activeText([...(running.get(context.agent?.id ?? '')?.values() ?? [])]),
  })
  ctx.tools.register(
    defineTool<TaskArgs>({
      name: TOOL,
      description:
        'Runs a task in a subagent: a fresh agent with its own session and no view of this conversation, which works on `prompt` with your tools (or those in `tools`) and returns its final answer, followed by a line with its session id, steps and tokens.',
      parameters: {
        type: 'object',
        properties: {
          description: { type: 'string', minLength: 1, maxLength: 120, description: 'A short label for the task (3 to 6 words), shown while it runs.' },
          prompt: { type: 'string', minLength: 1, description: 'The complete brief for the subagent: goal, context, where to look, what to report back.' },
          tools: {
            type: 'array',
            items: { type: 'string' },
            description: `Names of the tools the subagent may use (default: all of yours except \`${TOOL}\`); [] for none.`,
          },
        },
        required: ['description', 'prompt'],
        additionalProperties: false,
      },
      // Children run on their own sessions: calls of one step do not interfere.
      isConcurrencySafe: true,
      // Starting a subagent changes nothing by itself; each call the subagent makes is gated by its own effects.
      effects: ['read'],
      execute: runTask,
    }),
  )
}

/** The tool result of a finished child: its answer and a footer, or an error naming its session. */
function outcome(child: Agent) {
  const session = child.session
  const reason = session.lastOfType('turn/end')?.data.reason
  const steps = countSteps(session)
  const { inputTokens, outputTokens } = countTokens(session)
  if (reason?.kind !== 'completed') {
    throw new SubagentError(`subagent session "${child.id}" ${failureOf(reason)} after ${plural(steps, 'step')}`, codeOf(reason))
  }
  const text = lastAssistantText(session) || '(the subagent gave no text answer)'
  const footer = `[subagent session ${child.id}: ${plural(steps, 'step')}, ${inputTokens} input tokens, ${outputTokens} output tokens]`
  const meta: TaskMeta = { childSession: child.id, steps, inputTokens, outputTokens }
  return { content: `${text}\n\n${footer}`, meta: { ...meta } }
}

function failureOf(reason: TurnEndReason | undefined): string {
  if (!reason) return 'ended without closing its turn'
  switch (reason.kind) {
    case 'limit':
      return `stopped at its ${reason.limit} limit (${reason.used} used, ${reason.max} allowed)`
    case 'error':
      return `failed: ${reason.error.code}: ${reason.error.message}`
    case 'aborted':
      return `was cancelled (${reason.reason.kind})`
    case 'max-tokens':
      return 'ran out of output tokens'
    default:
      return `ended ${reason.kind}`
  }
}

function codeOf(reason: TurnEndReason | undefined): string {
  if (reason?.kind === 'limit') return 'SUBAGENT_LIMIT'
  if (reason?.kind === 'aborted') return 'SUBAGENT_ABORTED'
  return 'SUBAGENT_FAILED'
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`
}

// The child's log is read by type: a running child's step count is in the parent's context every step.
function countSteps(session: Session): number {
  return session.eventsOfType('step/start').length
}

/** Input (cache reads and writes included) and output tokens the provider reported. */
function countTokens(session: Session) {
  let inputTokens = 0
  let outputTokens = 0
  for (const event of session.eventsOfType('assistant/message')) {
    if (!event.data.usage) continue
    const usage = event.data.usage
    inputTokens += usage.inputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)
    outputTokens += usage.outputTokens
  }
  return { inputTokens, outputTokens }
}

function lastAssistantText(session: Session): string {
  const content = session.lastOfType('assistant/message')?.data.message.content ?? []
  return content.map(block => (block.type === 'text' ? block.text : '')).join('')
}
