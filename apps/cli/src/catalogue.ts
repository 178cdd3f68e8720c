// The catalogue of plugins a deployment can name: the bundled ones (every
// plugin a row of the CLI's own bundles names) and the installed ones (the
// packages in node_modules, from the working folder up, whose package.json
// keywords include "loom-plugin"), each with its description and its Config.
// `loom plugins` prints it; `loom schema` types each row's config from it.
import type Schema from '@deepseek-ai/schemastery'
import { readdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { CLI_ROOT, packageOf, readJson, readLayer, resolvePackage, type EntryOptions } from './compose.ts'

/** The keyword that marks an installed package as a Loom plugin. */
export const PLUGIN_KEYWORD = 'loom-plugin'

export interface CataloguedPlugin {
  /** What a row's `name` says. */
  name: string
  source: 'bundled' | 'installed'
  /** The package folder the name resolves to (from the working folder first, then from the CLI). */
  folder?: string
  description?: string
  /** The plugin's config schema; undefined when it takes no config (or did not load). */
  config?: Schema
  /** Why the module could not be loaded, on one line. */
  error?: string
}

/** The CLI's own plugins are subpaths of @loom/cli, whose package.json describes the command. */
const OWN_DESCRIPTIONS: Record<string, string> = {
  '@loom/cli/runner': "The CLI's own plugin (ctx.runner): picks the model route, runs the turns of run and sessions resume, builds prompt, compacts sessions.",
  '@loom/cli/demo-model': 'The offline demo model (route scripted): lists the directory, reads its README and answers from what the tools returned.',
}

/** Every plugin available from `cwd`: bundled first (in bundle order), then installed (by name). */
export async function catalogue(cwd: string): Promise<CataloguedPlugin[]> {
  const bundled = bundledNames()
  const installed = installedPackages(cwd).filter(pkg => !bundled.includes(pkg.name))
  const entries = [
    ...bundled.map(name => ({ name, source: 'bundled' as const })),
    ...installed.map(pkg => ({ name: pkg.name, source: 'installed' as const, folder: pkg.folder })),
  ]
  return Promise.all(entries.map(entry => describePlugin(entry.name, entry.source, cwd, 'folder' in entry ? entry.folder : undefined)))
}

/** The plugin names of every row in the CLI's own bundles (`"loom": { "bundle": ... }` of its package.json), nested group rows included. */
export function bundledNames(): string[] {
  const manifest = readJson(join(CLI_ROOT, 'package.json')) as { loom?: { bundle?: string | Record<string, string> } }
  const bundle = manifest.loom?.bundle ?? {}
  const files = typeof bundle === 'string' ? [bundle] : Object.values(bundle)
  const names: string[] = []
  const collect = (rows: readonly EntryOptions[] | undefined) => {
    for (const row of rows ?? []) {
      if (row.group) collect(Array.isArray(row.config) ? row.config : [])
      else if (!names.includes(row.name)) names.push(row.name)
    }
  }
  for (const file of files) for (const patch of readLayer(resolve(CLI_ROOT, file))) collect(patch.insert)
  return names
}

/**
 * Packages marked as Loom plugins in every node_modules from `cwd` up, then from
 * the CLI's own folder up (scoped ones too): where a row's package name resolves
 * (`resolvePackage`), so a plugin installed next to the CLI (`npm install --prefix`
 * of its folder) is listed too. The nearest of one name wins, as Node resolves it.
 */
export function installedPackages(cwd: string): { name: string; folder: string }[] {
  const found = new Map<string, string>()
  const consider = (folder: string) => {
    const manifest = readJson(join(folder, 'package.json')) as { name?: unknown; keywords?: unknown } | undefined
    if (typeof manifest?.name !== 'string' || found.has(manifest.name)) return
    if (Array.isArray(manifest.keywords) && manifest.keywords.includes(PLUGIN_KEYWORD)) found.set(manifest.name, folder)
  }
  const scanned = new Set<string>()
  const scan = (modules: string) => {
    for (const entry of list(modules)) {
      if (entry.startsWith('.')) continue
      if (entry.startsWith('@')) for (const scoped of list(join(modules, entry))) consider(join(modules, entry, scoped))
      else consider(join(modules, entry))
    }
  }
  // The CLI's walk stops at the first folder the project's walk scanned: the rest are scanned too.
  for (const start of [cwd, CLI_ROOT]) {
    for (let dir = resolve(start); !scanned.has(dir); dir = dirname(dir)) {
      scanned.add(dir)
      scan(join(dir, 'node_modules'))
    }
  }
  return [...found].map(([name, folder]) => ({ name, folder })).sort((a, b) => a.name.localeCompare(b.name))
}

async function describePlugin(name: string, source: CataloguedPlugin['source'], cwd: string, found?: string): Promise<CataloguedPlugin> {
  const plugin: CataloguedPlugin = { name, source, folder: found }
  let file: string
  try {
    file = resolvePackage(name, cwd)
  } catch (error) {
    return { ...plugin, error: oneLine(error) }
  }
  const pkg = packageOf(name, file)
  plugin.folder = pkg?.folder ?? found
  if (pkg?.name === name && typeof pkg.description === 'string') plugin.description = pkg.description
  try {
    const module = unwrap(await import(pathToFileURL(file).href))
    const config = module?.Config
    if (isSchema(config)) plugin.config = config
    else if (config !== undefined) plugin.error = 'its Config is not a schemastery schema: its keys are not known'
    plugin.description ??= OWN_DESCRIPTIONS[name] ?? (typeof module?.description === 'string' ? module.description : describe(config))
  } catch (error) {
    plugin.error = `cannot load: ${oneLine(error)}`
  }
  return plugin
}

/** A plugin module's plugin, as the Cordis loader unwraps it. */
export function unwrap(exports: Record<string, unknown>): { Config?: unknown; description?: unknown } | undefined {
  let plugin = (exports.default ?? exports) as Record<string, unknown> | undefined
  if (plugin?.__esModule) plugin = (plugin.default ?? plugin) as Record<string, unknown>
  return plugin
}

export function isSchema(value: unknown): value is Schema {
  return typeof value === 'function' && typeof (value as Schema).type === 'string' && typeof (value as Schema).meta === 'object'
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

function oneLine(error: unknown): string {
  return String((error as Error)?.message ?? error)
    .split('\n')
    .map(line => line.trim())
    .filter(line => line && !line.startsWith('at ') && !line.startsWith('Require stack'))
    .join(' ')
}

// Reading a schemastery schema: `loom plugins` lists its keys, `loom schema` converts it.

/** A schema's description (the English one of a translated description). */
export function describe(schema: unknown): string | undefined {
  const description = isSchema(schema) ? schema.meta.description : undefined
  if (typeof description === 'string') return description || undefined
  if (description && typeof description === 'object') return description.en ?? description[''] ?? Object.values(description)[0]
  return undefined
}

/** Lazy schemas built once each, so that a recursive one comes back as the same object (and a walk can tell it met it before). */
const built = new WeakMap<Schema, Schema>()

/** The schema a wrapper stands for: a transform's input, a lazy schema's built one. */
export function unwrapSchema(schema: Schema): Schema {
  if (schema.type === 'transform' && schema.inner) return unwrapSchema(schema.inner)
  if (schema.type === 'lazy') {
    let inner = isSchema(schema.inner) ? schema.inner : built.get(schema)
    if (!inner && schema.builder) built.set(schema, (inner = schema.builder() as Schema))
    return inner ? unwrapSchema(inner) : schema
  }
  return schema
}

/** The keys of an object schema, or of an intersection of object schemas; undefined for any other schema. */
export function objectKeys(schema: Schema): Record<string, Schema> | undefined {
  const plain = unwrapSchema(schema)
  const parts = plain.type === 'intersect' ? (plain.list ?? []).map(unwrapSchema) : [plain]
  if (!parts.length || parts.some(part => part.type !== 'object' || !part.dict)) return undefined
  return Object.assign({}, ...parts.map(part => part.dict))
}

export interface ConfigKey {
  /** Dotted path: `env.allow`. */
  key: string
  type: string
  default?: unknown
  required: boolean
  description?: string
}

/** Every key of a Config, nested objects' keys under their dotted paths (a recursive schema's once). */
export function configKeys(schema: Schema | undefined, prefix = '', seen = new Set<Schema>()): ConfigKey[] {
  const dict = schema && !seen.has(unwrapSchema(schema)) && objectKeys(schema)
  if (!dict) return []
  const inside = new Set(seen).add(unwrapSchema(schema))
  return Object.entries(dict).flatMap(([name, item]) => {
    const key = prefix + name
    const nested = objectKeys(item)
    const row: ConfigKey = { key, type: nested ? 'object' : typeText(item), required: item.meta.required === true, description: describe(item) }
    if (!nested && item.meta.default !== undefined && typeof item.meta.default !== 'function') row.default = item.meta.default
    return [row, ...(nested ? configKeys(item, `${key}.`, inside) : [])]
  })
}

/** A short type: `string`, `integer >= 1`, `"auto" | "none"`, `string[]`, `{ [key]: number }`. */
export function typeText(schema: Schema, seen = new Set<Schema>()): string {
  const plain = unwrapSchema(schema)
  if (seen.has(plain)) return '...'
  const inner = (item: Schema | undefined) => (item ? typeText(item, new Set(seen).add(plain)) : 'any')
  const { min, max, step } = plain.meta
  switch (plain.type) {
    case 'const':
      return JSON.stringify(plain.value) ?? String(plain.value)
    case 'union':
      return (plain.list ?? []).map(inner).join(' | ')
    case 'intersect':
      return objectKeys(plain) ? 'object' : (plain.list ?? []).map(inner).join(' & ')
    case 'array': {
      const item = inner(plain.inner)
      return /[ |]/.test(item) ? `(${item})[]` : `${item}[]`
    }
    case 'tuple':
      return `[${(plain.list ?? []).map(inner).join(', ')}]`
    case 'dict':
      return `{ [key]: ${inner(plain.inner)} }`
    case 'number': {
      const range = min !== undefined && max !== undefined ? ` ${min}..${max}` : min !== undefined ? ` >= ${min}` : max !== undefined ? ` <= ${max}` : ''
      return (step === 1 ? 'integer' : 'number') + range
    }
    case 'is':
      return typeof plain.constructor === 'function' ? plain.constructor.name : String(plain.constructor)
    default:
      return plain.type
  }
}
