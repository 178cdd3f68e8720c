// Trust for configuration that carries code or changes policy, as direnv's `allow`.
// A project's loom.yml can come with a cloned repository, or be created by the
// agent's own shell where none existed (a missing file cannot be mounted
// read-only). Its `!!js` values would run as the user, a plugin it mounts by path
// or an MCP command it names would run at the next start, and a patch of the
// permissions or the sandbox would loosen them. Such a layer runs only once the
// user trusted its exact bytes: a sha256 recorded in $LOOM_HOME/trust.json, which
// is itself a protected path. The check runs after the layer is parsed (parsing
// evaluates nothing) and before any row is mounted or any `!!js` evaluated.
// Bundles, the user's own layer and `--patch` files named on the command line are
// the user's choice, and trusted.
import { isJsExpr, type EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { applyLayers, compose, findProjectLayer, loomHome, readLayer, readLayerSource, type Composition, type Layer } from './compose.ts'
import { ConfigError, UsageError } from './errors.ts'
import { clip, styler, type Io, type Stream } from './present/term.ts'

/** The record of trusted layers, under $LOOM_HOME. */
export const TRUST_FILE = 'trust.json'

/**
 * Modules whose rows decide what the agent may do, and the config keys that do
 * (`*`: any change of the row, `disabled` included). A project layer that sets
 * one of them changes policy:
 * - `@loom/permissions`: the rules that allow, ask or deny each call;
 * - `@loom/tools`: `protect`, the paths the agent may not change;
 * - `@loom/tool-shell`: the sandbox and its network, what commands may write,
 *   the shell they run in, and which secrets reach them (`env`);
 * - `@loom/tool-fs`: the root the file tools write under.
 * Switching off the shell or the file tools takes nothing away from the user, so
 * only the keys listed count for those.
 */
export const POLICY_KEYS: Readonly<Record<string, readonly string[]>> = {
  '@loom/permissions': ['*'],
  '@loom/tools': ['*'],
  '@loom/tool-shell': ['root', 'shell', 'sandbox', 'network', 'writable', 'env'],
  '@loom/tool-fs': ['root'],
}

/** Config keys of any row that decide where a model adapter sends the API key (the route fields of `@loom/llm`). */
export const ENDPOINT_KEYS: readonly string[] = ['baseUrl', 'baseUrlEnv', 'defaultBaseUrl', 'apiKeyEnv']

/** One thing in a layer that needs trust. */
export interface TrustItem {
  /** What it is, without its place: recorded, and compared with the record to tell what is new. */
  what: string
  /** For the one-line refusal: `!!js at line 3`, `plugin ./x.ts`. */
  short: string
  /** 1-based, where it was found in the file's text. */
  line?: number
}

export interface TrustRecord {
  sha256: string
  /** ISO time of the trust. */
  trustedAt: string
  /** The `what` of each item trusted then. */
  items: string[]
}

/** A project layer that needs trust and is not trusted (its bytes differ from the record, or there is none). */
export interface Untrusted {
  layer: Layer & { source: NonNullable<Layer['source']> }
  items: TrustItem[]
  /** The record of an earlier version of this file, when there is one. */
  record?: TrustRecord
  /** How the file is named to the user (`./loom.yml`, or an absolute path outside the working folder). */
  shown: string
}

/** Asks the person at the terminal whether to trust a layer; true records the trust. */
export type TrustAsk = (untrusted: Untrusted) => Promise<boolean>

/**
 * Everything in `layer` that carries code or changes policy. `before` are the
 * rows composed from the layers under it: which module a patch by id changes,
 * and the values it replaces (a patch replaces a row's `config` whole, so
 * leaving out a key the operator set is a change too).
 */
export function trustItems(layer: Layer, before: readonly EntryOptions[]): TrustItem[] {
  const lines = new Lines(layer.source?.text ?? '')
  const earlier = new Map<string, EntryOptions>()
  for (const row of flatten(before)) if (row.id !== undefined) earlier.set(row.id, row)
  const items: TrustItem[] = []
  const add = (what: string, short: string, line?: number) => items.push({ what, short, ...(line && { line }) })
  const base = dirname(layer.file)

  for (const patch of layer.patches) {
    for (const expr of jsExpressions(patch)) {
      const line = lines.js(expr)
      add(`!!js ${clip(expr.replace(/\s+/g, ' ').trim(), 120)}`, line ? `!!js at line ${line}` : '!!js', line)
    }
    if (patch.insert) {
      for (const row of flatten(patch.insert)) rowItems(row, row.name, true)
    } else if (patch.id !== undefined) {
      rowItems(patch as EntryOptions, patch.name ?? earlier.get(patch.id)?.name ?? '', false)
    }
  }
  return items

  function rowItems(row: EntryOptions, module: string, inserted: boolean) {
    const label = row.id === undefined ? `a ${module} row` : `row "${row.id}"`
    if (inserted && !isPackageName(module) && !(row.group && module === 'cordis:group')) {
      const shown = pathShown(module, base)
      add(`plugin ${shown}`, `plugin ${shown}`, lines.find(new RegExp(`name:.*${escape(basename(module))}`)))
    }
    const config = isObject(row.config) ? row.config : {}
    if (module === '@loom/mcp' && isObject(config.servers)) {
      for (const [server, spec] of Object.entries(config.servers)) {
        if (!isObject(spec) || spec.command === undefined || isJsExpr(spec.command)) continue
        const args = Array.isArray(spec.args) ? spec.args.filter(arg => typeof arg === 'string') : []
        const command = clip([String(spec.command), ...args].join(' '), 120)
        add(
          `MCP server "${server}": ${command}`,
          `MCP command ${clip(String(spec.command), 40)}`,
          lines.find(new RegExp(`command:.*${escape(String(spec.command))}`)),
        )
      }
    }
    const policy = POLICY_KEYS[module] ?? []
    const old = isObject(earlier.get(row.id ?? '')?.config) ? (earlier.get(row.id!)!.config as Record<string, unknown>) : {}
    // The keys whose value this row or patch changes (a key left out of a patch's config goes back to its default).
    const differs = (keys: readonly string[]) =>
      row.config === undefined ? [] : keys.filter(key => JSON.stringify(config[key]) !== JSON.stringify(inserted ? undefined : old[key]))
    const changed = policy.includes('*')
      ? inserted
        ? ['inserted']
        : Object.keys(row).flatMap(key => (key === 'id' || key === 'name' ? [] : key === 'config' && Object.keys(config).length ? Object.keys(config) : [key]))
      : differs(policy.filter(key => key in config || key in old))
    let at: number | undefined | null = null
    const line = () =>
      at === null
        ? (at = lines.find(row.id === undefined ? new RegExp(`name:.*${escape(module)}`) : new RegExp(`id:\\s*['"]?${escape(row.id)}['"]?\\s*$`)))
        : at
    if (changed.length) add(`${label} (${module}): ${changed.join(', ')}`, `${row.id ?? module}: ${changed.join(', ')}`, line())
    const endpoint = differs(ENDPOINT_KEYS.filter(key => key in config))
    if (endpoint.length) add(`${label} (${module}): ${endpoint.join(', ')}: where its API key is sent`, `${row.id ?? module}: ${endpoint.join(', ')}`, line())
  }
}

/** A package name (`pkg`, `@scope/pkg`, `@scope/pkg/subpath`), as opposed to a path, a URL or a builtin: those are code the layer brings. */
function isPackageName(name: string): boolean {
  return /^(?:@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*(?:\/[\w.-]+)*$/i.test(name) && !name.split('/').includes('..')
}

/** Every `!!js` source (any value the loader would evaluate) anywhere in `value`. */
function jsExpressions(value: unknown): string[] {
  if (isJsExpr(value)) return [String((value as { __jsExpr: unknown }).__jsExpr)]
  if (Array.isArray(value)) return value.flatMap(jsExpressions)
  if (isObject(value)) return Object.values(value).flatMap(jsExpressions)
  return []
}

function flatten(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => [row, ...(row.group && Array.isArray(row.config) ? flatten(row.config as EntryOptions[]) : [])])
}

/** Line numbers of things in a layer's text, found in document order (each search goes on after the previous find of its kind). */
class Lines {
  private readonly lines: string[]
  private readonly after = new Map<string, number>()
  constructor(text: string) {
    this.lines = text.split('\n')
  }

  /** The line of a `!!js` value: a tag (in any spelling) with its source, else its source alone (a block scalar), else the next tag. */
  js(expr: string): number | undefined {
    const first =
      expr
        .split('\n')
        .find(line => line.trim())
        ?.trim() ?? ''
    const tag = /!!js\b|__jsExpr|:js>/
    return this.find(new RegExp(`(${tag.source}).*${escape(first)}`)) ?? (first.length >= 8 ? this.find(first) : undefined) ?? this.find(tag)
  }

  find(pattern: string | RegExp): number | undefined {
    const key = String(pattern)
    for (let i = this.after.get(key) ?? 0; i < this.lines.length; i++) {
      const line = this.lines[i]
      if (/^\s*#/.test(line)) continue
      if (typeof pattern === 'string' ? line.includes(pattern) : pattern.test(line)) {
        this.after.set(key, i + 1)
        return i + 1
      }
    }
    return undefined
  }
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}

/** A plugin path as the layer would write it: `./x.ts` next to it, else absolute. */
function pathShown(name: string, base: string): string {
  if (!isAbsolute(name)) return name
  const rel = relative(base, name)
  return rel.startsWith('..') || isAbsolute(rel) ? name : `./${rel}`
}

/**
 * The key of a layer in the record: its folder's real path and its own name. A
 * symlinked loom.yml is keyed where it is found, not at its target: relative
 * plugin paths resolve from where it is found, so trust in the target says
 * nothing about them.
 */
export function trustKey(file: string): string {
  const dir = dirname(resolve(file))
  let real = dir
  try {
    real = realpathSync(dir)
  } catch {
    /* a folder that is gone: its record is keyed as named */
  }
  return join(real, basename(file))
}

/** `$LOOM_HOME/trust.json`. */
export function trustFile(home = loomHome()): string {
  return join(home, TRUST_FILE)
}

/** The trusted layers, by key. A record that does not parse is an error naming it: silently trusting nothing would drop the others at the next write. */
export function readTrust(home = loomHome()): Record<string, TrustRecord> {
  const file = trustFile(home)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new ConfigError(`${file}: cannot read: ${(error as Error).message}`)
  }
  try {
    const data = JSON.parse(text) as { version?: unknown; layers?: unknown }
    if (data.version === 1 && isObject(data.layers)) return data.layers as Record<string, TrustRecord>
  } catch {
    /* reported below */
  }
  throw new ConfigError(`${file} is not a trust record Loom wrote: fix it, or remove it and trust your layers again with loom trust`)
}

/** Writes the record: a temporary file (mode 600) synced to disk, then renamed over the old one, so a crash leaves one or the other whole. */
export function writeTrust(layers: Record<string, TrustRecord>, home = loomHome()) {
  mkdirSync(home, { recursive: true, mode: 0o700 })
  const file = trustFile(home)
  const temporary = `${file}.${process.pid}.tmp`
  try {
    const fd = openSync(temporary, 'w', 0o600)
    try {
      writeSync(fd, JSON.stringify({ version: 1, layers }, null, 2) + '\n')
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, file)
  } catch (error) {
    rmSync(temporary, { force: true })
    throw new ConfigError(`cannot write ${file}: ${(error as Error).message}`)
  }
  // The rename itself reaches the disk with its folder.
  const dir = openSync(home, 'r')
  try {
    fsyncSync(dir)
  } finally {
    closeSync(dir)
  }
}

/** Records trust in the exact bytes of `layer` (read when it was composed). */
export function recordTrust(layer: Layer & { source: NonNullable<Layer['source']> }, items: readonly TrustItem[], home = loomHome()): TrustRecord {
  const layers = readTrust(home)
  const record = { sha256: layer.source.sha256, trustedAt: new Date().toISOString(), items: items.map(item => item.what) }
  layers[trustKey(layer.file)] = record
  writeTrust(layers, home)
  return record
}

/** The rows the layers under `composition.layers[index]` compose. */
function rowsBefore(composition: Composition, index: number): EntryOptions[] {
  return applyLayers(composition.layers.slice(0, index), () => {})
}

/** Records trust in `file` as it is now: a layer Loom wrote itself at the user's command (`loom new plugin`). */
export function trustWritten(file: string, home = loomHome()): TrustRecord {
  const source = readLayerSource(file)
  const layer = { kind: 'project' as const, label: file, file, patches: readLayer(file, source.text), source }
  return recordTrust(layer, trustItems(layer, []), home)
}

/** The project layers of `composition` that carry code or change policy and whose bytes are not trusted. */
export function untrustedLayers(composition: Composition, cwd: string, home = loomHome()): Untrusted[] {
  const found: Untrusted[] = []
  let records: Record<string, TrustRecord> | undefined
  for (const [index, layer] of composition.layers.entries()) {
    if (layer.kind !== 'project' || !layer.source) continue
    const items = trustItems(layer, rowsBefore(composition, index))
    if (!items.length) continue
    records ??= readTrust(home)
    const record = records[trustKey(layer.file)]
    if (record?.sha256 === layer.source.sha256) continue
    found.push({ layer: layer as Untrusted['layer'], items, ...(record && { record }), shown: shownPath(layer.file, cwd) })
  }
  return found
}

/**
 * Before anything of `composition` is evaluated or mounted: every project layer
 * that needs trust has it, or `ask` (a terminal) gets it now; otherwise a
 * ConfigError of one line naming `loom trust`.
 */
export async function requireTrust(composition: Composition, options: { cwd: string; ask?: TrustAsk; home?: string }): Promise<void> {
  for (const untrusted of untrustedLayers(composition, options.cwd, options.home)) {
    if (options.ask && (await options.ask(untrusted))) recordTrust(untrusted.layer, untrusted.items, options.home)
    else throw new ConfigError(refusal(untrusted))
  }
}

/** `./loom.yml carries code or changes policy (!!js at line 3, plugin ./x.ts) and is not trusted: review it, then run `loom trust ./loom.yml``. */
export function refusal({ items, record, shown }: Untrusted): string {
  const listed = (record ? newItems(items, record) : items).map(item => item.short)
  const what = listed.length > 3 ? [...listed.slice(0, 3), `${listed.length - 3} more`] : listed
  const changed = record ? ' changed since you trusted it,' : ''
  return `${shown}${changed} carries code or changes policy (${what.join(', ') || 'as before'}) and is not trusted: review it, then run \`loom trust ${shellWord(shown)}\``
}

/** The items not in the record (all of them when none is new: the same item, moved or edited around). */
function newItems(items: readonly TrustItem[], record: TrustRecord): TrustItem[] {
  const known = new Set(record.items)
  return items.filter(item => !known.has(item.what))
}

/** `./loom.yml` inside the working folder, else the absolute path. */
export function shownPath(file: string, cwd: string): string {
  const rel = relative(cwd, file)
  if (!rel || isAbsolute(rel)) return file
  // A layer in a folder above (the project root's, seen from a subfolder) reads `../loom.yml`.
  if (rel.startsWith('..')) return /^(\.\.\/)+[^/]+$/.test(rel) ? rel : file
  return `./${rel}`
}

function shellWord(text: string): string {
  return /^[\w./@+-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
}

/**
 * A file's text as the terminal shows it: control characters and bidi overrides
 * visible, so a hostile file cannot hide a line (a carriage return, an escape
 * sequence, Trojan Source reordering).
 */
export function visible(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, char => `\\u{${char.codePointAt(0)!.toString(16)}}`)
}

/** The review the terminal shows before asking: the file with line numbers (the lines that need trust marked), then each item new or changed. */
export function review(untrusted: Untrusted, out: Stream): string {
  const style = styler(out)
  const { layer, items, record, shown } = untrusted
  const marked = new Set(items.map(item => item.line))
  const lines = layer.source.text.replace(/\n$/, '').split('\n')
  const width = String(lines.length).length
  const listed = record ? newItems(items, record) : items
  const head = record
    ? `${shown} changed since you trusted it (${record.trustedAt.slice(0, 16).replace('T', ' ')}), and it carries code or changes policy:`
    : `${shown} carries code or changes policy, and you have not trusted it:`
  return [
    style.yellow(`loom: ${head}`),
    ...lines.map((line, i) => `${marked.has(i + 1) ? style.yellow('>') : ' '} ${style.dim(String(i + 1).padStart(width))}  ${visible(line)}`),
    style.bold(record ? (listed.length ? 'New since then:' : 'The same kinds of things as before, changed around them:') : 'It would run or change:'),
    ...(listed.length ? listed : items).map(item => `  ${item.line ? `line ${item.line}`.padEnd(10) : ''.padEnd(10)}${visible(item.what)}`),
    `Trusting runs it as you, now and at every start until it changes (any change asks again). Trust ${shown}? [y/N] `,
  ].join('\n')
}

/** The question on a terminal: the review on `output`, one line from `input`; anything but y or yes is no. */
export function terminalTrust(input: NodeJS.ReadableStream, output: Stream): TrustAsk {
  return untrusted =>
    new Promise(resolve => {
      output.write(review(untrusted, output))
      const rl = createInterface({ input, terminal: false })
      let answer = ''
      rl.once('line', line => {
        answer = line
        rl.close()
      })
      rl.once('close', () => {
        if (!answer) output.write('\n')
        resolve(/^\s*y(es)?\s*$/i.test(answer))
      })
    })
}

export interface TrustCommand {
  cwd: string
  io: Io
  path?: string
  list: boolean
  revoke: boolean
  bundles: string[]
  patches: string[]
}

/** `loom trust [PATH] [--list] [--revoke]`. */
export function trustCommand({ cwd, io, path, list, revoke, bundles, patches }: TrustCommand): number {
  if (list && revoke) throw new UsageError('trust: --list and --revoke are two actions: give one')
  if (list) {
    if (path !== undefined) throw new UsageError(`trust: --list lists every record; it takes no path (got "${path}")`)
    return listTrust(io)
  }
  const file = path === undefined ? findProjectLayer(cwd) : resolve(cwd, path)
  if (file === undefined) {
    throw new UsageError('trust: no loom.yml in this folder or up to the project root; name the layer: loom trust PATH')
  }
  const shown = shownPath(file, cwd)
  if (revoke) {
    const layers = readTrust()
    const key = trustKey(file)
    if (!layers[key]) throw new UsageError(`trust --revoke: ${shown} is not trusted (loom trust --list shows what is)`)
    delete layers[key]
    writeTrust(layers)
    io.stdout.write(`revoked the trust in ${shown}: Loom refuses it again if it carries code or changes policy\n`)
    return 0
  }
  // The deployment this layer would be part of, to know which module each patch changes.
  const composition = compose({ cwd, bundles, patches, project: file })
  const index = composition.layers.findIndex(layer => layer.kind === 'project')
  const layer = composition.layers[index] as Untrusted['layer']
  const items = trustItems(layer, rowsBefore(composition, index))
  const record = recordTrust(layer, items)
  const hash = record.sha256.slice(0, 12)
  if (!items.length) {
    io.stdout.write(`trusted ${shown} (sha256 ${hash}): it carries no code and changes no policy, so Loom runs it without trust too\n`)
    return 0
  }
  io.stdout.write(
    [
      `trusted ${shown} (sha256 ${hash}): Loom runs it as you until it changes. It carries:`,
      ...items.map(item => `  ${item.line ? `line ${item.line}`.padEnd(10) : ''.padEnd(10)}${visible(item.what)}`),
    ].join('\n') + '\n',
  )
  return 0
}

/** `loom trust --list`: each record with its short hash, its date, and whether the file still has those bytes. */
function listTrust(io: Io): number {
  const layers = Object.entries(readTrust())
  if (!layers.length) {
    io.stdout.write('no trusted layers (loom trust PATH records one)\n')
    return 0
  }
  const width = Math.max(...layers.map(([file]) => file.length))
  for (const [file, record] of layers.sort(([a], [b]) => a.localeCompare(b))) {
    let state: string
    try {
      state = readLayerSource(file).sha256 === record.sha256 ? 'matches' : 'changed (not trusted)'
    } catch {
      state = 'missing'
    }
    io.stdout.write(`${file.padEnd(width)}  ${record.sha256.slice(0, 12)}  ${record.trustedAt.slice(0, 16).replace('T', ' ')}  ${state}\n`)
  }
  return 0
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
