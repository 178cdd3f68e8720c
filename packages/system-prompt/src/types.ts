import type { AgentRef, ScopeKey } from '@loom/scope'
import type { Omission } from './allocate.ts'
import type { Asserted, Conflict } from './conflicts.ts'

/**
 * How often a contribution may change. `static`: fixed for the deployment;
 * `session`: fixed within one session (model, cwd at start); `step`: may change
 * between model steps (time, git state), so it may only reach the model through a
 * runtime context, never through the cached system prefix.
 */
export type Stability = 'static' | 'session' | 'step'

/** The request an assembly is built for. Callers may add fields of their own. */
export interface AssembleContext {
  /** The agent the assembly is for (the agent loop passes it); absent for an agent-less assembly. */
  agent?: AgentRef
  /** Selects the layers this assembly sees and the listeners it is routed to. */
  scope?: ScopeKey
  /** Passed through to providers and listeners; never inspected by `assemble()`. */
  signal?: AbortSignal
  [extra: string]: unknown
}

export type PromptText = string | ((context: AssembleContext) => string)

/**
 * Who stands behind a contribution, most trusted first: the product (Loom's own
 * plugins), the deployment (its operator's config and plugins), the repository
 * (files of the project: AGENTS.md, skills), what the user confirmed (memory),
 * the workspace (facts read from it: git state), and tool output.
 */
export type Trust = 'product' | 'deployment' | 'repository' | 'user-confirmed' | 'workspace' | 'tool-output'

/** What a contribution is, for budgets and the manifest. */
export type Category = 'instructions' | 'memory' | 'skills' | 'files' | 'runtime' | 'tools' | 'tool-results'

/** Where file-backed content came from: its path, the sha256 of what was read, and when it was last written. */
export interface PromptSource {
  readonly path: string
  readonly sha256: string
  /** ms since the epoch; the manifest shows the content's age from it. */
  readonly modifiedAt?: number
}

/** Trust, category and source of a contribution, as its plugin declares them. */
export interface Provenance {
  /** Default: `product` for `@loom/*` plugins, `deployment` for the others. */
  readonly trust?: Trust
  /** Default: `instructions` for sections, `runtime` for contexts. */
  readonly category?: Category
  /** For content read from a file; a function when the file is read at each assembly. */
  readonly source?: PromptSource | ((context: AssembleContext) => PromptSource | undefined)
  /** Under a category budget, higher stays first (default 0). */
  readonly priority?: number
  /** The model can fetch it again with a tool (a skill, a file): under a category budget it gives way first. */
  readonly recoverable?: boolean
  /**
   * Rules it asserts (`{ 'package-manager': 'pnpm' }`, or `{ value, from }` naming the file a value was read from):
   * two entries asserting different values get a `[context-conflict]` notice.
   */
  readonly asserts?: Readonly<Record<string, Asserted>> | ((context: AssembleContext) => Readonly<Record<string, Asserted>> | undefined)
  /** ms since the epoch after which it is left out of every assembly (with a warning). */
  readonly expiresAt?: number
  /** What the entry left out of its own text (records over its budget, old memories): named in the one budget notice. */
  readonly omissions?: (context: AssembleContext) => readonly SelfOmission[]
}

/** Something an entry left out of its own text, and why. */
export interface SelfOmission {
  name: string
  chars: number
  /** `over the memory record budget`, `older than 30 days` */
  reason: string
}

export interface PromptSection extends Provenance {
  readonly name: string
  /** Position in the system text; see the order bands in the README. */
  readonly order: number
  readonly text: PromptText
  /** A complete section replaces every other section of the assembly. */
  readonly complete?: boolean
  /** Default `static`. A system section can never be `step`: use a runtime context. */
  readonly stability?: Stability
  /** Text used verbatim, never interpolated: for content read from files (`{{` in it is just text). */
  readonly literal?: boolean
  /** A longer text is cut at a line boundary and ends with a notice the model sees (as a context's). */
  readonly budget?: ContextBudget
}

export interface PromptContext extends Provenance {
  readonly name: string
  readonly order: number
  readonly text: PromptText
  /** Default `step`: runtime contexts exist for facts that change between steps. */
  readonly stability?: Stability
  /** Text used verbatim, never interpolated (paths, branch names, file content). */
  readonly literal?: boolean
  /** A longer text is cut at a line boundary and ends with a notice the model sees. */
  readonly budget?: ContextBudget
}

/** The most a runtime context may contribute. */
export interface ContextBudget {
  /** Characters (UTF-16 code units) of the resolved text, the omission notice included; a positive integer. */
  readonly maxChars: number
}

export interface ToolSchema {
  name: string
  description: string
  parameters: Record<string, unknown>
}

export interface ToolProviderResult {
  /** `owner`: the plugin a schema comes from, when the provider serves several (default: the provider's own plugin). */
  readonly schemas: readonly (ToolSchema & { owner?: string })[]
  /** Names valid in `toolOrder` for this provider; replaces the schema names when given. */
  readonly knownNames?: readonly string[]
}

export type ToolProvider = (context: AssembleContext) => ToolProviderResult
export type VariableProvider = (context: AssembleContext) => string | undefined

export interface VariableOptions {
  /** Default `session`. A `step` variable may be used by runtime contexts only. */
  readonly stability?: Stability
}

/** Every assembled entry names the plugin that registered it. */
export interface Owned {
  /** Name of the plugin (Cordis fiber) that made the registration. */
  owner: string
}

/** Trust and category of one entry, resolved (declared, else the defaults); its source when declared. */
export interface Attributed {
  trust: Trust
  category: Category
  source?: PromptSource
}

/** Attribution of the registered sections and contexts by name (an entry a listener added has none: the manifest gives it the defaults). */
export interface AssemblyAttribution {
  sections: Record<string, Attributed>
  contexts: Record<string, Attributed>
}

/** A section with its text resolved but not yet interpolated. */
export interface AssembledSection extends Owned {
  name: string
  text: string
  order: number
  stability: Stability
  /** Present (true) when the text is rendered verbatim. */
  literal?: true
}

/** A runtime context with its text resolved but not yet interpolated. */
export interface AssembledContext extends Owned {
  name: string
  text: string
  order: number
  stability: Stability
  literal?: true
}

export interface AssembledTool extends ToolSchema, Owned {}

export interface VariableInfo extends Owned {
  stability: Stability
}

export interface PromptAssembly {
  sections: AssembledSection[]
  contexts: AssembledContext[]
  tools: AssembledTool[]
  variables: Record<string, string | undefined>
  /** Owner and stability of each registered variable (listener-added variables have none). */
  variableInfo: Record<string, VariableInfo>
  /** Trust, category and source of each registered section and context, apart from their shapes. */
  attribution?: AssemblyAttribution
  /** What the category budgets left out of this assembly (the `budget:notice` context tells the model). */
  omitted?: Omission[]
  /** Rules asserted with different values (the `context:conflicts` context tells the model). */
  conflicts?: Conflict[]
  [extra: string]: unknown
}

/** One rendered runtime-context entry. */
export interface ContextSnapshotSection {
  readonly name: string
  readonly text: string
}
