import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { AnonymousEntries, NamedEntries, ScopedLayers, scopeTarget, serviceLookup, untraced, type Scoped, type ScopeKey } from '@loom/scope'
import { compareCodeUnits } from '@loom/system-prompt'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Approvals, type ToolFacts } from './approval.ts'
import { Artifacts, MemoryArtifactStorage, type ArtifactLimits, type ArtifactStorage } from './artifacts.ts'
import { DEFAULT_DECISION, parseArguments, ToolCallRun, type CallHost } from './call.ts'
import { compileTool, TOOL_EFFECTS, type CompiledTool } from './define.ts'
import { CREDENTIAL_STORES, protectedDecision, protectionOf, resolveProtected, type ProtectedPath } from './protect.ts'
import { readDenial, type ReadRule, type ReadRules } from './workspace/read-policy.ts'
import type {
  Approver,
  ExecutionMode,
  PostToolDecision,
  PreToolDecision,
  ToolCallInput,
  ToolDefinition,
  ToolEffect,
  ToolExecutionResult,
  ToolRunContext,
  ToolSchema,
} from './types.ts'

const PACKAGE = '@loom/tools'

declare module '@deepseek-ai/cordis' {
  interface Context {
    tools: ToolRuntime
    /** Optional: answers the `ask` decisions of pre-execute listeners (see `Approver`). */
    approver: Approver
  }
  interface Events {
    /** Per call, before the body; routed to listeners of the call's scope and its ancestors. Default `{ kind: 'allow' }`. */
    'tools/pre-execute'(this: Scoped<ToolRuntime>, exec: ToolRunContext, next: () => Promise<PreToolDecision>): PreToolDecision | Promise<PreToolDecision>
    /** Around the body (lookup, argument validation, timeout included). */
    'tools/execute'(
      this: Scoped<ToolRuntime>,
      exec: ToolRunContext,
      next: () => Promise<ToolExecutionResult>,
    ): ToolExecutionResult | Promise<ToolExecutionResult>
    /** Per call, at commit; sees every dispatched or denied call, aborted ones included. Default `{ kind: 'accept' }`. */
    'tools/post-execute'(
      this: Scoped<ToolRuntime>,
      exec: ToolRunContext,
      result: ToolExecutionResult,
      next: () => Promise<PostToolDecision>,
    ): PostToolDecision | Promise<PostToolDecision>
    /** The final frozen result of every call that went through the pipeline. Listener failures are logged. */
    'tools/result'(this: Scoped<ToolRuntime>, exec: ToolRunContext, result: ToolExecutionResult): void
    /** After every registration and removal of a tool or a restriction, in any scope. */
    'tools/change'(): void
  }
}

/** A registration as stored: the value plus the plugin that owns it. */
interface Entry<T> {
  value: T
  owner: string
}

type Predicate = (name: string) => boolean

class ToolLayer {
  readonly scoped: boolean
  readonly tools: NamedEntries<Entry<CompiledTool>>
  readonly restrictions = new AnonymousEntries<Entry<Predicate>>()

  constructor(scoped: boolean) {
    this.scoped = scoped
    this.tools = new NamedEntries(name => new Error(`tool "${name}" is already registered ${this.where}`))
  }

  get where() {
    return this.scoped ? 'in this scope' : 'globally'
  }

  isEmpty() {
    return this.tools.isEmpty() && this.restrictions.isEmpty()
  }
}

/** Internal entry point of the scheduler: a call split into its phases. */
export const beginCall: unique symbol = Symbol('loom.tools.begin')

/**
 * The tool registry and execution pipeline (ctx key `tools`). Registrations are
 * effects on the caller's fiber and land in the caller's scope layer; a scope
 * sees the global tools and those of its parent chain, the nearest shadowing by
 * name, minus whatever a restriction on the way removes. The runtime is the one
 * system-prompt tool provider for all of them, so what the model is shown and
 * what can run are decided by the same lookup.
 */
export class ToolRuntime extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = PACKAGE
  static readonly inject = ['systemPrompt']
  static readonly Config: Schema<ToolRuntimeConfig> = Schema.object({
    protect: Schema.array(String)
      .default([])
      .description(
        'More paths no tool call may change unasked (relative to the project folder, or ~/...), besides the ones Loom protects itself: its config layers, .loom/, $LOOM_HOME, git hooks and config, plugins mounted by path.',
      ),
    denyRead: Schema.array(String)
      .default([])
      .description(
        "More paths no tool may read (relative to the project folder, or ~/...), besides the credential stores Loom keeps from them (~/.ssh, ~/.aws, ~/.docker/config.json, ~/.netrc, ~/.npmrc, ...); the shell's sandbox hides them.",
      ),
    allowRead: Schema.array(String)
      .default([])
      .description(
        'Paths tools may read although denyRead or a default credential store covers them (relative to the project folder, or ~/...), e.g. ~/.ssh/known_hosts, or ~/.config/gh for gh in the sandbox. The nearest rule decides.',
      ),
    artifacts: Schema.object({
      maxBytes: Schema.natural()
        .min(1)
        .default(2 * 1024 * 1024)
        .description(
          'Bytes one artifact keeps at most: the whole output of a tool call over its limit (bash, grep, web_fetch, MCP tools), which the model reads back with `read`. A longer output keeps its head and tail.',
        ),
      sessionMaxBytes: Schema.natural()
        .min(1)
        .default(10 * 1024 * 1024)
        .description("Bytes of artifacts one session keeps at most, in the session's store; past it the oldest are removed first."),
    }).description('Long tool output kept whole with the session (artifacts).'),
  }) as Schema<ToolRuntimeConfig>

  private readonly layers: ScopedLayers<ToolLayer>
  private readonly approvals: Approvals
  private readonly guarded = new Set<ProtectedPath>()
  private readonly readRuleSets = { deny: new Set<ReadRule>(), allow: new Set<ReadRule>() }
  /** The rules as one frozen snapshot, rebuilt after a change: tools check every call against it. */
  private readRuleCache: ReadRules | undefined
  /**
   * Long tool output kept whole with the calling session (see `@loom/tools/artifacts`): in the
   * session store's `artifacts` (`ctx.sessionPersistence.artifacts`), else in this process's memory
   * until the session is disposed.
   */
  readonly artifacts: Artifacts
  /** Every call's events are dispatched through it: looked up once (see `untraced`). */
  private readonly events: Context['events']
  /** Looked up per ask and per call, not injected: an approver coming or going must not restart the runtime. */
  private readonly approver: () => Context['approver'] | undefined

  constructor(ctx: Context, config: Partial<ToolRuntimeConfig> = {}) {
    super(ctx, 'tools')
    this.events = untraced(ctx.events)
    const memory = new MemoryArtifactStorage()
    // Looked up at each use: the session store may come (or be reloaded) after the runtime.
    const storage = () => (ctx.get('sessionPersistence' as never) as { artifacts?: ArtifactStorage } | undefined)?.artifacts ?? memory
    this.artifacts = new Artifacts(storage, { ...DEFAULT_ARTIFACT_LIMITS, ...config.artifacts })
    // `session/disposed` is declared by @loom/session, which this package does not depend on.
    ;(ctx.on as (name: string, listener: (session: { id: string }) => void) => () => void)('session/disposed', session => memory.drop(session.id))
    this.layers = new ScopedLayers(
      scope => new ToolLayer(scope !== undefined),
      () => this.notify(undefined, 'tools/change', []),
    )
    this.approver = serviceLookup(ctx, 'approver')
    this.approvals = new Approvals(this.approver)
    ctx.systemPrompt.tools(context => this.provide(context.scope))
    for (const path of config.protect ?? []) this.protect(configuredPath(path, ctx.baseUrl), 'the deployment lists it under protect (@loom/tools)')
    for (const [path, holds] of CREDENTIAL_STORES) this.denyRead(join(homedir(), path), `a credential store: ${holds}`)
    for (const path of config.denyRead ?? []) this.denyRead(configuredPath(path, ctx.baseUrl), 'the deployment lists it under denyRead (@loom/tools)')
    for (const path of config.allowRead ?? []) this.allowRead(configuredPath(path, ctx.baseUrl), 'the deployment lists it under allowRead (@loom/tools)')
  }

  /**
   * Registers a tool in the caller's scope, for the caller's lifetime. A plain
   * definition is checked and compiled here (see `defineTool`). A name already
   * registered in the same layer throws, naming both plugins.
   */
  register(def: ToolDefinition): () => void {
    const tool = compileTool(def)
    const owner = this.ctx.fiber.name
    return this.layers.effect(
      this.ctx,
      layer => {
        const existing = layer.tools.get(tool.name)
        if (existing) {
          const hint = layer.scoped ? '' : " (to override it for one agent, register through that agent's ctx)"
          throw new Error(
            `tool "${tool.name}" is already registered ${layer.where} by plugin "${existing.owner}"; plugin "${owner}" cannot register it again${hint}`,
          )
        }
        return layer.tools.insert(tool.name, { value: tool, owner })
      },
      { label: `tools.register(${JSON.stringify(tool.name)})` },
    )
  }

  /**
   * While held, the caller's scope and its descendants only see (and run) the
   * tools the filter allows. Restrictions stack: a name must pass every one.
   */
  restrict(allow: readonly string[] | ((name: string) => boolean)): () => void {
    let predicate: Predicate
    if (typeof allow === 'function') {
      predicate = name => Boolean(allow(name))
    } else if (Array.isArray(allow) && allow.every(name => typeof name === 'string')) {
      const names = new Set(allow)
      predicate = name => names.has(name)
    } else {
      throw new TypeError('tools.restrict() takes an array of tool names or a predicate (name) => boolean')
    }
    const owner = this.ctx.fiber.name
    return this.layers.effect(this.ctx, layer => layer.restrictions.append({ value: predicate, owner }), { label: 'tools.restrict' })
  }

  /**
   * Protects a path (a folder: everything below it) for the caller's lifetime: a tool
   * call that declares it would write there is asked about first, ahead of every
   * pre-execute listener, and refused where nobody can answer (see `ToolDefinition.writes`).
   * The shell's sandbox mounts the protected paths that exist read-only.
   */
  protect(path: string, reason: string): () => void {
    const entry: ProtectedPath = Object.freeze({ path: resolveProtected(path), reason, owner: this.ctx.fiber.name })
    return this.ctx.effect(
      () => {
        this.guarded.add(entry)
        return () => this.guarded.delete(entry)
      },
      `tools.protect(${JSON.stringify(entry.path)})`,
    ) as () => void
  }

  /** Every protected path, in the order they were protected. */
  protectedPaths(): ProtectedPath[] {
    return [...this.guarded]
  }

  /**
   * Keeps a path (a folder: everything below it) from every tool's reads for the caller's
   * lifetime: file tools refuse it, searches skip it, the shell's sandbox hides it. The runtime
   * itself denies the credential stores of `CREDENTIAL_STORES`.
   */
  denyRead(path: string, reason: string): () => void {
    return this.readRule('deny', path, reason)
  }

  /** Lets a path through although a deny rule above it covers it (the nearest rule decides), for the caller's lifetime. */
  allowRead(path: string, reason: string): () => void {
    return this.readRule('allow', path, reason)
  }

  /** The deny and allow rules in force, as one frozen snapshot (the same object until a rule comes or goes). */
  readRules(): ReadRules {
    this.readRuleCache ??= Object.freeze({
      deny: Object.freeze([...this.readRuleSets.deny]),
      allow: Object.freeze([...this.readRuleSets.allow]),
    })
    return this.readRuleCache
  }

  /** The deny rule that keeps `path` (absolute, symlinks resolved as the tool will follow them) from tools, or `undefined`. */
  readDenial(path: string): ReadRule | undefined {
    return readDenial(this.readRules(), path)
  }

  private readRule(kind: 'deny' | 'allow', path: string, reason: string): () => void {
    const rule: ReadRule = Object.freeze({ path: resolveProtected(path, `tools.${kind}Read()`), reason, owner: this.ctx.fiber.name })
    const rules = this.readRuleSets[kind]
    return this.ctx.effect(
      () => {
        rules.add(rule)
        this.readRuleCache = undefined
        return () => {
          rules.delete(rule)
          this.readRuleCache = undefined
        }
      },
      `tools.${kind}Read(${JSON.stringify(rule.path)})`,
    ) as () => void
  }

  /** The tools visible in `scope` (global only when omitted), sorted by name in code units. */
  schemas(scope?: object): ToolSchema[] {
    return this.allowedOf(this.visible(scope), scope)
  }

  /**
   * `parallel` only when the visible tool's `isConcurrencySafe` is `true` or returns
   * exactly `true` for schema-valid arguments; anything else (unknown tool, invalid
   * arguments, a throwing classifier) is `exclusive`.
   */
  executionMode(input: { name: string; arguments: unknown; scope?: object }): ExecutionMode {
    const tool = this.lookup(input.name, input.scope)
    if (!tool || tool.isConcurrencySafe === undefined || tool.isConcurrencySafe === false) return 'exclusive'
    const parsed = parseArguments(input.arguments)
    if (!parsed.ok || !tool.validate(parsed.value)) return 'exclusive'
    try {
      return tool.classify(parsed.value) === true ? 'parallel' : 'exclusive'
    } catch {
      return 'exclusive'
    }
  }

  /**
   * Runs one call through the whole pipeline. Tool failures (unknown tool, bad
   * arguments, a throwing body, a timeout, an abort, a denial) are error results;
   * only a failing hook or malformed input rejects.
   */
  async execute(input: ToolCallInput): Promise<ToolExecutionResult> {
    const run = this[beginCall](input)
    await run.prepare()
    if (run.needsDispatch) await run.dispatch()
    return run.finalize()
  }

  [beginCall](input: ToolCallInput): ToolCallRun {
    checkInput(input)
    const scope = input.scope
    const target = scopeTarget(this, scope)
    const host: CallHost = {
      lookup: name => this.lookup(name, scope),
      available: () => this.schemas(scope).map(schema => schema.name),
      preExecute: async exec =>
        (await this.guard(exec, scope)) ?? this.chain(target, 'tools/pre-execute', [exec], async (): Promise<PreToolDecision> => DEFAULT_DECISION),
      settleAsk: async (exec, ask) => this.approvals.settle(exec, ask, await this.aboutTool(exec, scope)),
      execute: (exec, inner) => this.chain(target, 'tools/execute', [exec], inner),
      postExecute: (exec, result) => this.chain(target, 'tools/post-execute', [exec, result], async (): Promise<PostToolDecision> => ({ kind: 'accept' })),
      emitResult: (exec, result) => this.notify(target, 'tools/result', [exec, result]),
    }
    return new ToolCallRun(host, input)
  }

  /**
   * What a call may do, as its tool declares for these arguments; `undefined` when unknown (no
   * such tool, no declaration, arguments it would refuse, a declaration that throws).
   */
  effectsOf(exec: Pick<ToolRunContext, 'name' | 'arguments' | 'scope'> & Partial<ToolRunContext>): readonly ToolEffect[] | undefined {
    const tool = this.lookup(exec.name, exec.scope)
    return tool && effectsOfCall(tool, exec as ToolRunContext)
  }

  /**
   * The runtime's own gate, ahead of every listener: an approver that allows only reads refuses
   * the rest; a write to a protected path, and a call its tool says needs a person, are asked
   * about. `undefined` lets the listeners decide.
   */
  private async guard(exec: ToolRunContext, scope: ScopeKey | undefined): Promise<PreToolDecision | undefined> {
    const tool = this.lookup(exec.name, scope)
    const readsOnly = this.approver()?.readsOnly
    if (readsOnly !== undefined && !isRead(tool && effectsOfCall(tool, exec))) {
      return { kind: 'deny', reason: `tool "${exec.name}" does more than read, and ${readsOnly}` }
    }
    // Arguments the body would refuse change nothing.
    if (!tool || !(tool.requiresApproval || (tool.writes && this.guarded.size > 0)) || !tool.validate(exec.arguments)) return undefined
    if (tool.writes && this.guarded.size > 0) {
      let paths: readonly string[] = []
      try {
        paths = await tool.writes(exec.arguments, exec)
      } catch {
        // A target it cannot resolve (outside the workspace, say) is refused by the body itself.
      }
      for (const path of paths) {
        // Resolved by the tool (where it will write); normalized here, not resolved again: a realpath
        // per call would cost more than the rest of the check together.
        const target = resolve(path)
        const entry = protectionOf(this.guarded, target)
        if (entry) return protectedDecision(exec.name, target, entry)
      }
    }
    const need = tool.requiresApproval?.(exec.arguments, exec)
    return need && { kind: 'ask', ...need }
  }

  /** What an approval question shows about the tool besides the call: its effects, who acts, whether it may destroy data, where it writes. */
  private async aboutTool(exec: ToolRunContext, scope: ScopeKey | undefined): Promise<ToolFacts> {
    const tool = this.lookup(exec.name, scope)
    if (!tool) return {}
    const effects = effectsOfCall(tool, exec)
    let writes: readonly string[] | undefined
    try {
      writes = tool.writes && tool.validate(exec.arguments) ? await tool.writes(exec.arguments, exec) : undefined
    } catch {
      // A target it cannot resolve is refused by the body itself; the question goes without it.
    }
    return {
      ...(effects && { effects }),
      ...(tool.origin !== undefined && { origin: tool.origin }),
      ...(tool.destructive !== undefined && { destructive: tool.destructive }),
      ...(writes?.length && { writes }),
    }
  }

  /** The system-prompt provider: restricted schemas, every visible name as known. */
  private provide(scope: ScopeKey | undefined) {
    const visible = this.visible(scope)
    // Each schema names the plugin that registered its tool, so manifests and
    // cache-break reports attribute tools to their plugins, not to this runtime.
    const schemas = this.allowedOf(visible, scope).map(schema => ({ ...schema, owner: visible.get(schema.name)!.owner }))
    return { schemas, knownNames: [...visible.keys()] }
  }

  /** Global then the scope's chain, nearest winning by name. */
  private visible(scope: ScopeKey | undefined): Map<string, Entry<CompiledTool>> {
    return this.layers.merge(scope, layer => layer.tools)
  }

  private predicates(scope: ScopeKey | undefined): Predicate[] {
    return [this.layers.global, ...this.layers.chainLayers(scope)].flatMap(layer => [...layer.restrictions.values()].map(entry => entry.value))
  }

  private allowedOf(visible: Map<string, Entry<CompiledTool>>, scope: ScopeKey | undefined): ToolSchema[] {
    const predicates = this.predicates(scope)
    return [...visible.keys()]
      .filter(name => predicates.every(allows => allows(name)))
      .sort(compareCodeUnits)
      .map(name => {
        const { description, parameters } = visible.get(name)!.value
        return { name, description, parameters }
      })
  }

  /** The tool a call named `name` in `scope` would run, or `undefined`. */
  private lookup(name: string, scope: ScopeKey | undefined): CompiledTool | undefined {
    const layers = [this.layers.global, ...this.layers.chainLayers(scope)]
    let tool: CompiledTool | undefined
    for (let i = layers.length - 1; i >= 0 && !tool; i--) tool = layers[i].tools.get(name)?.value
    if (!tool) return undefined
    for (const layer of layers) {
      for (const { value: allows } of layer.restrictions.values()) if (!allows(name)) return undefined
    }
    return tool
  }

  /** A waterfall whose `next` always returns a promise, routed by `target`. */
  private chain<R>(target: Scoped<ToolRuntime>, name: keyof ToolEvents, args: unknown[], inner: () => Promise<R>): Promise<R> {
    const listeners = this.events.dispatch('waterfall', [target, name, ...args]) as ((...args: unknown[]) => unknown)[]
    const step = async (index: number): Promise<R> => {
      const listener = listeners[index]
      if (!listener) return inner()
      return (await listener(...args, () => step(index + 1))) as R
    }
    return step(0)
  }

  /** Calls each listener; a throw or rejection is logged, never reaches the caller. */
  private notify(target: Scoped<ToolRuntime> | undefined, name: 'tools/result' | 'tools/change', args: unknown[]) {
    const logger = this.ctx.logger('tools')
    const listeners = this.events.dispatch('emit', target ? [target, name, ...args] : [name, ...args]) as ((...args: unknown[]) => unknown)[]
    for (const listener of listeners) {
      try {
        const result = listener(...args)
        if (result instanceof Promise) result.catch(error => logger.error(error))
      } catch (error) {
        logger.error(error)
      }
    }
  }
}

export interface ToolRuntimeConfig {
  protect: string[]
  denyRead: string[]
  allowRead: string[]
  artifacts: ArtifactLimits
}

const DEFAULT_ARTIFACT_LIMITS: ArtifactLimits = { maxBytes: 2 * 1024 * 1024, sessionMaxBytes: 10 * 1024 * 1024 }

/** A configured path: `~/` is the home folder, a relative one is relative to the project folder (the context's base URL). */
function configuredPath(path: string, baseUrl: string | undefined): string {
  if (path === '~' || path.startsWith('~/')) return join(homedir(), path.slice(1))
  return resolve(baseUrl?.startsWith('file:') ? fileURLToPath(baseUrl) : process.cwd(), path)
}

/** A call's effects as its tool declares them; `undefined` when unknown. */
function effectsOfCall(tool: CompiledTool, exec: ToolRunContext): readonly ToolEffect[] | undefined {
  if (typeof tool.effects !== 'function') return tool.effects
  if (!tool.validate(exec.arguments)) return undefined
  try {
    const effects = tool.effects(exec.arguments, exec)
    return Array.isArray(effects) && effects.length > 0 && effects.every(effect => TOOL_EFFECTS.includes(effect)) ? effects : undefined
  } catch {
    return undefined
  }
}

/** Whether every effect is a read; unknown effects are not. */
export function isRead(effects: readonly ToolEffect[] | undefined): boolean {
  return effects !== undefined && effects.length > 0 && effects.every(effect => effect === 'read')
}

type ToolEvents = Record<'tools/pre-execute' | 'tools/execute' | 'tools/post-execute', unknown>

function checkInput(input: ToolCallInput) {
  if (typeof input !== 'object' || input === null) throw new TypeError('tools.execute() takes { callId, name, arguments, signal, agent?, scope? }')
  if (typeof input.callId !== 'string' || input.callId === '') throw new TypeError('tool call input needs a non-empty string callId')
  if (typeof input.name !== 'string') throw new TypeError(`tool call "${input.callId}" needs a string name`)
  if (!(input.signal instanceof AbortSignal)) throw new TypeError(`tool call "${input.callId}" needs an AbortSignal (signal)`)
  if (input.scope !== undefined && ((typeof input.scope !== 'object' && typeof input.scope !== 'function') || input.scope === null)) {
    throw new TypeError(`tool call "${input.callId}": scope must be an object`)
  }
}
