// Booting a deployment: compose its layers, mount the rows through the Cordis
// loader and include plugins, wait until everything settled, and fail loud, row
// by row, when a plugin did not start. A `dev` command reuses `boot()` with the
// HMR plugin in `plugins` and `recompose()` on layer edits.
import { Context, resolveConfig, type Plugin } from '@deepseek-ai/cordis'
import type Schema from '@deepseek-ai/schemastery'
import Include from '@deepseek-ai/cordis-plugin-include'
import Loader, { Group, interpolate, isJsExpr, type Entry, type EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { isAbsolute, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { objectKeys } from './catalogue.ts'
import { closestName, compose, resolvePackage, type ComposeOptions, type Composition } from './compose.ts'
import { type Culprit, findCulprit, type RowModule } from './culprit.ts'
import { BootError } from './errors.ts'
import { protectedPaths, protectPlugin } from './protect.ts'
import { requireTrust, type TrustAsk } from './trust.ts'

/** The loader entry id of the include that mounts the composed rows. */
export const DEPLOYMENT_ENTRY = 'deployment'

export interface BootOptions extends ComposeOptions {
  /**
   * Plugins plugged on the root after the loader and before the rows, in order
   * (a dev command plugs the timer and HMR plugins here).
   */
  plugins?: readonly { plugin: Plugin; config?: unknown }[]
  /** Warnings and errors logged by plugins (default: stderr). Errors during boot (or a recompose) are also turned into the BootError. */
  log?: (level: 'warn' | 'error' | 'info', text: string) => void
  /** Also report `info` logs (default false). */
  verbose?: boolean
  /** The rows to mount, of the composed ones (default: all); `loom sessions` mounts only its store. */
  select?: (rows: readonly EntryOptions[]) => EntryOptions[]
  /**
   * Who is asked to trust a project layer that carries code or changes policy
   * (trust.ts), read at each compose: a terminal's question, or none (headless:
   * such a layer is refused with a ConfigError naming `loom trust`).
   */
  trust?: { ask?: TrustAsk }
}

export interface Deployment {
  root: Context
  /** The layers and rows that were mounted. */
  composition: Composition
  /** The folder of this boot's temporary files (under BOOT_PARENT), removed by `dispose()`. */
  bootDir: string
  /**
   * Re-reads every layer and applies the new rows to the running deployment as
   * one update of the include (rows that did not change keep running). A layer
   * that does not parse, or needs trust it lacks, throws a ConfigError, and a config value that its plugin's
   * schema refuses throws a BootError naming the row and key: both change nothing.
   * A row that does not start rolls the whole update back and throws a BootError.
   */
  recompose(): Promise<Composition>
  /** What is wrong with the running rows now: one line per row (empty when all run). */
  problems(): Promise<string[]>
  /** The row whose code threw `error` (an uncaught error), by its stack: culprit.ts. */
  culprit(error: unknown): Culprit | undefined
  /** Unloads every row (sessions are flushed by their backends), then the loader. */
  dispose(): Promise<void>
}

// FiberState is a const enum in Cordis: its values, for reading `fiber.state`.
const PENDING = 0
const ACTIVE = 2
const FAILED = 3
const UNLOADING = 5

/** How long unloading a deployment may take before the rows still unloading are given up. */
export const DISPOSE_DEADLINE_MS = 5_000

/** Whether `promise` settles within `ms` (a rejection within it is thrown). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<false>(resolve => {
    timer = setTimeout(() => resolve(false), ms)
  })
  const settled = promise.then(() => true)
  settled.catch(() => {}) // failing after the deadline: given up already
  try {
    return await Promise.race([settled, deadline])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Boots the composed deployment. Resolves once every row settled and all are
 * active; otherwise disposes what started and throws a BootError with one line
 * per failed row (unknown module, invalid config value with its key path, a
 * throwing plugin, services that no row provides). Composition errors (malformed
 * YAML, unknown bundle) throw a ConfigError before anything is mounted.
 */
export async function boot(options: BootOptions): Promise<Deployment> {
  const cwd = resolve(options.cwd)
  const log = options.log ?? ((level, text) => process.stderr.write(`loom: ${level === 'info' ? '' : level === 'warn' ? 'warning: ' : `${level}: `}${text}\n`))
  let composition = compose({ ...options, cwd, warn: options.warn ?? (text => log('warn', text)) })
  // Parsing evaluated nothing; from here on `!!js` runs and plugins load: only what is trusted.
  await requireTrust(composition, { cwd, ask: options.trust?.ask })

  const root = new Context()
  root.baseUrl = pathToFileURL(cwd).href + '/'
  // Errors logged while the rows start (at boot, during a recompose) fail that start.
  const logged: { error: unknown; text: string }[] = []
  let starting = true
  root.logger.exporter({
    colors: 0,
    // Cordis ranks WARN (2) above INFO (1): without this, warnings are filtered out.
    levels: { default: 3 },
    export: message => {
      // A syntax error keeps its code frame on lines of its own; the logger's format would flatten it.
      const text = `[${message.name}] ${syntaxErrorFrame(message.args[0]) ?? String(Logger.format(message))}`
      if (message.type === 'error') {
        if (starting) logged.push({ error: message.args[0], text })
        else log('error', text)
      } else if (message.type === 'warn') {
        log('warn', text)
      } else if (options.verbose && message.type === 'info') {
        log('info', text)
      }
    },
  })

  await root.plugin(Loader)
  root.loader.builtins.include = Include
  root.loader.builtins.group = Group
  // Relative paths in a plugin's config (a replay log, say) are relative to the
  // project folder, not to the boot's temporary root file.
  const projectUrl = root.baseUrl
  root.on('loader/entry-init', (entry: Entry) => {
    entry.ctx.baseUrl = projectUrl
  })
  for (const { plugin, config } of options.plugins ?? []) await root.plugin(plugin, config)
  // The deployment's own files, out of its agents' reach (they change with a recompose).
  let protection = await root.plugin(protectPlugin(protectedPaths({ cwd, composition })))

  // The include needs a real root file; it stays `[]` and every row comes in
  // through `patches`, so the loader's write-back can never bake rows into a
  // file someone edits. It lives in the OS temp folder, never in the install.
  const bootDir = makeBootDir()
  const rootFile = join(bootDir, 'deployment.yml')
  writeFileSync(rootFile, '[]\n')
  const removeBootDir = () => rmSync(bootDir, { recursive: true, force: true })
  process.once('exit', removeBootDir)
  // Modules load relative to that file, so each row's package is located first
  // (`resolvePackage`: a package the CLI ships from the CLI only, any other from the
  // project, then from the CLI). Messages name the row's own `name`.
  const located = new Map<string, string>()
  const locateRows = (rows: readonly EntryOptions[]): EntryOptions[] =>
    rows.map(row => {
      const where = locateModule(row.name, cwd)
      if (where !== row.name) located.set(where, row.name)
      return { ...row, name: where, ...(row.group && Array.isArray(row.config) && { config: locateRows(row.config as EntryOptions[]) }) }
    })
  const shownName = (name: string) => located.get(name) ?? name

  let disposed: Promise<void> | undefined
  const dispose = () =>
    (disposed ??= (async () => {
      try {
        // The rows, taken now: an include that unloads takes its rows out of the loader's list.
        const rows = [...root.loader.entries()].filter(entry => entry.options.id !== DEPLOYMENT_ENTRY && !entry.options.group)
        const unloading = (async () => {
          await root.loader.store[DEPLOYMENT_ENTRY]?.fiber?.dispose()
          await root.loader.await()
        })()
        // A plugin whose disposer never settles would hold the command forever (and Node
        // exits 13 on the unsettled await): past the deadline it is named and left behind.
        if (!(await settlesWithin(unloading, DISPOSE_DEADLINE_MS))) {
          const stuck = rows.filter(entry => entry.fiber?.state === UNLOADING).map(entry => `row "${entry.options.id}" (${shownName(entry.options.name)})`)
          log('warn', `${stuck.join(', ') || 'the deployment'} did not finish unloading within ${DISPOSE_DEADLINE_MS} ms; given up`)
        }
      } finally {
        removeBootDir()
        process.removeListener('exit', removeBootDir)
      }
    })())

  const select = options.select ?? (rows => [...rows])
  const mounted = (rows: Composition['rows']) => locateRows(select(rows))
  const includeConfig = (rows: readonly EntryOptions[]) => ({ path: rootFile, patches: [{ insert: rows }] })
  // The rows as mounted (packages located once): a rolled-back edit mounts exactly these again.
  let mountedRows = mounted(composition.rows)
  await root.loader.create({ id: DEPLOYMENT_ENTRY, name: 'cordis:include', config: includeConfig(mountedRows) } as never)
  await root.loader.await()

  const problems = async () => reportLines(await rowProblems(root, shownName))
  // The running rows and where their code is, for naming the one an uncaught error came from.
  const rowModules = (): RowModule[] =>
    flatRows(mountedRows).flatMap(row => {
      if (row.id === undefined || row.group || row.name.startsWith('cordis:')) return []
      const file = row.name.startsWith('file:') ? row.name : resolve(cwd, row.name)
      return [{ id: row.id, shown: shownName(row.name), file, package: located.has(row.name) }]
    })
  const found: RowProblem[] = [
    ...(await rowProblems(root, shownName)),
    ...(await configProblems(root, mountedRows, shownName, composition.configFrom, false)).map(text => ({ text, message: text })),
  ]
  starting = false
  const stray = strayErrors(found, logged)
  if (found.length || stray.length) {
    await dispose().catch(() => {})
    throw new BootError([...reportLines(found), ...stray])
  }

  return {
    root,
    get composition() {
      return composition
    },
    bootDir,
    async recompose() {
      const next = compose({ ...options, cwd, warn: options.warn ?? (text => log('warn', text)) })
      await requireTrust(next, { cwd, ask: options.trust?.ask })
      // The loader would keep a running row on its old config and go on with the
      // others: refuse an invalid value before anything changes.
      const nextRows = mounted(next.rows)
      const invalid = await configProblems(root, nextRows, shownName, next.configFrom)
      if (invalid.length) throw new BootError(invalid, 'the edited deployment was not applied')
      const apply = async (rows: readonly EntryOptions[]) => {
        await root.loader.update(DEPLOYMENT_ENTRY, { config: includeConfig(rows) } as never)
        await root.loader.await()
      }
      starting = true
      logged.length = 0
      try {
        await apply(nextRows)
      } finally {
        starting = false
      }
      // One transaction: if a row of the new composition does not start, the
      // previous rows come back and nothing of the edit stays applied.
      const found = await rowProblems(root, shownName)
      const stray = strayErrors(found, logged)
      if (found.length || stray.length) {
        await apply(mountedRows)
        throw new BootError([...reportLines(found), ...stray], 'the edited deployment did not start, so the previous one runs again')
      }
      composition = next
      mountedRows = nextRows
      await protection.dispose()
      protection = await root.plugin(protectPlugin(protectedPaths({ cwd, composition })))
      return next
    },
    problems,
    culprit: error => findCulprit(error, rowModules()),
    dispose,
  }
}

/** The rows and the rows of their groups. */
function flatRows(rows: readonly EntryOptions[]): EntryOptions[] {
  return rows.flatMap(row => [row, ...(row.group && Array.isArray(row.config) ? flatRows(row.config as EntryOptions[]) : [])])
}

/** Where boots keep their root file: one `boot-<pid>-*` folder each, in a folder of this user's. */
export const BOOT_PARENT = join(tmpdir(), `loom-${process.getuid?.() ?? 'user'}`)

/** A new folder for this boot, after removing those of processes that are gone (killed before they could clean up). */
function makeBootDir(): string {
  mkdirSync(BOOT_PARENT, { recursive: true, mode: 0o700 })
  for (const name of readdirSync(BOOT_PARENT)) {
    const pid = Number(/^boot-(\d+)-/.exec(name)?.[1])
    if (pid && pid !== process.pid && !processAlive(pid)) rmSync(join(BOOT_PARENT, name), { recursive: true, force: true })
  }
  return mkdtempSync(join(BOOT_PARENT, `boot-${process.pid}-`))
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Where a row's module is, as a file URL: a package name resolves as
 * `resolvePackage` says (a bundled plugin from the CLI's install only, any other
 * from the project folder first). Paths, URLs and `cordis:` builtins stay as they
 * are, and so does a name found nowhere: its mount reports it.
 */
export function locateModule(name: string, cwd: string): string {
  if (name.startsWith('cordis:') || name.startsWith('file:') || name.startsWith('.') || isAbsolute(name)) return name
  try {
    return pathToFileURL(resolvePackage(name, cwd)).href
  } catch {
    return name
  }
}

/**
 * Config values that a row's plugin would refuse, one line per row, found
 * without touching the running rows: each enabled row's config (its `!!js`
 * values evaluated as the loader would) checked against its module's schema.
 * A module that does not load is left to the mount, which reports it.
 */
async function configProblems(
  root: Context,
  rows: readonly EntryOptions[],
  shownName: (name: string) => string,
  configFrom: Composition['configFrom'],
  checkValues = true,
): Promise<string[]> {
  const tree = root.loader.store[DEPLOYMENT_ENTRY]?.subtree
  if (!tree) return []
  const problems: string[] = []
  const check = async (row: EntryOptions) => {
    let disabled: unknown
    let config: unknown
    try {
      disabled = isJsExpr(row.disabled) ? interpolate(root, row.disabled) : row.disabled
      config = interpolate(root, row.config)
    } catch {
      return // an expression that needs the row's own context: checked when it mounts
    }
    if (disabled) return
    if (row.group) {
      for (const child of Array.isArray(row.config) ? (row.config as EntryOptions[]) : []) await check(child)
      return
    }
    let plugin: Plugin | undefined
    try {
      plugin = root.loader.unwrapExports(await tree.import(row.name))
    } catch {
      return
    }
    if (!plugin) return
    problems.push(...pluginConfigProblems(plugin, config, { row, shownName, configFrom, checkValues }))
  }
  for (const row of rows) await check(row)
  return problems
}

/**
 * What `plugin` would refuse in a row's `config`: an invalid value (one line
 * with the key paths, unless `checkValues` is false: the loader checked them),
 * else every key its schema does not name, with the nearest known key and the
 * file that set the config.
 */
export function pluginConfigProblems(
  plugin: { Config?: unknown },
  config: unknown,
  {
    row,
    shownName,
    configFrom,
    checkValues = true,
  }: { row: EntryOptions; shownName: (name: string) => string; configFrom: Composition['configFrom']; checkValues?: boolean },
): string[] {
  if (checkValues && plugin.Config) {
    try {
      resolveConfig({ Config: plugin.Config } as Plugin.Runtime, config)
    } catch (error) {
      return [`row "${row.id}" (${shownName(row.name)}): ${startMessage(error)}`]
    }
  }
  return unknownKeys(plugin.Config as Schema | undefined, config).map(({ key, known }) => {
    const near = closestName(key.split('.').pop()!, known)
    const file = row.id === undefined ? undefined : configFrom[row.id]
    return `${file ? `${file}: ` : ''}row "${row.id}" (${shownName(row.name)}): unknown config key "${key}"${near ? ` (did you mean "${near}"?)` : ''}; ${known.length ? `it has: ${known.join(', ')}` : 'it takes no config'}`
  })
}

/**
 * Keys of `value` that an object schema (or an intersection of them) does not
 * name, with their dotted paths and the keys that level does have. A setting
 * that silently does nothing misleads: it is refused like a bad value.
 */
function unknownKeys(schema: Schema | undefined, value: unknown, path = ''): { key: string; known: string[] }[] {
  // A plugin without a Config gets its config as it is: nothing to check it by.
  const dict = schema && objectKeys(schema)
  if (!dict || typeof value !== 'object' || value === null || Array.isArray(value)) return []
  const known = Object.keys(dict)
  const found: { key: string; known: string[] }[] = []
  for (const [key, item] of Object.entries(value)) {
    if (!Object.hasOwn(dict, key)) found.push({ key: path + key, known })
    else found.push(...unknownKeys(dict[key], item, `${path}${key}.`))
  }
  return found
}

interface RowProblem {
  text: string
  /** A row that did not start because services it needs are missing: its id and those services. */
  waiting?: { row: string; missing: string[] }
  message: string
  error?: unknown
}

/**
 * One line per root cause. Rows that failed each get theirs; rows that only
 * wait for services are folded into one line: after failed rows (which most
 * likely provide what they wait for), or else one line per missing service,
 * leaving out a service whose rows an earlier line already named.
 */
function reportLines(found: readonly RowProblem[]): string[] {
  const waiting = found.filter(problem => problem.waiting?.missing.length)
  const lines = found.filter(problem => !problem.waiting?.missing.length).map(problem => problem.text)
  if (!waiting.length) return lines
  const ids = (rows: readonly string[]) => rows.map(row => `"${row}"`).join(', ')
  if (lines.length) {
    const rows = waiting.map(problem => problem.waiting!.row)
    const they = rows.length === 1 ? 'it waits' : 'they wait'
    return [...lines, `${rows.length === 1 ? 'row' : `${rows.length} rows`} ${ids(rows)} did not start: ${they} for services that a failed row above provides`]
  }
  const needing = new Map<string, string[]>()
  for (const { waiting: wait } of waiting) for (const service of wait!.missing) needing.set(service, [...(needing.get(service) ?? []), wait!.row])
  const named = new Set<string>()
  for (const [service, rows] of [...needing].sort((a, b) => b[1].length - a[1].length)) {
    if (rows.every(row => named.has(row))) continue
    for (const row of rows) named.add(row)
    lines.push(
      `no running row provides the service "${service}", so ${rows.length === 1 ? 'row' : 'rows'} ${ids(rows)} did not start (is its row disabled or missing?)`,
    )
  }
  return lines
}

/** Every enabled row must be active: otherwise say which row, which module, and why. */
async function rowProblems(root: Context, shownName: (name: string) => string): Promise<RowProblem[]> {
  const problems: RowProblem[] = []
  for (const entry of root.loader.entries()) {
    if (entry.options.id === DEPLOYMENT_ENTRY && entry.parent.tree === (root.loader as never)) continue
    if (entry.options.group || entry.disabled) continue
    const row = `row "${entry.options.id}" (${shownName(entry.options.name)})`
    const fiber = entry.fiber
    if (!fiber) {
      const error = await Promise.resolve(entry.parent.tree.import(entry.options.name)).then(
        () => undefined,
        (error: unknown) => error,
      )
      const message = error === undefined ? 'the module did not load' : importMessage(error, shownName(entry.options.name))
      problems.push({ text: `${row}: ${message}`, message: firstLine(error) })
    } else if (fiber.state === FAILED) {
      const error = await fiber.await().then(
        () => undefined,
        (error: unknown) => error,
      )
      problems.push({ text: `${row}: ${startMessage(error)}`, message: firstLine(error), error })
    } else if (fiber.state === PENDING) {
      const wanted = Object.keys(fiber.inject)
      const missing = wanted.filter(name => root.get(name) === undefined)
      const message = missing.length
        ? `needs the service${missing.length > 1 ? 's' : ''} ${missing.map(name => `"${name}"`).join(', ')}, which no running row provides`
        : `is waiting for the services ${wanted.map(name => `"${name}"`).join(', ')}`
      problems.push({ text: `${row} did not start: it ${message}`, message, waiting: { row: String(entry.options.id), missing } })
    } else if (fiber.state !== ACTIVE) {
      problems.push({ text: `${row} did not settle (fiber state ${fiber.state})`, message: '' })
    }
  }
  return problems
}

/** Errors logged while rows started that no row problem explains already, one line each. */
function strayErrors(found: readonly RowProblem[], logged: readonly { error: unknown; text: string }[]): string[] {
  const explained = new Set<unknown>(found.map(problem => problem.error).filter(error => error !== undefined))
  const messages = new Set(found.map(problem => problem.message))
  return logged.filter(entry => !explained.has(entry.error) && !messages.has(firstLine(entry.error))).map(entry => oneLine(entry.text))
}

function importMessage(error: unknown, name: string): string {
  const code = (error as NodeJS.ErrnoException)?.code
  if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
    const missing = /Cannot find (?:package|module) '([^']+)'/.exec(String((error as Error).message))?.[1]
    return missing && missing !== name && !name.endsWith(missing)
      ? `cannot load module "${name}": it imports "${missing}", which is not installed`
      : `cannot load module "${name}": no such package or file`
  }
  return `cannot load module "${name}": ${syntaxErrorFrame(error) ?? oneLine(String((error as Error)?.message ?? error))}`
}

/**
 * A syntax error as Node reports it (`file:line`, the source line and maybe a
 * caret at the head of its stack, then `SyntaxError: …`) as a headline and its
 * code frame below, line breaks kept: `greeter.ts:8: SyntaxError …: Expression
 * expected`, then the line. Undefined for any other error.
 */
export function syntaxErrorFrame(error: unknown): string | undefined {
  const lines = error instanceof Error && typeof error.stack === 'string' ? error.stack.split('\n') : []
  const headline = lines.findIndex(line => /^\w*Error\b/.test(line))
  if (headline < 1 || !/:\d+$/.test(lines[0])) return undefined
  const frame = lines.slice(1, headline).filter(line => line.trim())
  return [`${lines[0]}: ${lines[headline]}`, ...frame.map(line => `    ${line}`)].join('\n')
}

/** Why a plugin did not start: its invalid config values (key paths), or what its apply threw. */
export function startMessage(error: unknown): string {
  if (error instanceof Error && error.name === 'ValidationError') {
    const issues = error.message
      .split('\n')
      .slice(1)
      .map(line => line.replace(/^\s*-\s*/, '').replace(/ \(at [^)]*\)$/, ''))
    return `invalid config: ${issues.join('; ')}`
  }
  return `failed to start: ${oneLine(String((error as Error)?.message ?? error))}`
}

function firstLine(error: unknown): string {
  return String((error as Error)?.message ?? error).split('\n')[0]
}

function oneLine(text: string): string {
  return text
    .split('\n')
    .filter(line => !/^\s+at /.test(line))
    .map(line => line.trim())
    .filter(Boolean)
    .join(' ')
}

// The logger's printf-style formatting, without colors.
const Logger = {
  format(message: { args: unknown[] }): string {
    const [format, ...rest] = message.args
    if (format instanceof Error) return oneLine(format.stack ?? format.message)
    let i = 0
    const text = String(format).replace(/%[a-zA-Z]/g, () => {
      const value = rest[i++]
      return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value))
    })
    return [text, ...rest.slice(i).map(value => (value instanceof Error ? oneLine(value.stack ?? value.message) : String(value)))].join(' ')
  },
}
