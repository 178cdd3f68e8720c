// The approvers of the CLI. Headless commands (`loom run --approve MODE`): nobody
// is at a terminal to answer an `ask`, so the mode answers every one the same way.
// The conversation: the person at the terminal answers each one.
import { type Context, type Fiber, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { redact } from '@loom/secrets'
import { type ApprovalAnswer, type ApprovalRequest, type Approver, PROTECTED_RULE } from '@loom/tools'
import { UNCONFINED_RULE } from '@loom/tool-shell'
import { createInterface } from 'node:readline'
import { type ApproveMode, DEFAULT_APPROVE_MODE } from './commands.ts'
import { editDiff } from './present/diff.ts'
import { clip, hostSecrets, styler } from './present/term.ts'

/** The note a denied call carries to the model: why nobody approved it. */
export const DENIAL_NOTES: Record<Exclude<ApproveMode, 'all'> | 'protected' | 'unconfined', string> = {
  never: 'approvals are turned off for this run (--approve never): only tools that read run',
  policy: 'this headless run has no one to ask (--approve policy); the call needs a rule that allows it, or unattended: allow on its ask rule',
  protected: 'a protected path changes only with the approval of a person at the terminal (or a run with --approve all); no rule allows it',
  unconfined:
    'without a sandbox a command runs only with the approval of a person at the terminal (or with --approve all, or unattended: allow in the config of @loom/tool-shell); no rule allows it',
}

/** How a mode answers a request: `all` allows, `never` denies, `policy` takes the rule's `unattended` answer (absent: deny). */
export function answerOf(mode: ApproveMode, request?: Pick<ApprovalRequest, 'unattended' | 'rule'>): ApprovalAnswer {
  if (mode === 'all' || (mode === 'policy' && request?.unattended === 'allow')) return { kind: 'allow' }
  const note =
    request?.rule === PROTECTED_RULE
      ? DENIAL_NOTES.protected
      : request?.rule === UNCONFINED_RULE && mode === 'policy'
        ? DENIAL_NOTES.unconfined
        : DENIAL_NOTES[mode]
  return { kind: 'deny', note }
}

export interface Config {
  mode: ApproveMode
}

/** `ctx.approver` for a headless command, answering by its mode. */
export class HeadlessApprover extends Service implements Approver {
  static override readonly name = '@loom/cli/approve'
  static readonly Config: Schema<Config> = Schema.object({
    mode: Schema.union(['never', 'policy', 'all'] as const)
      .default(DEFAULT_APPROVE_MODE)
      .description('How every ask is answered: never (deny), policy (deny: no one can answer here), all (allow).'),
  }) as Schema<Config>

  readonly mode: ApproveMode
  /** Under `never` the tool runtime refuses every call that is not a read, before any rule. */
  readonly readsOnly: string | undefined

  constructor(ctx: Context, config: Config) {
    super(ctx, 'approver')
    this.mode = config.mode ?? DEFAULT_APPROVE_MODE
    if (this.mode === 'never') this.readsOnly = 'approvals are turned off for this run (--approve never)'
  }

  async approve(request: ApprovalRequest): Promise<ApprovalAnswer> {
    return answerOf(this.mode, request)
  }
}

/** Loads the headless approver on a booted deployment's root; dispose the returned fiber (or the root) to remove it. */
export async function provideApprover(root: Context, mode: ApproveMode = DEFAULT_APPROVE_MODE): Promise<Fiber> {
  return root.plugin(HeadlessApprover, { mode })
}

/** The approver as a boot plugin: `boot({ ...layers, log, plugins: [headlessApprover(mode)] })` provides it before the deployment's rows start. */
export function headlessApprover(mode: ApproveMode = DEFAULT_APPROVE_MODE): { plugin: typeof HeadlessApprover; config: Config } {
  return { plugin: HeadlessApprover, config: { mode } }
}

/** Whether a terminal question is open: the conversation holds the turn's output off the line being typed meanwhile. */
export interface Asking {
  asking: boolean
  /** Called when a question closes (the conversation shows what it held). */
  settled?: () => void
}

export interface TerminalConfig {
  input?: NodeJS.ReadableStream
  output?: NodeJS.WritableStream & { isTTY?: boolean }
  asking?: Asking
}

/** `ctx.approver` for the conversation: each `ask` is a question on the terminal, one at a time. */
export class TerminalApprover extends Service implements Approver {
  static override readonly name = '@loom/cli/approve-terminal'

  private readonly input: NodeJS.ReadableStream
  private readonly output: NodeJS.WritableStream & { isTTY?: boolean }
  private readonly asking: Asking
  /** The question before this one: parallel calls are asked in turn, not on one line. */
  private queue: Promise<unknown> = Promise.resolve()

  constructor(ctx: Context, config: TerminalConfig = {}) {
    super(ctx, 'approver')
    this.input = config.input ?? process.stdin
    this.output = config.output ?? process.stdout
    this.asking = config.asking ?? { asking: false }
  }

  approve(request: ApprovalRequest): Promise<ApprovalAnswer> {
    const answer = this.queue.then(() => this.ask(request))
    this.queue = answer.catch(() => {})
    return answer
  }

  /** The questions about one call; the turn's output waits until the last is answered (the note of a denial included). */
  private async ask(request: ApprovalRequest): Promise<ApprovalAnswer> {
    this.asking.asking = true
    try {
      return await this.questions(request)
    } finally {
      this.asking.asking = false
      this.asking.settled?.()
    }
  }

  private async questions(request: ApprovalRequest): Promise<ApprovalAnswer> {
    const out = styler(this.output)
    const reason = request.reason ? out.dim(`  (${request.reason})`) : ''
    const choices = `  ${out.bold('[y]')} allow once  ${out.bold('[a]')} allow for this session  ${out.bold('[n]')} deny: `
    // An edit shows what it would change, between the question and the choices.
    const diff = editDiff(request.tool, request.args, out)
    const shown = diff?.length ? `\n${diff.join('\n')}\n` : ''
    const who = [...this.asker(request), ...toolFacts(request)]
    const facts = who.length ? out.dim(`  [${who.join(' · ')}]`) : ''
    const choice = await this.question(out.yellow(`? ${describeRequest(request.tool, request.args)}`) + facts + reason + shown + choices, request.signal)
    // Aborted: the tool runtime records the call as aborted, whatever is answered here.
    if (choice === undefined) return { kind: 'deny' }
    const key = choice.trim().toLowerCase()
    if (key === 'y' || key === 'yes') return { kind: 'allow' }
    if (key === 'a') return { kind: 'allow-session' }
    const note = (await this.question('note for the model (optional): ', request.signal))?.trim()
    return note ? { kind: 'deny', note } : { kind: 'deny' }
  }

  /** Who asks, when it is not the conversation's own agent: a delegated agent (a subagent), named with its session. */
  private asker(request: ApprovalRequest): string[] {
    const agent = request.agent && this.ctx.get('agents')?.get(request.agent.id)
    if (agent?.session.header.parentSession === undefined) return []
    return [`${request.agent!.name ?? 'agent'} ${request.agent!.id}`]
  }

  /**
   * One line from the terminal, or undefined once `signal` aborts or input ends.
   * Not a terminal-mode readline: the terminal stays in its normal mode, so
   * Ctrl-C remains the signal that cancels the turn (and so this question).
   */
  private question(text: string, signal: AbortSignal): Promise<string | undefined> {
    return new Promise(resolve => {
      if (signal.aborted) return resolve(undefined)
      // The spinner may hold the current line: start the question on a clean one.
      this.output.write((this.output.isTTY ? '\r\x1b[K' : '') + redact(text, hostSecrets()))
      const rl = createInterface({ input: this.input, terminal: false })
      let answer: string | undefined
      const abort = () => rl.close()
      signal.addEventListener('abort', abort, { once: true })
      rl.once('line', line => {
        answer = line
        rl.close()
      })
      rl.once('close', () => {
        signal.removeEventListener('abort', abort)
        // Ended input leaves the cursor on the question's line; a Ctrl-C's message starts a new one itself.
        if (answer === undefined && !signal.aborted) this.output.write('\n')
        resolve(answer)
      })
    })
  }
}

const EFFECT_WORDS: Record<string, string> = {
  read: 'reads',
  write: 'writes files',
  execute: 'runs programs',
  network: 'reaches the network',
  outside: 'acts outside Loom',
}

/** What the tool says of itself: who runs it, what it may do, whether it may destroy data. */
function toolFacts(request: ApprovalRequest): string[] {
  const effects = request.effects ? request.effects.map(effect => EFFECT_WORDS[effect] ?? effect).join(', ') : 'effects unknown'
  return [...(request.origin ? [request.origin] : []), effects, ...(request.destructive ? ['may destroy data'] : [])]
}

/** `bash wants to run: ls`, `edit wants to change a.ts`, else the arguments as short JSON. */
function describeRequest(tool: string, args: unknown): string {
  if (typeof args === 'object' && args !== null) {
    if ('command' in args && typeof args.command === 'string') return `${tool} wants to run: ${clip(args.command.replace(/\s*\n\s*/g, ' ⏎ '), 200)}`
    if ('path' in args && typeof args.path === 'string')
      return `${tool} wants to ${'new_string' in args ? 'change' : 'content' in args ? 'write' : 'use'} ${clip(args.path, 200)}`
  }
  return `${tool} wants to run with ${clip(typeof args === 'string' ? args : JSON.stringify(args), 200)}`
}

/** The terminal approver as a boot plugin; `asking` is shared with the conversation that shows the turns. */
export function terminalApprover(config: TerminalConfig = {}): { plugin: typeof TerminalApprover; config: TerminalConfig } {
  return { plugin: TerminalApprover, config }
}
