import { inspect } from 'node:util'
import { Context, type Fiber, type Plugin, Service } from '@deepseek-ai/cordis'
import AgentLoop, { buildManifest, type Agent, type AgentLoopConfig, type Manifest, type ManifestRow } from '@loom/agent-loop'
import Llm, { userText, type AdapterRegistration, type GenerateOptions, type UserMessage } from '@loom/llm'
import { ScriptedAdapter, type ScriptEntry } from '@loom/llm/testing'
import SessionStore, { lastEventOfType, type Session, type SessionEvent, type TurnEndReason } from '@loom/session'
import SystemPrompt, { interpolate, type PromptAssembly, type Stability, type SystemPromptConfig, type ToolSchema } from '@loom/system-prompt'
import ToolRuntime, { type ApprovalAnswer, type ApprovalRequest, type ToolExecutionResult } from '@loom/tools'
import { snapshotRequest } from './snapshot.ts'
import { activeTimeouts, attributeTimers, describeTimer, liveTimers, trackTimers, type TimerSink } from './timers.ts'

/** The provider (and model) id the scripted model answers under. */
export const SCRIPTED_PROVIDER = 'scripted'
export const SCRIPTED_MODEL = 'scripted'
/** The name of the host plugin: the owner of the agents and the adapter the kit creates. */
export const HOST_PLUGIN = '@loom/testkit'
// The tool runtime provides every registered tool's schema to the prompt.
const TOOLS_OWNER = '@loom/tools'

const SPINE = ['systemPrompt', 'sessions', 'llm', 'tools', 'agents']
// Cordis `FiberState` is a const enum; its values are spelled out here.
const PENDING = 0

export interface HostOptions {
  /** Config of the SystemPrompt service (persona, identity, toolOrder, ...); its stability check is `error` unless given. */
  prompt?: SystemPromptConfig
  /** Config of the AgentLoop service. */
  loop?: Partial<AgentLoopConfig>
  /** The first script of the scripted model (see `host.scriptedModel`). */
  script?: readonly ScriptEntry[]
  /** The working directory used when a call gives none (default `process.cwd()`); absolute. */
  cwd?: string
  /** Provides `ctx.approver` answering each question so (recorded in `host.approvals`); absent: no approver, every ask is refused. */
  approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>
}

/** One section or runtime context a plugin adds to the prompt. */
export interface PromptDeltaEntry {
  name: string
  order: number
  stability: Stability
  /** As registered (resolved for this agent, not interpolated). */
  text: string
  /** `text` with its `{{variables}}` interpolated (verbatim when literal), as the model reads it. */
  rendered: string
  /** Present when the entry is rendered verbatim. */
  literal?: true
}

export interface PromptDeltaVariable {
  name: string
  value: string | undefined
  stability: Stability
}

/** What one plugin adds to an assembly, in assembly order. */
export interface PromptDelta {
  sections: PromptDeltaEntry[]
  contexts: PromptDeltaEntry[]
  tools: ToolSchema[]
  variables: PromptDeltaVariable[]
}

export interface DeltaOptions {
  /** The working directory of the agent the prompt is assembled for (the `{{cwd}}` variable). */
  cwd?: string
}

export interface Mounted {
  /** The plugin's context. */
  ctx: Context
  fiber: Fiber
  /** The owner name of its registrations (`fiber.name`). */
  name: string
  /** The config as the plugin received it (after schema defaults). */
  config: unknown
  /** What the plugin adds to the prompt of a fresh agent with that cwd. */
  delta(options?: DeltaOptions): Promise<PromptDelta>
  /** Unloads the plugin and waits until its teardown settled. Idempotent. */
  dispose(): Promise<void>
}

export interface CallToolOptions {
  /** The session cwd of the calling agent (default: the host's cwd). */
  cwd?: string
  signal?: AbortSignal
}

/** A manifest row without its sizes and digest: what a plugin's structure test compares. */
export type OutlineRow = Pick<ManifestRow, 'kind' | 'name' | 'owner' | 'order' | 'stability' | 'trust' | 'category'>

/**
 * The rows of `manifest` (of `owner` only, when given) as outlines: ids, order,
 * stability, trust and category, in request order. A change of wording keeps a
 * test green; a section that moves, vanishes or changes stability does not.
 */
export function manifestOutline(manifest: Manifest, owner?: string): OutlineRow[] {
  return manifest.rows
    .filter(row => owner === undefined || row.owner === owner)
    .map(({ kind, name, owner, order, stability, trust, category }) => ({ kind, name, owner, order, stability, trust, category }))
}

export interface StablePromptOptions {
  /** The agent's working directory (default: the host's). */
  cwd?: string
  /** Assemblies to compare (default 3). */
  times?: number
}

export interface RunOptions {
  cwd?: string
}

export interface RunResult {
  /** The fresh agent that ran the turn (alive until the host is disposed). */
  agent: Agent
  /** Its session log after the turn. */
  events: readonly SessionEvent[]
  /** The requests the model was sent during this run. */
  requests: GenerateOptions[]
  /** The text of the last assistant message ('' when there is none). */
  text: string
  /** How the turn ended (`completed`, `error`, ...). */
  reason: TurnEndReason | undefined
}

export interface HostLog {
  type: 'error' | 'info' | 'warn' | 'debug'
  name: string
  text: string
}

export interface Host {
  /** The root context: SystemPrompt, SessionStore, Llm, ToolRuntime and AgentLoop are loaded. */
  root: Context
  /** The host plugin's context (injects every spine service); the kit's agents belong to it. */
  ctx: Context
  /** The scripted model currently answering on provider `scripted`. */
  readonly adapter: ScriptedAdapter
  /** Everything logged on the host, warnings and errors included. */
  readonly logs: HostLog[]
  /** The questions the approver of `approve` was asked, in order. */
  readonly approvals: ApprovalRequest[]
  /** The working directory used when a call gives none. */
  readonly cwd: string
  /** Loads a plugin on the root; rejects, naming the plugin, when it does not start. */
  mount(plugin: Plugin, config?: unknown): Promise<Mounted>
  /** What remains of a plugin after its dispose ([] when nothing). */
  residue(mounted: Mounted): Promise<string[]>
  /** Throws, listing every residue found, when anything of the plugin remains. */
  assertZeroResidue(mounted: Mounted): Promise<void>
  /**
   * Assembles one agent's prompt `times` times (default 3, a few ms apart) with
   * the stability check strict: rejects naming the first section or variable
   * whose text changed on its own, with its plugin and the first difference.
   */
  assertStablePrompt(options?: StablePromptOptions): Promise<void>
  /**
   * The manifest of a fresh agent's first request (no history): one row per
   * section, runtime context and tool with owner, order, stability, trust,
   * category, size and sha256. Assert its structure (`manifestOutline`) rather
   * than snapshot the whole prompt.
   */
  manifest(options?: DeltaOptions): Promise<Manifest>
  /** One call through `ctx.tools.execute` for an agent whose session cwd is `cwd`. */
  callTool(name: string, args?: unknown, options?: CallToolOptions): Promise<ToolExecutionResult>
  /** Replaces the model's script; the returned adapter records every request (`.requests`). */
  scriptedModel(script?: readonly ScriptEntry[]): ScriptedAdapter
  /** One turn of a fresh agent. */
  run(prompt: string | UserMessage, options?: RunOptions): Promise<RunResult>
  /** Stable JSON text of a request (signal dropped, ids replaced). */
  snapshot(request: GenerateOptions): string
  /** The agent `callTool` uses for that cwd (created on first use, kept for the host's life). */
  agent(cwd?: string): Agent
  /** Disposes everything: mounted plugins, the kit's agents, the services. */
  dispose(): Promise<void>
}

/** Prompt entries by key (`section:name`, `context:name`, `tool:name`, `variable:name`) → owner. */
type Keys = Map<string, string | undefined>

interface Created {
  kind: 'agent' | 'session'
  id: string
  value: Agent | Session
}

interface MountRecord extends TimerSink {
  plugin: Plugin
  fiber: Fiber
  name: string
  cwd: string
  baseline: Keys
  claims: Set<string>
  hooksBefore: Set<unknown>
  timeoutsBefore: number
  agentsBefore: Map<Agent, Keys>
  createdFrom: number
  createdTo?: number
}

interface Hook {
  ctx: Context
  callback: Function
}

export async function createHost(options: HostOptions = {}): Promise<Host> {
  const root = new Context()
  const logs: HostLog[] = []
  root.logger.exporter({
    levels: { default: 3 }, // everything, warnings and debug included
    export(message) {
      logs.push({ type: message.type, name: message.name, text: message.args.map(formatArg).join(' ') })
    },
  })
  const stopTimers = trackTimers()
  // Strict: a plugin whose prompt text changes on its own fails its tests, naming the section.
  await root.plugin(SystemPrompt, { stabilityCheck: 'error', ...options.prompt })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, (options.loop ?? {}) as AgentLoopConfig)
  const approvals: ApprovalRequest[] = []
  const answer = options.approve
  if (answer) {
    await root.plugin(
      class TestApprover extends Service {
        static override readonly name = `${HOST_PLUGIN}/approver`
        constructor(ctx: Context) {
          super(ctx, 'approver')
        }
        async approve(request: ApprovalRequest) {
          approvals.push(request)
          return answer(request)
        }
      },
    )
  }
  const hostFiber = await root.plugin({ name: HOST_PLUGIN, inject: SPINE, apply() {} })
  const ctx = hostFiber.ctx
  const defaultCwd = options.cwd ?? process.cwd()

  const created: Created[] = []
  ctx.on('agent/created', ({ agent }) => {
    created.push({ kind: 'agent', id: agent.id, value: agent })
  })
  ctx.on('session/created', session => {
    created.push({ kind: 'session', id: session.id, value: session })
  })

  const adapters: ScriptedAdapter[] = []
  let adapter!: ScriptedAdapter
  let registration: AdapterRegistration | undefined
  const scriptedModel = (script: readonly ScriptEntry[] = []) => {
    const next = new ScriptedAdapter({ provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, script })
    registration?.()
    registration = ctx.llm.registerAdapter([SCRIPTED_PROVIDER], next)
    adapters.push(next)
    return (adapter = next)
  }
  scriptedModel(options.script)

  const hostIds = new Set<string>()
  let counter = 0
  const createAgent = (kind: string, cwd: string) => {
    const id = `testkit-${kind}-${++counter}`
    hostIds.add(id)
    return ctx.agents.create(id, { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd })
  }
  const assemble = (agent: Agent) => ctx.systemPrompt.assemble({ agent, scope: agent })
  /** Assembles for a throwaway agent with that cwd, disposed afterwards. */
  const probe = async <T>(cwd: string, read: (assembly: PromptAssembly) => T): Promise<T> => {
    const agent = createAgent('probe', cwd)
    try {
      return read(await assemble(agent))
    } finally {
      await agent.dispose()
    }
  }

  const toolAgents = new Map<string, Agent>()
  const agentFor = (cwd = defaultCwd) => {
    const existing = toolAgents.get(cwd)
    if (existing && ctx.agents.get(existing.id) === existing) return existing
    const agent = createAgent('tools', cwd)
    toolAgents.set(cwd, agent)
    return agent
  }

  const records = new WeakMap<Mounted, MountRecord>()
  const live = new Set<MountRecord>()
  const hooks = () => allHooks(root)

  /** The live fibers of the registry under `ancestor` (itself excluded). */
  const descendants = (ancestor: Fiber) => {
    const found: { fiber: Fiber; name?: string }[] = []
    for (const runtime of root.registry.values()) {
      for (const fiber of runtime.fibers) {
        if (fiber !== ancestor && fiber.uid !== null && within(fiber, ancestor)) found.push({ fiber, name: runtime.name })
      }
    }
    return found
  }

  /** Tool names the plugin's fiber tree holds registrations for. */
  const heldTools = (fiber: Fiber) => new Set([fiber, ...descendants(fiber).map(d => d.fiber)].flatMap(toolsOf))
  /** Tool name → the plugin whose fiber holds its registration (from effect labels). */
  const toolHolders = () => {
    const holders = new Map<string, string>()
    for (const runtime of root.registry.values()) {
      for (const fiber of runtime.fibers) {
        if (fiber.uid === null) continue
        for (const name of toolsOf(fiber)) holders.set(name, fiber.name)
      }
    }
    return holders
  }
  const refreshClaims = (record: MountRecord) => {
    if (record.fiber.uid === null) return
    for (const name of heldTools(record.fiber)) record.claims.add(`tool:${name}`)
  }

  const mount = async (plugin: Plugin, config?: unknown): Promise<Mounted> => {
    const label = pluginLabel(plugin)
    const baseline = await probe(defaultCwd, keysOf)
    const globalTools = new Set(ctx.tools.schemas().map(tool => tool.name))
    const agentsBefore = new Map<Agent, Keys>()
    for (const agent of ctx.agents.list()) agentsBefore.set(agent, keysOf(await assemble(agent)))
    const record: MountRecord = {
      plugin,
      fiber: undefined as unknown as Fiber,
      name: label,
      cwd: defaultCwd,
      baseline,
      claims: new Set(),
      hooksBefore: new Set(hooks()),
      timeoutsBefore: activeTimeouts(),
      agentsBefore,
      createdFrom: created.length,
      timers: [],
    }

    let loading: (Fiber & PromiseLike<Fiber>) | undefined
    try {
      await attributeTimers(record, async () => {
        loading = root.plugin(plugin, config as never)
        await loading
      })
    } catch (error) {
      if (loading) await settleDispose(loading)
      throw new Error(`plugin "${label}" failed to start: ${messageOf(error)}`, { cause: error })
    }
    const fiber = Object.getPrototypeOf(loading) as Fiber
    record.fiber = fiber
    record.name = fiber.name
    if (fiber.state === PENDING) {
      const missing = Object.keys(fiber.inject).filter(service => root.get(service) === undefined)
      await settleDispose(fiber)
      throw new Error(
        missing.length
          ? `plugin "${record.name}" did not start: it waits for services that no loaded plugin provides: ${missing.join(', ')} (mount the plugins that provide them first)`
          : `plugin "${record.name}" did not start`,
      )
    }

    // What appeared while the plugin loaded is its, whatever context it used.
    const after = await probe(defaultCwd, keysOf)
    for (const [key, owner] of after) if (!unchanged(record, key, owner)) record.claims.add(key)
    for (const tool of ctx.tools.schemas()) if (!globalTools.has(tool.name)) record.claims.add(`tool:${tool.name}`)
    refreshClaims(record)
    live.add(record)

    let disposal: Promise<void> | undefined
    const mounted: Mounted = {
      ctx: fiber.ctx,
      fiber,
      name: record.name,
      config: fiber.config,
      delta: deltaOptions => delta(record, deltaOptions),
      dispose: () =>
        (disposal ??= (async () => {
          refreshClaims(record)
          await attributeTimers(record, () => settleDispose(fiber))
          record.createdTo = created.length
          live.delete(record)
        })()),
    }
    records.set(mounted, record)
    return mounted
  }

  const delta = async (record: MountRecord, deltaOptions: DeltaOptions = {}): Promise<PromptDelta> => {
    if (record.fiber.uid === null) throw new Error(`plugin "${record.name}" is disposed: it has no prompt delta`)
    refreshClaims(record)
    const others = [...live].filter(other => other !== record && other.fiber.uid !== null)
    const otherNames = new Set(others.map(other => other.name).filter(name => name !== record.name))
    const mine = (key: string, owner: string | undefined) => {
      if (owner === record.name) return true
      // As before the mount (a built-in the plugin overrides only for some agents, say).
      if (unchanged(record, key, owner)) return false
      if (record.claims.has(key)) return true
      // Added later (per agent, on an event): the plugin's unless another plugin claims it.
      if (owner !== undefined && otherNames.has(owner)) return false
      return !others.some(other => other.claims.has(key))
    }
    return probe(deltaOptions.cwd ?? defaultCwd, assembly => {
      const entry =
        (kind: 'section' | 'context') =>
        (item: PromptAssembly['sections'][number]): PromptDeltaEntry => ({
          name: item.name,
          order: item.order,
          stability: item.stability,
          text: item.text,
          rendered: item.literal ? item.text : interpolate(item.text, assembly.variables, kind, item.name),
          ...(item.literal && { literal: true as const }),
        })
      return {
        sections: assembly.sections.filter(s => mine(`section:${s.name}`, s.owner)).map(entry('section')),
        contexts: assembly.contexts.filter(c => mine(`context:${c.name}`, c.owner)).map(entry('context')),
        tools: assembly.tools.filter(t => mine(`tool:${t.name}`, t.owner)).map(({ name, description, parameters }) => ({ name, description, parameters })),
        variables: Object.keys(assembly.variables)
          .filter(name => mine(`variable:${name}`, assembly.variableInfo[name]?.owner))
          .map(name => ({ name, value: assembly.variables[name], stability: assembly.variableInfo[name]?.stability ?? 'session' })),
      }
    })
  }

  const residue = async (mounted: Mounted): Promise<string[]> => {
    const record = records.get(mounted)
    if (!record) throw new Error('assertZeroResidue() takes what host.mount() returned on this host')
    const { fiber, name } = record
    const findings: string[] = []
    const add = (finding: string) => {
      if (!findings.includes(finding)) findings.push(finding)
    }

    // The fiber and the registry.
    if (fiber.uid !== null) add('the plugin is still loaded (call mounted.dispose() first)')
    const runtime = root.registry.get(record.plugin)
    if (runtime && [...runtime.fibers].includes(fiber)) add('the plugin is still in the registry')
    const effects = effectLabels(fiber.getEffects())
    if (effects.length) add(`its fiber still holds ${effects.length} effect(s): ${effects.join(', ')}`)
    else if (fiber._disposables.length) add(`its fiber still holds ${fiber._disposables.length} effect(s)`)
    for (const child of descendants(fiber)) add(`a child fiber (${child.name ? `plugin "${child.name}"` : 'a scope'}) is still loaded`)

    // The prompt: entries it owns, or that appeared when it was mounted.
    const fresh = new Map<string, Keys>()
    const freshKeys = async (cwd: string) => {
      if (!fresh.has(cwd)) fresh.set(cwd, await probe(cwd, keysOf))
      return fresh.get(cwd)!
    }
    const holders = toolHolders()
    const stillRegistered = (key: string, owner: string | undefined) => {
      const tool = key.startsWith('tool:') ? holders.get(key.slice(5)) : undefined
      const by = tool ? ` (through plugin "${tool}")` : owner && owner !== TOOLS_OWNER ? ` (owner "${owner}")` : ''
      add(`${describeKey(key)} is still registered${by}`)
    }
    const reported = new Set<string>()
    try {
      for (const [key, owner] of await freshKeys(record.cwd)) {
        if (owner !== name && (!record.claims.has(key) || unchanged(record, key, owner))) continue
        reported.add(key)
        stillRegistered(key, owner)
      }
    } catch (error) {
      add(`the prompt cannot be assembled: ${messageOf(error)}`)
    }
    for (const tool of ctx.tools.schemas()) {
      const key = `tool:${tool.name}`
      if (record.claims.has(key) && !reported.has(key) && !record.baseline.has(key)) stillRegistered(key, undefined)
    }

    // Scope layers: what live agents see that a fresh agent does not.
    for (const agent of ctx.agents.list()) {
      let keys: Keys
      try {
        keys = keysOf(await assemble(agent))
      } catch (error) {
        add(`the prompt of agent "${agent.id}" cannot be assembled: ${messageOf(error)}`)
        continue
      }
      const known = hostIds.has(agent.id) || record.agentsBefore.has(agent)
      if (!known) {
        for (const [key, owner] of keys) if (owner === name) add(`${describeKey(key)} in the scope of agent "${agent.id}" (owner "${owner}")`)
        continue
      }
      let reference: Keys
      try {
        reference = await freshKeys(agent.session.header.cwd ?? defaultCwd)
      } catch {
        continue // already reported above
      }
      const before = record.agentsBefore.get(agent)
      for (const [key, owner] of keys) {
        if (reference.has(key) && reference.get(key) === owner) continue
        if (before?.has(key) && before.get(key) === owner) continue
        add(`${describeKey(key)} in the scope of agent "${agent.id}" (owner "${owner ?? '?'}")`)
      }
      for (const key of reference.keys()) {
        if (keys.has(key) || (before && !before.has(key))) continue
        add(`agent "${agent.id}" no longer sees ${describeKey(key)} that a fresh agent sees (a restriction or suppression left in its scope)`)
      }
    }

    // Listeners: of the plugin's fiber tree, or added on the root (or a dead context) since it was mounted.
    for (const [event, list] of Object.entries(hookTable(root))) {
      for (const hook of list as Hook[]) {
        const owner = hook.ctx.fiber
        if (within(owner, fiber)) add(`a listener of "${event}" registered through the plugin's context`)
        else if (!record.hooksBefore.has(hook) && owner === root.fiber) add(`a listener of "${event}" registered on the root context (ctx.root.on)`)
        else if (!record.hooksBefore.has(hook) && owner.uid === null) add(`a listener of "${event}" registered through a disposed context`)
      }
    }

    // Agents and sessions created while it was mounted (not by the kit) that are still alive.
    const end = record.createdTo ?? created.length
    const agentIds = new Set(created.filter(item => item.kind === 'agent').map(item => item.id))
    for (const item of created.slice(record.createdFrom, end)) {
      if (hostIds.has(item.id)) continue
      if (item.kind === 'agent' && ctx.agents.get(item.id) === item.value) add(`agent "${item.id}" (created while the plugin was mounted) is still alive`)
      if (item.kind === 'session' && !agentIds.has(item.id) && ctx.sessions.get(item.id) === item.value) {
        add(`session "${item.id}" (created while the plugin was mounted) is still live`)
      }
    }

    // Timers: those its code created that are still scheduled, and the process-wide count.
    await new Promise(resolve => setImmediate(resolve))
    const timers = liveTimers(record)
    const kinds = new Map<string, number>()
    for (const timer of timers) kinds.set(describeTimer(timer), (kinds.get(describeTimer(timer)) ?? 0) + 1)
    for (const [kind, count] of kinds)
      add(count === 1 ? `a timer it created is still scheduled: ${kind}` : `${count} timers it created are still scheduled: ${kind}`)
    const extra = activeTimeouts() - record.timeoutsBefore - timers.filter(timer => timer.hasRef()).length
    if (extra > 0) add(`${extra} more active timer handle(s) (Timeout) than before the plugin was mounted`)
    return findings
  }

  const host: Host = {
    root,
    ctx,
    get adapter() {
      return adapter
    },
    logs,
    approvals,
    cwd: defaultCwd,
    mount,
    residue,
    async assertZeroResidue(mounted) {
      const findings = await residue(mounted)
      if (!findings.length) return
      const name = records.get(mounted)!.name
      const error = new Error(`plugin "${name}" left residue after dispose:\n${findings.map(finding => `  - ${finding}`).join('\n')}`)
      throw Object.assign(error, { residue: findings })
    },
    manifest({ cwd = defaultCwd } = {}) {
      return probe(cwd, assembly => buildManifest({ assembly }))
    },
    async assertStablePrompt({ cwd = defaultCwd, times = 3 } = {}) {
      const strict = ctx.systemPrompt.enforceStability('error')
      const agent = createAgent('stable', cwd)
      try {
        for (let i = 0; i < times; i++) {
          // Apart by a few ms, so a clock read in a contribution has moved.
          if (i > 0) await new Promise(resolve => setTimeout(resolve, 3))
          await assemble(agent)
        }
      } finally {
        strict()
        await agent.dispose()
      }
    },
    callTool(name, args = {}, callOptions = {}) {
      const agent = agentFor(callOptions.cwd)
      // Timers the body starts are attributed to the plugin that registered the tool.
      const owner = [...live].find(record => record.fiber.uid !== null && heldTools(record.fiber).has(name))
      return attributeTimers(owner ?? { timers: [] }, () =>
        ctx.tools.execute({
          callId: `testkit-call-${++counter}`,
          name,
          arguments: args,
          agent,
          scope: agent,
          signal: callOptions.signal ?? new AbortController().signal,
        }),
      )
    },
    scriptedModel,
    async run(prompt, runOptions = {}) {
      const agent = createAgent('run', runOptions.cwd ?? defaultCwd)
      agent.followup(typeof prompt === 'string' ? userText(prompt) : prompt)
      await agent.idle()
      const events = agent.session.events
      const requests = adapters.flatMap(a => a.requests).filter(request => request.sessionId === agent.id)
      return { agent, events, requests, text: lastAssistantText(events), reason: lastTurnEnd(events) }
    },
    snapshot: snapshotRequest,
    agent: agentFor,
    async dispose() {
      // Newest first: mounted plugins, the host, then the services.
      const fibers = [...root.registry.values()]
        .flatMap(runtime => [...runtime.fibers])
        .filter(fiber => fiber.parent === root && fiber.uid !== null)
        .sort((a, b) => (b.uid ?? 0) - (a.uid ?? 0))
      for (const fiber of fibers) await settleDispose(fiber)
      stopTimers()
    },
  }
  return host
}

/** The entry is in the assembly from before the mount, with the same owner. */
function unchanged(record: MountRecord, key: string, owner: string | undefined): boolean {
  return record.baseline.has(key) && record.baseline.get(key) === owner
}

/** Disposes a fiber and waits until its teardown settled. */
async function settleDispose(fiber: Fiber) {
  if (fiber.uid !== null) await fiber.dispose()
  while (fiber.inertia) await fiber.inertia
}

/** `fiber` is `ancestor` or lives under it. */
function within(fiber: Fiber, ancestor: Fiber): boolean {
  for (let current = fiber; ; current = current.parent.fiber) {
    if (current === ancestor) return true
    if (current.parent.fiber === current) return false
  }
}

function hookTable(root: Context): Record<string, Hook[]> {
  return (root.events as unknown as { _hooks: Record<string, Hook[]> })._hooks
}

function allHooks(root: Context): Hook[] {
  return Object.values(hookTable(root)).flat()
}

function effectLabels(effects: readonly { label: string; children: unknown[] }[]): string[] {
  return effects.flatMap(effect => [effect.label, ...effectLabels(effect.children as typeof effects)])
}

/** Tool names registered through this fiber's own context (from its effect labels). */
function toolsOf(fiber: Fiber): string[] {
  return effectLabels(fiber.getEffects()).flatMap(label => {
    const match = /^tools\.register\((".*")\)$/.exec(label)
    return match ? [JSON.parse(match[1]) as string] : []
  })
}

function keysOf(assembly: PromptAssembly): Keys {
  const keys: Keys = new Map()
  for (const s of assembly.sections) keys.set(`section:${s.name}`, s.owner)
  for (const c of assembly.contexts) keys.set(`context:${c.name}`, c.owner)
  for (const t of assembly.tools) keys.set(`tool:${t.name}`, t.owner)
  for (const name of Object.keys(assembly.variables)) keys.set(`variable:${name}`, assembly.variableInfo?.[name]?.owner)
  return keys
}

function describeKey(key: string): string {
  const at = key.indexOf(':')
  const kind = key.slice(0, at)
  const name = key.slice(at + 1)
  return kind === 'variable' ? `prompt variable "{{${name}}}"` : kind === 'tool' ? `tool "${name}"` : `prompt ${kind} "${name}"`
}

function pluginLabel(plugin: Plugin): string {
  const name = (plugin as { name?: unknown })?.name
  return typeof name === 'string' && name !== '' && name !== 'apply' ? name : 'anonymous plugin'
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function formatArg(arg: unknown): string {
  if (typeof arg === 'string') return arg
  if (arg instanceof Error) return arg.stack ?? arg.message
  return inspect(arg, { depth: 4 })
}

function lastAssistantText(events: readonly SessionEvent[]): string {
  const content = lastEventOfType(events, 'assistant/message')?.data.message.content ?? []
  return content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

function lastTurnEnd(events: readonly SessionEvent[]): TurnEndReason | undefined {
  return lastEventOfType(events, 'turn/end')?.data.reason
}
