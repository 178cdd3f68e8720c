// The approvers of the CLI. Headless commands (`loom run --approve MODE`): nobody
// is at a terminal to answer an `ask`, so the mode answers every one the same way.
// The conversation: the person at the terminal answers each one, with one key,
// after seeing what the model wrote before the call and what the call would
// change (an edit's diff, a write's content or its diff against the file).
import { type Context, type Fiber, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { redact } from '@loom/secrets'
import type { ApprovalAnswer, ApprovalRequest, Approver } from '@loom/tools'
import { readFile, realpath, stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { type ApproveMode, DEFAULT_APPROVE_MODE } from './commands.ts'
import { expandHome } from './input/complete.ts'
import { KeyReader, TerminalPrompt, type TtyInput } from './input/terminal.ts'
import { type CurrentContent, editDiff, writePreview } from './present/diff.ts'
import { clip, hostSecrets, styler } from './present/term.ts'

/** The note a denied call carries to the model: why nobody approved it (unless the ask says how a person would let it run). */
export const DENIAL_NOTES: Record<Exclude<ApproveMode, 'all'>, string> = {
  never: 'approvals are turned off for this run (--approve never): only tools that read run',
  policy: 'this headless run has no one to ask (--approve policy); the call needs a rule that allows it, or unattended: allow on its ask rule',
}

/** How a mode answers a request: `all` allows, `never` denies, `policy` takes the rule's `unattended` answer (absent: deny), with the ask's `refusal` as the note. */
export function answerOf(mode: ApproveMode, request?: Pick<ApprovalRequest, 'unattended' | 'refusal'>): ApprovalAnswer {
  if (mode === 'all' || (mode === 'policy' && request?.unattended === 'allow')) return { kind: 'allow' }
  return { kind: 'deny', note: request?.refusal ?? DENIAL_NOTES[mode] }
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

/** Whether a terminal question is open: the conversation holds the turn's output off the question meanwhile. */
export interface Asking {
  asking: boolean
  /** Called before a question is shown: the conversation shows what the turn streamed so far, so the question comes under it. */
  before?: () => Promise<void>
  /** Called when a question closes (the conversation shows what it held). */
  settled?: () => void
}

export interface TerminalConfig {
  input?: TtyInput
  output?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
  asking?: Asking
}

const CHOICES = (out: ReturnType<typeof styler>) => `  ${out.bold('[y]')} allow once  ${out.bold('[a]')} allow for this session  ${out.bold('[n]')} deny: `

const HELP = [
  '  y  allow this call once',
  '  a  allow it for the rest of this session: every call of this tool that the same rule asks about',
  '  n  deny it; then a note for the model, which it reads with the denial (Enter for none)',
  '  Ctrl-C or Esc cancels the turn',
]

/** A file a `write` preview compares with: larger ones are only named. */
const MAX_COMPARED_BYTES = 1024 * 1024

/**
 * `ctx.approver` for the conversation: each `ask` is a question on the terminal,
 * one at a time, answered by one key on a terminal (`y`, `a`, `n`, `?`; anything
 * else asks again) or by a line when the input is not one.
 */
export class TerminalApprover extends Service implements Approver {
  static override readonly name = '@loom/cli/approve-terminal'

  private readonly input: TtyInput
  private readonly output: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
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
    await this.asking.before?.().catch(() => {})
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
    // A change to a file shows what it would change, between the question and the choices.
    const preview = editDiff(request.tool, request.args, out) ?? writePreview(request.tool, request.args, await this.current(request), out)
    const shown = preview?.length ? `\n${preview.join('\n')}\n` : ''
    const who = [...this.asker(request), ...toolFacts(request)]
    const facts = who.length ? out.dim(`  [${who.join(' · ')}]`) : ''
    // The spinner may hold the current line: the question starts on a clean one.
    this.write((this.output.isTTY ? '\r\x1b[K' : '') + out.yellow(`? ${describeRequest(request.tool, request.args)}`) + facts + reason + shown)
    const keys = this.keys()
    for (;;) {
      const choice = await (keys ? this.key(keys, CHOICES(out), request.signal) : this.line(CHOICES(out), request.signal))
      // Aborted: the tool runtime records the call as aborted, whatever is answered here.
      if (choice === undefined) return { kind: 'deny' }
      const answer = choice.trim().toLowerCase()
      if (answer === 'y' || answer === 'yes') return { kind: 'allow' }
      if (answer === 'a') return { kind: 'allow-session' }
      if (answer === 'n' || answer === 'no') {
        const note = (await (keys ? this.note(keys, request.signal) : this.line('note for the model (optional): ', request.signal)))?.trim()
        return note ? { kind: 'deny', note } : { kind: 'deny' }
      }
      this.write(answer === '?' ? `${HELP.join('\n')}\n` : out.dim('  answer y, a or n (? explains them)') + '\n')
    }
  }

  /** The keyboard, when the input is a terminal: answers are single keys. */
  private keys(): KeyReader | undefined {
    return this.input.isTTY && typeof this.input.setRawMode === 'function' ? KeyReader.of(this.input) : undefined
  }

  /** Who asks, when it is not the conversation's own agent: a delegated agent (a subagent), named with its session. */
  private asker(request: ApprovalRequest): string[] {
    const agent = request.agent && this.ctx.get('agents')?.get(request.agent.id)
    if (agent?.session.header.parentSession === undefined) return []
    return [`${request.agent!.name ?? 'agent'} ${request.agent!.id}`]
  }

  /**
   * What the file a `write` call names holds now, for its preview: where its
   * tool resolved the path (`request.writes`), else from the calling agent's
   * folder. A file the tools may not read is not shown; nor is a large or
   * binary one.
   */
  private async current(request: ApprovalRequest): Promise<CurrentContent> {
    const path = typeof request.args === 'object' && request.args !== null ? (request.args as { path?: unknown }).path : undefined
    if (request.tool !== 'write' || typeof path !== 'string') return { kind: 'none' }
    const agent = request.agent && this.ctx.get('agents')?.get(request.agent.id)
    let file: string
    try {
      file = await realpath(request.writes?.length === 1 ? request.writes[0] : resolve(agent?.cwd ?? process.cwd(), expandHome(path)))
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ENOENT' ? { kind: 'none' } : { kind: 'hidden', why: (error as Error).message }
    }
    if (this.ctx.get('tools')?.readDenial(file)) return { kind: 'hidden', why: 'tools may not read it' }
    try {
      const stats = await stat(file)
      if (!stats.isFile()) return { kind: 'hidden', why: 'not a file' }
      if (stats.size > MAX_COMPARED_BYTES) return { kind: 'hidden', why: 'too large to compare', bytes: stats.size }
      const data = await readFile(file)
      if (data.includes(0)) return { kind: 'hidden', why: 'binary', bytes: data.length }
      return { kind: 'text', text: data.toString('utf8') }
    } catch (error) {
      return { kind: 'hidden', why: (error as Error).message }
    }
  }

  private write(text: string) {
    this.output.write(redact(text, hostSecrets()))
  }

  /**
   * One key from the terminal, shown after `text`, or undefined once `signal`
   * aborts. Ctrl-C and Esc are left to the conversation beneath, which cancels
   * the turn (and so this question).
   */
  private key(keys: KeyReader, text: string, signal: AbortSignal): Promise<string | undefined> {
    return new Promise(resolve => {
      if (signal.aborted) return resolve(undefined)
      this.write(text)
      const release = keys.open()
      const done = (answer: string | undefined) => {
        remove()
        release()
        signal.removeEventListener('abort', abort)
        resolve(answer)
      }
      const abort = () => done(undefined)
      const remove = keys.on(key => {
        if (key.name === 'ctrl-c' || key.name === 'escape') return false
        const typed = key.name === 'text' ? key.text![0] : ''
        this.output.write(`${typed}\n`)
        done(typed)
        return true
      })
      signal.addEventListener('abort', abort, { once: true })
    })
  }

  /** The note of a denial, typed on one line at the terminal; undefined once `signal` aborts. */
  private async note(keys: KeyReader, signal: AbortSignal): Promise<string | undefined> {
    const prompt = new TerminalPrompt(keys, this.output, { prompt: 'note for the model (optional): ', passInterrupts: true })
    const result = await prompt.read({ signal })
    return result.kind === 'line' && !signal.aborted ? result.text : undefined
  }

  /**
   * One line from input that is not a terminal, or undefined once `signal`
   * aborts or input ends.
   */
  private line(text: string, signal: AbortSignal): Promise<string | undefined> {
    return new Promise(resolve => {
      if (signal.aborted) return resolve(undefined)
      this.write(text)
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
