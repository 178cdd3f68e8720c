// The `loom` command line: parse, then run the command on what it needs: the
// composed rows (`config`), the session store alone (`sessions list`, `show`,
// `verify`, `repair`, `stats`), or the whole deployment and its runner (`run`,
// `prompt`, `sessions resume`, `compact`, `dev`). present/ does the printing.
import { redact } from '@loom/secrets'
import type { CachePrices } from '@loom/session'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { boot, type BootOptions } from './boot.ts'
import { compose } from './compose.ts'
import { dev } from './dev.ts'
import { ConfigError, UsageError } from './errors.ts'
import { printConfig } from './present/config.ts'
import { printPrompt } from './present/prompt.ts'
import { printCompact, printRepair, printSession, printSessionList, printStats, printVerify } from './present/sessions.ts'
import { hostSecrets, processIo, styler, type Io } from './present/term.ts'
import { showTurn } from './present/turn.ts'
import type { Runner } from './runner.ts'
import { openStore, type StoredSessions } from './sessions.ts'

export const USAGE = `Usage: loom <command> [options]

Commands:
  run "<task>"                 one headless turn of an agent in the current directory
  prompt                       the request the deployment would send next (no model call)
  dev                          the deployment with hot reload: edit a plugin or loom.yml while it runs
  config                       the deployment's rows, composed from its layers, as they boot
  sessions list                stored sessions: id, created, cwd, turns
  sessions show ID             a session log as a readable transcript
  sessions resume ID "<task>"  a new turn on a stored session (output as for run)
  sessions verify ID           check a log: torn tail, open turn, corruption (exit 1 if not clean)
  sessions repair ID           repair a log on disk and say what was done
  sessions stats ID            prefix reuse between consecutive requests, and their estimated input cost
  sessions compact ID          summarize the older part of a session now (exit 1 if the summary is refused)

Options (a command refuses one it does not use):
  --json                 machine-readable output (run, prompt, config, sessions)
  --provider <id>        model route (run, resume, prompt, dev, compact); default: deepseek, anthropic, openai, scripted (the first served)
  --model <id>           model id (run, resume, prompt, dev, compact)
  --thinking on|off      thinking mode of the model (run, resume); off sends reasoning effort "off"
  --reasoning-effort <e> reasoning effort the route offers, e.g. low, high, max (run, resume)
  --show-reasoning       print the model's reasoning as it streams, dimmed (run, resume)
  --max-steps <n>        model requests per turn before the turn stops (run, resume; default 50)
  --max-input-tokens <n> input tokens per turn, as the provider reports them (run, resume)
  --max-cost <usd>       estimated US dollars per turn at the model's prices (run, resume)
  --bundle <name>        bundle layer(s), in order (default: default; the CLI also ships minimal)
  --patch <file>         a patch layer applied after loom.yml; repeatable, in order
  --hit-price <P>        sessions stats: price per million cache-hit input tokens (default: the model's; deepseek-flash 0.006)
  --miss-price <P>       sessions stats: price per million cache-miss input tokens (default: the model's; deepseek-flash 0.30)
  --output-price <P>     sessions stats: price per million output tokens (default: the model's; deepseek-flash 1.20)
  -h, --help             this help
  -v, --version          versions of loom and Node

Environment:
  DEEPSEEK_API_KEY               use DeepSeek (route deepseek, model deepseek-flash); DEEPSEEK_BASE_URL overrides its URL
  ANTHROPIC_API_KEY              use Anthropic (route anthropic); ANTHROPIC_BASE_URL overrides its URL
  OPENAI_BASE_URL, OPENAI_API_KEY  use an OpenAI-compatible server (route openai); OPENAI_MODEL picks the model
  LOOM_HOME                      where sessions are stored (default ~/.loom; sessions in $LOOM_HOME/sessions)
  With no key set, an offline demo model answers (route scripted).
`

export interface Parsed {
  command: string[]
  json: boolean
  provider?: string
  model?: string
  bundles: string[]
  patches: string[]
  help: boolean
  version: boolean
  /** `sessions stats` prices per million tokens, as typed (checked by the command). */
  prices: { hit?: string; miss?: string; output?: string }
  showReasoning: boolean
  thinking?: 'on' | 'off'
  reasoningEffort?: string
  maxSteps?: number
  maxInputTokens?: number
  maxCostUsd?: number
}

export function parse(argv: readonly string[]): Parsed {
  // `pnpm loom -- ...` passes the `--` through.
  const args = argv.filter(arg => arg !== '--')
  let values: Record<string, unknown>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean' },
        provider: { type: 'string' },
        model: { type: 'string' },
        bundle: { type: 'string', multiple: true },
        patch: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
        'hit-price': { type: 'string' },
        'miss-price': { type: 'string' },
        'output-price': { type: 'string' },
        'show-reasoning': { type: 'boolean' },
        thinking: { type: 'string' },
        'reasoning-effort': { type: 'string' },
        'max-steps': { type: 'string' },
        'max-input-tokens': { type: 'string' },
        'max-cost': { type: 'string' },
      },
    }))
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''))
  }
  checkOptions(positionals, Object.keys(values))
  return {
    command: positionals,
    json: values.json === true,
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
    },
    showReasoning: values['show-reasoning'] === true,
    thinking: onOff('thinking', values.thinking as string | undefined),
    reasoningEffort: values['reasoning-effort'] as string | undefined,
    maxSteps: number('max-steps', values['max-steps'] as string | undefined, { integer: true, min: 1 }),
    maxInputTokens: number('max-input-tokens', values['max-input-tokens'] as string | undefined, { integer: true, min: 1 }),
    maxCostUsd: number('max-cost', values['max-cost'] as string | undefined, { integer: false, min: 0 }),
  }
}

const TURN = ['run', 'sessions resume']
const ROUTE = [...TURN, 'prompt', 'dev', 'sessions compact']
/** The commands each option applies to, as USAGE says; every other option goes with any command. */
const OPTION_COMMANDS: Record<string, readonly string[]> = {
  json: ['run', 'prompt', 'config', ...['list', 'show', 'resume', 'verify', 'repair', 'stats', 'compact'].map(sub => `sessions ${sub}`)],
  provider: ROUTE,
  model: ROUTE,
  thinking: TURN,
  'reasoning-effort': TURN,
  'show-reasoning': TURN,
  'max-steps': TURN,
  'max-input-tokens': TURN,
  'max-cost': TURN,
  'hit-price': ['sessions stats'],
  'miss-price': ['sessions stats'],
  'output-price': ['sessions stats'],
}

/** An option the command does not use is refused: silently ignoring `loom config --model x` would mislead. */
function checkOptions(positionals: readonly string[], given: readonly string[]) {
  const [command, sub] = positionals
  const name = command === 'sessions' ? `sessions ${sub}` : command
  if (name === undefined || name === 'help') return
  for (const option of given) {
    const commands = OPTION_COMMANDS[option]
    if (commands && !commands.includes(name)) throw new UsageError(`${name}: --${option} does not apply here (it is for: ${commands.join(', ')})`)
  }
}

function onOff(flag: string, raw: string | undefined): 'on' | 'off' | undefined {
  if (raw === undefined || raw === 'on' || raw === 'off') return raw
  throw new UsageError(`--${flag}: expected on or off, got "${raw}"`)
}

function number(flag: string, raw: string | undefined, rule: { integer: boolean; min: number }): number | undefined {
  if (raw === undefined) return undefined
  const value = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(value) || value < rule.min || (rule.integer && !Number.isInteger(value))) {
    throw new UsageError(`--${flag}: expected ${rule.integer ? 'a whole number' : 'a number'} >= ${rule.min}, got "${raw}"`)
  }
  return value
}

/**
 * What a stop signal (SIGINT, SIGTERM, SIGHUP) does to the running command:
 * `stopping`: it closes its work (the running turn is cancelled, closed and
 * written), then the process exits with the signal's code; `handled`: the
 * command took it and goes on (`loom dev` cancelled a task); `exit`: nothing
 * to close, exit now.
 */
export type Interrupt = (signal: NodeJS.Signals) => 'stopping' | 'handled' | 'exit'

export interface MainOptions {
  io?: Io
  cwd?: string
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
  let parsed: Parsed
  try {
    parsed = parse(argv)
  } catch (error) {
    return fail(`${(error as Error).message}\n\n${USAGE}`, 2)
  }
  if (parsed.version) {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    io.stdout.write(`loom ${pkg.version} (node ${process.version})\n`)
    return 0
  }
  const [command, ...rest] = parsed.command
  if (parsed.help || command === undefined || command === 'help') {
    io.stdout.write(USAGE)
    return command === undefined && !parsed.help ? 2 : 0
  }

  const layers = { cwd, bundles: parsed.bundles, patches: parsed.patches }
  const log: BootOptions['log'] = (level, text) =>
    io.stderr.write(err.yellow(`loom: ${level === 'info' ? '' : level === 'warn' ? 'warning: ' : `${level}: `}${text}`) + '\n')
  let opened: { dispose(): Promise<void> } | undefined
  try {
    if (command === 'config') {
      expectArgs(command, rest, 0)
      printConfig(io, compose({ ...layers, warn: text => io.stderr.write(`loom: warning: ${text}\n`) }), parsed.json)
      return 0
    }
    if (command === 'dev') {
      expectArgs(command, rest, 0)
      return await dev({ ...layers, provider: parsed.provider, model: parsed.model, io, onInterrupt: options.onInterrupt })
    }
    const plan = planCommand(command, rest)
    // The session leases this process takes name it, so a refused writer reads `(loom run)`.
    const leaseCommand = ['loom', command, ...(command === 'sessions' ? rest.slice(0, 1) : [])].join(' ')
    if (plan.on === 'store') {
      const store = await openStore({ ...layers, log })
      opened = store
      store.persistence.leaseCommand = leaseCommand
      // A signal lets the command finish what it writes (a repair), then exits.
      options.onInterrupt?.(() => 'stopping')
      return await plan.run(store, parsed, io)
    }
    const deployment = await boot({ ...layers, log })
    opened = deployment
    const runner = deployment.root.get('runner') as Runner | undefined
    if (!runner) {
      throw new ConfigError("the deployment has no runner: add the row `- id: runner\n    name: '@loom/cli/runner'` (the CLI's own plugin serves its commands)")
    }
    const persistence = deployment.root.get('sessionPersistence')
    if (persistence) persistence.leaseCommand = leaseCommand
    options.onInterrupt?.(() => {
      runner.cancel()
      return 'stopping'
    })
    return await plan.run(runner, parsed, io, cwd)
  } catch (error) {
    // A usage error exits 2; known by its name, since the runner's come through
    // the Cordis loader, which may hold another copy of errors.ts (a hot reload).
    return fail((error as Error)?.message ?? String(error), (error as Error)?.name === 'UsageError' ? 2 : 1)
  } finally {
    await opened?.dispose().catch(error => fail(`shutting down: ${(error as Error).message}`))
    options.onInterrupt?.(undefined)
  }
}

/** What a command needs, and what it does with it: the session store alone, or the runner of the whole deployment. */
type Plan =
  | { on: 'store'; run: (store: StoredSessions, parsed: Parsed, io: Io) => Promise<number> }
  | { on: 'runner'; run: (runner: Runner, parsed: Parsed, io: Io, cwd: string) => Promise<number> }

function expectArgs(command: string, args: readonly string[], count: number, names = '') {
  if (args.length < count) throw new UsageError(`${command}: missing ${names}`)
  if (args.length > count && count >= 0) throw new UsageError(`${command}: unexpected argument "${args[count]}"`)
}

/** Checks the command before anything boots, and returns what to do once it did. */
function planCommand(command: string, rest: string[]): Plan {
  switch (command) {
    case 'run': {
      const task = rest.join(' ').trim()
      if (!task) throw new UsageError('run: missing the task, as in: loom run "what is in this directory?"')
      return { on: 'runner', run: (runner, parsed, io, cwd) => showTurn(io, parsed, watch => runner.run(task, { ...parsed, cwd }, watch)) }
    }
    case 'prompt':
      expectArgs(command, rest, 0)
      return {
        on: 'runner',
        run: async (runner, parsed, io, cwd) => {
          printPrompt(io, await runner.prompt({ ...parsed, cwd }), parsed.json)
          return 0
        },
      }
    case 'sessions':
      return planSessions(rest)
    default:
      throw new UsageError(`unknown command "${command}"\n\n${USAGE}`)
  }
}

function planSessions(rest: string[]): Plan {
  const [sub, id, ...more] = rest
  const needId = () => {
    if (!id) throw new UsageError(`sessions ${sub}: missing the session id (see: loom sessions list)`)
  }
  switch (sub) {
    case 'list':
      expectArgs('sessions list', rest.slice(1), 0)
      return {
        on: 'store',
        run: async (store, parsed, io) => {
          printSessionList(io, await store.list(), parsed.json)
          return 0
        },
      }
    case 'show':
      needId()
      expectArgs('sessions show', more, 0)
      return {
        on: 'store',
        run: async (store, parsed, io) => {
          printSession(io, await store.show(id), parsed.json)
          return 0
        },
      }
    case 'resume': {
      needId()
      const task = more.join(' ').trim()
      if (!task) throw new UsageError('sessions resume: missing the task, as in: loom sessions resume ID "and now?"')
      return { on: 'runner', run: (runner, parsed, io, cwd) => showTurn(io, parsed, watch => runner.resume(id, task, { ...parsed, cwd }, watch)) }
    }
    case 'verify':
      needId()
      expectArgs('sessions verify', more, 0)
      return {
        on: 'store',
        run: async (store, parsed, io) => {
          const report = await store.verify(id)
          printVerify(io, report, parsed.json)
          return report.clean ? 0 : 1
        },
      }
    case 'repair':
      needId()
      expectArgs('sessions repair', more, 0)
      return {
        on: 'store',
        run: async (store, parsed, io) => {
          const repaired = await store.repair(id)
          printRepair(io, id, repaired, parsed.json)
          return repaired.after.clean ? 0 : 1
        },
      }
    case 'stats':
      needId()
      expectArgs('sessions stats', more, 0)
      return {
        on: 'store',
        run: async (store, parsed, io) => {
          printStats(io, await store.stats(id, statsPrices(parsed.prices)), parsed.json)
          return 0
        },
      }
    case 'compact':
      needId()
      expectArgs('sessions compact', more, 0)
      return {
        on: 'runner',
        run: async (runner, parsed, io) => {
          const report = await runner.compactSession(id, parsed)
          printCompact(io, report, parsed.json)
          return report.status === 'refused' || report.status === 'failed' ? 1 : 0
        },
      }
    default:
      throw new UsageError(
        sub
          ? `unknown sessions command "${sub}" (list, show, resume, verify, repair, stats, compact)`
          : 'sessions: missing the command (list, show, resume, verify, repair, stats, compact)',
      )
  }
}

/** The `--*-price` flags (over the model's prices); a price must be a finite number >= 0. */
function statsPrices(typed: Parsed['prices']): Partial<CachePrices> {
  const prices: Partial<CachePrices> = {}
  for (const key of ['hit', 'miss', 'output'] as const) {
    const raw = typed[key]
    if (raw === undefined) continue
    const value = Number(raw)
    if (raw.trim() === '' || !Number.isFinite(value) || value < 0)
      throw new UsageError(`--${key}-price: expected a price per million tokens (a number >= 0), got "${raw}"`)
    prices[key] = value
  }
  return prices
}
