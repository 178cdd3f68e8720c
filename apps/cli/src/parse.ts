// The command line as data: the words and options of one `loom` invocation,
// checked against the command table (commands.ts) before anything loads. A
// mistake is a UsageError naming the option or the value.
import { parseArgs } from 'node:util'
import { checkOptions, CONVERSATION, lookup, OPTIONS, parseApproveMode, type ServeApproveMode } from './commands.ts'
import { UsageError } from './errors.ts'
import type { OutputFormat } from './present/turn.ts'

export interface Parsed {
  command: string[]
  json: boolean
  /** How a turn is printed as it runs (`run`, `sessions resume`). */
  output: OutputFormat
  /** How a headless turn answers a tool call the policy asks about (`api`: loom serve's clients do). */
  approve: ServeApproveMode
  provider?: string
  model?: string
  bundles: string[]
  patches: string[]
  help: boolean
  version: boolean
  /** `sessions stats` prices per million tokens, as typed (checked by the command). */
  prices: { hit?: string; miss?: string; output?: string; write?: string }
  showReasoning: boolean
  thinking?: 'on' | 'off'
  reasoningEffort?: string
  maxSteps?: number
  maxInputTokens?: number
  maxCostUsd?: number
  /** `schema --out`: the file to write. */
  out?: string
  /** `new plugin --packs`: a folder of package tarballs. */
  packs?: string
  /** `sessions manifest --step`: the request (1-based). */
  step?: number
  /** `prompt --diff A [B]`: the first side of the comparison. */
  diff?: string
  /** `loom -c`: the conversation continues the session used last here. */
  continue: boolean
  /** `trust --list`, `trust --revoke`. */
  list: boolean
  revoke: boolean
  /** `inspect --open`: start the browser on the page. */
  open: boolean
  /** `serve`, `inspect`: where to listen; `serve`: the token file, the drain deadline. */
  port?: number
  host?: string
  tokenFile?: string
  drainMs?: number
  maxConnections?: number
  headersTimeoutMs?: number
  requestTimeoutMs?: number
  /** `serve --approve api`: how long a question waits for a client. */
  approveDeadlineMs?: number
}

/** `pnpm loom -- ...` passes the `--` through. */
const withoutDashes = (argv: readonly string[]) => argv.filter(arg => arg !== '--')

export function parse(argv: readonly string[]): Parsed {
  let values: Record<string, unknown>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: withoutDashes(argv), allowPositionals: true, strict: true, options: OPTIONS }))
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''))
  }
  const found = lookup(positionals)
  if (values.help !== true) {
    if (found && 'command' in found) checkOptions(found.command, Object.keys(values))
    else if (found === undefined) checkOptions(CONVERSATION, Object.keys(values))
  }
  const output = outputFormat(values.output as string | undefined)
  // One object at the end, or lines as it runs: both at once cannot share stdout.
  if (values.json === true && values.output !== undefined) throw new UsageError(`--json and --output ${output} are two output formats: give one`)
  return {
    command: positionals,
    json: values.json === true,
    output,
    approve: parseApproveMode(values.approve as string | undefined, found && 'command' in found ? found.command.name : undefined),
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
      write: values['write-price'] as string | undefined,
    },
    showReasoning: values['show-reasoning'] === true,
    thinking: onOff('thinking', values.thinking as string | undefined),
    reasoningEffort: values['reasoning-effort'] as string | undefined,
    maxSteps: number('max-steps', values['max-steps'] as string | undefined, { integer: true, min: 1 }),
    maxInputTokens: number('max-input-tokens', values['max-input-tokens'] as string | undefined, { integer: true, min: 1 }),
    maxCostUsd: number('max-cost', values['max-cost'] as string | undefined, { integer: false, min: 0 }),
    out: values.out as string | undefined,
    packs: values.packs as string | undefined,
    step: number('step', values.step as string | undefined, { integer: true, min: 1 }),
    diff: values.diff as string | undefined,
    continue: values.continue === true,
    list: values.list === true,
    revoke: values.revoke === true,
    open: values.open === true,
    port: number('port', values.port as string | undefined, { integer: true, min: 0, max: 65535 }),
    host: values.host as string | undefined,
    tokenFile: values['token-file'] as string | undefined,
    drainMs: number('drain-ms', values['drain-ms'] as string | undefined, { integer: true, min: 0 }),
    maxConnections: number('max-connections', values['max-connections'] as string | undefined, { integer: true, min: 1 }),
    headersTimeoutMs: number('headers-timeout-ms', values['headers-timeout-ms'] as string | undefined, { integer: true, min: 1 }),
    requestTimeoutMs: number('request-timeout-ms', values['request-timeout-ms'] as string | undefined, { integer: true, min: 1 }),
    approveDeadlineMs: number('approve-deadline-ms', values['approve-deadline-ms'] as string | undefined, { integer: true, min: 1 }),
  }
}

/** The positionals as well as they can be told apart, for pointing a usage error at the right help. */
export function positionalsOf(argv: readonly string[]): string[] {
  try {
    return parseArgs({ args: withoutDashes(argv), allowPositionals: true, strict: false, options: OPTIONS }).positionals
  } catch {
    return []
  }
}

function outputFormat(raw: string | undefined): OutputFormat {
  if (raw === undefined || raw === 'text' || raw === 'stream-json') return raw ?? 'text'
  throw new UsageError(`--output: expected text or stream-json, got "${raw}"`)
}

function onOff(flag: string, raw: string | undefined): 'on' | 'off' | undefined {
  if (raw === undefined || raw === 'on' || raw === 'off') return raw
  throw new UsageError(`--${flag}: expected on or off, got "${raw}"`)
}

function number(flag: string, raw: string | undefined, rule: { integer: boolean; min: number; max?: number }): number | undefined {
  if (raw === undefined) return undefined
  const value = Number(raw)
  if (
    raw.trim() === '' ||
    !Number.isFinite(value) ||
    value < rule.min ||
    (rule.max !== undefined && value > rule.max) ||
    (rule.integer && !Number.isInteger(value))
  ) {
    const range = rule.max === undefined ? `>= ${rule.min}` : `from ${rule.min} to ${rule.max}`
    throw new UsageError(`--${flag}: expected ${rule.integer ? 'a whole number' : 'a number'} ${range}, got "${raw}"`)
  }
  return value
}
