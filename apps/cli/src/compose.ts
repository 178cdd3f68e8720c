// Composition: a deployment is an entry list built by applying layers of patches
// over an empty list, in order: each bundle, the operator's $LOOM_HOME/loom.yml, the
// project's loom.yml (the nearest one up to the project root), then every
// `--patch` file. The patch semantics are the include plugin's own
// (`applyEntryPatches`), and the YAML dialect is its own (`entryListSchema`, with
// `!!js`), so what `loom config` prints is exactly what boots.
import { applyEntryPatches, entryListSchema, type PatchOptions } from '@deepseek-ai/cordis-plugin-include'
import type { EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import yaml from 'js-yaml'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError } from './errors.ts'
import { loadLayerYaml } from './yaml-limits.ts'

export type { EntryOptions, PatchOptions }

/** The CLI's own package folder (apps/cli). */
export const CLI_ROOT = fileURLToPath(new URL('..', import.meta.url))

/** Where a layer came from. */
export interface Layer {
  kind: 'bundle' | 'user' | 'project' | 'patch'
  /** `default`, `@acme/loom-bundle#web`, `loom.yml`, the patch path as given. */
  label: string
  file: string
  patches: PatchOptions[]
  /** The exact text the patches were parsed from, and the sha256 of its bytes (a project layer runs only if they are trusted: trust.ts). */
  source?: LayerSource
}

export interface LayerSource {
  text: string
  sha256: string
}

export interface ComposeOptions {
  /** The working folder: `loom.yml` is looked for from here up, bundles resolve from here first. */
  cwd: string
  /** Bundle names, applied in order (default: `['default']`). */
  bundles?: readonly string[]
  /** The operator's layer: a path, or `false` for none. Default `$LOOM_HOME/loom.yml` (`~/.loom/loom.yml`) when it exists. */
  user?: string | false
  /** The project's layer: a path, or `false` for none. Default: the nearest `loom.yml` (see `findProjectLayer`). */
  project?: string | false
  /** `--patch` files, applied last, in order (relative to `cwd`). */
  patches?: readonly string[]
  /** Diagnostics of patches that match nothing (a missing id, a name mismatch). */
  warn?: (message: string) => void
}

export interface Composition {
  layers: Layer[]
  /** The composed rows: exactly what the include mounts. */
  rows: EntryOptions[]
  /** For each row id, the files of the layers that inserted or changed it, in order. */
  sources: Record<string, string[]>
  /** For each row id, the file whose patch set its `config` last (a patch replaces it whole). */
  configFrom: Record<string, string>
}

/** Builds the deployment's rows from its layers; throws a ConfigError naming the file. */
export function compose(options: ComposeOptions): Composition {
  const cwd = resolve(options.cwd)
  const layers: Layer[] = []
  for (const bundle of options.bundles?.length ? options.bundles : ['default']) {
    const file = resolveBundle(bundle, cwd)
    layers.push({ kind: 'bundle', label: bundle, file, patches: readLayer(file) })
  }
  const user = options.user === undefined ? userLayer() : options.user === false ? undefined : resolve(cwd, options.user)
  if (user !== undefined) layers.push({ kind: 'user', label: user, file: user, patches: readLayer(user) })
  const project = options.project === undefined ? findProjectLayer(cwd) : options.project === false ? undefined : resolve(cwd, options.project)
  if (project !== undefined) {
    const source = readLayerSource(project)
    layers.push({ kind: 'project', label: relative(cwd, project) || project, file: project, patches: readLayer(project, source.text), source })
  }
  for (const patch of options.patches ?? []) {
    const file = resolve(cwd, patch)
    layers.push({ kind: 'patch', label: patch, file, patches: readLayer(file) })
  }
  const rows = applyLayers(layers, options.warn ?? (() => {}))
  checkIds(rows, layers)
  return { layers, rows, ...rowSources(layers, rows) }
}

/** Which layers wrote each row (the one that inserted it, then every one that patched it), and which set its config. */
function rowSources(layers: readonly Layer[], rows: readonly EntryOptions[]): Pick<Composition, 'sources' | 'configFrom'> {
  const sources: Record<string, string[]> = {}
  const configFrom: Record<string, string> = {}
  for (const row of rows) if (row.id !== undefined) sources[row.id] = []
  const add = (row: { id?: string; config?: unknown }, file: string) => {
    const files = row.id === undefined ? undefined : sources[row.id]
    if (!files) return
    if (files.at(-1) !== file) files.push(file)
    if (row.config !== undefined) configFrom[row.id!] = file
  }
  for (const layer of layers) {
    for (const patch of layer.patches) {
      for (const inserted of patch.insert ?? []) add(inserted, layer.file)
      add(patch, layer.file)
    }
  }
  return { sources, configFrom }
}

/**
 * The project's `loom.yml`: the nearest one from `cwd` up to the project root
 * (the folder with `.git`), else up to the filesystem root. A command run in a
 * subfolder gets the same deployment as at the project's top.
 */
export function findProjectLayer(cwd: string): string | undefined {
  return projectLayerPlaces(cwd).find(file => existsSync(file))
}

/** Every place `findProjectLayer` looks, nearest first: `loom.yml` in `cwd` and each folder up to the project root (or `/`). */
export function projectLayerPlaces(cwd: string): string[] {
  const places: string[] = []
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    places.push(join(dir, 'loom.yml'))
    if (existsSync(join(dir, '.git')) || dirname(dir) === dir) return places
  }
}

/** `$LOOM_HOME`, `~/.loom` by default (a leading `~` is the home folder). */
export function loomHome(): string {
  return resolve((process.env.LOOM_HOME || join(homedir(), '.loom')).replace(/^~(?=$|\/)/, homedir()))
}

/** `$LOOM_HOME/loom.yml` (`~/.loom/loom.yml` by default), when it exists. */
export function userLayer(): string | undefined {
  const file = join(loomHome(), 'loom.yml')
  return existsSync(file) ? file : undefined
}

/** The loader keys rows by id: two rows with one id would silently become one. */
function checkIds(rows: readonly EntryOptions[], layers: readonly Layer[]) {
  const seen = new Set<string>()
  for (const row of rows) {
    if (row.id === undefined) continue
    if (seen.has(row.id)) {
      const inserting = layers.filter(layer => layer.patches.some(patch => patch.insert?.some(inserted => inserted.id === row.id)))
      throw new ConfigError(
        `two rows have the id "${row.id}" (inserted by ${inserting.map(layer => layer.file).join(' and ')}): ids must be unique; to change a row, patch it by id instead of inserting it again`,
      )
    }
    seen.add(row.id)
    if (row.group && Array.isArray(row.config)) checkIds(row.config, layers)
  }
}

/**
 * Applies the layers in order with the include's patch semantics: `{insert}`
 * adds rows, an `id` replaces that row's fields (its whole `config`), `disabled`
 * switches it off; later layers win.
 */
export function applyLayers(layers: readonly Layer[], warn: (message: string) => void): EntryOptions[] {
  let rows: EntryOptions[] = []
  for (const layer of layers) {
    const missing: string[] = []
    rows = applyEntryPatches(rows, layer.patches, (format, ...args) => {
      if (/not found/.test(format) && typeof args[0] === 'string') missing.push(args[0])
      else warn(`${layer.file}: ${formatDiagnostic(format, args)}`)
    })
    for (const id of missing) {
      const near = closestName(
        id,
        rows.map(row => row.id).filter((name): name is string => name !== undefined),
      )
      const message = `${layer.file}: no row "${id}" to change${near ? ` (did you mean "${near}"?)` : ''}; to add a row, list it under "- insert:"`
      // A bundle or the operator's layer may patch rows some deployments lack; the project's and --patch may not.
      if (layer.kind === 'bundle' || layer.kind === 'user') warn(message)
      else throw new ConfigError(message)
    }
  }
  return rows
}

/** The known name nearest to `name` (edit distance at most 2, case ignored), for "did you mean". */
export function closestName(name: string, known: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase())
    if (distance <= 2 && (!best || distance < best.distance)) best = { name: candidate, distance }
  }
  return best?.name
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = current
  }
  return previous[b.length]
}

function formatDiagnostic(format: string, args: unknown[]): string {
  let i = 0
  return format.replace(/%[A-Za-z]/g, () => JSON.stringify(args[i++]))
}

/** A layer file's text and the sha256 of its bytes, read once (what is trusted is exactly what is parsed). */
export function readLayerSource(file: string): LayerSource {
  let bytes: Buffer
  try {
    bytes = readFileSync(file)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new ConfigError(code === 'ENOENT' ? `${file}: no such file` : `${file}: cannot read: ${(error as Error).message}`)
  }
  return { text: bytes.toString('utf8'), sha256: createHash('sha256').update(bytes).digest('hex') }
}

/** Parses one layer file (or its `text`, already read): a YAML (or JSON) list of patches. */
export function readLayer(file: string, text = readLayerSource(file).text): PatchOptions[] {
  let data: unknown
  try {
    data = loadLayerYaml(text, file, { schema: entryListSchema })
  } catch (error) {
    if (error instanceof yaml.YAMLException) {
      const { mark, reason } = error
      throw new ConfigError(`malformed YAML in ${file}${mark ? ` at line ${mark.line + 1}, column ${mark.column + 1}` : ''}: ${reason}`)
    }
    throw error
  }
  if (data === undefined || data === null) {
    throw new ConfigError(`${file} is empty: a layer is a YAML list of patches; write [] for a layer that changes nothing`)
  }
  if (!Array.isArray(data)) {
    throw new ConfigError(`${file} must be a YAML list of patches ({ insert: [rows] }, or { id, ... } to replace a row), got ${typeName(data)}`)
  }
  return data.map((patch, index) => checkPatch(patch, `${file}: patch ${index + 1}`, dirname(file)))
}

const ROW_KEYS = new Set(['id', 'name', 'config', 'disabled', 'inject', 'group', 'isolate', 'intercept'])

function checkPatch(patch: unknown, where: string, base: string): PatchOptions {
  if (!isObject(patch)) throw new ConfigError(`${where} must be a mapping, got ${typeName(patch)}`)
  const unknown = Object.keys(patch).filter(key => key !== 'insert' && !ROW_KEYS.has(key))
  if (unknown.length) {
    throw new ConfigError(
      `${where} has unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map(key => `"${key}"`).join(', ')} (known: insert, ${[...ROW_KEYS].join(', ')})`,
    )
  }
  if (patch.id !== undefined && typeof patch.id !== 'string') throw new ConfigError(`${where}: id must be a string`)
  if (patch.insert !== undefined) {
    if (!Array.isArray(patch.insert)) throw new ConfigError(`${where}: insert must be a list of rows`)
    return { ...patch, insert: patch.insert.map((row, i) => checkRow(row, `${where}, row ${i + 1}`, base)) }
  }
  if (patch.id === undefined) {
    throw new ConfigError(`${where} needs an id (to replace or disable that row) or an insert list (to add rows)`)
  }
  if (patch.name !== undefined) {
    if (typeof patch.name !== 'string') throw new ConfigError(`${where}: name must be a string`)
    return { ...patch, name: absoluteName(patch.name, base) }
  }
  return patch as PatchOptions
}

function checkRow(row: unknown, where: string, base: string): EntryOptions {
  if (!isObject(row)) throw new ConfigError(`${where} must be a mapping, got ${typeName(row)}`)
  const label = typeof row.id === 'string' ? `${where} ("${row.id}")` : where
  const unknown = Object.keys(row).filter(key => !ROW_KEYS.has(key))
  if (unknown.length)
    throw new ConfigError(
      `${label} has unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map(key => `"${key}"`).join(', ')} (known: ${[...ROW_KEYS].join(', ')})`,
    )
  if (row.id !== undefined && typeof row.id !== 'string') throw new ConfigError(`${label}: id must be a string`)
  if (typeof row.name !== 'string' || row.name === '') throw new ConfigError(`${label} needs a name (a package or a path to a plugin module)`)
  const checked = { ...row, name: absoluteName(row.name, base) } as EntryOptions
  if (row.group && Array.isArray(row.config)) {
    checked.config = row.config.map((child, i) => checkRow(child, `${label}, row ${i + 1}`, base))
  }
  return checked
}

/** A relative module path names a file next to the layer that wrote it. */
function absoluteName(name: string, base: string): string {
  return name.startsWith('./') || name.startsWith('../') ? resolve(base, name) : name
}

/**
 * Finds a bundle file. `default` and `minimal` are the CLI's own; `<package>`
 * or `<package>#<name>` is a bundle a package declares in its package.json
 * (`"loom": { "bundle": "./x.yml" }` or a map of named bundles), looked up as a
 * row's package is (`lookupFolders`).
 */
export function resolveBundle(spec: string, cwd: string): string {
  const own = readManifest(join(CLI_ROOT, 'package.json'))
  if (isObject(own.bundles) && typeof own.bundles[spec] === 'string') return resolve(CLI_ROOT, own.bundles[spec] as string)
  const hash = spec.lastIndexOf('#')
  const pkg = hash > 0 ? spec.slice(0, hash) : spec
  const wanted = hash > 0 ? spec.slice(hash + 1) : undefined
  const manifestPath = lookupFolders(pkg, cwd).reduce<string | undefined>((found, dir) => found ?? findManifest(pkg, dir), undefined)
  const shipped = Object.keys(isObject(own.bundles) ? own.bundles : {}).join(', ')
  if (!manifestPath) {
    throw new ConfigError(
      `unknown bundle "${spec}": the CLI ships ${shipped}; another bundle is a package (or <package>#<name>) that declares "loom": { "bundle": ... } in its package.json`,
    )
  }
  const manifest = readManifest(manifestPath)
  const pkgDir = dirname(manifestPath)
  if (typeof manifest.bundles === 'string' && wanted === undefined) return resolve(pkgDir, manifest.bundles)
  if (isObject(manifest.bundles)) {
    const names = Object.keys(manifest.bundles)
    const chosen = wanted ?? (names.length === 1 ? names[0] : 'default')
    const file = manifest.bundles[chosen]
    if (typeof file === 'string') return resolve(pkgDir, file)
    throw new ConfigError(`package "${pkg}" has no bundle "${chosen}" (it declares: ${names.join(', ')}); name one as ${pkg}#<name>`)
  }
  throw new ConfigError(`package "${pkg}" (${manifestPath}) declares no bundle: add "loom": { "bundle": "./bundles/<name>.yml" } to its package.json`)
}

/**
 * The packages the CLI depends on, its bundled plugins among them: they resolve
 * from the CLI's install only, so a package planted in a project's node_modules
 * under one of their names never runs in its place.
 */
const SHIPPED = new Set(Object.keys((JSON.parse(readFileSync(join(CLI_ROOT, 'package.json'), 'utf8')) as { dependencies?: object }).dependencies ?? {}))

/** The package a module specifier names: `@scope/name` or `name`, without a subpath. */
export function packageName(specifier: string): string {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** Where a package is looked up: a package the CLI ships in the CLI's install only; any other from the project folder first, then from the CLI's. */
function lookupFolders(specifier: string, cwd: string): string[] {
  return SHIPPED.has(packageName(specifier)) ? [CLI_ROOT] : [cwd, CLI_ROOT]
}

/** The file a package name (or a subpath it exports) resolves to (`lookupFolders`). Throws the first folder's error when none has it. */
export function resolvePackage(name: string, cwd: string): string {
  let first: unknown
  for (const dir of lookupFolders(name, cwd)) {
    try {
      return createRequire(join(dir, 'package.json')).resolve(name)
    } catch (error) {
      first ??= error
    }
  }
  throw first
}

/** The package a resolved module file belongs to: the nearest package.json above it that carries the specifier's package name. */
export function packageOf(specifier: string, file: string): { folder: string; name: string; description?: unknown } | undefined {
  const name = packageName(specifier)
  for (let dir = dirname(file); dirname(dir) !== dir; dir = dirname(dir)) {
    const manifest = readJson(join(dir, 'package.json')) as { name?: unknown; description?: unknown } | undefined
    if (manifest?.name === name) return { folder: dir, name, description: manifest.description }
  }
  return undefined
}

/** A package's package.json as seen from `dir` (resolution, then a parent walk for packages whose exports hide it). */
function findManifest(pkg: string, dir: string): string | undefined {
  try {
    return createRequire(join(dir, 'package.json')).resolve(`${pkg}/package.json`)
  } catch {
    /* not exported, or not there */
  }
  for (let at = dir; ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', pkg, 'package.json')
    if (existsSync(candidate)) return candidate
    if (dirname(at) === at) return undefined
  }
}

/** A JSON file's value; undefined when it is missing or not JSON. */
export function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'))
  } catch {
    return undefined
  }
}

function readManifest(path: string): { bundles?: unknown } {
  const json = JSON.parse(readFileSync(path, 'utf8')) as { loom?: { bundle?: unknown } }
  return { bundles: json.loom?.bundle }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function typeName(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`
}

/** The rows as the YAML dialect the include reads (`!!js` kept). */
export function dumpRows(rows: readonly EntryOptions[]): string {
  return yaml.dump(rows, { schema: entryListSchema, lineWidth: 120, noRefs: true })
}
