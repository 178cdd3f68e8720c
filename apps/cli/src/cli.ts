// The `loom` command line: parse against the command table (parse.ts,
// commands.ts), then run the command on what its plan (commands/) needs: nothing
// booted (`config`, `schema`, `plugins`, `new plugin`, `dev`, which boots its
// own), the session store alone (`sessions list`, `show`, `verify`, `repair`,
// `stats`, `manifest`), or the whole deployment and its runner (`run`, `prompt`,
// the conversation, `sessions resume`, `compact`). `loom` alone, on a terminal,
// is the conversation (conversation.ts). present/ does the printing. Everything
// heavy is imported by the command that needs it, so `loom --version` and
// `loom --help` load no host.
import { redact } from '@loom/secrets'
import { readFileSync } from 'node:fs'
import type { BootOptions, Deployment } from './boot.ts'
import { CONVERSATION, resolveCommand, type CommandName, type CommandSpec } from './commands.ts'
import { CONVERSATION_PLAN, PLANS } from './commands/index.ts'
import type { Context, MainOptions, Plan } from './context.ts'
import { ConfigError, UsageError } from './errors.ts'
import { helpFor, overview, seeHelp } from './help.ts'
import { parse, positionalsOf, type Parsed } from './parse.ts'
import { hostSecrets, processIo, styler } from './present/term.ts'
import type { Runner } from './runner.ts'

/** The overview that `loom --help` prints. */
export const USAGE = overview()

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
    const { plan: makePlan } = await (command === CONVERSATION ? CONVERSATION_PLAN() : PLANS[command.name as CommandName]())
    plan = await makePlan(args, parsed)
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
    onInterrupt(signal => {
      // A closed output (SIGPIPE: main.ts saw EPIPE) is nobody left to read, not a user's cancel.
      runner.cancel(signal === 'SIGPIPE' ? { kind: 'output-closed' } : { kind: 'user' })
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
