// `loom dev`: the conversation of `loom` (conversation.ts) on a deployment with
// hot reload. Saving a plugin file replaces that plugin (its old contributions
// vanish, the new ones apply at the next step of the same agent and session,
// and the turn shows which plugin changed the request); an edit that does not
// compile, or whose plugin does not start, keeps the last good version and
// prints the error with its location; an edit of a layer file (loom.yml, a
// --patch) applies as one transaction or not at all, and the conversation goes
// on with its session. Ctrl-C cancels the running turn; at an empty prompt it quits.
import type { Context, Fiber, Plugin } from '@deepseek-ai/cordis'
import Hmr from '@deepseek-ai/cordis-plugin-hmr'
import Timer from '@deepseek-ai/cordis-plugin-timer'
import { spawn } from 'node:child_process'
import { constants } from 'node:os'
import { relative } from 'node:path'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { type Asking, terminalApprover } from './approve.ts'
import { boot, startMessage, type Deployment } from './boot.ts'
import { findProjectLayer, userLayer } from './compose.ts'
import type { Interrupt } from './context.ts'
import { converse } from './conversation.ts'
import { BootError, ConfigError } from './errors.ts'
import { styler, type Io } from './present/term.ts'
import { terminalTrust } from './trust.ts'
import type { RunFlags, Runner } from './runner.ts'

export interface DevOptions {
  cwd: string
  bundles: string[]
  patches: string[]
  /** The route and limits of the conversation's turns, as `loom` takes them. */
  flags?: Omit<RunFlags, 'cwd'> & { showReasoning?: boolean }
  /** Continue this stored session (an id, a unique prefix, or `last`) instead of starting a new one. */
  session?: string
  io: Io
  input?: Readable
  /** Receives what a stop signal does while dev runs (see `Interrupt`). */
  onInterrupt?: (interrupt: Interrupt | undefined) => void
}

/**
 * Hot reload needs Node's internal module loader (`--expose-internals`). Without
 * it, `loom dev` starts itself again with the flag and passes its exit code on.
 * Signals sent to this process are passed on; when they came to the whole
 * process group the child gets them twice, and takes the second as a duplicate.
 */
export function relaunchWithInternals(onInterrupt?: DevOptions['onInterrupt']): Promise<number> {
  return new Promise(resolve => {
    // As bin/loom.js: the child stops as on SIGTERM when this process dies, a SIGKILL included (main.ts watches fd 3).
    const child = spawn(process.execPath, ['--expose-internals', ...process.execArgv, ...process.argv.slice(1)], {
      stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
      env: { ...process.env, LOOM_LAUNCHER_FD: '3' },
    })
    onInterrupt?.(signal => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return 'handled'
    })
    child.on('exit', (code, signal) => resolve(signal ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1)))
    child.on('error', error => {
      process.stderr.write(`loom: cannot restart with --expose-internals: ${error.message}\n`)
      resolve(1)
    })
  })
}

export async function dev(options: DevOptions): Promise<number> {
  if (!process.execArgv.includes('--expose-internals')) return relaunchWithInternals(options.onInterrupt)
  const { io, cwd } = options
  const out = styler(io.stdout)
  // Until the conversation starts, plain writes; then its printer, which keeps the line being typed intact.
  let print = (text: string, stream: 'stdout' | 'stderr' = 'stdout') => io[stream].write(text + '\n')
  const say = (text: string) => print(text)
  const warn = (text: string) => print(styler(io.stderr).yellow(`loom: ${text}`), 'stderr')
  // Shared by the terminal approver and the conversation: a question is open.
  const asking: Asking = { asking: false }
  const input = options.input ?? process.stdin

  // Until the conversation owns the terminal, a layer that needs trust is shown and asked about there.
  const trust = { ask: options.input === undefined && process.stdin.isTTY && io.stderr.isTTY ? terminalTrust(input, io.stderr) : undefined }
  const deployment: Deployment = await boot({
    cwd,
    bundles: options.bundles,
    patches: options.patches,
    trust,
    // awaitWriteFinish: an editor's save can arrive as a truncation and a write;
    // reloading between the two would import an empty or half-written file.
    // The folder is watched, and so are the layer files outside it (a project's
    // loom.yml above a subfolder, the operator's own).
    plugins: [
      { plugin: Timer },
      { plugin: Hmr, config: { root: ['.', ...layersOutside(cwd)], awaitWriteFinish: { stabilityThreshold: 50, pollInterval: 10 } } },
      terminalApprover({ input, output: process.stdout, asking }),
    ],
    log: (level, text) => warn(level === 'info' ? text : `${level === 'warn' ? 'warning' : level}: ${text}`),
  })
  // From now on an untrusted edit of a layer is not applied: the message names `loom trust`.
  trust.ask = undefined
  const root = deployment.root
  // In development an unstable prompt contribution fails its turn, naming the section and plugin.
  root.get('systemPrompt')?.enforceStability('error')
  const runner = () => root.get('runner') as Runner | undefined
  const flags = { ...options.flags, cwd, showReasoning: options.flags?.showReasoning === true }
  const modules = new GoodModules(root)

  /** The sections and tools now in the prompt, one line each, with their owners. */
  const summary = async () => {
    const current = runner()
    if (!current) return say('(the deployment has no runner row: nothing to show)')
    try {
      const report = await current.prompt(flags)
      say(out.bold('prompt:') + ' ' + report.sections.map(s => `${s.name} ${out.dim(`← ${s.owner}`)}`).join(', '))
      say(out.bold('tools:') + ' ' + (report.tools.map(t => t.name).join(', ') || '(none)'))
      // Said before a turn fails on it (PROMPT_UNSTABLE at the agent's next step).
      for (const { message } of report.unstable) warn(message)
    } catch (error) {
      warn(`the prompt does not assemble: ${(error as Error).message}`)
    }
  }

  // Module reloads. HMR has disposed the old fibers and plugged the new module;
  // a module that fails to import never gets here (HMR keeps the old one and logs
  // the error with its location). A new version that does not start (its apply
  // throws, its config is invalid for its new schema) is swapped back for the last
  // good one, so its sections and tools stay.
  root.on('hmr/reload', async reloads => {
    await root.loader.await()
    const reloaded: string[] = []
    for (const [previous, { filename, runtime }] of reloads) {
      const file = relative(cwd, fileURLToPath(filename))
      const problem = runtime && (await modules.restoreIfBroken(previous, filename, runtime))
      if (problem)
        warn(`${locate(problem.error, filename, cwd) ?? file}: ${problem.message}; the edited plugin did not start, so the last good version runs again`)
      else reloaded.push(file)
    }
    await root.loader.await()
    modules.remember()
    if (reloaded.length) say(out.green(`reloaded ${reloaded.join(', ')}`))
    for (const problem of await deployment.problems()) warn(problem)
    await summary()
  })

  // Layer files are not modules: an edit recomposes the whole deployment, as one transaction.
  const layerFiles = () => new Set(deployment.composition.layers.map(layer => layer.file))
  root.on('hmr/change', async url => {
    if (!url.startsWith('file:') || !layerFiles().has(fileURLToPath(url))) return
    const file = relative(cwd, fileURLToPath(url))
    try {
      await deployment.recompose()
      modules.remember()
      say(out.green(`applied ${file}`))
      await summary()
    } catch (error) {
      if (!(error instanceof ConfigError || error instanceof BootError)) throw error
      const detail = error instanceof BootError ? error.problems.join('\n  ') : error.message.replace(/\n/g, '\n  ')
      warn(`${file} not applied: ${detail}\n  the running deployment is unchanged`)
    }
  })

  say(`loom dev: watching ${cwd}`)
  say(out.dim('edit a plugin or loom.yml and the next step uses it; /prompt shows the request, /help the commands'))
  await summary()
  try {
    return await converse({
      runner: () => {
        const current = runner()
        if (!current) throw new Error("the deployment has no runner row now: add `- id: runner` with name '@loom/cli/runner' to loom.yml")
        return current
      },
      io,
      flags,
      session: options.session,
      input,
      onInterrupt: options.onInterrupt,
      asking,
      onPrinter: printer => {
        print = printer
      },
    })
  } finally {
    await deployment.dispose()
  }
}

// FiberState is a const enum in Cordis: its values, for reading `fiber.state`.
const PENDING = 0
const FAILED = 3

/**
 * The module each project file had when the deployment last ran well. HMR
 * re-imports an edited plugin and plugs the new version in place of the old one;
 * when that version does not start, the old module and its fibers come back.
 */
class GoodModules {
  private readonly root: Context
  private readonly good = new Map<string, unknown>()

  constructor(root: Context) {
    this.root = root
    this.remember()
  }

  private get cache(): Map<string, unknown> {
    return this.root.loader.internal!.loadCache as unknown as Map<string, unknown>
  }

  /** Records the modules loaded now (the loader cache holds one entry per URL). */
  remember() {
    // Map.prototype: Node 24's loader cache overrides get/set with a per-type slot.
    for (const [url, job] of Map.prototype.entries.call(this.cache) as Iterable<[string, unknown]>) {
      if (url.startsWith('file:') && !url.includes('/node_modules/')) this.good.set(url, job)
    }
  }

  /**
   * After HMR replaced `previous` (loaded from `filename`): if the new version's
   * fibers did not start, dispose them, plug `previous` again with each old
   * fiber's config, and put its module back in the loader cache (so the next
   * edit replaces it). Returns what went wrong, or `undefined` when the new version runs.
   */
  async restoreIfBroken(previous: Plugin, filename: string, runtime: Plugin.Runtime): Promise<{ message: string; error?: unknown } | undefined> {
    const { root } = this
    const job = root.loader.internal!.loadCache.get(filename)
    const current = root.loader.unwrapExports(job?.module?.getNamespace())
    const fibers: Fiber[] = current ? [...(root.registry.get(current)?.fibers ?? [])] : []
    const broken = fibers.find(fiber => fiber.state === FAILED || fiber.state === PENDING)
    if (!broken) return undefined
    const problem =
      broken.state === FAILED
        ? await broken.await().then(
            () => ({ message: 'it did not start' }),
            (error: unknown) => ({ message: startMessage(error), error }),
          )
        : {
            message: `it waits for the services ${Object.keys(broken.inject)
              .map(name => `"${name}"`)
              .join(', ')}`,
          }

    root.registry.delete(current)
    for (const old of runtime.fibers) {
      const fiber = old.parent.registry.plugin(previous, old._config).ctx.fiber
      if (old.entry) {
        fiber.entry = old.entry
        old.entry.fiber = fiber
      }
    }
    const good = this.good.get(filename)
    if (good !== undefined) Map.prototype.set.call(this.cache, filename, good)
    return problem
  }
}

/** `file.ts:line:column` of the first stack frame in `filename` (a file URL), relative to `cwd`. */
function locate(error: unknown, filename: string, cwd: string): string | undefined {
  const stack = String((error as Error | undefined)?.stack ?? '')
  const path = fileURLToPath(filename)
  for (const where of [filename, path]) {
    const at = stack.indexOf(where + ':')
    const position = at < 0 ? null : /^:(\d+):(\d+)/.exec(stack.slice(at + where.length))
    if (position) return `${relative(cwd, path)}:${position[1]}:${position[2]}`
  }
  return undefined
}

/** The user and project layer files that are not inside `cwd`. */
function layersOutside(cwd: string): string[] {
  return [userLayer(), findProjectLayer(cwd)].filter((file): file is string => file !== undefined && relative(cwd, file).startsWith('..'))
}
