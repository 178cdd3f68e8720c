// The `loom` command line: parse against the command table (commands.ts), then
// run the command on what it needs (`loom` alone, on a terminal, is the
// conversation: conversation.ts): nothing booted (`config`, `schema`,
// `plugins`, `new plugin`, `dev`, which boots its own), the session store alone
// (`sessions list`, `show`, `verify`, `repair`, `stats`, `manifest`), or the whole
// deployment and its runner (`run`, `prompt`, the conversation, `sessions
// resume`, `compact`).
// present/ does the printing. Everything heavy is imported by the command that
// needs it, so `loom --version` and `loom --help` load no host.
import type { Context as Root } from '@deepseek-ai/cordis'
import { redact } from '@loom/secrets'
import type { CachePrices } from '@loom/session'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import type { Asking } from './approve.ts'
import type { BootOptions, Deployment } from './boot.ts'
import {
  checkOptions,
  CONVERSATION,
  lookup,
  OPTIONS,
  parseApproveMode,
  resolveCommand,
  type ServeApproveMode,
  type CommandName,
  type CommandSpec,
} from './commands.ts'
import { ConfigError, UsageError } from './errors.ts'
import { helpFor, overview, seeHelp } from './help.ts'
import { hostSecrets, processIo, styler, type Io } from './present/term.ts'
import type { OutputFormat } from './present/turn.ts'
import type { TurnResult, TurnWatcher, Runner } from './runner.ts'
import type { StoredSessions } from './sessions.ts'

/** The overview that `loom --help` prints. */
export const USAGE = overview()

export interface Parsed {
  command: string[]
  json: boolean
  /** How a turn is printed as it runs (`run`, `sessions resume`). */
  output: OutputFormat
  /** How a headless turn answers a tool call the policy asks about (`api`: loom serve's clients do). */
  approve: ServeApproveMode
  provider?: string
  model?: string
  bundles: string[]
  patches: string[]
  help: boolean
  version: boolean
  /** `sessions stats` prices per million tokens, as typed (checked by the command). */
  prices: { hit?: string; miss?: string; output?: string; write?: string }
  showReasoning: boolean
  thinking?: 'on' | 'off'
  reasoningEffort?: string
  maxSteps?: number
  maxInputTokens?: number
  maxCostUsd?: number
  /** `schema --out`: the file to write. */
  out?: string
  /** `sessions manifest --step`: the request (1-based). */
  step?: number
  /** `prompt --diff A [B]`: the first side of the comparison. */
  diff?: string
  /** `loom -c`: the conversation continues the last session started here. */
  continue: boolean
  /** `trust --list`, `trust --revoke`. */
  list: boolean
  revoke: boolean
  /** `serve`: where to listen, the token file, the drain deadline. */
  port?: number
  host?: string
  tokenFile?: string
  drainMs?: number
  maxConnections?: number
  headersTimeoutMs?: number
  requestTimeoutMs?: number
  /** `serve --approve api`: how long a question waits for a client. */
  approveDeadlineMs?: number
}

/** `pnpm loom -- ...` passes the `--` through. */
const withoutDashes = (argv: readonly string[]) => argv.filter(arg => arg !== '--')

export function parse(argv: readonly string[]): Parsed {
  let values: Record<string, unknown>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: withoutDashes(argv), allowPositionals: true, strict: true, options: OPTIONS }))
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''))
  }
  const found = lookup(positionals)
  if (values.help !== true) {
    if (found && 'command' in found) checkOptions(found.command, Object.keys(values))
    else if (found === undefined) checkOptions(CONVERSATION, Object.keys(values))
  }
  const output = outputFormat(values.output as string | undefined)
  // One object at the end, or lines as it runs: both at once cannot share stdout.
  if (values.json === true && values.output !== undefined) throw new UsageError(`--json and --output ${output} are two output formats: give one`)
  return {
    command: positionals,
    json: values.json === true,
    output,
    approve: parseApproveMode(values.approve as string | undefined, found && 'command' in found ? found.command.name : undefined),
    provider: values.provider as string | undefined,
    model: values.model as string | undefined,
    bundles: (values.bundle as string[] | undefined) ?? [],
    patches: (values.patch as string[] | undefined) ?? [],
    help: values.help === true,
    version: values.version === true,
    prices: {
      hit: values['hit-price'] as string | undefined,
      miss: values['miss-price'] as string | undefined,
      output: values['output-price'] as string | undefined,
      write: values['write-price'] as string | undefined,
    },
    showReasoning: values['show-reasoning'] === true,
    thinking: onOff('thinking', values.thinking as string | undefined),
    reasoningEffort: values['reasoning-effort'] as string | undefined,
    maxSteps: number('max-steps', values['max-steps'] as string | undefined, { integer: true, min: 1 }),
    maxInputTokens: number('max-input-tokens', values['max-input-tokens'] as string | undefined, { integer: true, min: 1 }),
    maxCostUsd: number('max-cost', values['max-cost'] as string | undefined, { integer: false, min: 0 }),
    out: values.out as string | undefined,
    step: number('step', values.step as string | undefined, { integer: true, min: 1 }),
    diff: values.diff as string | undefined,
    continue: values.continue === true,
    list: values.list === true,
    revoke: values.revoke === true,
    port: number('port', values.port as string | undefined, { integer: true, min: 0, max: 65535 }),
    host: values.host as string | undefined,
    tokenFile: values['token-file'] as string | undefined,
    drainMs: number('drain-ms', values['drain-ms'] as string | undefined, { integer: true, min: 0 }),
    maxConnections: number('max-connections', values['max-connections'] as string | undefined, { integer: true, min: 1 }),
    headersTimeoutMs: number('headers-timeout-ms', values['headers-timeout-ms'] as string | undefined, { integer: true, min: 1 }),
    requestTimeoutMs: number('request-timeout-ms', values['request-timeout-ms'] as string | undefined, { integer: true, min: 1 }),
    approveDeadlineMs: number('approve-deadline-ms', values['approve-deadline-ms'] as string | undefined, { integer: true, min: 1 }),
  }
}

/** The positionals as well as they can be told apart, for pointing a usage error at the right help. */
function positionalsOf(argv: readonly string[]): string[] {
  try {
    return parseArgs({ args: withoutDashes(argv), allowPositionals: true, strict: false, options: OPTIONS }).positionals
  } catch {
    return []
  }
}

function outputFormat(raw: string | undefined): OutputFormat {
  if (raw === undefined || raw === 'text' || raw === 'stream-json') return raw ?? 'text'
  throw new UsageError(`--output: expected text or stream-json, got "${raw}"`)
}

function onOff(flag: string, raw: string | undefined): 'on' | 'off' | undefined {
  if (raw === undefined || raw === 'on' || raw === 'off') return raw
  throw new UsageError(`--${flag}: expected on or off, got "${raw}"`)
}

function number(flag: string, raw: string | undefined, rule: { integer: boolean; min: number; max?: number }): number | undefined {
  if (raw === undefined) return undefined
  const value = Number(raw)
  if (
    raw.trim() === '' ||
    !Number.isFinite(value) ||
    value < rule.min ||
    (rule.max !== undefined && value > rule.max) ||
    (rule.integer && !Number.isInteger(value))
  ) {
    const range = rule.max === undefined ? `>= ${rule.min}` : `from ${rule.min} to ${rule.max}`
    throw new UsageError(`--${flag}: expected ${rule.integer ? 'a whole number' : 'a number'} ${range}, got "${raw}"`)
  }
  return value
}

/**
 * What a stop signal (SIGINT, SIGTERM, SIGHUP) does to the running command:
 * `stopping`: it closes its work (the running turn is cancelled, closed and
 * written), then the process exits with the signal's code; `handled`: the
 * command took it and goes on (`loom dev` cancelled a task); `exit`: nothing
 * to close, exit now. An uncaught error stops the command as SIGTERM does, and
 * comes as `crash`: main() shows it, naming the plugin it came from, and makes
 * it the cause of the running turn's end; the command's own interrupt sees only
 * the signal.
 */
export type Interrupt = (signal: NodeJS.Signals, crash?: unknown) => 'stopping' | 'handled' | 'exit'

export interface MainOptions {
  io?: Io
  cwd?: string
  /** Where the task `-` is read from (default: process.stdin). */
  stdin?: AsyncIterable<string | Uint8Array>
  /** Receives what a stop signal does while the command runs (`undefined`: nothing runs yet, or any more). */
  onInterrupt?: (interrupt: Interrupt | undefined) => void
}

/**
 * Runs one `loom` invocation; resolves to the exit code. It reads the
 * environment from `process.env`, as the deployment's plugins do.
 */
export async function main(argv: readonly string[], options: MainOptions = {}): Promise<number> {
  const io = options.io ?? processIo
  const cwd = options.cwd ?? process.cwd()
  const err = styler(io.stderr)
  const fail = (message: string, code = 1) => {
    io.stderr.write(err.red(`loom: ${redact(message, hostSecrets())}`) + '\n')
    return code
  }
  // Everything that can be checked before anything loads: the command, its
  // options and arguments. A mistake is one line naming the help to read.
  let parsed: Parsed
  let plan: Plan
  // The session leases this process takes name it, so a refused writer reads `(loom run)`.
  let leaseCommand = 'loom'
  // On a terminal, a project layer that needs trust is shown and asked about; a script's command refuses it.
  let askTrust = false
  try {
    parsed = parse(argv)
    if (parsed.version) {
      const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
      io.stdout.write(`loom ${pkg.version} (node ${process.version})\n`)
      return 0
    }
    if (parsed.help) {
      io.stdout.write(helpFor(parsed.command))
      return 0
    }
    // No command: a conversation on a terminal; elsewhere the overview, as a usage error.
    const terminal = options.stdin === undefined && Boolean(process.stdin.isTTY) && Boolean(io.stdout.isTTY)
    if (!parsed.command.length && !terminal && !parsed.continue) {
      io.stdout.write(USAGE)
      return 2
    }
    const { command, args }: { command: CommandSpec; args: Record<string, string> } = parsed.command.length
      ? resolveCommand(parsed.command)
      : { command: CONVERSATION, args: {} }
    if ((command === CONVERSATION || command.name === 'resume') && !terminal) {
      throw new UsageError(
        `${parsed.continue ? '-c' : command.name}: a conversation needs a terminal (stdin and stdout); a script runs a turn with: loom sessions resume ID "<task>"`,
      )
    }
    if (command !== CONVERSATION) leaseCommand = `loom ${command.name}`
    askTrust = options.stdin === undefined && Boolean(process.stdin.isTTY) && Boolean(io.stderr.isTTY) && !HEADLESS.has(command.name)
    if (args.task === '-') args.task = await readTask(options.stdin ?? process.stdin, command.name)
    plan = command === CONVERSATION ? conversation(parsed.continue ? 'last' : undefined) : await PLANS[command.name as CommandName](args, parsed)
  } catch (error) {
    if ((error as Error)?.name !== 'UsageError') throw error
    return fail(`${(error as Error).message}; see: ${seeHelp(positionalsOf(argv))}`, 2)
  }

  const trust = { ask: askTrust ? (await import('./trust.ts')).terminalTrust(process.stdin, io.stderr) : undefined }
  const layers = { cwd, bundles: parsed.bundles, patches: parsed.patches, trust }
  const log: BootOptions['log'] = (level, text) =>
    io.stderr.write(err.yellow(`loom: ${level === 'info' ? '' : level === 'warn' ? 'warning: ' : `${level}: `}${text}`) + '\n')
  // What runs once the deployment is up, for an uncaught error: the plugin it came from, and the turn it stops.
  let running: { deployment: Deployment; runner: Runner } | undefined
  const crashed = (error: unknown) => {
    const culprit = running?.deployment.culprit(error)
    fail(`${culprit ? `uncaught error in ${culprit.label}` : 'internal error'}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    const text = (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).split('\n')[0]
    running?.runner.cancel({ kind: 'uncaught', error: redact(text, hostSecrets()), ...(culprit && { plugin: culprit.id }) })
  }
  const onInterrupt: MainOptions['onInterrupt'] = interrupt =>
    options.onInterrupt?.(
      interrupt &&
        ((signal, crash) => {
          if (crash !== undefined) crashed(crash)
          return interrupt(signal)
        }),
    )
  const context: Context = { parsed, io, cwd, layers, log, onInterrupt }
  let opened: { dispose(): Promise<void> } | undefined
  try {
    if (plan.on === 'nothing') return await plan.run(context)
    if (plan.on === 'store') {
      const { openStore } = await import('./sessions.ts')
      const store = await openStore({ ...layers, log })
      opened = store
      store.persistence.leaseCommand = leaseCommand
      // A signal lets the command finish what it writes (a repair), then exits.
      onInterrupt(() => 'stopping')
      return await plan.run(store, context)
    }
    const { boot } = await import('./boot.ts')
    // A tool call the policy asks about: the conversation asks at the terminal; a headless command answers by --approve.
    const { headlessApprover, terminalApprover } = await import('./approve.ts')
    // Under `serve --approve api` the server is the approver, once it starts.
    const approver = plan.asking ? terminalApprover({ asking: plan.asking }) : parsed.approve === 'api' ? undefined : headlessApprover(parsed.approve)
    const deployment = await boot({ ...layers, log, plugins: approver ? [approver] : [] })
    opened = deployment
    context.root = deployment.root
    const runner = deployment.root.get('runner') as Runner | undefined
    if (!runner) {
      throw new ConfigError("the deployment has no runner: add the row `- id: runner\n    name: '@loom/cli/runner'` (the CLI's own plugin serves its commands)")
    }
    const persistence = deployment.root.get('sessionPersistence')
    if (persistence) persistence.leaseCommand = leaseCommand
    running = { deployment, runner }
    onInterrupt(() => {
      runner.cancel()
      return 'stopping'
    })
    return await plan.run(runner, context)
  } catch (error) {
    // A usage error exits 2; known by its name, since the runner's come through
    // the Cordis loader, which may hold another copy of errors.ts (a hot reload).
    return fail((error as Error)?.message ?? String(error), (error as Error)?.name === 'UsageError' ? 2 : 1)
  } finally {
    await opened?.dispose().catch(error => fail(`shutting down: ${(error as Error).message}`))
    onInterrupt(undefined)
  }
}

/** Commands made for scripts: they never ask whether to trust a layer, even on a terminal. */
const HEADLESS = new Set(['run', 'serve', 'sessions resume'])

/** The task `-`: all of stdin up to its end, without the trailing line breaks; an empty one is a usage error. */
async function readTask(stdin: AsyncIterable<string | Uint8Array>, command: string): Promise<string> {
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })
  const task = (text + decoder.decode()).replace(/[\r\n]+$/, '')
  if (!task.trim()) throw new UsageError(`${command}: the task read from stdin (-) is empty`)
  return task
}

/** What a running command gets. */
export interface Context {
  parsed: Parsed
  io: Io
  cwd: string
  layers: { cwd: string; bundles: string[]; patches: string[]; trust: NonNullable<BootOptions['trust']> }
  log: BootOptions['log']
  onInterrupt: MainOptions['onInterrupt']
  /** The booted deployment's root context (`runner` plans; `serve` plugs its server there). */
  root?: Root
}

/** What a command needs, and what it does with it: nothing booted, the session store alone, or the runner of the whole deployment. */
type Plan =
  | { on: 'nothing'; run: (context: Context) => Promise<number> }
  | { on: 'store'; run: (store: StoredSessions, context: Context) => Promise<number> }
  | { on: 'runner'; run: (runner: Runner, context: Context) => Promise<number>; asking?: Asking }

const nothing = (run: (context: Context) => Promise<number>): Plan => ({ on: 'nothing', run })
const store = (run: (store: StoredSessions, context: Context) => Promise<number>): Plan => ({ on: 'store', run })
const runner = (run: (runner: Runner, context: Context) => Promise<number>, asking?: Asking): Plan => ({ on: 'runner', run, ...(asking && { asking }) })

/** A turn, shown as it runs. */
const turn = (start: (runner: Runner, context: Context, watch?: TurnWatcher) => Promise<TurnResult>) =>
  runner(async (on, context) => {
    const { showTurn } = await import('./present/turn.ts')
    return showTurn(context.io, context.parsed, watch => start(on, context, watch))
  })

const sessionsView = () => import('./present/sessions.ts')

/** `loom`, `loom -c`, `loom resume REF`: the conversation, on a new session or the stored one `ref` names. */
const conversation = (ref: string | undefined): Plan => {
  // Shared by the terminal approver and the conversation: a question is open.
  const asking: Asking = { asking: false }
  return runner(async (runner, { parsed, io, cwd, onInterrupt }) => {
    const { converse } = await import('./conversation.ts')
    return converse({ runner: () => runner, io, flags: { ...parsed, cwd }, session: ref, onInterrupt, asking })
  }, asking)
}

/**
 * Each command's plan, made from its arguments once they are checked (a
 * mistake found here is a usage error, before anything loads); the command
 * table and this map name the same commands.
 */
const PLANS: Record<CommandName, (args: Record<string, string>, parsed: Parsed) => Plan | Promise<Plan>> = {
  run: ({ task }) => turn((runner, { parsed, cwd }, watch) => runner.run(task, { ...parsed, cwd }, watch)),
  prompt: ({ against }, parsed) => {
    if (parsed.diff !== undefined) {
      const [a, b] = [parsed.diff, against ?? 'deployment']
      return nothing(async context => {
        const { manifestOf } = await import('./manifest-ref.ts')
        const { printManifestDiff } = await import('./present/prompt.ts')
        const before = await manifestOf(a, context)
        const after = await manifestOf(b, context)
        printManifestDiff(context.io, before, after, parsed.json)
        return 0
      })
    }
    if (against !== undefined) throw new UsageError(`prompt: "${against}" is the second side of a comparison: give the first with --diff`)
    return runner(async (runner, { parsed, io, cwd }) => {
      const { printPrompt } = await import('./present/prompt.ts')
      const report = await runner.prompt({ ...parsed, cwd })
      printPrompt(io, report, parsed.json)
      // What would fail `loom dev`'s turns fails here too; a session section that follows its file only warns.
      return report.unstable.some(instability => instability.severe) ? 1 : 0
    })
  },
  dev: () =>
    nothing(async ({ parsed, io, layers, onInterrupt }) => {
      const { dev } = await import('./dev.ts')
      return dev({ ...layers, flags: parsed, session: parsed.continue ? 'last' : undefined, io, onInterrupt })
    }),
  config: () =>
    nothing(async ({ parsed, io, layers, cwd }) => {
      const [{ compose }, { printConfig }, { untrustedLayers, refusal }] = await Promise.all([
        import('./compose.ts'),
        import('./present/config.ts'),
        import('./trust.ts'),
      ])
      const warn = (text: string) => io.stderr.write(`loom: warning: ${text}\n`)
      const composition = compose({ ...layers, warn })
      // Printing evaluates nothing, so an untrusted layer is shown (to review it), with what the commands that run it say.
      for (const untrusted of untrustedLayers(composition, cwd)) warn(refusal(untrusted))
      printConfig(io, composition, parsed.json)
      return 0
    }),
  trust: ({ path }) =>
    nothing(async ({ parsed, io, cwd }) => {
      const { trustCommand } = await import('./trust.ts')
      return trustCommand({ cwd, io, path, list: parsed.list, revoke: parsed.revoke, bundles: parsed.bundles, patches: parsed.patches })
    }),
  'sessions list': () =>
    store(async (store, { parsed, io }) => {
      ;(await sessionsView()).printSessionList(io, await store.list(), parsed.json)
      return 0
    }),
  'sessions show': ({ id: ref }) =>
    store(async (store, { parsed, io, cwd }) => {
      const id = await store.resolve(ref, cwd)
      ;(await sessionsView()).printSession(io, await store.show(id), parsed.json)
      return 0
    }),
  resume: ({ id }) => conversation(id),
  serve: async (_args, parsed) => {
    const { checkApprovalFlags, serve, serveToken } = await import('./serve.ts')
    // Checked before anything boots: no token, no server.
    checkApprovalFlags(parsed)
    const token = serveToken(parsed.tokenFile)
    return runner((runner, context) => serve(runner, { ...context, root: context.root!, token }))
  },
  'sessions resume': ({ id, task }) => turn((runner, { parsed, cwd }, watch) => runner.resume(id, task, { ...parsed, cwd }, watch)),
  'sessions verify': ({ id: ref }) =>
    store(async (store, { parsed, io, cwd }) => {
      const report = await store.verify(await store.resolve(ref, cwd))
      ;(await sessionsView()).printVerify(io, report, parsed.json)
      return report.clean ? 0 : 1
    }),
  'sessions repair': ({ id: ref }) =>
    store(async (store, { parsed, io, cwd }) => {
      const id = await store.resolve(ref, cwd)
      const repaired = await store.repair(id)
      ;(await sessionsView()).printRepair(io, id, repaired, parsed.json)
      return repaired.after.clean ? 0 : 1
    }),
  'sessions stats': ({ id: ref }, parsed) => {
    const prices = statsPrices(parsed.prices)
    return store(async (store, { io, cwd }) => {
      ;(await sessionsView()).printStats(io, await store.stats(await store.resolve(ref, cwd), prices), parsed.json)
      return 0
    })
  },
  'sessions manifest': ({ id: ref }, parsed) => {
    return store(async (store, { io, cwd }) => {
      const report = await store.manifest(await store.resolve(ref, cwd), parsed.step)
      ;(await import('./present/prompt.ts')).printSessionManifest(io, report, parsed.json)
      return 0
    })
  },
  'sessions compact': ({ id }) =>
    runner(async (runner, { parsed, io }) => {
      const report = await runner.compactSession(id, parsed)
      ;(await sessionsView()).printCompact(io, report, parsed.json)
      return report.status === 'refused' || report.status === 'failed' ? 1 : 0
    }),
  schema: () =>
    nothing(async ({ parsed, io, cwd }) => {
      const { writeSchema } = await import('./schema.ts')
      return writeSchema({ cwd, bundles: parsed.bundles, out: parsed.out, io })
    }),
  plugins: () =>
    nothing(async ({ parsed, io, cwd }) => {
      const [{ catalogue }, { printCatalogue }] = await Promise.all([import('./catalogue.ts'), import('./present/catalogue.ts')])
      printCatalogue(io, await catalogue(cwd), parsed.json)
      return 0
    }),
  'new plugin': ({ name }) =>
    nothing(async ({ io, cwd }) => {
      const { newPlugin } = await import('./scaffold.ts')
      return newPlugin(name, { cwd, io })
    }),
  help: ({ topic }) => {
    const text = helpFor(topic ? topic.split(/\s+/) : [])
    return nothing(async ({ io }) => {
      io.stdout.write(text)
      return 0
    })
  },
}

/** The `--*-price` flags (over the model's prices); a price must be a finite number >= 0. */
function statsPrices(typed: Parsed['prices']): Partial<CachePrices> {
  const prices: Partial<CachePrices> = {}
  for (const key of ['hit', 'miss', 'output', 'write'] as const) {
    const raw = typed[key]
    if (raw === undefined) continue
    const value = Number(raw)
    if (raw.trim() === '' || !Number.isFinite(value) || value < 0)
      throw new UsageError(`--${key}-price: expected a price per million tokens (a number >= 0), got "${raw}"`)
    prices[key] = value
  }
  return prices
}
