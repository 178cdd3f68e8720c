import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { HarnessError, type JsonValue } from '@loom/llm'
import type { ToolSchema } from '@loom/system-prompt'
import { defineTool, ToolNotFoundError, type ToolErrorInfo, type ToolExecutionResult, type ToolOutput } from '@loom/tools'
import { CALL_TOOL, catalogText, matcher, PATTERN, SCHEMA_TOOL, unknownTool } from './catalog.ts'

export { CALL_TOOL, catalogText, closeMatches, firstSentence, matcher, SCHEMA_TOOL } from './catalog.ts'

export const name = '@loom/tool-catalog'
export const inject = ['tools', 'systemPrompt']

export interface Config {
  /** Names or globs (`*`, `?`) of the tools served on demand. */
  onDemand: string[]
  /** Names or globs of tools that always stay in the request, even when `onDemand` matches them. */
  keep: string[]
  /** Characters of a tool's first sentence shown in the catalogue at most. */
  maxDescriptionChars: number
}

/**
 * Loom's first-party tools: a coding agent uses them at nearly every step, and
 * their guidance sections tell the model to call them by name, so they keep their
 * schemas; what goes on demand by default is everything else (MCP servers' tools,
 * third-party plugins').
 */
export const DEFAULT_KEEP = ['bash', 'edit', 'glob', 'grep', 'load_skill', 'read', 'task', 'web_fetch', 'write']

const patterns = (what: string, fallback: string[]) =>
  Schema.array(Schema.string().pattern(PATTERN))
    .default(fallback)
    .description(`${what} A pattern is a tool name, where \`*\` matches any run of characters and \`?\` one character (\`mcp__*\`).`)

export const Config: Schema<Config> = Schema.object({
  onDemand: patterns('Tools served on demand: the model sees their name and first sentence in the catalogue section, and loads the schema when it needs it.', [
    '*',
  ]),
  keep: patterns('Tools that stay in every request with their schema, even when `onDemand` matches them.', DEFAULT_KEEP),
  maxDescriptionChars: Schema.natural()
    .min(20)
    .default(200)
    .description('Characters of a tool description shown in the catalogue at most (its first sentence, cut with …).'),
}) as unknown as Schema<Config>

/** Section name and order (the band of late or generated tool guidance). */
export const SECTION_NAME = 'tool-catalog'
export const SECTION_ORDER = 150

// Cordis' FiberState is a const enum: the values this plugin reads.
const LOADING = 1
const ACTIVE = 2

/** An error of the inner call, rethrown so the call_tool result carries the same message and `error.info`. */
class ForwardedToolError extends HarnessError {
  constructor(message: string, info: ToolErrorInfo) {
    super(message, info.code)
    this.name = info.name
  }
}

export interface CallToolArgs {
  name: string
  arguments?: Record<string, unknown>
}

/**
 * While loaded, the tools `onDemand` matches (minus `keep` and this plugin's own
 * two) leave the request's `tools` and are listed in a static catalogue section
 * instead; `tool_schema` returns their schemas as a tool result (history, after
 * the cached prefix) and `call_tool` runs them through the tool runtime.
 */
export function apply(ctx: Context, config: Config) {
  const wanted = matcher(config.onDemand)
  const kept = matcher(config.keep)
  const isOnDemand = (tool: string) => tool !== SCHEMA_TOOL && tool !== CALL_TOOL && wanted(tool) && !kept(tool)
  /** The inner result of each running call_tool call, by its exec. */
  const inner = new WeakMap<object, { name: string; result: ToolExecutionResult }>()
  /** The on-demand tools the runtime can run in `scope`, by name in code units (the runtime's order). */
  const catalogue = (scope: object | undefined): ToolSchema[] => {
    const visible = ctx.tools.schemas(scope)
    // A scope restricted away from call_tool (a subagent given a tool list) keeps every schema: it could not run them otherwise.
    if (!visible.some(tool => tool.name === CALL_TOOL)) return []
    return visible.filter(tool => isOnDemand(tool.name))
  }

  let dropSection: (() => void) | undefined
  const registerSection = () => {
    dropSection?.()
    dropSection = ctx.systemPrompt.section({
      name: SECTION_NAME,
      order: SECTION_ORDER,
      // Descriptions are other plugins' text: never interpolated.
      literal: true,
      text: context => catalogText(catalogue(context.scope), config.maxDescriptionChars),
    })
  }
  registerSection()

  // The schemas leave every request of every scope this plugin sees; the tools stay registered (and callable by name).
  ctx.on('system-prompt/assemble', async (_assembly, context, next) => {
    const result = await next()
    const deferred = new Set(catalogue(context.scope).map(tool => tool.name))
    // Nothing on demand here: the two catalogue tools would only cost tokens.
    if (deferred.size === 0) deferred.add(SCHEMA_TOOL).add(CALL_TOOL)
    return { ...result, tools: result.tools.filter(tool => !deferred.has(tool.name)) }
  })

  // The dispatcher and the schema reader are not themselves policy subjects: the
  // inner call of call_tool goes through every pre-execute listener under its own name.
  ctx.on('tools/pre-execute', (exec, next) => (exec.name === CALL_TOOL || exec.name === SCHEMA_TOOL ? { kind: 'allow' as const } : next()), { prepend: true })

  ctx.tools.register(
    defineTool<{ names: string[] }>({
      name: SCHEMA_TOOL,
      description: `Returns the full JSON schemas (name, description, parameters) of tools from the tools-on-demand catalogue, one per line. Load a tool's schema once, before its first use with \`${CALL_TOOL}\`.`,
      parameters: {
        type: 'object',
        properties: {
          names: {
            type: 'array',
            items: { type: 'string' },
            minItems: 1,
            description: 'Tool names, exactly as the catalogue lists them.',
          },
        },
        required: ['names'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      execute(args, exec): ToolOutput {
        const visible = new Map(ctx.tools.schemas(exec.scope).map(tool => [tool.name, tool]))
        const names = [...new Set(args.names)]
        const unknown = names.filter(tool => !visible.has(tool))
        if (unknown.length) {
          const known = [...visible.keys()].filter(tool => tool !== SCHEMA_TOOL && tool !== CALL_TOOL)
          throw new ToolNotFoundError(
            `${unknown.map(tool => unknownTool(tool, known)).join('; ')}. No schema was loaded: call ${SCHEMA_TOOL} again with names from the catalogue.`,
          )
        }
        const lines = names.map(tool => {
          const { description, parameters } = visible.get(tool)!
          return JSON.stringify({ name: tool, description, parameters })
        })
        return { content: lines.join('\n'), meta: { loaded: names } }
      },
    }),
  )

  ctx.tools.register(
    defineTool<CallToolArgs>({
      name: CALL_TOOL,
      description: `Runs a tool from the tools-on-demand catalogue with the given arguments and returns its result, exactly as calling it directly would. Load its schema with \`${SCHEMA_TOOL}\` first.`,
      parameters: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'The tool to run, exactly as the catalogue lists it.' },
          arguments: { type: 'object', description: "The tool's arguments, as its schema describes them." },
        },
        required: ['name'],
        additionalProperties: false,
      },
      // No timeoutMs: the inner call has the tool's own, and the body must receive the exec the tools/execute listener sees.
      // As safe as the tool it runs (looked up globally: a scoped tool runs alone).
      isConcurrencySafe: args =>
        ctx.tools.executionMode({ name: (args as CallToolArgs).name, arguments: (args as CallToolArgs).arguments ?? {} }) === 'parallel',
      // What the inner tool may do (the inner call is gated again under its own name).
      effects: (args, exec) => ctx.tools.effectsOf({ name: args.name, arguments: args.arguments ?? {}, ...(exec.scope && { scope: exec.scope }) }) ?? [],
      async execute(args, exec) {
        if (args.name === CALL_TOOL) throw new Error(`${CALL_TOOL} cannot run itself; name the tool to run`)
        const visible = ctx.tools.schemas(exec.scope).map(tool => tool.name)
        if (!visible.includes(args.name)) {
          const known = visible.filter(tool => tool !== CALL_TOOL)
          throw new ToolNotFoundError(`${unknownTool(args.name, known)}; the tools on demand are listed in the system prompt`)
        }
        // Through the runtime: policies, approval, argument validation, the tool's timeout and redaction apply as to a direct call.
        const result = await ctx.tools.execute({
          callId: `${exec.callId}:${args.name}`,
          name: args.name,
          arguments: args.arguments ?? {},
          signal: exec.signal,
          ...(exec.agent && { agent: exec.agent }),
          ...(exec.scope && { scope: exec.scope }),
        })
        inner.set(exec, { name: args.name, result })
        // The tools/execute listener below hands on the inner result whole (its contexts included, so none are deferred here).
        if (result.isError) {
          const { message, info } = result.error
          throw info ? new ForwardedToolError(message, info) : new Error(message)
        }
        const meta: JsonValue | undefined = result.meta
        return { content: [...result.content], ...(meta !== undefined && { meta }), ...(result.concludesTurn && { concludesTurn: true }) }
      },
    }),
  )

  // A body cannot return an error result with meta: the inner call's result
  // replaces call_tool's whole (content, error info, contexts), its meta nested
  // under `result` so the inner decision survives next to the outer one. Keyed by
  // the call's exec, which a tool without timeoutMs receives unchanged.
  ctx.on('tools/execute', async (exec, next) => {
    const outer = await next()
    const ran = inner.get(exec)
    // An aborted call keeps the runtime's abort result.
    if (exec.name !== CALL_TOOL || !ran || exec.signal.aborted) return outer
    inner.delete(exec)
    const { name: tool, result } = ran
    return { ...result, meta: { tool, ...(result.meta !== undefined && { result: result.meta }) } }
  })

  // A tool added, removed or restricted changes the catalogue: re-registering the
  // section makes that a registry change, owned by this plugin, instead of a
  // static section changing on its own. Registered last, so it goes first on dispose.
  ctx.on('tools/change', () => {
    const state: number = ctx.fiber.state
    if (state === ACTIVE || state === LOADING) registerSection()
  })
}
