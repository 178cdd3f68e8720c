import { realpathSync } from 'node:fs'
import { realpath, stat } from 'node:fs/promises'
import { isAbsolute } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'
import { defineTool, type ToolRunContext } from '@loom/tools'
import { excerpt } from '@loom/tools/artifacts'
import { workspaceRootOf } from '@loom/tools/workspace'
import { DEFAULT_SECRET_PATTERNS, createRedactor, hostRedactor, scrubEnv, type Redactor, type SecretPattern } from '@loom/secrets'
import { reapOrphans } from './procs.ts'
import { ShellRun, type RunResult, type StreamOutput } from './run.ts'
import { probeBwrap, readMounts, resolveSandbox, type Confinement, type SandboxMode } from './sandbox.ts'

export { ShellRun, DRAIN_MS, type RunOptions, type RunResult, type StreamOutput } from './run.ts'
export { MARKER_VAR, reapOrphans } from './procs.ts'
export { bwrapArgs, probeBwrap, readMounts, resolveSandbox, type BwrapProbe, type Confinement, type ReadMount, type SandboxMode } from './sandbox.ts'
export { StreamBuffer, TailBuffer } from './tail.ts'

export const name = '@loom/tool-shell'
export const inject = ['tools', 'systemPrompt']

export const SECTION_NAME = 'tool:bash'
export const SECTION_ORDER = 105
/** The rule an unconfined command's question carries: an allow-session answer covers the session's commands. */
export const UNCONFINED_RULE = 'unconfined shell'

export interface Config {
  /** Workspace root, where commands run (a leading `~/` is the home directory); default: the calling agent's session cwd, else the process cwd. */
  root?: string
  /** Timeout of a call that does not pass `timeout`. */
  timeoutMs: number
  /** Largest timeout a call may ask for; larger ones are clamped. */
  maxTimeoutMs: number
  /** Bytes shown per stream (stdout, stderr): its head and tail; the whole is kept as an artifact. */
  maxOutputBytes: number
  /** Time between SIGTERM and SIGKILL when a command is stopped. */
  graceMs: number
  /** The shell, run as `<shell> -c <command>`. */
  shell: string
  /** `bwrap`: each command confined through bubblewrap; `none`: unconfined (process group and /proc tracking); `auto`: `bwrap` when it works here, else `none`. */
  sandbox: SandboxMode
  /** With bubblewrap: keep the host's network; otherwise commands have none. */
  network: boolean
  /** Without a sandbox: how a run with nobody to ask answers for a command (`deny` unless chosen). */
  unattended: 'allow' | 'deny'
  /** With bubblewrap: paths (absolute or `~/...`) writable besides the workspace root and the private /tmp. */
  writable: string[]
  env: {
    /** Names (globs, or exact) removed from the commands' environment besides the default secret rule. */
    secretPatterns: string[]
    /** Names (globs, or exact) kept even when they look secret. */
    allow: string[]
  }
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description(
    'Workspace root, where commands run and what they may write (a leading `~/` is the home directory; default: the agent session cwd, else the process cwd).',
  ),
  timeoutMs: Schema.natural().min(1).default(120_000).description('Timeout of a call that does not pass `timeout`, in ms.'),
  maxTimeoutMs: Schema.natural().min(1).default(600_000).description('Largest timeout a call may ask for, in ms; larger requests are clamped.'),
  maxOutputBytes: Schema.natural()
    .min(1)
    .default(64_000)
    .description(
      'Bytes of each stream (stdout, stderr) the model is shown: a longer one shows its head and tail, and the whole output is kept as an artifact that `read` pages through.',
    ),
  graceMs: Schema.natural().default(3_000).description('Time between SIGTERM and SIGKILL when a command is stopped, in ms.'),
  shell: Schema.string().default('bash').description('Shell executable, run as `<shell> -c <command>`.'),
  sandbox: Schema.union(['auto', 'bwrap', 'none'] as const)
    .default('auto')
    .description(
      'Isolation of each command: `bwrap` confines it through bubblewrap (the filesystem read-only except the workspace root, `writable` and a private /tmp; no network unless `network`; its own PID namespace, so nothing it starts survives the call or the host); `none` runs it unconfined, tracked by its process group and /proc; `auto` is `bwrap` when it works here, else `none`.',
    ),
  network: Schema.boolean()
    .default(false)
    .description(
      "With bubblewrap: keep the host's network. Off, a command has only a loopback interface of its own (a server it starts is reachable, nothing else).",
    ),
  unattended: Schema.union(['allow', 'deny'] as const)
    .default('deny')
    .description(
      'Without a sandbox (bubblewrap missing, or sandbox none) every command is asked about at the terminal, whatever the permission rules say; this is the answer of a run with nobody to ask (`loom run`, `loom serve`). `allow` lets commands run unconfined there: choose it only where the agent may do anything you can.',
    ),
  writable: Schema.array(String)
    .default([])
    .description(
      'With bubblewrap: more paths commands may write, absolute or `~/...`, e.g. `~/.cache`; each must exist. Everything but the workspace root, these and a private /tmp is read-only.',
    ),
  env: Schema.object({
    secretPatterns: Schema.array(String)
      .default([])
      .description(
        "More secret variable names, removed from the commands' environment and redacted from their output: exact names or globs (`*`), case-insensitive, e.g. `DATABASE_URL`, `MYCORP_*`. Added to the default rule of @loom/secrets (`*_API_KEY`, `*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, ...).",
      ),
    allow: Schema.array(String)
      .default([])
      .description(
        'Secret variables passed to commands anyway (exact names or globs), e.g. `GITHUB_TOKEN` for `gh`. Their values are still redacted from the output.',
      ),
  }).description("The environment of the commands: the host's, without secrets."),
}) as Schema<Config>

/** Variables set for every command so that nothing waits for a terminal or paints colours. */
export const SHELL_ENV: Readonly<Record<string, string>> = Object.freeze({
  NO_COLOR: '1',
  TERM: 'dumb',
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  GIT_TERMINAL_PROMPT: '0',
})

/** Variables removed from the inherited environment (they would force colours back on). */
const DROPPED_ENV = ['FORCE_COLOR', 'CLICOLOR_FORCE']

/** `120000` → `120`, `1500` → `1.5`. */
export function seconds(ms: number): string {
  return String(Math.round(ms) / 1000)
}

export function guidance(config: Config, sandbox: 'bwrap' | 'none' = config.sandbox === 'none' ? 'none' : 'bwrap'): string {
  return [
    '`bash` runs each command in a fresh, non-interactive `bash -c` shell started in the workspace root: `cd`, variables and other shell state do not carry over to the next call, so chain dependent steps in one command (`cd sub && make`).',
    'Nothing can be typed into it (stdin is empty): pass flags that avoid prompts and pagers (`--yes`, `--no-pager`). Colours are off (`NO_COLOR=1`, `TERM=dumb`).',
    'The result is stdout, then stderr under `[stderr]`, then `[exit code: N]`: check the code, a non-zero code means the command failed even when its output looks fine.',
    `A command is stopped after ${seconds(config.timeoutMs)} s; give long builds or test runs a larger \`timeout\` (in ms, at most ${seconds(config.maxTimeoutMs)} s). Of stdout and of stderr you see at most ${config.maxOutputBytes} bytes each: of a longer stream its head and tail, and a reference to the whole output that \`read\` pages through (\`offset\`); filter long output (\`| tail\`, \`| grep\`) when you need only part of it.`,
    'Every process a command starts ends with the call, background ones too: start a server and use it in the same command (`server & sleep 2; curl localhost:8080`).',
    'Secret environment variables (API keys, tokens, passwords) are not set in the shell, and secrets in the output read `[REDACTED]`.',
    sandboxGuidance(config, sandbox),
  ].join('\n')
}

/** What the model is told about confinement: what `sandbox` came to on this machine. */
function sandboxGuidance(config: Config, sandbox: 'bwrap' | 'none'): string {
  if (sandbox === 'none') {
    return 'Commands are not sandboxed: each one is approved by the user first, and runs with their rights (files anywhere, the network), so keep changes inside the workspace root.'
  }
  const places = ['the workspace root', ...config.writable.map(path => `\`${path}\``), '`/tmp` (private to the call, emptied after it)']
  const writable = `${places.slice(0, -1).join(', ')} and ${places.at(-1)}`
  const network = config.network
    ? ''
    : '; there is no network (downloads, package installs and `git fetch` fail; a server the command starts on localhost works)'
  return `Commands run in a sandbox: credential stores (\`~/.ssh\`, \`~/.aws\` and the like) are hidden and every other file is readable, but only ${writable} are writable, a write elsewhere fails with \`Read-only file system\`${network}.`
}

interface BashArgs {
  command: string
  timeout?: number
}

/** One trailing newline is the line end, not content. */
function body(text: string): string {
  return text.endsWith('\n') ? text.slice(0, -1) : text
}

/** All a run kept of a stream: the stream, or its head and tail around a line saying how much was dropped. */
function kept(stream: StreamOutput): string {
  if (stream.truncated === 0) return body(stream.text)
  const head = stream.text === '' || stream.text.endsWith('\n') ? stream.text : `${stream.text}\n`
  return `${head}[… ${stream.truncated} bytes not kept: the stream is longer than one call keeps]\n${body(stream.tail)}`
}

/** The whole output as kept: stdout, then `[stderr]` and stderr; and the line each stream starts at in it. */
export function keptOutput(result: Pick<RunResult, 'stdout' | 'stderr'>): { text: string; stdoutLine: number; stderrLine: number } {
  const stdout = result.stdout.total > 0 ? kept(result.stdout) : undefined
  const stderr = result.stderr.total > 0 ? kept(result.stderr) : undefined
  const parts = [...(stdout === undefined ? [] : [stdout]), ...(stderr === undefined ? [] : ['[stderr]', stderr])]
  const stdoutLines = stdout === undefined ? 0 : stdout.split('\n').length
  return { text: parts.join('\n'), stdoutLine: 1, stderrLine: stdoutLines + 2 }
}

/** Whether a stream is longer than the model is shown: then the whole output is kept as an artifact. */
export function overLimit(result: Pick<RunResult, 'stdout' | 'stderr'>, maxBytes: number): boolean {
  return [result.stdout, result.stderr].some(stream => stream.truncated > 0 || Buffer.byteLength(stream.text) > maxBytes)
}

/**
 * The text the model reads: stdout, `[stderr]` section, notices, then the exit status. A
 * stream over `maxBytes` shows its head and tail around a line naming the artifact (`reference`)
 * and the line of it to read on from.
 */
export function formatResult(result: RunResult, notes: { clampedFromMs?: number; timeoutMs: number; maxBytes: number; reference?: string }): string {
  const lines: string[] = []
  const { stdout, stderr } = result
  const whole = keptOutput(result)
  // Without a reference, nothing was kept beyond what the run held: the limit itself (see keepBytes).
  const shown = (stream: StreamOutput, firstLine: number) =>
    notes.reference === undefined ? kept(stream) : excerpt(kept(stream), { maxBytes: notes.maxBytes }, { firstLine, reference: notes.reference }).text
  if (stdout.total > 0) lines.push(shown(stdout, whole.stdoutLine))
  if (stderr.total > 0) lines.push('[stderr]', shown(stderr, whole.stderrLine))
  if (stdout.total === 0 && stderr.total === 0) lines.push('(no output)')
  if (notes.clampedFromMs !== undefined) {
    lines.push(`[requested timeout ${seconds(notes.clampedFromMs)} s exceeds the maximum; clamped to ${seconds(notes.timeoutMs)} s]`)
  }
  if (result.timedOut) lines.push(`[timed out after ${seconds(notes.timeoutMs)} s]`)
  if (result.aborted) lines.push('[aborted]')
  if (result.stoppedBackground) lines.push('[background processes still running when the shell exited were stopped]')
  lines.push(result.exitCode !== null ? `[exit code: ${result.exitCode}]` : `[killed by signal ${result.signal}]`)
  return lines.join('\n')
}

/** The workspace root of the call, the one the file tools use (`workspaceRootOf`): commands start there. */
async function workingDirectory(config: Config, exec: ToolRunContext): Promise<string> {
  const cwd = workspaceRootOf(config.root, exec)
  const info = await stat(cwd).catch(() => undefined)
  if (!info?.isDirectory()) {
    throw new Error(`working directory "${cwd}" does not exist or is not a directory (${name}: config root or the session cwd)`)
  }
  return cwd
}

/** The `writable` paths, `~/` expanded and symlinks resolved (bwrap binds a path at its real place); each must exist. */
function writablePaths(paths: readonly string[]): string[] {
  return paths.map(path => {
    if (!isAbsolute(path) && path !== '~' && !path.startsWith('~/')) {
      throw new Error(`${name}: config writable path "${path}" is not absolute (give /... or ~/...)`)
    }
    try {
      return realpathSync(workspaceRootOf(path))
    } catch (error) {
      throw new Error(`${name}: config writable path "${path}" cannot be made writable: ${(error as Error).message}`)
    }
  })
}

/** The host's environment without secrets, plus `SHELL_ENV`. */
function shellEnv(patterns: readonly SecretPattern[], allow: readonly string[]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...scrubEnv(process.env, { patterns, allow }).env, ...SHELL_ENV }
  for (const key of DROPPED_ENV) delete env[key]
  return env
}

/** The stdout and stderr text with the host's secret values, and credentials in header echoes, redacted. */
function redactOutput(result: RunResult, redactor: Redactor): RunResult {
  // Around a cut, the head may end with the start of a secret and the tail begin with its end.
  const cut = (stream: StreamOutput) => stream.truncated > 0
  const clean = (stream: StreamOutput): StreamOutput => ({
    ...stream,
    text: redactor(stream.text, { tailCut: cut(stream) }),
    tail: redactor(stream.tail, { headCut: cut(stream) }),
  })
  return { ...result, stdout: clean(result.stdout), stderr: clean(result.stderr) }
}

/**
 * Bytes a run keeps of each stream: with a session to keep the output in, as much as one
 * artifact holds (stdout and stderr share it, with room for the marker lines); else what
 * the model is shown.
 */
function keepBytes(ctx: Context, exec: ToolRunContext, maxOutputBytes: number): number {
  const { artifacts } = ctx.tools
  if (!artifacts.available(exec)) return maxOutputBytes
  return Math.max(maxOutputBytes, Math.floor((artifacts.limits.maxBytes - ARTIFACT_MARKS_BYTES) / 2))
}

/** Room in an artifact for what a run adds to the streams: `[stderr]` and the lines saying what was not kept. */
const ARTIFACT_MARKS_BYTES = 512

// Processes left by a host of an earlier run that was killed with SIGKILL (only
// possible without bwrap) are reaped once, when the plugin first starts here.
let reaped = false

export function apply(ctx: Context, config: Config) {
  if (config.timeoutMs > config.maxTimeoutMs) {
    throw new Error(`${name}: config timeoutMs (${config.timeoutMs}) exceeds maxTimeoutMs (${config.maxTimeoutMs})`)
  }

  const writable = config.sandbox === 'none' ? [] : writablePaths(config.writable)
  // `bwrap` that does not work fails the start; `auto` tries it at the first call
  // (a 50 ms subprocess that `loom prompt` and a turn without bash never need: the
  // guidance does not depend on its outcome).
  let sandbox = config.sandbox === 'auto' ? undefined : resolveSandbox(config.sandbox, name, config.network)
  let warned = false
  const unconfinedWhy = () => (config.sandbox === 'none' ? "config sandbox is 'none'" : `bubblewrap does not work here (${probeBwrap(config.network).reason})`)
  const resolvedSandbox = () => {
    sandbox ??= resolveSandbox('auto', name, config.network)
    if (sandbox === 'none' && !warned) {
      // Said once, at the first command: the deployment runs commands that can write anywhere.
      warned = true
      const unattended = config.unattended === 'allow' ? 'run unattended (unattended: allow)' : 'each asked about first, refused where nobody can answer'
      ctx.logger('tool-shell').warn(`${unconfinedWhy()}: commands run unconfined, ${unattended}`)
    }
    return sandbox
  }
  const unconfinedAsk = () => ({
    reason: `${unconfinedWhy()}, so the command would run without a sandbox, as you: able to read and change every file you can, and to reach the network`,
    rule: UNCONFINED_RULE,
    unattended: config.unattended,
    refusal:
      'without a sandbox a command runs only with the approval of a person at the terminal (or with --approve all, or unattended: allow in the config of @loom/tool-shell); no rule allows it',
  })
  /** The confinement of a call whose workspace root is `cwd`, or `none`. */
  const confinement = async (cwd: string): Promise<Confinement | 'none'> =>
    resolvedSandbox() === 'none'
      ? 'none'
      : {
          network: config.network,
          writable: [...writable, await realpath(cwd)],
          readOnly: ctx.tools.protectedPaths().map(entry => entry.path),
          // Found at every call, as the disk is: a credential store created since is hidden too.
          hidden: readMounts(ctx.tools.readRules()),
        }
  if (!reaped) {
    reaped = true
    reapOrphans()
  }
  const secretPatterns = [...DEFAULT_SECRET_PATTERNS, ...config.env.secretPatterns]
  // The host's secrets are read at each call (the environment may change).
  const currentRedactor = (): Redactor => hostRedactor({ patterns: secretPatterns }) ?? createRedactor([])

  // Runs that are not over yet: an unload kills their trees, and so does the host's exit
  // (synchronously, in 'exit', which also runs after an uncaught error).
  const live = new Set<ShellRun>()
  ctx.effect(
    () => () => {
      for (const run of [...live]) run.dispose()
      live.clear()
    },
    `${name}: running commands`,
  )
  ctx.effect(() => {
    const onExit = () => {
      for (const run of live) run.killTree()
    }
    process.on('exit', onExit)
    return () => process.off('exit', onExit)
  }, `${name}: kill running commands on exit`)

  // What `auto` comes to is found out at the first assembly (the probe is a 50 ms subprocess), so the
  // model is told the truth; it never changes while the process runs, so the section stays stable.
  let text: string | undefined
  ctx.systemPrompt.section({ name: SECTION_NAME, order: SECTION_ORDER, text: () => (text ??= guidance(config, resolvedSandbox())) })

  ctx.tools.register(
    defineTool<BashArgs>({
      name: 'bash',
      description:
        'Runs a shell command with `bash -c` in the workspace root and returns its stdout, its stderr (under `[stderr]`) and `[exit code: N]`. Each call gets a fresh, non-interactive shell.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', minLength: 1, description: 'The command line to run.' },
          timeout: {
            type: 'integer',
            minimum: 1,
            description: `Timeout in milliseconds (default ${config.timeoutMs}, at most ${config.maxTimeoutMs}).`,
          },
        },
        required: ['command'],
        additionalProperties: false,
      },
      // A command can change anything: it never runs alongside other calls.
      isConcurrencySafe: false,
      effects: ['execute'],
      // Unconfined, a command can read the user's keys and the host's environment and outlive the call:
      // a person says yes to each one, whatever the rules say (or the user chose `unattended: allow`).
      requiresApproval: () => (resolvedSandbox() === 'none' ? unconfinedAsk() : undefined),
      // No declarative `timeoutMs`: the tool stops its own process tree and still returns the output.
      async execute(args, exec) {
        const cwd = await workingDirectory(config, exec)
        const sandbox = await confinement(cwd)
        const requested = args.timeout ?? config.timeoutMs
        const timeoutMs = Math.min(requested, config.maxTimeoutMs)
        let run: ShellRun
        try {
          run = new ShellRun(
            {
              shell: config.shell,
              command: args.command,
              cwd,
              env: shellEnv(secretPatterns, config.env.allow),
              sandbox,
              timeoutMs,
              graceMs: config.graceMs,
              keepBytes: keepBytes(ctx, exec, config.maxOutputBytes),
              signal: exec.signal,
            },
            done => live.delete(done),
          )
        } catch (error) {
          throw new Error(`cannot start shell "${config.shell}" (${name} config shell): ${(error as Error).message}`)
        }
        live.add(run)
        let result: RunResult
        try {
          result = await run.done
        } catch (error) {
          throw new Error(`cannot start shell "${config.shell}" (${name} config shell): ${(error as Error).message}`)
        }
        result = redactOutput(result, currentRedactor())
        // A stream over the limit: the whole output is kept with the session, the model reads head and tail.
        const reference = overLimit(result, config.maxOutputBytes) ? await ctx.tools.artifacts.keep(exec, keptOutput(result).text) : undefined
        return {
          content: formatResult(result, {
            timeoutMs,
            maxBytes: config.maxOutputBytes,
            ...(reference !== undefined && { reference }),
            ...(requested > timeoutMs && { clampedFromMs: requested }),
          }),
          meta: {
            exitCode: result.exitCode,
            signal: result.signal,
            timedOut: result.timedOut,
            aborted: result.aborted,
            durationMs: result.durationMs,
            stdoutBytes: result.stdout.total,
            stderrBytes: result.stderr.total,
            // Bytes kept nowhere: a stream longer than one artifact holds loses its middle.
            truncatedBytes: result.stdout.truncated + result.stderr.truncated,
            ...(reference !== undefined && { artifact: reference }),
          },
        }
      },
    }),
  )
}
