// `loom` on a terminal: a conversation with the agent of the current directory.
// One agent and one session for all its turns: the agent stays alive between
// them, so this process keeps the session's lease. Each message typed is a turn,
// shown as `loom run` shows it (present/turn.ts); a line starting with / is a
// command. On a terminal the keyboard is read in raw mode for the whole
// conversation (input/terminal.ts): the prompt edits a message of one or more
// lines, with the history of this project, Tab completion and a status line
// above it; while a turn runs, Ctrl-C or Esc cancels it (the log closes it as
// aborted) and the prompt comes back, and a second Ctrl-C within a second
// quits. `@path` in a message attaches that file (input/attach.ts). A tool call
// the policy asks about is a question answered with one key (approve.ts,
// TerminalApprover). Piped input (a script driving `loom dev`) reads plain lines.
// The prompts of the deployment's MCP servers are commands too:
// `/mcp__<server>__<prompt> args…` sends the prompt's text as the message.
import type { Context } from '@deepseek-ai/cordis'
import type { Agent } from '@loom/agent-loop'
import type { McpPrompt, McpPromptResult } from '@loom/mcp'
import { redact } from '@loom/secrets'
import { createInterface } from 'node:readline'
import type { Asking } from './approve.ts'
import { loomHome } from './compose.ts'
import type { MainOptions } from './context.ts'
import { attachMentions } from './input/attach.ts'
import { historyFile, InputHistory } from './input/history.ts'
import { KeyReader, TerminalPrompt, type TtyInput } from './input/terminal.ts'
import { describeBytes } from './present/diff.ts'
import { printManifest, printPrompt } from './present/prompt.ts'
import { printCompact, printSessionList, printStats } from './present/sessions.ts'
import { describeStatus, sessionStatus } from './present/status.ts'
import { hostSecrets, styler, type Io } from './present/term.ts'
import { showTurn, type TurnControl } from './present/turn.ts'
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
  output?: NodeJS.WritableStream & { columns?: number }
  /** Receives what a stop signal does while the conversation runs (see `Interrupt`). */
  onInterrupt?: MainOptions['onInterrupt']
  /** Set while the terminal approver asks about a tool call (see approve.ts). */
  asking?: Asking
  /** Receives the function through which the host (`loom dev`) prints between prompts without breaking the line being typed. */
  onPrinter?: (print: (text: string, stream?: 'stdout' | 'stderr') => void) => void
}

export const COMMANDS: [string, string][] = [
  ['/help', 'these commands, and the keys'],
  ['/prompt', 'the request the deployment would send next for a new agent (as loom prompt)'],
  ['/manifest', "that request's manifest: every section, context and tool with its owner, size and hash"],
  ['/stats', "this session's requests: prefix reuse and estimated cost (as loom sessions stats)"],
  ['/sessions', 'the stored sessions (as loom sessions list)'],
  ['/new', 'a new session, from the next turn on'],
  ['/resume ID|prefix|last', 'continue a stored session instead'],
  ['/model <id>', 'the model of the next requests, in this session (the switch is in its log)'],
  ['/provider <id>', 'the provider of the next requests (with its default model), in this session'],
  ['/compact', 'summarize the older part of this session now (as loom sessions compact)'],
  ['/quit', 'quit (so do Ctrl-D and Ctrl-C at an empty prompt)'],
]

const KEYS: [string, string][] = [
  ['Enter', 'sends the message; a trailing \\ or Shift+Enter (where the terminal tells it apart) or Ctrl-J starts a new line in it'],
  ['Tab', 'completes a command or a path (after @ as well)'],
  ['@path', 'attaches that file to the message'],
  ['Up, Down', 'the messages typed before in this project, and the lines of this one'],
  ['Ctrl-C', 'cancels the running turn; twice within a second quits; at the prompt, drops the line or (on an empty one) quits'],
  ['Esc', 'cancels the running turn'],
  ['Ctrl-L', 'clears the screen'],
  ['Ctrl-D', 'quits at an empty prompt'],
]

/** A second Ctrl-C within this time of the one that cancelled a turn quits. */
const QUIT_WINDOW_MS = 1000

export async function converse(options: ConversationOptions): Promise<number> {
  const { io } = options
  const runner = options.runner
  // Started now, in the background: nothing waits for it.
  const mcp = new McpPrompts(() => runner().context)
  void mcp.load()
  const input = (options.input ?? process.stdin) as TtyInput
  const output = options.output ?? process.stdout
  // A terminal: keys in raw mode, the line editor, the status line. Piped input reads plain lines.
  const terminal = Boolean(input.isTTY) && typeof input.setRawMode === 'function'
  let flags = { ...options.flags }
  const out = styler(io.stdout)
  const say = (text: string) => io.stdout.write(text + '\n')
  const warn = (text: string) => io.stderr.write(styler(io.stderr).red(`loom: ${redact(text, hostSecrets())}`) + '\n')
  const store = () => new StoredSessions(runner().persistence(), runner().config.prices, async () => {})

  /** The agent of this conversation's session; a new session has none until its first turn (so quitting at once stores nothing). */
  let agent: Agent | undefined = options.session === undefined ? undefined : await runner().open(flags, await runner().resolve(options.session, flags.cwd))
  /** The route of the next request (the agent's, or the one a new agent will get). */
  let route = agent ? routeOf(agent) : await runner().route(flags)
  const turns = (current: Agent) => current.session.events.filter(event => event.type === 'turn/start').length
  say(
    out.bold(agent ? `loom: session ${agent.session.id} (${turns(agent)} turns so far)` : 'loom: a new session') +
      out.dim(` · ${route.provider}/${route.model} · /help lists the commands`),
  )

  /** The status line: the route, the context's fill, cache hits and cost of this session so far; none while there is no runner (`loom dev`). */
  const status = (): string | undefined => {
    try {
      const prices = (provider: string, model: string) => runner().prices(provider, model)
      return describeStatus(sessionStatus(agent?.session.events ?? [], route, prices))
    } catch {
      return undefined
    }
  }

  // The keyboard, for the whole conversation (released when it quits, so a later Ctrl-C is a signal again).
  const keys = terminal ? KeyReader.of(input) : undefined
  let releaseKeys = keys?.open()
  const history = terminal ? new InputHistory(historyFile(loomHome(), flags.cwd)) : undefined
  const prompt = keys
    ? new TerminalPrompt(keys, output, {
        prompt: out.bold('> '),
        continuation: out.dim('… '),
        multiline: true,
        history: () => history!.list(),
        completion: { commands: () => [...COMMANDS.map(([usage]) => usage.split(' ')[0]), ...mcp.list().map(prompt => `/${prompt.command}`)], cwd: flags.cwd },
      })
    : undefined

  /** A turn, a compaction or an MCP prompt's fetch that Ctrl-C cancels (`cancel`); `cancelled` once it was asked to stop, `control` its live view. */
  let busy: { cancelled: boolean; cancel: () => void; control?: TurnControl } | undefined
  /** When Ctrl-C last cancelled a turn. */
  let cancelledAt = Number.NEGATIVE_INFINITY
  let exitCode = 0
  // Quitting ends the wait for the prompt or the running turn: the turn is cancelled, and closed while the agent is disposed.
  const quit = new AbortController()
  const quitted = new Promise<void>(resolve => quit.signal.addEventListener('abort', () => resolve(), { once: true }))
  let closeLine: (() => void) | undefined
  const requestQuit = (code: number) => {
    if (quit.signal.aborted) return
    exitCode = code
    releaseKeys?.()
    releaseKeys = undefined
    if (busy) {
      note('loom: quitting')
      busy.cancel()
    }
    closeLine?.()
    quit.abort()
  }

  /** A line on stderr under the running turn's output (its spinner cleared, its text so far shown first), or under an open question. */
  const note = (text: string) => {
    const styled = styler(io.stderr).yellow(text)
    // A question holds the turn's output, and leaves the cursor on its line.
    if (options.asking?.asking) io.stderr.write(`\n${styled}\n`)
    else if (busy?.control) busy.control.note(styled)
    else io.stderr.write(styled + '\n')
  }
  const cancelTurn = (why: string) => {
    busy!.cancelled = true
    note(`loom: cancelling the turn (${why})`)
    busy!.cancel()
  }
  /**
   * Ctrl-C: cancels the running turn; again while it is cancelled quits (130),
   * as does a key again within a second (a signal may come twice through a
   * launcher, so only keys count so); when nothing runs, it quits (0).
   */
  const ctrlC = (from: 'key' | 'signal'): 'handled' | 'exit' => {
    // The turn being closed for a quit did not end: nothing is left to wait for.
    if (quit.signal.aborted) return 'exit'
    const now = Date.now()
    const again = from === 'key' && now - cancelledAt < QUIT_WINDOW_MS
    if (busy && !busy.cancelled && !again) {
      cancelledAt = now
      cancelTurn('Ctrl-C again to quit')
    } else requestQuit(busy || again ? 130 : 0)
    return 'handled'
  }
  /** What was typed while a turn ran: the next prompt starts with it. */
  let typedAhead = ''
  const stopKeys = keys?.on(key => {
    if (!busy) return false
    if (key.name === 'ctrl-c') ctrlC('key')
    else if (key.name === 'escape' && !busy.cancelled) cancelTurn('Esc')
    else if (key.name === 'text' || key.name === 'paste') typedAhead += key.text
    return true
  })
  options.onInterrupt?.(signal => {
    if (signal === 'SIGINT') return ctrlC('signal')
    // Any other signal ends the conversation: the running turn is closed first.
    requestQuit(exitCode)
    return 'stopping'
  })

  // What the host prints meanwhile (a reload in `loom dev`) goes above the line being typed, which is drawn again after it.
  options.onPrinter?.((text, stream = 'stdout') => {
    if (prompt?.open) prompt.print(text)
    else io[stream].write(text + '\n')
  })

  const whileBusy = async <T>(work: () => Promise<T>, cancel = () => runner().cancel()): Promise<T> => {
    busy = { cancelled: false, cancel }
    // A Ctrl-C pairs only with one that cancelled this work.
    cancelledAt = Number.NEGATIVE_INFINITY
    try {
      return await work()
    } finally {
      busy = undefined
    }
  }

  // While a tool call is asked about, the turn's view would write over the answer being typed: the spinner's
  // frames (stderr) are dropped, and its lines (stdout, as the call's own `→` line) shown once the question closes.
  // Before the question, what the model wrote so far is shown: the session is written, so what waits for the disk shows.
  const asking = options.asking
  let held = ''
  if (asking) {
    asking.before = async () => {
      if (agent && busy) await runner().flush(agent)
    }
    asking.settled = () => {
      if (held) io.stdout.write(held)
      held = ''
    }
  }
  const turnIo: Io = asking
    ? {
        stdout: {
          isTTY: io.stdout.isTTY,
          get columns() {
            return io.stdout.columns
          },
          write: (text: string) => {
            if (!asking.asking) return io.stdout.write(text)
            held += text
            return true
          },
        },
        stderr: {
          isTTY: io.stderr.isTTY,
          get columns() {
            return io.stderr.columns
          },
          write: (text: string) => asking.asking || io.stderr.write(text),
        },
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
    agent ??= await runner().open(flags)
    route = routeOf(agent)
    return agent
  }

  /** A turn on `text`: a typed message attaches the files its `@path` mentions name; an MCP prompt's text is sent as it is. */
  const turn = async (text: string, { mentions = true } = {}) => {
    const on = await current()
    let message = text
    if (mentions) {
      const files = await attachMentions(text, { cwd: flags.cwd, denied: path => runner().readDenial(path) })
      for (const file of files.attached) say(out.dim(`  + @${file.path} (${file.lines} lines, ${describeBytes(file.bytes)})`))
      for (const why of files.notes) io.stderr.write(styler(io.stderr).yellow(`loom: ${why}`) + '\n')
      message = files.text
    }
    await whileBusy(() =>
      showTurn(
        turnIo,
        {
          showReasoning: flags.showReasoning,
          asksAtTerminal: true,
          status: terminal ? status : undefined,
          control: control => {
            if (busy) busy.control = control
          },
        },
        watch => runner().turn(on, message, watch),
      ),
    )
  }

  /**
   * `/mcp__<server>__<prompt> args…`: the server renders the prompt with the
   * arguments of `line`, and its text is the message of a turn (shown first, as
   * the user did not type it). A refusal (unknown prompt, missing argument,
   * server down) is the error getPrompt gives; Ctrl-C cancels the fetch.
   */
  const runPrompt = async (command: string, line: string) => {
    const stop = new AbortController()
    const result = await whileBusy(
      () => mcp.get(command, line, stop.signal),
      () => stop.abort(),
    ).catch(error => {
      throw stop.signal.aborted ? new Error(`${command}: cancelled`) : error
    })
    say(out.dim(quoted(result.text)))
    await turn(result.text, { mentions: false })
  }

  /** Replaces the agent with one on the stored session `id` (opened first: if that fails, the current one stays). */
  const switchTo = async (id: string | undefined) => {
    const next = id === undefined ? undefined : await runner().open(flags, id)
    await agent?.dispose()
    agent = next
    route = agent ? routeOf(agent) : await runner().route(flags)
  }

  const command = async (line: string): Promise<'quit' | undefined> => {
    const [name, ...words] = line.split(/\s+/)
    const arg = words.join(' ')
    switch (name) {
      case '/quit':
      case '/exit':
        return 'quit'
      case '/help': {
        const width = Math.max(...[...COMMANDS, ...KEYS].map(([usage]) => usage.length)) + 2
        say(COMMANDS.map(([usage, text]) => `  ${usage.padEnd(width)}${text}`).join('\n'))
        await mcp.load()
        const prompts = mcp.list().map(prompt => [prompt.usage, prompt.description ?? prompt.title ?? ''])
        if (prompts.length) {
          const promptWidth = Math.max(...prompts.map(([usage]) => usage.length)) + 2
          say(
            'prompts of MCP servers (the text is sent as your message):\n' +
              prompts.map(([usage, text]) => `  ${usage.padEnd(promptWidth)}${text}`.trimEnd()).join('\n'),
          )
        }
        if (terminal) say(out.dim('keys:\n' + KEYS.map(([key, text]) => `  ${key.padEnd(width)}${text}`).join('\n')))
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
      case '/model':
      case '/provider': {
        if (!arg)
          return void warn(name === '/model' ? '/model: which model? as in /model deepseek-reasoner' : '/provider: which provider? as in /provider anthropic')
        // A provider alone takes its default model.
        const next = name === '/model' ? { ...flags, model: arg } : { ...flags, provider: arg, model: undefined }
        // An open session switches its agent's route: the switch is in its log, and the next request's header change names it.
        const open = stored() === undefined ? undefined : await current()
        route = open ? await runner().switchRoute(open, next, name) : await runner().route(next)
        flags = next
        say(`the next requests use ${route.provider}/${route.model}`)
        break
      }
      case '/compact': {
        if (stored() === undefined) return void say('nothing to compact yet: this session has no turn')
        const on = await current()
        printCompact(io, await whileBusy(() => runner().compact(on)), false)
        break
      }
      default:
        if (name.startsWith('/mcp__')) return void (await runPrompt(name, line.slice(name.length).trim()))
        warn(`unknown command ${name}; /help lists the commands`)
    }
    return undefined
  }

  /** The next message: typed at the prompt on a terminal, else a line of input; undefined to quit. */
  const ask = async (): Promise<string | undefined> => {
    if (prompt) {
      const line = status()
      const result = await prompt.read({ status: line === undefined ? undefined : out.dim(line), text: typedAhead, signal: quit.signal })
      typedAhead = ''
      if (result.kind === 'line') {
        history!.add(result.text)
        return result.text
      }
      if (result.kind === 'interrupt') {
        // The second Ctrl-C of a pair, the first of which cancelled a turn that ended at once.
        if (Date.now() - cancelledAt < QUIT_WINDOW_MS) exitCode = 130
        else if (result.dropped) return ''
      }
      return undefined
    }
    return new Promise(resolve => {
      const rl = createInterface({ input, terminal: false })
      let answer: string | undefined
      closeLine = () => rl.close()
      rl.once('line', line => {
        answer = line
        rl.close()
      })
      rl.once('close', () => {
        closeLine = undefined
        resolve(answer)
      })
      output.write(out.bold('> '))
    })
  }

  try {
    while (!quit.signal.aborted) {
      const line = await ask()
      if (line === undefined) break
      const text = line.trim()
      if (!text) continue
      try {
        if (text.startsWith('/')) {
          if ((await Promise.race([command(text), quitted])) === 'quit') break
        } else await Promise.race([turn(text), quitted])
      } catch (error) {
        warn((error as Error)?.message ?? String(error))
      }
    }
  } finally {
    stopKeys?.()
    releaseKeys?.()
    await agent?.dispose()
  }
  return exitCode
}

/**
 * The prompts of the deployment's MCP servers. @loom/mcp is imported once the
 * deployment runs its plugin (it loads the MCP SDK): a deployment without MCP
 * servers never loads it.
 */
class McpPrompts {
  private module: typeof import('@loom/mcp') | undefined
  private loading: Promise<void> | undefined
  /** Why the import failed. */
  private failure: unknown
  private readonly context: () => Context

  /** `context`: a context of the deployment now (`loom dev` replaces it); it throws when there is none. */
  constructor(context: () => Context) {
    this.context = context
  }

  /** Starts the import when the deployment runs @loom/mcp; resolves once it is settled, at once when there is none. */
  load(): Promise<void> {
    if (!this.loading && this.runsMcp()) {
      this.loading = import('@loom/mcp').then(
        module => void (this.module = module),
        error => void (this.failure = error),
      )
    }
    return this.loading ?? Promise.resolve()
  }

  /** The prompts of the connected servers, sorted by command; none before the import is done. */
  list(): McpPrompt[] {
    void this.load()
    try {
      return this.module?.listPrompts(this.context()) ?? []
    } catch {
      return []
    }
  }

  /** The prompt `command` (with its slash) rendered with the arguments of `line`; rejects with a message naming the culprit. */
  async get(command: string, line: string, signal: AbortSignal): Promise<McpPromptResult> {
    await this.load()
    if (this.failure !== undefined) {
      throw new Error(`${command}: MCP prompts are not available: @loom/mcp did not load (${(this.failure as Error)?.message ?? this.failure})`)
    }
    if (!this.module) throw new Error(`no MCP prompt ${command}: this deployment has no MCP servers (@loom/mcp)`)
    return this.module.getPrompt(this.context(), command, line, { signal })
  }

  private runsMcp(): boolean {
    try {
      return [...this.context().registry.values()].some(plugin => plugin.name === '@loom/mcp' && plugin.fibers.length > 0)
    } catch {
      return false
    }
  }
}

/** How a prompt's text is shown before its turn: each line quoted, at most `MAX_QUOTED` of them. */
function quoted(text: string): string {
  const lines = text.split('\n')
  const shown = lines.slice(0, MAX_QUOTED).map(line => `  │ ${line}`)
  if (lines.length > MAX_QUOTED) shown.push(`  │ … ${lines.length - MAX_QUOTED} more lines`)
  return shown.join('\n')
}

const MAX_QUOTED = 12

/** The route of an agent's next request. */
function routeOf(agent: Agent): { provider: string; model: string } {
  return { provider: agent.options.provider ?? '', model: agent.options.model ?? '' }
}
