import { Context, Service, type Events } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { Llm } from '@loom/llm'
import { scopeTarget, untraced } from '@loom/scope'
import type { Session, SessionHeader, SessionStore } from '@loom/session'
import type { AssembleContext, SystemPrompt } from '@loom/system-prompt'
import type { ToolRuntime } from '@loom/tools'
import { isAbsolute } from 'node:path'
import { Agent, pendingRouteSwitch, sessionObservers, type AgentOptions } from './agent.ts'
import { pluginIdentity, type PluginIdentity } from './identity.ts'
import type {} from './events.ts' // the agent/* event declarations

export const name = '@loom/agent-loop'

export interface AgentLoopConfig {
  /** Concurrency-safe tool calls of one step that may run at once. */
  maxParallelToolCalls: number
  /** Model requests per turn unless an agent's `limits.maxSteps` says otherwise. */
  maxSteps: number
}

/** Where a delegated agent's session comes from, recorded in its header (a subagent: `origin: 'subagent'`, its parent's session id, depth 1 and up). */
export type Delegation = Pick<SessionHeader, 'parentSession' | 'origin' | 'delegationDepth'>

export interface CreateAgentOptions extends AgentOptions, Delegation {
  /** Absolute working directory recorded in the session header (the `{{cwd}}` variable). */
  cwd?: string
}

/** What a persistence backend must offer for `resume`. */
interface ResumeSource {
  prepare(id: string): Promise<Session>
}

declare module '@deepseek-ai/cordis' {
  interface Context {
    agents: AgentLoop
  }
}

type Handle = { agent: Agent; detachSession: () => void; leave?: () => void }

/** The agent events whose listeners wrap a `next` (see events.ts). */
type AgentWaterfall = 'agent/pre-step' | 'agent/request' | 'agent/request-error'
/** The fire-and-forget agent events. */
type AgentNotification = Exclude<Extract<keyof Events, `agent/${string}`>, AgentWaterfall | 'agent/turn-stopping'>
type PayloadOf<K extends keyof Events> = Parameters<Events[K]>[0]
type ResultOf<K extends AgentWaterfall> = Awaited<ReturnType<Events[K]>>

/**
 * The agents of a host (ctx key `agents`). Each agent gets its own scope: a
 * registration made through `agent.ctx` (a section, a tool, a listener) applies to
 * that agent only and is removed with it. An agent belongs to the plugin that
 * created it: unloading that plugin disposes the agent.
 */
export class AgentLoop extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = name
  static readonly inject = ['systemPrompt', 'sessions', 'llm', 'tools']
  static readonly Config: Schema<Partial<AgentLoopConfig>, AgentLoopConfig> = Schema.object({
    maxParallelToolCalls: Schema.natural().min(1).default(10).description('Concurrency-safe tool calls of one step that may run at once.'),
    maxSteps: Schema.natural().min(1).default(50).description('Model requests per turn; the turn ends with reason `limit` when it is reached.'),
  })

  readonly config: AgentLoopConfig
  private readonly home: Context
  private readonly agents = new Map<string, Handle>()

  constructor(ctx: Context, config: Partial<AgentLoopConfig> = {}) {
    // Checked before the service is provided, so a bad config registers nothing.
    const maxParallelToolCalls = config.maxParallelToolCalls ?? 10
    if (!Number.isInteger(maxParallelToolCalls) || maxParallelToolCalls < 1) {
      throw new Error(`maxParallelToolCalls must be a positive integer, got ${maxParallelToolCalls}`)
    }
    const maxSteps = config.maxSteps ?? 50
    if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new Error(`maxSteps must be a positive integer, got ${maxSteps}`)
    super(ctx, 'agents')
    this.config = { maxParallelToolCalls, maxSteps }
    this.home = ctx
    this.events = untraced(ctx.events)
    this.systemPrompt = untraced(ctx.systemPrompt)
    this.llm = untraced(ctx.llm)
    this.tools = ctx.tools
    this.sessions = ctx.sessions
    // The route is this loop's own option, not part of AgentRef.
    const agentOf = (c: AssembleContext) => (c.agent instanceof Agent ? c.agent : undefined)
    // Registered through the context, which owns them: they go when the loop does.
    ctx.systemPrompt.variable('provider', c => agentOf(c)?.options.provider)
    ctx.systemPrompt.variable('model', c => agentOf(c)?.options.model)
    ctx.systemPrompt.variable('cwd', c => c.agent?.cwd)
    ctx.on('session/event', (session, event) => sessionObservers.get(session)?.(event))
  }

  // The injected services, looked up once and called directly (see `untraced`): a
  // lookup through the context costs microseconds, and a step makes many. The loop
  // restarts if one is replaced. Registrations go through `ctx`, which owns them.
  readonly systemPrompt: SystemPrompt
  readonly llm: Llm
  readonly tools: ToolRuntime
  private readonly sessions: SessionStore
  private readonly events: Context['events']

  /**
   * What identifies plugin `name` for drift, as loaded here: its package version,
   * and the sha256 of its source when it was loaded by path or from a workspace
   * package (computed once per loaded plugin, when a request header first needs it).
   */
  pluginIdentity(name: string): PluginIdentity {
    return pluginIdentity(this.home, name)
  }

  /** A new agent on a new session named `id`; it belongs to the calling plugin. */
  create(id: string, options: CreateAgentOptions = {}): Agent {
    const { cwd, parentSession, origin, delegationDepth, ...agentOptions } = options
    if (agentOptions.maxTokens !== undefined && !(Number.isSafeInteger(agentOptions.maxTokens) && agentOptions.maxTokens > 0)) {
      throw new Error('agent maxTokens must be a positive safe integer')
    }
    if (cwd !== undefined && !isAbsolute(cwd)) throw new Error(`agent "${id}": cwd must be an absolute path, got "${cwd}"`)
    if (delegationDepth !== undefined && !(Number.isSafeInteger(delegationDepth) && delegationDepth >= 0 && !Object.is(delegationDepth, -0))) {
      throw new Error(`agent "${id}": delegationDepth must be a non-negative safe integer, got ${delegationDepth}`)
    }
    if (origin !== undefined && origin !== 'subagent') throw new Error(`agent "${id}": origin must be 'subagent', got ${JSON.stringify(origin)}`)
    if (parentSession !== undefined && (typeof parentSession !== 'string' || parentSession === '')) {
      throw new Error(`agent "${id}": parentSession must be a non-empty session id`)
    }
    if (this.agents.has(id)) throw new Error(`agent "${id}" already exists`)
    const meta = {
      ...(cwd !== undefined && { cwd }),
      ...(parentSession !== undefined && { parentSession }),
      ...(origin !== undefined && { origin }),
      ...(delegationDepth !== undefined && { delegationDepth }),
    }
    const session = this.sessions.prepare(id, { meta })
    return this.publish(this.ctx, session, agentOptions, 'startup')
  }

  /**
   * Continues a stored session: the log is repaired if a crash left it open, and
   * turns, inbox and runtime context carry on from it. The route defaults to the
   * one the session last used, or was switched to since (`Agent.switchRoute`).
   * With `pinPrompt`, the agent keeps the system text and tools of the session's
   * latest logged header.
   */
  async resume(id: string, options: AgentOptions = {}): Promise<Agent> {
    // Optional: resume needs a backend, nothing else does.
    const persistence = this.home.get('sessionPersistence') as ResumeSource | undefined
    if (!persistence) throw new Error('cannot resume: session persistence is not configured (load a session persistence plugin such as @loom/session-jsonl)')
    if (this.agents.has(id)) throw new Error(`agent "${id}" already exists`)
    const caller = this.ctx
    const session = await persistence.prepare(id)
    // A route switched after the last request is the one the session goes on with.
    const last = pendingRouteSwitch(session)?.data ?? session.requestHeader()?.config
    return this.publish(caller, session, { provider: last?.provider, model: last?.model, ...options }, 'resume')
  }

  get(id: string): Agent | undefined {
    return this.agents.get(id)?.agent
  }

  list(): Agent[] {
    return [...this.agents.values()].map(handle => handle.agent)
  }

  private publish(owner: Context, session: Session, options: AgentOptions, source: 'startup' | 'resume'): Agent {
    let agent: Agent | undefined
    let detachSession: (() => void) | undefined
    try {
      // The agent calls its loop at every step: the loop itself, not the caller's tracing proxy of it.
      agent = new Agent(untraced(this), this.home, session, Object.freeze({ ...options }))
      detachSession = this.home.sessions.enter(session)
      const handle: Handle = { agent, detachSession }
      this.agents.set(agent.id, handle)
      this.sessions.announce(session)
      this.emit(agent, 'agent/created', { agent })
      this.emit(agent, 'agent/session-start', { agent, source })
      const created = agent
      handle.leave = owner.effect(() => () => created.dispose(), 'agents.create')
      return agent
    } catch (error) {
      this.agents.delete(session.id)
      detachSession?.()
      void agent?.dispose()
      throw error
    }
  }

  /** The end of `agent.dispose()`, once the driver is quiet and the agent's scope is gone. */
  async release(agent: Agent): Promise<void> {
    const handle = this.agents.get(agent.id)
    if (handle?.agent !== agent) return
    this.agents.delete(agent.id)
    handle.leave?.()
    this.emit(agent, 'agent/disposed', { agent })
    handle.detachSession()
  }

  /** Fire-and-forget, routed to the agent's listeners and unscoped ones; failures are logged. */
  emit<K extends AgentNotification>(agent: Agent, name: K, payload: PayloadOf<K>): void {
    // The logger only when there is something to log: every status change and inbox change comes through here.
    const report = (error: unknown) => this.home.logger('agents').error(error)
    for (const listener of this.events.dispatch('emit', [scopeTarget(this, agent), name, payload])) {
      try {
        const result = listener(payload)
        if (result instanceof Promise) result.catch(report)
      } catch (error) {
        report(error)
      }
    }
  }

  /**
   * Runs the agent's listeners of a waterfall around `inner`, outermost first.
   * Each `next()` returns a promise even when the listener after it answers
   * synchronously, as the event types promise.
   */
  waterfall<K extends AgentWaterfall>(agent: Agent, name: K, payload: PayloadOf<K>, inner: () => Promise<ResultOf<K>>): Promise<ResultOf<K>> {
    const listeners = this.events.dispatch('waterfall', [scopeTarget(this, agent), name, payload])
    const step = async (index: number): Promise<ResultOf<K>> => {
      const listener = listeners[index]
      return listener ? await listener(payload, () => step(index + 1)) : inner()
    }
    return step(0)
  }

  async serial(agent: Agent, name: 'agent/turn-stopping', payload: PayloadOf<'agent/turn-stopping'>): Promise<void> {
    await this.events.serial(scopeTarget(this, agent), name, payload)
  }
}

export default AgentLoop
