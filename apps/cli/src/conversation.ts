// `loom` on a terminal: a conversation with the agent of the current directory.
// One agent and one session for all its turns: the agent stays alive between
// them, so this process keeps the session's lease. Each line typed is a turn,
// shown as `loom run` shows it (present/turn.ts); a line starting with / is a
// command. While a turn runs the terminal is in its normal mode, so Ctrl-C is a
// signal and reaches the conversation through main.ts's Interrupt: it cancels
// the turn (the log closes it as aborted) and the prompt comes back. At the
// prompt readline reads the keys itself: Ctrl-C or Ctrl-D on an empty line quits.
// A tool call the policy asks about is a question on the terminal (approve.ts,
// TerminalApprover) answered during the turn; Ctrl-C there cancels the turn too.
import type { Agent } from '@loom/agent-loop'
import { redact } from '@loom/secrets'
import { createInterface, type Interface } from 'node:readline'
import type { Asking } from './approve.ts'
import type { MainOptions } from './cli.ts'
import { printManifest, printPrompt } from './present/prompt.ts'
import { printCompact, printSessionList, printStats } from './present/sessions.ts'
import { hostSecrets, styler, type Io } from './present/term.ts'
import { showTurn } from './present/turn.ts'
import type { RunFlags, Runner } from './runner.ts'
import { StoredSessions } from './sessions.ts'

export interface ConversationOptions {
  /** The runner now (`loom dev` may replace it when loom.yml changes). */
  runner: () => Runner
  io: Io
  flags: RunFlags & { cwd: string; showReasoning: boolean }
  /** The stored session to continue: an id, a unique prefix of one, or `last`; a new session when absent. */
  session?: string
  input?: NodeJS.ReadableStream
  output?: NodeJS.WritableStream
  /** Receives what a stop signal does while the conversation runs (see `Interrupt`). */
  onInterrupt?: MainOptions['onInterrupt']
  /** Set while the terminal approver asks about a tool call (see approve.ts). */
  asking?: Asking
  /** Receives the function through which the host (`loom dev`) prints between prompts without breaking the line being typed. */
  onPrinter?: (print: (text: string, stream?: 'stdout' | 'stderr') => void) => void
}

const COMMANDS: [string, string][] = [
  ['/help', 'these commands'],
  ['/prompt', 'the request the deployment would send next for a new agent (as loom prompt)'],
  ['/manifest', "that request's manifest: every section, context and tool with its owner, size and hash"],
  ['/stats', "this session's requests: prefix reuse and estimated cost (as loom sessions stats)"],
  ['/sessions', 'the stored sessions (as loom sessions list)'],
  ['/new', 'a new session, from the next turn on'],
  ['/resume ID|prefix|last', 'continue a stored session instead'],
  ['/model <id>', 'the model of the next turns'],
  ['/compact', 'summarize the older part of this session now (as loom sessions compact)'],
  ['/quit', 'quit (so do Ctrl-D and Ctrl-C at an empty prompt)'],
]

const HISTORY_SIZE = 500

export async function converse(options: ConversationOptions): Promise<number> {
  const { io } = options
  const runner = options.runner
  const input = options.input ?? process.stdin
  const output = options.output ?? process.stdout
  // Piped input (a script driving `loom dev`) reads plain lines: no line editing, no history.
  const terminal = Boolean((input as { isTTY?: boolean }).isTTY)
  const flags = { ...options.flags }
  const out = styler(io.stdout)
  const say = (text: string) => io.stdout.write(text + '\n')
  const warn = (text: string) => io.stderr.write(styler(io.stderr).red(`loom: ${redact(text, hostSecrets())}`) + '\n')
  const store = () => new StoredSessions(runner().persistence(), runner().config.prices, async () => {})

  /** The agent of this conversation's session; a new session has none until its first turn (so quitting at once stores nothing). */
  let agent: Agent | undefined = options.session === undefined ? undefined : await runner().open(flags, await runner().resolve(options.session, flags.cwd))
  const route = agent ? `${agent.options.provider}/${agent.options.model}` : Object.values(await runner().route(flags)).join('/')
  const turns = (current: Agent) => current.session.events.filter(event => event.type === 'turn/start').length
  say(
    out.bold(agent ? `loom: session ${agent.session.id} (${turns(agent)} turns so far)` : 'loom: a new session') +
      out.dim(` · ${route} · /help lists the commands`),
  )

  /** A turn or a compaction that Ctrl-C cancels; `cancelled` once it was asked to stop. */
  let busy: { cancelled: boolean } | undefined
  let prompt: Interface | undefined
  let quitting = false
  // What the host prints meanwhile (a reload in `loom dev`) goes above the line being typed, which is drawn again after it.
  options.onPrinter?.((text, stream = 'stdout') => {
    const open = terminal ? prompt : undefined
    if (open) output.write('\r\x1b[K')
    io[stream].write(text + '\n')
    open?.prompt(true)
  })
  options.onInterrupt?.(signal => {
    if (busy && signal === 'SIGINT') {
      if (busy.cancelled) return 'exit'
      busy.cancelled = true
      // A question about a tool call leaves the cursor on its line.
      const newline = options.asking?.asking ? '\n' : ''
      io.stderr.write(newline + styler(io.stderr).yellow('loom: cancelling the turn (Ctrl-C again to quit at once)') + '\n')
      runner().cancel()
      return 'handled'
    }
    // Any other signal ends the conversation: the running turn is closed first.
    quitting = true
    if (busy) runner().cancel()
    prompt?.close()
    return signal === 'SIGINT' ? 'handled' : 'stopping'
  })

  const whileBusy = async <T>(work: () => Promise<T>): Promise<T> => {
    busy = { cancelled: false }
    try {
      return await work()
    } finally {
      busy = undefined
    }
  }

  // While a tool call is asked about, the turn's view would write over the answer being typed: the spinner's
  // frames (stderr) are dropped, and its lines (stdout, as the call's own `→` line) shown once the question closes.
  const asking = options.asking
  let held = ''
  if (asking) {
    asking.settled = () => {
      if (held) io.stdout.write(held)
      held = ''
    }
  }
  const turnIo: Io = asking
    ? {
        stdout: {
          isTTY: io.stdout.isTTY,
          write: (text: string) => {
            if (!asking.asking) return io.stdout.write(text)
            held += text
            return true
          },
        },
        stderr: { isTTY: io.stderr.isTTY, write: (text: string) => asking.asking || io.stderr.write(text) },
      }
    : io

  /** The session of the agent, once something of it is stored (a resume needs that). */
  const stored = () => (agent && agent.session.events.length ? agent.session.id : undefined)

  /**
   * The conversation's agent, opened at the first turn. When `loom dev` replaced
   * the runner (a loom.yml edit), the old runner's agents went with it: the
   * session is resumed on the new one, so the conversation goes on.
   */
  const current = async (): Promise<Agent> => {
    if (agent && !runner().holds(agent)) {
      const id = stored()
      agent = id === undefined ? undefined : await runner().open(flags, id)
    }
    return (agent ??= await runner().open(flags))
  }

  const turn = async (text: string) => {
    const on = await current()
    await whileBusy(() => showTurn(turnIo, { showReasoning: flags.showReasoning, asksAtTerminal: true }, watch => runner().turn(on, text, watch)))
  }

  /** Replaces the agent with one on the stored session `id` (opened first: if that fails, the current one stays). */
  const switchTo = async (id: string | undefined) => {
    const next = id === undefined ? undefined : await runner().open(flags, id)
    await agent?.dispose()
    agent = next
  }

  const command = async (line: string): Promise<'quit' | undefined> => {
    const [name, ...words] = line.split(/\s+/)
    const arg = words.join(' ')
    switch (name) {
      case '/quit':
      case '/exit':
        return 'quit'
      case '/help': {
        const width = Math.max(...COMMANDS.map(([usage]) => usage.length)) + 2
        say(COMMANDS.map(([usage, text]) => `  ${usage.padEnd(width)}${text}`).join('\n'))
        break
      }
      case '/prompt':
        printPrompt(io, await runner().prompt(flags), false)
        break
      case '/manifest':
        printManifest(io, (await runner().prompt(flags)).manifest)
        break
      case '/stats': {
        const id = stored()
        if (id === undefined) say('nothing to measure yet: this session has no turn')
        else printStats(io, await store().stats(id), false)
        break
      }
      case '/sessions':
        printSessionList(io, await store().list(), false)
        break
      case '/new':
        await switchTo(undefined)
        say('a new session starts with the next turn')
        break
      case '/resume': {
        if (!arg) return void warn('/resume: which session? its id, a unique prefix of it, or last (see: /sessions)')
        const id = await runner().resolve(arg, flags.cwd)
        if (id === stored()) return void say(`session ${id} is the one open`)
        await switchTo(id)
        say(`session ${id} resumed (${turns(agent!)} turns so far)`)
        break
      }
      case '/model': {
        if (!arg) return void warn('/model: which model? as in /model deepseek-pro')
        const previous = flags.model
        flags.model = arg
        try {
          await runner().route(flags)
          // An agent's route is fixed: the session is resumed on the new one.
          await switchTo(stored())
        } catch (error) {
          flags.model = previous
          throw error
        }
        say(`the next turns use ${arg}`)
        break
      }
      case '/compact': {
        if (stored() === undefined) return void say('nothing to compact yet: this session has no turn')
        const on = await current()
        printCompact(io, await whileBusy(() => runner().compact(on)), false)
        break
      }
      default:
        warn(`unknown command ${name}; /help lists the commands`)
    }
    return undefined
  }

  // One readline per prompt, sharing the history: closing it between prompts
  // gives the terminal back its normal mode, in which Ctrl-C is a signal.
  let history: string[] = []
  const ask = () =>
    new Promise<string | undefined>(resolve => {
      const rl = createInterface({ input, output, terminal, history, historySize: HISTORY_SIZE, removeHistoryDuplicates: true })
      prompt = rl
      let answer: string | undefined
      let entered = false
      rl.on('history', lines => {
        history = lines
      })
      rl.on('line', line => {
        answer = line
        entered = true
        rl.close()
      })
      // Ctrl-C drops the line being typed; on an empty line it quits.
      rl.on('SIGINT', () => {
        if (rl.line) answer = ''
        rl.close()
      })
      rl.on('close', () => {
        prompt = undefined
        // Ctrl-C and Ctrl-D leave the cursor on the prompt's line.
        if (!entered && terminal) output.write('\n')
        resolve(answer)
      })
      rl.setPrompt(out.bold('> '))
      rl.prompt()
    })

  try {
    while (!quitting) {
      const line = await ask()
      if (line === undefined) break
      const text = line.trim()
      if (!text) continue
      try {
        if (text.startsWith('/')) {
          if ((await command(text)) === 'quit') break
        } else await turn(text)
      } catch (error) {
        warn((error as Error)?.message ?? String(error))
      }
    }
  } finally {
    await agent?.dispose()
  }
  return 0
}
