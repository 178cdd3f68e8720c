import type { Ajv, ErrorObject, ValidateFunction } from 'ajv'
import type { Ajv2020 } from 'ajv/dist/2020.js'
import { createRequire } from 'node:module'
import { isPlainObject, snapshotJson } from './json.ts'
import { draft07MetaSchema, draft2020MetaSchema, type MetaSchemaValidator } from './meta-schemas.generated.ts'
import type { ApprovalNeed, ToolDefinition, ToolEffect, ToolOutput, ToolRunContext } from './types.ts'

export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/
/** Node's timers overflow past this many milliseconds. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1
/** Every effect a tool may declare (see `ToolEffect`). */
export const TOOL_EFFECTS: readonly ToolEffect[] = Object.freeze(['read', 'write', 'execute', 'network', 'outside'])
/** Violations listed in an INVALID_ARGS message; the rest are counted. */
const MAX_VIOLATIONS = 8

/** What `defineTool` accepts: a definition whose body sees typed arguments. */
// biome-ignore lint/suspicious/noExplicitAny: a definition erases its argument type; `unknown` would refuse every typed execute
export interface ToolSpec<A = any> {
  name: string
  description: string
  parameters: Record<string, unknown>
  execute(args: A, exec: ToolRunContext): ToolOutput | Promise<ToolOutput>
  isConcurrencySafe?: boolean | ((args: A) => boolean)
  timeoutMs?: number
  writes?: (args: A, exec: ToolRunContext) => readonly string[] | Promise<readonly string[]>
  effects?: readonly ToolEffect[] | ((args: A, exec: ToolRunContext) => readonly ToolEffect[])
  origin?: string
  destructive?: boolean
  requiresApproval?: (args: A, exec: ToolRunContext) => ApprovalNeed | undefined
}

/** A checked definition: frozen schema, compiled validator, calls bound to the author's object. */
export interface CompiledTool {
  readonly name: string
  readonly description: string
  readonly parameters: Readonly<Record<string, unknown>>
  readonly validate: ValidateFunction
  readonly timeoutMs: number | undefined
  readonly isConcurrencySafe: ToolDefinition['isConcurrencySafe']
  readonly writes: ToolDefinition['writes']
  readonly effects: ToolDefinition['effects']
  readonly origin: string | undefined
  readonly destructive: boolean | undefined
  readonly requiresApproval: ToolDefinition['requiresApproval']
  execute(args: unknown, exec: ToolRunContext): ToolOutput | Promise<ToolOutput>
  classify(args: unknown): unknown
}

// Lenient about unknown keywords and formats (schemas come from many authors and
// from MCP servers); strict about schemas that are malformed. Every schema compiled
// here passed the meta-schema when its tool was defined: Ajv need not check it again
// (which would compile Ajv's own meta-schema at the first call of a tool).
const options = { allErrors: true, strict: false, logger: false, validateSchema: false } as const
let draft7: Ajv | undefined
let draft2020: Ajv2020 | undefined

// Ajv (about 90 modules) loads with the first call of a tool, not with this
// package or a definition: a command that only shows the prompt never compiles one.
const require = createRequire(import.meta.url)

const isDraft2020 = (schema: Record<string, unknown>) => typeof schema.$schema === 'string' && schema.$schema.includes('2020-12')
const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/

/**
 * The meta-schema a tool's parameters are checked against: the one its `$schema`
 * names, draft-07 without one. Compiled ahead of time (meta-schemas.generated.ts):
 * compiling one at startup cost more than the rest of defining every tool.
 */
function metaSchemaFor(schema: Record<string, unknown>): MetaSchemaValidator | string {
  if (schema.$schema === undefined || (typeof schema.$schema === 'string' && DRAFT_07.test(schema.$schema))) return draft07MetaSchema()
  if (isDraft2020(schema)) return draft2020MetaSchema()
  return `parameters.$schema must name draft-07 (the default) or 2020-12, got ${JSON.stringify(schema.$schema)}`
}

/** Ajv's own wording: `parameters/properties/a/type must be equal to one of the allowed values`. */
function schemaErrorsText(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? []).map(error => `parameters${error.instancePath} ${error.message}`).join(', ')
}

function validatorFor(schema: Record<string, unknown>): Ajv | Ajv2020 {
  if (isDraft2020(schema)) {
    return (draft2020 ??= new (require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js')).Ajv2020(options))
  }
  return (draft7 ??= new (require('ajv') as typeof import('ajv')).Ajv(options))
}

const compiled = new WeakMap<object, CompiledTool>()

/**
 * Checks a tool definition once and compiles its argument validator. The result
 * is frozen; registering it skips the checks. A definition that is not an object
 * schema, has a bad name or a bad field throws a `TypeError` naming the tool.
 */
// biome-ignore lint/suspicious/noExplicitAny: a definition erases its argument type; `unknown` would refuse every typed execute
export function defineTool<A = any>(spec: ToolSpec<A>): ToolDefinition {
  const tool = compile(spec as ToolDefinition)
  const definition: ToolDefinition = Object.freeze({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
    // biome-ignore lint/suspicious/noExplicitAny: see ToolSpec
    execute: (args: any, exec: ToolRunContext) => tool.execute(args, exec),
    ...(tool.isConcurrencySafe !== undefined && { isConcurrencySafe: tool.isConcurrencySafe }),
    ...(tool.timeoutMs !== undefined && { timeoutMs: tool.timeoutMs }),
    ...(tool.writes !== undefined && { writes: tool.writes }),
    ...(tool.effects !== undefined && { effects: tool.effects }),
    ...(tool.origin !== undefined && { origin: tool.origin }),
    ...(tool.destructive !== undefined && { destructive: tool.destructive }),
    ...(tool.requiresApproval !== undefined && { requiresApproval: tool.requiresApproval }),
  })
  compiled.set(definition, tool)
  return definition
}

/** The compiled form of a definition, checking and compiling a hand-written one on first use. */
export function compileTool(def: ToolDefinition): CompiledTool {
  const known = typeof def === 'object' && def !== null ? compiled.get(def) : undefined
  if (known) return known
  const tool = compile(def)
  compiled.set(def, tool)
  return tool
}

function compile(def: ToolDefinition): CompiledTool {
  if (typeof def !== 'object' || def === null) {
    throw new TypeError(`a tool definition must be an object, got ${def === null ? 'null' : typeof def}`)
  }
  const { name, description, parameters, execute, isConcurrencySafe, timeoutMs, writes, effects, origin, destructive, requiresApproval } = def
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new TypeError(`invalid tool name ${JSON.stringify(name) ?? String(name)}: must match ${TOOL_NAME}`)
  }
  const fail = (detail: string): never => {
    throw new TypeError(`invalid tool definition "${name}": ${detail}`)
  }
  if (typeof description !== 'string' || description.trim() === '') fail('description must be a non-empty string')
  if (typeof execute !== 'function') fail('execute must be a function')
  if (isConcurrencySafe !== undefined && typeof isConcurrencySafe !== 'boolean' && typeof isConcurrencySafe !== 'function') {
    fail('isConcurrencySafe must be a boolean or a function')
  }
  if (writes !== undefined && typeof writes !== 'function') fail('writes must be a function')
  if (effects !== undefined && typeof effects !== 'function') {
    if (!Array.isArray(effects) || effects.length === 0 || !effects.every(effect => TOOL_EFFECTS.includes(effect))) {
      fail(
        `effects must be a non-empty list of ${TOOL_EFFECTS.map(effect => `"${effect}"`).join(', ')} (or a function returning one), got ${JSON.stringify(effects)}`,
      )
    }
  }
  if (origin !== undefined && (typeof origin !== 'string' || origin === '')) fail('origin must be a non-empty string')
  if (destructive !== undefined && typeof destructive !== 'boolean') fail('destructive must be a boolean')
  if (requiresApproval !== undefined && typeof requiresApproval !== 'function') fail('requiresApproval must be a function')
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs > 0 && timeoutMs <= MAX_TIMEOUT_MS)) {
    fail(`timeoutMs must be a positive number of milliseconds up to ${MAX_TIMEOUT_MS}, got ${String(timeoutMs)}`)
  }
  if (!isPlainObject(parameters)) fail('parameters must be a JSON schema object')
  if (parameters.type !== 'object')
    fail(`parameters must be an object schema ({ type: 'object', ... }), got type ${JSON.stringify(parameters.type) ?? 'undefined'}`)
  const snapshot = snapshotJson(parameters)
  if (!snapshot.ok) fail(`parameters must be plain JSON (found ${snapshot.problem})`)
  const schema = (snapshot as { value: Record<string, unknown> }).value

  // Checked against the meta-schema now; compiled (code generated: several ms a
  // schema) at the first call, which many tools of a deployment never get.
  const metaSchema = metaSchemaFor(schema)
  if (typeof metaSchema === 'string') fail(metaSchema)
  else if (!metaSchema(schema)) fail(`parameters are not a valid JSON schema: ${schemaErrorsText(metaSchema.errors)}`)
  let validate: ValidateFunction | undefined
  return Object.freeze({
    name,
    description,
    parameters: schema,
    get validate() {
      return (validate ??= compileValidator(validatorFor(schema), schema))
    },
    timeoutMs,
    isConcurrencySafe,
    writes: writes && ((args: unknown, exec: ToolRunContext) => writes.call(def, args, exec)),
    effects: typeof effects === 'function' ? (args: unknown, exec: ToolRunContext) => effects.call(def, args, exec) : effects && Object.freeze([...effects]),
    origin,
    destructive,
    requiresApproval: requiresApproval && ((args: unknown, exec: ToolRunContext) => requiresApproval.call(def, args, exec)),
    execute: (args: unknown, exec: ToolRunContext) => execute.call(def, args, exec),
    classify: (args: unknown) => (typeof isConcurrencySafe === 'function' ? isConcurrencySafe.call(def, args) : isConcurrencySafe),
  })
}

/**
 * The argument validator of a schema the meta-schema accepted. One it still cannot
 * compile (a `$ref` to nowhere, a `pattern` that is no regular expression) refuses
 * every call, saying why.
 */
function compileValidator(ajv: Ajv | Ajv2020, schema: Record<string, unknown>): ValidateFunction {
  try {
    return ajv.compile(schema)
  } catch (error) {
    const refuse = (() => false) as unknown as ValidateFunction
    const message = `the tool's parameters are not a valid JSON schema: ${error instanceof Error ? error.message : String(error)}`
    refuse.errors = [{ keyword: 'schema', instancePath: '', schemaPath: '#', params: {}, message }]
    return refuse
  } finally {
    // The compiled function stays usable; dropping the cache entry lets a reloaded
    // tool reuse the same `$id`.
    ajv.removeSchema(schema)
  }
}

/** `"/path must be string; must have required property 'command'"`. */
export function describeViolations(errors: readonly ErrorObject[] | null | undefined): string {
  const parts: string[] = []
  for (const error of errors ?? []) {
    let text = error.message ?? `fails "${error.keyword}"`
    if (error.keyword === 'additionalProperties') text += ` (${JSON.stringify(error.params.additionalProperty)})`
    if (error.keyword === 'enum' && Array.isArray(error.params.allowedValues)) {
      text += ` (${error.params.allowedValues.map(value => JSON.stringify(value)).join(', ')})`
    }
    const line = error.instancePath ? `${error.instancePath} ${text}` : text
    if (!parts.includes(line)) parts.push(line)
  }
  if (parts.length === 0) return 'do not match the schema'
  const shown = parts.slice(0, MAX_VIOLATIONS).join('; ')
  return parts.length > MAX_VIOLATIONS ? `${shown}; and ${parts.length - MAX_VIOLATIONS} more` : shown
}
