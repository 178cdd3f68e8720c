// The `loom` command line: parse, compose or boot, dispatch to the runner.
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { boot, type Deployment } from './boot.ts'
import { CLI_ROOT, compose, dumpRows, type Composition } from './compose.ts'
import { formatTime } from './describe.ts'
import { dev } from './dev.ts'
import { BootError, ConfigError, UsageError } from './errors.ts'
import { redact, redactDeep, secretValues } from '@loom/secrets'
import type { CachePrices, ReportedEconomics } from '@loom/session'
import type { PromptReport, Runner, StatsReport, VerifyReport } from './runner.ts'
import { processIo, styler, type Io } from './term.ts'

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

Options:
  --json                 machine-readable output (run, prompt, config, sessions)
  --provider <id>        model route (run, resume, prompt); default: deepseek, anthropic, openai, scripted (the first served)
  --model <id>           model id (run, resume, prompt)
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
    ({ values, positionals } = parseArgs({
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
  return {
    command: positionals,
    json: values.json === true,
    provider: values.provider as string | undefined,
    model: values.model as string | undefined,
    bundles: (values.bundle as string[] | undefined) ?? [],
    patches: (values.patch as string[] | undefined) ?? [],
    help: values.help === true,
    version: values.version === true,
    prices: { hit: values['hit-price'] as string | undefined, miss: values['miss-price'] as string | undefined, output: values['output-price'] as string | undefined },
    showReasoning: values['show-reasoning'] === true,
    thinking: onOff('thinking', values.thinking as string | undefined),
    reasoningEffort: values['reasoning-effort'] as string | undefined,
    maxSteps: number('max-steps', values['max-steps'] as string | undefined, { integer: true, min: 1 }),
    maxInputTokens: number('max-input-tokens', values['max-input-tokens'] as string | undefined, { integer: true, min: 1 }),
    maxCostUsd: number('max-cost', values['max-cost'] as string | undefined, { integer: false, min: 0 }),
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
  /** Receives the runner once the deployment is up. */
  onRunner?: (runner: Runner | undefined) => void
  /** Receives what a stop signal does while the command runs (`undefined`: nothing runs yet, or any more). */
  onInterrupt?: (interrupt: Interrupt | undefined) => void
}

/** Runs one `loom` invocation; resolves to the exit code. */
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
  let deployment: Deployment | undefined
  try {
    if (command === 'config') {
      expectArgs(command, rest, 0)
      printConfig(compose({ ...layers, warn: text => io.stderr.write(`loom: warning: ${text}\n`) }), parsed.json, io)
      return 0
    }
    if (command === 'dev') {
      expectArgs(command, rest, 0)
      return await dev({ ...layers, provider: parsed.provider, model: parsed.model, io, onInterrupt: options.onInterrupt })
    }
    const plan = plan_(command, rest)
    deployment = await boot({ ...layers, log: (level, text) => io.stderr.write(err.yellow(`loom: ${level === 'info' ? '' : level === 'warn' ? 'warning: ' : `${level}: `}${text}`) + '\n') })
    const runner = deployment.root.get('runner') as Runner | undefined
    if (!runner) {
      throw new ConfigError('the deployment has no runner: add the row `- id: runner\n    name: \'@loom/cli/runner\'` (the CLI\'s own plugin serves its commands)')
    }
    // The session leases this process takes name it, so a refused writer reads `(loom run)`.
    const persistence = deployment.root.get('sessionPersistence')
    if (persistence) persistence.leaseCommand = ['loom', command, ...(command === 'sessions' ? rest.slice(0, 1) : [])].join(' ')
    options.onRunner?.(runner)
    options.onInterrupt?.(() => {
      runner.cancel()
      return 'stopping'
    })
    return await plan(runner, parsed, io, cwd)
  } catch (error) {
    if (error instanceof UsageError) return fail(error.message, 2)
    if (error instanceof ConfigError || error instanceof BootError) return fail(error.message)
    return fail((error as Error)?.message ?? String(error))
  } finally {
    options.onRunner?.(undefined)
    await deployment?.dispose().catch(error => fail(`shutting down: ${(error as Error).message}`))
    options.onInterrupt?.(undefined)
  }
}

type Plan = (runner: Runner, parsed: Parsed, io: Io, cwd: string) => Promise<number>

function expectArgs(command: string, args: readonly string[], count: number, names = '') {
  if (args.length < count) throw new UsageError(`${command}: missing ${names}`)
  if (args.length > count && count >= 0) throw new UsageError(`${command}: unexpected argument "${args[count]}"`)
}

/** Checks the command before anything boots, and returns what to do once it did. */
function plan_(command: string, rest: string[]): Plan {
  switch (command) {
    case 'run': {
      const task = rest.join(' ').trim()
      if (!task) throw new UsageError('run: missing the task, as in: loom run "what is in this directory?"')
      return (runner, parsed, io, cwd) => runner.run(task, { ...parsed, cwd }, io)
    }
    case 'prompt':
      expectArgs(command, rest, 0)
      return async (runner, parsed, io, cwd) => {
        printPrompt(await runner.prompt({ ...parsed, cwd }), parsed.json, io)
        return 0
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
      return async (runner, parsed, io) => {
        const sessions = await runner.listSessions()
        if (parsed.json) {
          io.stdout.write(JSON.stringify(sessions, null, 2) + '\n')
        } else if (!sessions.length) {
          io.stdout.write('no stored sessions\n')
        } else {
          const rows = sessions.map(s => [s.id, formatTime(s.createdAt), String(s.turns), s.lastStatus ?? '-', s.cwd ?? '-'])
          const head = ['ID', 'CREATED', 'TURNS', 'LAST', 'CWD']
          const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
          const fmt = (r: string[]) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join('  ')
          io.stdout.write([fmt(head), ...rows.map(fmt)].join('\n') + '\n')
        }
        return 0
      }
    case 'show':
      needId()
      expectArgs('sessions show', more, 0)
      return async (runner, parsed, io) => {
        const shown = await runner.showSession(id)
        io.stdout.write(parsed.json ? JSON.stringify({ meta: shown.meta, events: shown.events }, null, 2) + '\n' : shown.text)
        return 0
      }
    case 'resume': {
      needId()
      const task = more.join(' ').trim()
      if (!task) throw new UsageError('sessions resume: missing the task, as in: loom sessions resume ID "and now?"')
      return (runner, parsed, io, cwd) => runner.resume(id, task, { ...parsed, cwd }, io)
    }
    case 'verify':
      needId()
      expectArgs('sessions verify', more, 0)
      return async (runner, parsed, io) => {
        const report = await runner.verifySession(id)
        if (parsed.json) io.stdout.write(JSON.stringify(report, null, 2) + '\n')
        else io.stdout.write(describeVerify(report))
        return report.clean ? 0 : 1
      }
    case 'repair':
      needId()
      expectArgs('sessions repair', more, 0)
      return async (runner, parsed, io) => {
        const { before, after } = await runner.repairSession(id)
        if (parsed.json) {
          io.stdout.write(JSON.stringify({ before, after }, null, 2) + '\n')
        } else if (before.corruption) {
          io.stdout.write(`session ${id} cannot be repaired: ${before.corruption}\n`)
        } else if (before.clean) {
          io.stdout.write(`session ${id} is clean: nothing to repair (${before.events} events)\n`)
        } else {
          const done: string[] = []
          if (before.tornBytes) done.push(`cut a torn tail of ${before.tornBytes} bytes`)
          for (const compaction of before.unfinishedCompactions ?? []) done.push(`closed the unfinished compaction ${compaction.compactionId}: appended compaction/end`)
          if (before.openTurn) done.push(`closed the open turn ${before.openTurn.turn}: appended ${before.openTurn.closers.join(', ')}`)
          io.stdout.write(`repaired session ${id}: ${done.join('; ')}\n${after.clean ? `the log is clean now (${after.events} events)` : 'the log is still not clean'}\n`)
        }
        return after.clean ? 0 : 1
      }
    case 'stats':
      needId()
      expectArgs('sessions stats', more, 0)
      return async (runner, parsed, io) => {
        const stats = await runner.statsSession(id, statsPrices(parsed.prices))
        io.stdout.write(parsed.json ? JSON.stringify(stats, null, 2) + '\n' : describeStats(stats))
        return 0
      }
    case 'compact':
      needId()
      expectArgs('sessions compact', more, 0)
      return async (runner, parsed, io) => {
        const report = await runner.compactSession(id, parsed)
        if (parsed.json) {
          io.stdout.write(JSON.stringify(report, null, 2) + '\n')
        } else {
          const tokens = `~${report.tokensBefore} → ~${report.tokensAfter} estimated tokens`
          const pruned = report.pruned ? `, ${report.pruned} tool results pruned` : ''
          io.stdout.write(report.status === 'compacted'
            ? `compacted session ${id}: ${report.summarized} messages summarized${pruned}; ${tokens}\n`
            : `session ${id} was not summarized (${report.status}: ${report.reason})${pruned}; ${tokens}\n`)
        }
        return report.status === 'refused' || report.status === 'failed' ? 1 : 0
      }
    default:
      throw new UsageError(sub ? `unknown sessions command "${sub}" (list, show, resume, verify, repair, stats, compact)` : 'sessions: missing the command (list, show, resume, verify, repair, stats, compact)')
  }
}

/** The `--*-price` flags (over the model's prices); a price must be a finite number >= 0. */
function statsPrices(typed: Parsed['prices']): Partial<CachePrices> {
  const prices: Partial<CachePrices> = {}
  for (const key of ['hit', 'miss', 'output'] as const) {
    const raw = typed[key]
    if (raw === undefined) continue
    const value = Number(raw)
    if (raw.trim() === '' || !Number.isFinite(value) || value < 0) throw new UsageError(`--${key}-price: expected a price per million tokens (a number >= 0), got "${raw}"`)
    prices[key] = value
  }
  return prices
}

function describeStats(stats: StatsReport): string {
  const { requests, totals, prices } = stats
  const percent = (share: number | null) => share === null ? '-' : `${(Math.floor(share * 1000) / 10).toFixed(1)}%`
  const money = (value: number) => `$${value.toFixed(6)}`
  const head = ['#', 'TURN', 'STEP', 'CHARS', 'REUSE', 'HIT TOK', 'MISS TOK', 'OUT TOK', 'INPUT COST', 'REPORTED IN', 'CACHED', 'REPORTED COST']
  const reported = (r: ReportedEconomics | null) => r ? [String(r.inputTokens), percent(r.hitShare), money(r.inputCost + r.outputCost)] : ['-', '-', '-']
  const rows = requests.map(r => [String(r.index + 1), String(r.turn ?? '-'), String(r.step ?? '-'), String(r.chars), percent(r.reuse), String(r.hitTokens), String(r.missTokens), String(r.outputTokens), money(r.inputCost), ...reported(r.reported)])
  const total = ['total', '', '', String(totals.chars), percent(totals.meanReuse), String(totals.hitTokens), String(totals.missTokens), String(totals.outputTokens), money(totals.inputCost), ...reported(totals.reported)]
  const widths = head.map((h, i) => Math.max(h.length, ...[...rows, total].map(r => r[i].length)))
  const fmt = (r: string[]) => r.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join('  ')
  const lines = [
    `session ${stats.id}: ${totals.requests} request${totals.requests === 1 ? '' : 's'}`,
    `  prices per million tokens: cache hit ${prices.hit}, cache miss ${prices.miss}, output ${prices.output}; tokens ~ characters / 4 of the serialized request`,
    `  REUSE: share of the previous request's serialization (tools, system, messages) reused unchanged as this one's prefix`,
    `  REPORTED: what the provider reported (input tokens incl. cache reads, share of them read from its cache, cost of input and output)`,
    '',
    fmt(head),
    ...rows.map(fmt),
    fmt(total),
    '',
    `prefix reuse: mean ${percent(totals.meanReuse)}, min ${percent(totals.minReuse)}`,
    `estimated input cost: ${money(totals.inputCost)} (${money(totals.uncachedInputCost)} with no cache); output cost: ${money(totals.outputCost)}`,
    totals.reported
      ? `reported by the provider (${totals.reported.requests} of ${totals.requests} requests): ${totals.reported.inputTokens} input tokens, ${percent(totals.reported.hitShare)} from its cache; cost ${money(totals.reported.inputCost)} input + ${money(totals.reported.outputCost)} output`
      : 'the provider reported no usage',
  ]
  return lines.join('\n') + '\n'
}

function describeVerify(report: VerifyReport): string {
  const lines = [`session ${report.id}: ${report.clean ? 'clean' : 'NOT clean'}`, `  log      ${report.path}`]
  if (report.corruption) {
    lines.push(`  corrupt  ${report.corruption}`)
  } else {
    lines.push(`  events   ${report.events} committed`)
    lines.push(`  tail     ${report.tornBytes ? `torn: ${report.tornBytes} bytes after the last complete line would be cut` : 'intact'}`)
    lines.push(`  turns    ${report.openTurn ? `turn ${report.openTurn.turn} is open; repair appends ${report.openTurn.closers.join(', ')}` : 'all closed'}`)
    // A crash inside a compaction (`loom sessions compact`, or one before a step) leaves its start without an end.
    for (const { compactionId, turn } of report.unfinishedCompactions ?? []) {
      lines.push(`  compact  unfinished compaction ${compactionId} (${turn === null ? 'between turns' : `in turn ${turn}`}); repair appends compaction/end`)
    }
    if (!report.clean) lines.push(`  repair with: loom sessions repair ${report.id}`)
  }
  return lines.join('\n') + '\n'
}

/** The host's secret values (provider keys, tokens, passwords in URLs): never printed. */
const hostSecrets = () => secretValues(process.env)

function printConfig(composition: Composition, json: boolean, io: Io) {
  const layers = composition.layers.map(({ kind, label, file }) => ({ kind, label, file }))
  // A literal `apiKey:` in loom.yml, or a known secret inside any value, is shown as [REDACTED].
  const rows = redactDeep(composition.rows, hostSecrets())
  if (json) {
    io.stdout.write(JSON.stringify({ layers, rows }, null, 2) + '\n')
    return
  }
  const width = Math.max(...layers.map(layer => `${layer.kind} ${layer.label}`.length))
  const header = [
    '# The deployment as it boots: these rows, in this order, mounted by the Cordis loader.',
    '# Layers, applied in order over an empty list:',
    ...layers.map(layer => `#   ${`${layer.kind} ${layer.label}`.padEnd(width)}  ${layer.file.startsWith(CLI_ROOT) ? '<loom>/' + layer.file.slice(CLI_ROOT.length) : layer.file}`),
  ]
  io.stdout.write(header.join('\n') + '\n' + dumpRows(rows))
}

function printPrompt(report: PromptReport, json: boolean, io: Io) {
  if (json) {
    io.stdout.write(JSON.stringify(redactDeep(report, hostSecrets()), null, 2) + '\n')
    return
  }
  const out = styler(io.stdout)
  const rule = (title: string) => out.bold(`── ${title} ${'─'.repeat(Math.max(0, 60 - title.length))}`) + '\n'
  let text = rule(`route: ${report.provider ? `${report.provider}/${report.model}` : 'none (no model provider is configured)'}`)
  text += '\n' + rule('system') + report.system + '\n\n'
  text += rule(`tools, in request order (${report.tools.length})`)
  report.tools.forEach((tool, i) => {
    text += `${i + 1}. ${out.bold(tool.name)}  ${out.dim(`← ${tool.owner}`)}\n   ${tool.description}\n`
  })
  text += '\n' + rule('runtime-context snapshot (user message)') + (report.runtimeContext || '(none)') + '\n'
  const { rows, totals } = report.manifest
  const table = (head: string[], body: string[][], right: number[]) => {
    const widths = head.map((h, i) => Math.max(h.length, ...body.map(r => r[i].length)))
    const fmt = (r: string[]) => r.map((c, i) => right.includes(i) ? c.padStart(widths[i]) : i === r.length - 1 ? c : c.padEnd(widths[i])).join('  ')
    return [out.bold(fmt(head)), ...body.map(fmt)].join('\n') + '\n'
  }
  text += '\n' + rule(`manifest (${rows.length} rows, ~${totals.tokens} tokens estimated)`)
  text += table(
    ['KIND', 'NAME', 'OWNER', 'ORDER', 'STABILITY', 'CHARS', 'TOKENS', 'SHA256'],
    rows.map(r => [r.kind, r.name, r.owner, String(r.order), r.stability ?? '-', String(r.chars), String(r.tokens), r.sha256.slice(0, 12)]),
    [3, 5, 6],
  )
  text += '\n' + table(['OWNER', 'ROWS', 'CHARS', 'TOKENS'], totals.byOwner.map(t => [t.owner, String(t.rows), String(t.chars), String(t.tokens)]), [1, 2, 3])
  io.stdout.write(redact(text, hostSecrets()))
}
