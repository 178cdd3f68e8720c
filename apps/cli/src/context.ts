// What every command shares: the options main() takes, what a stop signal does
// to the running command, the context a command runs in, and its plan: what it
// needs loaded before it runs (nothing, the session store, or the whole
// deployment and its runner). main() (cli.ts) loads that and runs the plan;
// each command's plan is in commands/.
import type { Context as Root } from '@deepseek-ai/cordis'
import type { Asking } from './approve.ts'
import type { BootOptions } from './boot.ts'
import type { Parsed } from './parse.ts'
import type { Io } from './present/term.ts'
import type { Runner, TurnResult, TurnWatcher } from './runner.ts'
import type { StoredSessions } from './sessions.ts'

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
export type Plan =
  | { on: 'nothing'; run: (context: Context) => Promise<number> }
  | { on: 'store'; run: (store: StoredSessions, context: Context) => Promise<number> }
  | { on: 'runner'; run: (runner: Runner, context: Context) => Promise<number>; asking?: Asking }

/**
 * A command's plan, made from its arguments (by key, as the command table names
 * them) once they are checked: a mistake found here is a usage error, before
 * anything loads.
 */
export type PlanMaker = (args: Record<string, string>, parsed: Parsed) => Plan | Promise<Plan>

export const nothing = (run: (context: Context) => Promise<number>): Plan => ({ on: 'nothing', run })
export const store = (run: (store: StoredSessions, context: Context) => Promise<number>): Plan => ({ on: 'store', run })
export const runner = (run: (runner: Runner, context: Context) => Promise<number>, asking?: Asking): Plan => ({
  on: 'runner',
  run,
  ...(asking && { asking }),
})

/** A turn, shown as it runs. */
export const turn = (start: (runner: Runner, context: Context, watch?: TurnWatcher) => Promise<TurnResult>) =>
  runner(async (on, context) => {
    const { showTurn } = await import('./present/turn.ts')
    return showTurn(context.io, context.parsed, watch => start(on, context, watch))
  })
