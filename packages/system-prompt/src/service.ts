import { Context, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { AnonymousEntries, NamedEntries, ScopedLayers, scopeTarget, untraced, type Scoped } from '@loom/scope'
import { allocate, BUDGET_NOTICE, type BudgetOverflow, type CategoryBudgets, categoryOf, type Omission, omissionNotice, type Placement } from './allocate.ts'
import { applyBudget, checkBudget } from './budget.ts'
import { type Assertion, CONFLICT_NOTICE, conflictNotice, declaredAssertions, findConflicts } from './conflicts.ts'
import { cloneParameters } from './clone.ts'
import { referencedVariables, VARIABLE_NAME } from './render.ts'
import { PromptUnstableError, StabilityCheck, type StabilityCheckMode } from './stability.ts'
import { compareCodeUnits, orderTools, validateToolOrder } from './tool-order.ts'
import type {
  AssembleContext,
  AssemblyAttribution,
  Attributed,
  Category,
  Trust,
  AssembledContext,
  AssembledSection,
  AssembledTool,
  PromptAssembly,
  PromptContext,
  PromptSection,
  Stability,
  ToolProvider,
  VariableInfo,
  VariableOptions,
  VariableProvider,
} from './types.ts'

export const PERSONA_SECTION = 'deployment:persona'
export const PERSONA_ORDER = 0
export const IDENTITY_SECTION = 'harness:identity'
export const IDENTITY_ORDER = -100
export const DEFAULT_IDENTITY = 'You are an AI agent powered by Loom.'
const PACKAGE = '@loom/system-prompt'
/** The identity and the persona stay under any budget that leaves room for them. */
const BUILT_IN_PRIORITY = 1000

declare module '@deepseek-ai/cordis' {
  interface Context {
    systemPrompt: SystemPrompt
  }
  interface Events {
    /** Waterfall around every assembly, routed to listeners of `context.scope` and its ancestors. */
    'system-prompt/assemble'(
      this: Scoped<SystemPrompt>,
      assembly: PromptAssembly,
      context: AssembleContext,
      next: () => Promise<PromptAssembly>,
    ): Promise<PromptAssembly>
    /** After every registration and every removal, in any layer. */
    'system-prompt/change'(): void
  }
}

/** A registration as stored: the value plus the plugin that owns it. */
interface Entry<T> {
  value: T
  owner: string
}

interface VariableEntry extends Entry<VariableProvider> {
  stability: Stability
}

class PromptLayer {
  private readonly scoped: boolean

  constructor(scoped: boolean) {
    this.scoped = scoped
  }

  readonly sections = new NamedEntries<Entry<PromptSection>>(name => this.duplicate('section', name))
  readonly contexts = new NamedEntries<Entry<PromptContext>>(name => this.duplicate('context', name))
  readonly variables = new NamedEntries<VariableEntry>(name => this.duplicate('variable', name))
  readonly toolProviders = new AnonymousEntries<Entry<ToolProvider>>()
  readonly suppressors = new AnonymousEntries<true>()

  isEmpty() {
    return this.sections.isEmpty() && this.contexts.isEmpty() && this.variables.isEmpty() && this.toolProviders.isEmpty() && this.suppressors.isEmpty()
  }

  private duplicate(kind: string, name: string) {
    const where = this.scoped
      ? 'in this scope'
      : kind === 'variable'
        ? "(for a per-agent value, register through that agent's `agent.ctx` instead)"
        : "(for a per-agent override, register through that agent's `agent.ctx` instead)"
    return new Error(`prompt ${kind} "${name}" is already registered ${where}`)
  }
}

function assertFiniteOrder(kind: 'section' | 'context', item: { name: string; order: number }) {
  if (!Number.isFinite(item.order)) {
    throw new TypeError(`prompt ${kind} "${item.name}" order must be a finite number`)
  }
}

function resolveText(text: PromptSection['text'], context: AssembleContext): string {
  return typeof text === 'function' ? text(context) : text
}

/** The trust of a contribution that declares none: `@loom/*` plugins are the product; the operator chose the rest. */
export function defaultTrust(owner: string): Trust {
  return owner.startsWith('@loom/') ? 'product' : 'deployment'
}

/** Trust, category and source of an entry: declared, else the defaults. */
function attribute(value: PromptSection | PromptContext, owner: string, category: Category, context: AssembleContext): Attributed {
  const source = typeof value.source === 'function' ? value.source(context) : value.source
  return { trust: value.trust ?? defaultTrust(owner), category: value.category ?? category, ...(source !== undefined && { source }) }
}

/** Sorts by order, then by name: equal orders never depend on load order. */
function byOrderThenName(a: { order: number; name: string }, b: { order: number; name: string }) {
  return a.order - b.order || compareCodeUnits(a.name, b.name)
}

export interface SystemPromptConfig {
  identity?: string
  includeHarnessIdentity?: boolean
  includeRuntimeContext?: boolean
  persona?: string
  toolOrder?: string[]
  /** What a contribution that changes with no registry change does: fail the assembly, warn, or nothing (see stability.ts). */
  stabilityCheck?: StabilityCheckMode
  /** Room per category of contribution, and for all of a step's sections and contexts together (see allocate.ts). */
  budgets?: CategoryBudgets
}

/**
 * The prompt registry. Plugins contribute sections, runtime contexts, tool
 * providers and variables through `ctx.systemPrompt`; each registration is an
 * effect on the caller's fiber and lands in the caller's scope layer. `assemble()`
 * builds one deterministic view for a scope.
 */
export class SystemPrompt extends Service {
  /** The plugin name (`fiber.name`), so what the plugin registers is owned by the package. */
  static override readonly name = PACKAGE
  static readonly Config: Schema<SystemPromptConfig> = Schema.object({
    identity: Schema.string().default(DEFAULT_IDENTITY).description('Text of the harness identity section (order -100).'),
    includeHarnessIdentity: Schema.boolean().default(true).description('Register the identity section.'),
    includeRuntimeContext: Schema.boolean().default(true).description('When false, runtime contexts are suppressed everywhere.'),
    persona: Schema.string().default('').description('Deployment persona (section "deployment:persona", order 0); a {{var}} template.'),
    // A union keeps an absent toolOrder absent (a bare array schema would default it to []).
    toolOrder: Schema.union([Schema.array(Schema.string()), Schema.const(undefined)]).description('Explicit tool order; must contain "<unlisted-tools>" once.'),
    budgets: Schema.object({
      maxChars: Schema.natural().min(1).description('Characters of all sections and contexts of a step together; categories above their floor give way.'),
      categories: Schema.dict(
        Schema.object({
          cap: Schema.natural().description('Most characters of this category in a step.'),
          floor: Schema.natural().description('Characters of this category that maxChars never takes away.'),
        }),
        Schema.union(['instructions', 'memory', 'skills', 'files', 'runtime', 'tools', 'tool-results'] as const),
      ).description('Per category (instructions, memory, skills, files, runtime): a cap and a floor in characters.'),
    }).description('Category budgets: what does not fit is left out, lowest priority, recoverable and oldest first, and named in one notice.'),
    stabilityCheck: Schema.union(['error', 'warn', 'off'] as const)
      .default('warn')
      .description(
        'A section or variable whose text changes between two assemblies with no registration change: error fails the assembly (loom dev and the test kit use it), warn logs it, off ignores it.',
      ),
  }) as Schema<SystemPromptConfig>

  readonly config: Required<Omit<SystemPromptConfig, 'toolOrder' | 'budgets'>> & Pick<SystemPromptConfig, 'toolOrder' | 'budgets'>
  private readonly layers: ScopedLayers<PromptLayer>
  private readonly warned = new Set<string>()
  private readonly stability = new StabilityCheck()
  /** The check's mode now: the config's, or a caller's override (`enforceStability`). */
  private readonly checking: { mode: StabilityCheckMode }
  /** Each assembly's waterfall is dispatched through it: looked up once (see `untraced`). */
  private readonly events: Context['events']

  constructor(ctx: Context, config: SystemPromptConfig = {}) {
    super(ctx, 'systemPrompt')
    this.events = untraced(ctx.events)
    this.config = {
      identity: config.identity ?? DEFAULT_IDENTITY,
      includeHarnessIdentity: config.includeHarnessIdentity ?? true,
      includeRuntimeContext: config.includeRuntimeContext ?? true,
      persona: config.persona ?? '',
      toolOrder: config.toolOrder,
      budgets: config.budgets,
      stabilityCheck: config.stabilityCheck ?? 'warn',
    }
    if (this.config.toolOrder) validateToolOrder(this.config.toolOrder)
    this.checking = { mode: this.config.stabilityCheck }
    const stability = this.stability
    this.layers = new ScopedLayers(
      scope => new PromptLayer(scope !== undefined),
      () => {
        stability.registryChanged()
        ctx.emit('system-prompt/change')
      },
    )

    // Built-ins belong to the service's own lifetime.
    if (this.config.includeHarnessIdentity) {
      this.section({ name: IDENTITY_SECTION, order: IDENTITY_ORDER, text: this.config.identity, priority: BUILT_IN_PRIORITY })
    }
    // The operator's words: the deployment's, though the product registers them.
    this.section({ name: PERSONA_SECTION, order: PERSONA_ORDER, text: this.config.persona, trust: 'deployment', priority: BUILT_IN_PRIORITY })
    if (!this.config.includeRuntimeContext) this.suppressRuntimeContext()
  }

  /** Name of the plugin whose context is calling: the owner of its registrations. */
  private get caller(): string {
    return this.ctx.fiber.name
  }

  section(section: PromptSection): () => void {
    assertFiniteOrder('section', section)
    checkBudget(section.name, section.budget, 'section')
    if (section.stability === 'step') {
      throw new TypeError(
        `prompt section "${section.name}" cannot be step-stable: a fact that changes between steps belongs in a runtime context (ctx.systemPrompt.context)`,
      )
    }
    const entry = { value: section, owner: this.caller }
    return this.layers.effect(this.ctx, layer => layer.sections.insert(section.name, entry), { label: 'systemPrompt.section' })
  }

  context(context: PromptContext): () => void {
    assertFiniteOrder('context', context)
    checkBudget(context.name, context.budget, 'context')
    const entry = { value: context, owner: this.caller }
    return this.layers.effect(this.ctx, layer => layer.contexts.insert(context.name, entry), { label: 'systemPrompt.context' })
  }

  /** While registered, assemblies of this scope and its descendants carry no runtime contexts. */
  suppressRuntimeContext(): () => void {
    return this.layers.effect(this.ctx, layer => layer.suppressors.append(true), { label: 'systemPrompt.suppressRuntimeContext' })
  }

  tools(provider: ToolProvider): () => void {
    const entry = { value: provider, owner: this.caller }
    return this.layers.effect(this.ctx, layer => layer.toolProviders.append(entry), { label: 'systemPrompt.tools' })
  }

  variable(name: string, provider: VariableProvider, options: VariableOptions = {}): () => void {
    if (!VARIABLE_NAME.test(name)) {
      throw new Error(`invalid prompt variable name "${name}" (must match ${VARIABLE_NAME})`)
    }
    const entry = { value: provider, owner: this.caller, stability: options.stability ?? 'session' }
    return this.layers.effect(this.ctx, layer => layer.variables.insert(name, entry), { label: 'systemPrompt.variable' })
  }

  /**
   * The next assembly for `scope` starts a new stability baseline: a change its
   * owner announces (an agent's route switch changes `{{model}}`) did not happen
   * on its own, and is not reported as an instability.
   */
  rebaseStability(scope: object): void {
    this.stability.forget(scope)
  }

  /**
   * Sets the stability check's mode while the caller's fiber lives, then restores
   * the previous one: `loom dev` turns it to `error`, so an unstable plugin fails
   * its turn with the culprit named instead of quietly costing cache hits.
   */
  enforceStability(mode: StabilityCheckMode): () => void {
    const { checking } = this
    return this.ctx.effect(() => {
      const previous = checking.mode
      checking.mode = mode
      return () => {
        checking.mode = previous
      }
    }, 'systemPrompt.enforceStability') as () => void
  }

  /**
   * Builds the view of `context.scope`: the global layer, then the existing layers
   * of its parent chain, nearest winning by name. Always asynchronous: every
   * failure is a rejection. The signal is passed through, never checked.
   */
  async assemble(context: AssembleContext = {}): Promise<PromptAssembly> {
    const { scope } = context
    // `this` is the framework's tracing proxy: read what is needed once.
    const { layers: registry, config, stability, checking } = this
    const warn = (message: string, key?: string) => this.warnOnce(message, key)
    const layers = [registry.global, ...registry.chainLayers(scope)]
    const suppressed = layers.some(layer => !layer.suppressors.isEmpty())

    // Variables first: every provider runs, shadowed ones included (global first).
    const resolved = new Map<string, { value: string | undefined; info: VariableInfo }>()
    for (const layer of layers) {
      for (const [name, entry] of layer.variables.entries()) {
        resolved.set(name, { value: entry.value(context), info: { owner: entry.owner, stability: entry.stability } })
      }
    }
    // Keyed by name, so the assembly never depends on load order.
    const variables: PromptAssembly['variables'] = {}
    const variableInfo: PromptAssembly['variableInfo'] = {}
    for (const name of [...resolved.keys()].sort(compareCodeUnits)) {
      variables[name] = resolved.get(name)!.value
      variableInfo[name] = resolved.get(name)!.info
    }

    const sectionEntries = registry.merge(scope, layer => layer.sections)
    const contextEntries = registry.merge(scope, layer => layer.contexts)

    // Tools add up across layers (no shadowing); providers are snapshotted first.
    const providers = layers.flatMap(layer => [...layer.toolProviders.values()])
    const collected: AssembledTool[] = []
    const knownNames = new Set<string>()
    for (const { value: provider, owner } of providers) {
      const result = provider(context)
      for (const { name, description, parameters, owner: schemaOwner } of result.schemas) {
        const toolOwner = schemaOwner ?? owner
        collected.push({ name, description, parameters: cloneParameters(parameters, name, toolOwner), owner: toolOwner })
      }
      for (const name of result.knownNames ?? result.schemas.map(schema => schema.name)) knownNames.add(name)
    }

    // An entry past its `expiresAt` is left out, and said so once.
    const now = Date.now()
    const current =
      <T extends PromptSection | PromptContext>(kind: string) =>
      (entry: Entry<T>) => {
        const { expiresAt } = entry.value
        if (expiresAt === undefined || expiresAt > now) return true
        warn(`prompt ${kind} "${entry.value.name}" (plugin "${entry.owner}") expired at ${new Date(expiresAt).toISOString()}: it is left out`)
        return false
      }
    const registered = [...sectionEntries.values()].filter(current('section')).sort((a, b) => byOrderThenName(a.value, b.value))
    warnTies('section', registered, warn)
    const complete = registered.filter(entry => entry.value.complete === true)
    if (complete.length > 1) {
      throw new Error(`multiple complete prompt sections are active: ${complete.map(entry => JSON.stringify(entry.value.name)).join(', ')}`)
    }
    const sections = registered.map(
      ({ value, owner }): AssembledSection => ({
        name: value.name,
        text: value.budget ? applyBudget(resolveText(value.text, context), value.name, value.budget.maxChars) : resolveText(value.text, context),
        order: value.order,
        stability: value.stability ?? 'static',
        owner,
        ...(value.literal === true && { literal: true as const }),
      }),
    )
    const completeCopy = complete.length ? { ...sections[registered.indexOf(complete[0])] } : undefined

    const attribution: AssemblyAttribution = { sections: {}, contexts: {} }
    for (const { value, owner } of registered) attribution.sections[value.name] = attribute(value, owner, 'instructions', context)
    let contexts: AssembledContext[] = []
    if (!suppressed) {
      const active = [...contextEntries.values()].filter(current('context')).sort((a, b) => byOrderThenName(a.value, b.value))
      for (const { value, owner } of active) attribution.contexts[value.name] = attribute(value, owner, 'runtime', context)
      warnTies('context', active, warn)
      contexts = active.map(
        ({ value, owner }): AssembledContext => ({
          name: value.name,
          text: value.budget ? applyBudget(resolveText(value.text, context), value.name, value.budget.maxChars) : resolveText(value.text, context),
          order: value.order,
          stability: value.stability ?? 'step',
          owner,
          ...(value.literal === true && { literal: true as const }),
        }),
      )
    }

    const tools = orderTools(collected, knownNames, config.toolOrder)
    warnDuplicateTools(tools, warn)

    let budgeted: Pick<PromptAssembly, 'sections' | 'contexts' | 'omitted'> = { sections, contexts }
    let overflow: BudgetOverflow | undefined
    if (config.budgets && (config.budgets.maxChars !== undefined || config.budgets.categories)) {
      const placements = new Map<string, Placement>()
      const place = (kind: string, { value }: Entry<PromptSection | PromptContext>) =>
        placements.set(`${kind}\0${value.name}`, { priority: value.priority ?? 0, recoverable: value.recoverable === true })
      for (const entry of registered) place('section', entry)
      for (const entry of contextEntries.values()) if (current('context')(entry)) place('context', entry)
      const trustOf = (kind: 'section' | 'context', name: string, owner: string) =>
        attribution[kind === 'section' ? 'sections' : 'contexts'][name]?.trust ?? defaultTrust(owner)
      const allocation = allocate(sections, contexts, attribution, placements, config.budgets, trustOf)
      budgeted = allocation
      overflow = allocation.overflow
      if (overflow) {
        warn(
          `prompt budgets: the floors (${overflow.floors} characters) exceed maxChars (${overflow.maxChars}); this request is ${overflow.over} characters over its total`,
        )
      }
    }
    // What entries left out of their own text (records over a budget, old memories) joins the same notice.
    const omitted: Omission[] = [...(budgeted.omitted ?? [])]
    for (const [kind, list, pool] of [
      ['section', budgeted.sections, sectionEntries],
      ['context', budgeted.contexts, contextEntries],
    ] as const) {
      for (const entry of list) {
        const report = pool.get(entry.name)?.value.omissions
        if (!report) continue
        const category = categoryOf(attribution, kind, entry.name)
        for (const own of report(context))
          omitted.push({ kind, name: own.name, owner: entry.owner, category, chars: own.chars, over: 'self', reason: own.reason })
      }
    }
    if (omitted.length) budgeted = { ...budgeted, omitted }
    if ((omitted.length || overflow) && !suppressed) {
      // Every omission is named to the model in one runtime context (the system prefix stays as it is).
      const counts = new Map<Category, number>()
      for (const [kind, list] of [
        ['section', sections],
        ['context', contexts],
      ] as const)
        for (const entry of list) {
          const category = categoryOf(attribution, kind, entry.name)
          if (entry.text !== '') counts.set(category, (counts.get(category) ?? 0) + 1)
        }
      const notice = {
        name: BUDGET_NOTICE,
        text: omissionNotice(omitted, counts, overflow),
        order: 1000,
        stability: 'step' as const,
        owner: PACKAGE,
        literal: true as const,
      }
      budgeted = { ...budgeted, contexts: [...budgeted.contexts, notice] }
      attribution.contexts[BUDGET_NOTICE] = { trust: 'product', category: 'runtime' }
    }

    // Rules the remaining entries assert, checked against each other.
    const assertions: Assertion[] = []
    const assertionsOf = (
      kind: 'section' | 'context',
      entries: readonly (AssembledSection | AssembledContext)[],
      pool: ReadonlyMap<string, Entry<PromptSection | PromptContext>>,
    ) => {
      for (const entry of entries) {
        const asserts = pool.get(entry.name)?.value.asserts
        const rules = typeof asserts === 'function' ? asserts(context) : asserts
        const trust = attribution[kind === 'section' ? 'sections' : 'contexts'][entry.name]?.trust ?? defaultTrust(entry.owner)
        assertions.push(...declaredAssertions(rules, `${kind} "${entry.name}" (plugin "${entry.owner}")`, trust))
      }
    }
    assertionsOf('section', budgeted.sections, sectionEntries)
    assertionsOf('context', budgeted.contexts, contextEntries)
    const conflicts = findConflicts(assertions)
    if (conflicts.length && !suppressed) {
      const notice = { name: CONFLICT_NOTICE, text: conflictNotice(conflicts), order: 999, stability: 'step' as const, owner: PACKAGE, literal: true as const }
      budgeted = { ...budgeted, contexts: [...budgeted.contexts, notice].sort(byOrderThenName) }
      attribution.contexts[CONFLICT_NOTICE] = { trust: 'product', category: 'runtime' }
    }

    const assembly: PromptAssembly = { ...budgeted, tools, variables, variableInfo, attribution, ...(conflicts.length && { conflicts }) }
    const result = await this.events.waterfall(scopeTarget(this, scope), 'system-prompt/assemble', assembly, context, async () => assembly)
    const final = completeCopy || suppressed ? { ...result, ...(completeCopy && { sections: [completeCopy] }), ...(suppressed && { contexts: [] }) } : result
    assertStableSections(final)
    if (checking.mode !== 'off') {
      for (const instability of stability.check(scope, final)) {
        if (instability.severe && checking.mode === 'error') throw new PromptUnstableError(instability)
        // Once per contribution: a clock would otherwise warn at every step.
        warn(instability.message, instability.subject)
      }
    }
    return final
  }

  /** Logs `message` once per `key` (default: the message itself). */
  private warnOnce(message: string, key = message) {
    if (this.warned.has(key)) return
    this.warned.add(key)
    this.ctx.logger('system-prompt').warn(message)
  }
}

/** Warns once per pair of same-order entries: their order is decided by name only. */
function warnTies(kind: 'section' | 'context', sorted: readonly Entry<{ name: string; order: number }>[], warn: (message: string) => void) {
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]]
    if (a.value.order !== b.value.order) continue
    warn(
      `prompt ${kind}s "${a.value.name}" (plugin "${a.owner}") and "${b.value.name}" (plugin "${b.owner}") share order ${a.value.order}; they are ordered by name. Give them distinct orders to state the intent.`,
    )
  }
}

function warnDuplicateTools(tools: readonly AssembledTool[], warn: (message: string) => void) {
  for (let i = 1; i < tools.length; i++) {
    const [a, b] = [tools[i - 1], tools[i]]
    if (a.name !== b.name) continue
    warn(`tool "${a.name}" is provided more than once (plugins "${a.owner}" and "${b.owner}"); models reject duplicate tool names.`)
  }
}

/**
 * A system section may not read a `step` variable: its value would change the
 * system text between steps and break every provider's prompt cache.
 */
function assertStableSections(assembly: PromptAssembly) {
  const info = assembly.variableInfo ?? {}
  if (!Object.keys(info).some(name => info[name]?.stability === 'step')) return
  for (const section of assembly.sections) {
    if (section.literal) continue
    for (const name of referencedVariables(section.text)) {
      const info: VariableInfo | undefined = assembly.variableInfo?.[name]
      if (info?.stability !== 'step') continue
      throw new Error(
        `prompt section "${section.name}" (plugin "${section.owner}") references step-stable variable "{{${name}}}" (plugin "${info.owner}"); a value that changes between steps would break the cached system prefix, so use it in a runtime context (ctx.systemPrompt.context) instead`,
      )
    }
  }
}
