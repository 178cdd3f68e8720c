// `loom schema`: a JSON Schema (draft 2020-12) of a loom.yml layer, for
// editors. It mirrors what compose.ts accepts (a list of patches: `- insert:
// [rows]` adds rows, `- id: x` with fields changes row x) and types each row's
// config by its plugin's Config, converted from schemastery: an inserted row by
// its `name`, a patch by id by the plugin of that id's row in the bundles. The
// plugins are the catalogue's (catalogue.ts): bundled and installed.
import type Schema from '@deepseek-ai/schemastery'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { catalogue, describe, objectKeys, unwrapSchema, type CataloguedPlugin } from './catalogue.ts'
import { CLI_ROOT, compose, findProjectLayer, type EntryOptions } from './compose.ts'
import type { Io } from './present/term.ts'

export type JsonSchema = { [key: string]: unknown }

const DRAFT = 'https://json-schema.org/draft/2020-12/schema'

/** A `!!js` value as the include's YAML dialect parses it. */
const JS = { $ref: '#/$defs/js' }

const configRef = (plugin: string) => ({ $ref: `#/$defs/${pointer(configDef(plugin))}` })
const configDef = (plugin: string) => `config:${plugin}`
/** A `$defs` key as a JSON pointer token. */
const pointer = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1')

/**
 * A schemastery schema as JSON Schema. Objects refuse unknown keys (the boot
 * does), a union of constants is an enum, and any value may also be a `!!js`
 * expression, which the loader evaluates when the row mounts. Descriptions and
 * defaults are kept for the editor to show.
 */
export function toJsonSchema(schema: Schema, stack: ReadonlySet<Schema> = new Set(), orJs = true): JsonSchema {
  const plain = unwrapSchema(schema)
  const annotations: JsonSchema = {}
  const description = describe(schema) ?? describe(plain)
  if (description) annotations.description = description
  const fallback = schema.meta.default
  if (fallback !== undefined && !['object', 'dict', 'intersect'].includes(plain.type) && isJson(fallback)) annotations.default = fallback
  // A recursive schema is checked down to where it repeats.
  if (stack.has(plain)) return annotations
  const shape = shapeOf(plain, new Set(stack).add(plain))
  if (shape === undefined) return annotations
  if (shape === JS) return { ...annotations, ...JS }
  return orJs ? { ...annotations, anyOf: [shape, JS] } : { ...annotations, ...shape }
}

/** The JSON Schema of one kind of schemastery schema; undefined: anything goes. */
function shapeOf(plain: Schema, stack: ReadonlySet<Schema>): JsonSchema | undefined {
  const { min, max, step, pattern } = plain.meta
  const child = (item: Schema) => toJsonSchema(item, stack)
  switch (plain.type) {
    case 'any':
      return undefined
    case 'never':
      return { not: {} }
    case 'const':
      // JSON has no undefined: a YAML null (an empty value) is what stands for it.
      return plain.value === undefined ? { type: 'null' } : { const: plain.value }
    case 'boolean':
      return { type: 'boolean' }
    case 'string':
      // A JSON Schema pattern has no flags: one with flags is left to the boot.
      return defined({ type: 'string', minLength: min, maxLength: max, pattern: pattern && !pattern.flags ? pattern.source : undefined })
    case 'number':
      return defined({ type: step === 1 ? 'integer' : 'number', minimum: min, maximum: max })
    case 'array':
      return defined({ type: 'array', items: plain.inner && child(plain.inner), minItems: min, maxItems: max })
    case 'tuple':
      return { type: 'array', prefixItems: (plain.list ?? []).map(child) }
    case 'dict':
      return { type: 'object', additionalProperties: plain.inner ? child(plain.inner) : true }
    case 'object':
    case 'intersect': {
      const dict = objectKeys(plain)
      if (!dict) return { allOf: (plain.list ?? []).map(child) }
      const required = Object.keys(dict).filter(key => dict[key].meta.required)
      const properties = Object.fromEntries(Object.entries(dict).map(([key, item]) => [key, child(item)]))
      return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false }
    }
    case 'union': {
      const list = (plain.list ?? []).map(unwrapSchema)
      if (list.length && list.every(item => item.type === 'const')) return { enum: list.map(item => item.value ?? null) }
      const members = list.map(item => toJsonSchema(item, stack, false))
      // A member that takes anything makes the union take anything.
      return members.some(member => Object.keys(member).every(key => key === 'description' || key === 'default')) ? undefined : { anyOf: members }
    }
    case 'bitset':
      return {
        anyOf: [
          { type: 'integer', minimum: 0 },
          { type: 'array', items: { enum: Object.keys(plain.bits ?? {}) } },
        ],
      }
    // Only an expression can make a function or a class instance.
    case 'function':
    case 'is':
      return JS
    default:
      return undefined
  }
}

function defined(schema: JsonSchema): JsonSchema {
  return Object.fromEntries(Object.entries(schema).filter(([, value]) => value !== undefined))
}

function isJson(value: unknown): boolean {
  try {
    return JSON.stringify(value) !== undefined
  } catch {
    return false
  }
}

/** The keys a row (and a patch by id) may have, as compose.ts accepts them. */
function rowFields(names: readonly string[]): JsonSchema {
  return {
    id: { type: 'string', description: "The row's id, unique in the deployment: a later layer changes or disables the row by it." },
    name: {
      type: 'string',
      minLength: 1,
      description:
        'The plugin: a package name (see `loom plugins`) or a path to a plugin module, relative to this file. On a patch by id: apply only if the row is this plugin.',
      examples: names,
    },
    config: { description: "The plugin's config (its Config; see `loom plugins`). A patch replaces it whole: restate every key you keep." },
    disabled: {
      description: 'true switches the row off. A `!!js` expression (which an editor shows as a string) is evaluated when the row mounts.',
      anyOf: [{ type: ['boolean', 'null'] }, { type: 'string' }, JS],
    },
    group: { type: ['boolean', 'null'], description: 'A group row: its config is a list of rows.' },
    inject: {
      description: 'Services the row needs, besides those its plugin declares.',
      anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'object' }, { type: 'null' }],
    },
    isolate: {
      description: 'Services this row gets its own instance of (true), or shares in a named realm (a string).',
      anyOf: [{ type: 'object', additionalProperties: { anyOf: [{ const: true }, { type: 'string' }] } }, { type: 'null' }],
    },
    intercept: { description: "Per-service options for this row's context.", type: ['object', 'null'] },
  }
}

export interface LoomSchemaOptions {
  plugins: readonly CataloguedPlugin[]
  /** The rows of the layers below loom.yml (the bundles): a patch by id has that row's plugin. */
  rows: readonly EntryOptions[]
  version: string
}

/** The JSON Schema of a loom.yml layer, with the config of every catalogued plugin that has a Config. */
export function loomSchema({ plugins, rows, version }: LoomSchemaOptions): JsonSchema {
  const configured = plugins.filter(plugin => plugin.config)
  const defs: JsonSchema = {}
  for (const plugin of configured) defs[configDef(plugin.name)] = { title: `${plugin.name} config`, ...toJsonSchema(plugin.config!) }
  const known = new Set(configured.map(plugin => plugin.name))
  const byName = configured.map(plugin => ({
    if: { required: ['name'], properties: { name: { const: plugin.name } } },
    then: { properties: { config: configRef(plugin.name) } },
  }))
  const byId = flatten(rows)
    .filter(row => row.id !== undefined && known.has(row.name))
    .map(row => ({
      if: { required: ['id'], properties: { id: { const: row.id } }, not: { required: ['name'] } },
      then: { properties: { config: configRef(row.name) } },
    }))
  const group = {
    if: { required: ['group'], properties: { group: { const: true } } },
    then: { properties: { config: { type: 'array', items: { $ref: '#/$defs/row' } } } },
  }
  const fields = rowFields(plugins.map(plugin => plugin.name))
  return {
    $schema: DRAFT,
    $id: `urn:loom:loom.yml:${version}`,
    title: 'loom.yml',
    description: `A layer of a Loom deployment: a list of patches over the rows of the layers before it (the bundles, $LOOM_HOME/loom.yml). Written by \`loom schema\` (loom ${version}) with the plugins found then: run it again after installing one.`,
    type: 'array',
    items: { $ref: '#/$defs/patch' },
    $defs: {
      patch: { if: { type: 'object', required: ['insert'] }, then: { $ref: '#/$defs/insert' }, else: { $ref: '#/$defs/change' } },
      insert: {
        description: 'Adds rows (a later patch can target them by id at once).',
        type: 'object',
        required: ['insert'],
        properties: {
          insert: { type: 'array', items: { $ref: '#/$defs/row' } },
          id: { type: 'string', description: 'A group row to add the rows to (default: the top level).' },
        },
        // The include ignores other fields next to `insert`: a field that does nothing is flagged.
        additionalProperties: false,
      },
      change: {
        description: 'Replaces these fields of the row with this id (`config` whole); `disabled: true` switches it off.',
        type: 'object',
        required: ['id'],
        properties: fields,
        additionalProperties: false,
        allOf: [group, ...byName, ...byId],
      },
      row: {
        type: 'object',
        required: ['name'],
        properties: fields,
        additionalProperties: false,
        allOf: [group, ...byName],
      },
      js: {
        description: 'A `!!js` expression: the loader evaluates it when the row mounts.',
        type: 'object',
        required: ['__jsExpr'],
        properties: { __jsExpr: { type: 'string' } },
        additionalProperties: false,
      },
      ...defs,
    },
  }
}

/** Rows with the rows of their groups. */
function flatten(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => [row, ...(row.group && Array.isArray(row.config) ? flatten(row.config) : [])])
}

export interface WriteSchemaOptions {
  cwd: string
  /** The bundles whose rows patches by id refer to (default: `default`). */
  bundles: readonly string[]
  /** The file to write (relative to `cwd`); stdout when undefined. */
  out?: string
  io: Io
}

/** `loom schema [--bundle B] [--out FILE]`; resolves to the exit code. */
export async function writeSchema({ cwd, bundles, out, io }: WriteSchemaOptions): Promise<number> {
  const plugins = await catalogue(cwd)
  for (const plugin of plugins) {
    if (plugin.error) io.stderr.write(`loom: warning: plugin "${plugin.name}": ${plugin.error}; its config is not checked\n`)
  }
  const { rows } = compose({ cwd, bundles, user: false, project: false })
  const { version } = JSON.parse(readFileSync(join(CLI_ROOT, 'package.json'), 'utf8')) as { version: string }
  const text = JSON.stringify(loomSchema({ plugins, rows, version }), null, 2) + '\n'
  if (out === undefined) {
    io.stdout.write(text)
    return 0
  }
  const file = resolve(cwd, out)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, text)
  const layer = findProjectLayer(cwd) ?? join(cwd, 'loom.yml')
  const link = relative(dirname(layer), file)
  io.stdout.write(
    `wrote ${out}: the config of ${plugins.filter(plugin => plugin.config).length} plugins. For an editor with the YAML language server, make this the first line of ${relative(cwd, layer) || layer}:\n` +
      `# yaml-language-server: $schema=${link.startsWith('../') ? link : `./${link}`}\n`,
  )
  return 0
}
