// The `loom` command table: every command with its arguments, its options and
// examples. The parser, the check that an option applies to the command, and
// every help text derive from it. It imports nothing heavy, so `loom --help` and
// `loom --version` start without loading the host.
import { UsageError } from './errors.ts'

export interface OptionSpec {
  type: 'boolean' | 'string'
  short?: string
  multiple?: boolean
  /** The value's placeholder in help texts. */
  value?: string
  help: string
}

/** `never`: every ask is denied; `all`: every ask is allowed; `policy` (the default): the policy's asks are denied, as no one can answer them here. */
export type ApproveMode = 'never' | 'policy' | 'all'

export const APPROVE_MODES: readonly ApproveMode[] = ['never', 'policy', 'all']
export const DEFAULT_APPROVE_MODE: ApproveMode = 'policy'

/** `loom serve --approve api`: the server's clients answer each ask over its API (`@loom/serve`), the rule's `unattended` answer after a deadline. */
export type ServeApproveMode = ApproveMode | 'api'

/** The value of `--approve` for `command`; a usage error naming the flag and the modes otherwise. */
export function parseApproveMode(value: string | undefined, command?: string): ServeApproveMode {
  if (value === undefined) return DEFAULT_APPROVE_MODE
  if ((APPROVE_MODES as readonly string[]).includes(value)) return value as ApproveMode
  if (value === 'api' && command === 'serve') return value
  if (value === 'api') throw new UsageError(`--approve api is for loom serve, whose clients answer over its API; here it is one of ${APPROVE_MODES.join(', ')}`)
  const modes = command === 'serve' ? [...APPROVE_MODES, 'api'] : APPROVE_MODES
  throw new UsageError(`--approve must be one of ${modes.join(', ')}, not ${JSON.stringify(value)}`)
}

/** Every option, in the order the help lists them. */
export const OPTIONS = {
  json: { type: 'boolean', help: 'machine-readable output' },
  output: {
    type: 'string',
    value: '<format>',
    help: 'text as the turn streams (default), or stream-json: one JSON object per line as things happen; not with --json',
  },
  approve: {
    type: 'string',
    value: 'never|policy|all',
    help: "how a tool call that the policy (@loom/permissions) asks about is answered with no one to ask: never and policy (default) deny it with a note the model sees, all allows it; loom serve also takes api: the session's clients answer over the API",
  },
  'approve-deadline-ms': {
    type: 'string',
    value: '<n>',
    help: "with --approve api: how long a tool call waits for a client's answer before the rule's unattended answer (default 300000)",
  },
  provider: { type: 'string', value: '<id>', help: 'model route; default: the first served of deepseek, anthropic, openai, scripted' },
  model: { type: 'string', value: '<id>', help: 'model id' },
  thinking: { type: 'string', value: 'on|off', help: 'thinking mode of the model; off sends reasoning effort "off"' },
  'reasoning-effort': { type: 'string', value: '<e>', help: 'reasoning effort the route offers, e.g. low, high, max' },
  'show-reasoning': { type: 'boolean', help: "print the model's reasoning as it streams, dimmed (reasoning lines with stream-json)" },
  'max-steps': { type: 'string', value: '<n>', help: 'model requests per turn before the turn stops (default 50)' },
  'max-input-tokens': { type: 'string', value: '<n>', help: 'input tokens per turn, as the provider reports them' },
  'max-cost': { type: 'string', value: '<usd>', help: "estimated US dollars per turn at the model's prices" },
  bundle: { type: 'string', multiple: true, value: '<name>', help: 'bundle layer(s), in order (default: default; the CLI also ships minimal)' },
  patch: { type: 'string', multiple: true, value: '<file>', help: 'a patch layer applied after loom.yml; repeatable, in order' },
  'hit-price': { type: 'string', value: '<P>', help: "price per million cache-hit input tokens (default: the model's; deepseek-flash 0.006)" },
  'miss-price': { type: 'string', value: '<P>', help: "price per million cache-miss input tokens (default: the model's; deepseek-flash 0.30)" },
  'output-price': { type: 'string', value: '<P>', help: "price per million output tokens (default: the model's; deepseek-flash 1.20)" },
  'write-price': { type: 'string', value: '<P>', help: "price per million input tokens written to the cache (default: the model's, else the miss price)" },
  out: { type: 'string', value: '<file>', help: 'write it to this file instead of stdout' },
  packs: {
    type: 'string',
    value: '<dir>',
    help: "a folder of package tarballs (pnpm pack-all's packs/) the new project installs from, before the packages next to loom",
  },
  diff: {
    type: 'string',
    value: '<A>',
    help: 'compare the manifest of A with that of B: a session (ID, prefix or last; ID:N its Nth request), deployment, or a .yml layer',
  },
  step: { type: 'string', value: '<n>', help: 'the request of the session, numbered as sessions stats numbers them (default: the last)' },
  port: { type: 'string', value: '<n>', help: 'TCP port to listen on (serve: default 8080; inspect: a free one; 0 picks a free one)' },
  open: { type: 'boolean', help: "open the page in the browser ($BROWSER, else the system's opener)" },
  host: { type: 'string', value: '<address>', help: 'address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)' },
  'token-file': { type: 'string', value: '<file>', help: 'read the bearer token from this file instead of $LOOM_SERVE_TOKEN' },
  'drain-ms': { type: 'string', value: '<n>', help: 'on SIGTERM, how long running turns may finish before they are cancelled (default 10000)' },
  'max-connections': {
    type: 'string',
    value: '<n>',
    help: 'connections at once, event streams included; another gets 503 TOO_MANY_CONNECTIONS (default 1000)',
  },
  'headers-timeout-ms': { type: 'string', value: '<n>', help: "a request's headers must arrive within this, else 408 (default 10000)" },
  'request-timeout-ms': { type: 'string', value: '<n>', help: 'a whole request (headers and body) must arrive within this, else 408 (default 30000)' },
  continue: { type: 'boolean', short: 'c', help: 'open the conversation on the session used last in this folder' },
  list: { type: 'boolean', help: 'list the trusted layers: path, hash, date, and whether the file still matches' },
  revoke: { type: 'boolean', help: 'remove the trust in the layer (default: the loom.yml of this folder)' },
  help: { type: 'boolean', short: 'h', help: "this help; after a command, that command's options and examples" },
  version: { type: 'boolean', short: 'v', help: 'versions of loom and Node' },
} as const satisfies Record<string, OptionSpec>

export type OptionName = keyof typeof OPTIONS

/** Options every command takes. */
export const GLOBAL_OPTIONS: readonly OptionName[] = ['help', 'version']

export interface ArgSpec {
  /** As the synopsis shows it: `ID`, `"<task>"`. */
  name: string
  /** The key the command reads it by. */
  key: string
  /** What a usage error says is missing. */
  missing: string
  /** Takes every remaining word, joined by spaces. */
  rest?: boolean
  optional?: boolean
}

export interface CommandSpec {
  /** One word, or a group and its subcommand: `sessions stats`. */
  name: string
  args: readonly ArgSpec[]
  /** One line, for the overview. */
  summary: string
  /** More, for `loom help <command>`. */
  details?: string
  options: readonly OptionName[]
  examples: readonly string[]
}

const LAYERS = ['bundle', 'patch'] as const
const ROUTE = ['provider', 'model'] as const
/** What a conversation's turns take; `run` and `sessions resume` add their output formats. */
const CHAT = [...ROUTE, 'thinking', 'reasoning-effort', 'show-reasoning', 'max-steps', 'max-input-tokens', 'max-cost', ...LAYERS] as const
const TURN = ['json', 'output', 'approve', ...CHAT] as const
const STORED = ['json', ...LAYERS] as const

const task = (example: string): ArgSpec => ({ name: '"<task>"', key: 'task', rest: true, missing: `the task, as in: ${example} (or - to read it from stdin)` })
const ID: ArgSpec = { name: 'ID', key: 'id', missing: 'the session id (see: loom sessions list)' }
/** A stored session to continue: its id, a unique prefix of it, or `last`. */
const REF: ArgSpec = { name: 'ID|prefix|last', key: 'id', missing: 'the session: its id, a unique prefix of it, or last (see: loom sessions list)' }
const SESSION = '20261129-134221-5be15d'

export const COMMANDS = [
  {
    name: 'run',
    args: [task('loom run "what is in this directory?"')],
    summary: 'one headless turn of an agent in the current directory',
    details:
      'Streams the assistant text and tool calls as they happen; the session is stored under $LOOM_HOME/sessions. The task - is read from stdin, all of it. Exit 0 when the turn completed, 1 otherwise (an error, a limit), 2 on a usage error, 130 after Ctrl-C, 141 when nothing reads its output any more (| head -1).',
    options: TURN,
    examples: ['loom run "what is in this directory?"', 'loom run --json --max-steps 10 "fix the failing test"', 'git diff | loom run --output stream-json -'],
  },
  {
    name: 'resume',
    args: [REF],
    summary: 'open the conversation (as `loom` does) on a stored session',
    details:
      'The session is named by its id, a unique prefix of it, or last: the session used last in this folder (`loom -c` opens that one). An ambiguous prefix is an error that lists the sessions it names. Needs a terminal; to script a turn on a session, use loom sessions resume.',
    options: CHAT,
    examples: ['loom resume last', `loom resume ${SESSION.slice(0, 11)}`],
  },
  {
    name: 'prompt',
    args: [{ name: '[B]', key: 'against', optional: true, missing: 'what to compare with' }],
    summary: 'the request the deployment would send next (no model call), or how two manifests differ',
    details:
      'The system text, the tools in order and the runtime-context snapshot, then the manifest: every section, context and tool with its owner, trust, category, age and size. It assembles twice for the same agent: a section or variable whose text changed in between with no registration change is named on stderr with its plugin (--json: unstable), and the exit code is 1 when it is a static section or a variable (what fails the turns of loom dev; a session-stable section only warns). --diff A [B] compares two manifests instead (B defaults to this deployment): rows added, removed, moved (their order relative to the rows on both sides changed), and changed (or changed only in hash, same size), matched by kind and name. A and B are each a stored session (its id, a unique prefix or last; ID:N for its Nth request, as sessions stats numbers them; default its last), this deployment (deployment), or this deployment with one more layer file (a path ending in .yml).',
    options: ['json', 'diff', ...ROUTE, ...LAYERS],
    examples: [
      'loom prompt',
      'loom prompt --json --provider anthropic',
      'loom prompt --diff last',
      'loom prompt --diff last:1 last:3',
      'loom prompt --diff deployment with-mcp.yml',
    ],
  },
  {
    name: 'dev',
    args: [],
    summary: 'the conversation (as `loom` has it) with hot reload: edit a plugin or loom.yml while it runs',
    details:
      'One agent and one session for all the turns, as in loom. Saving a plugin file reloads that plugin: the next step of the same session uses it, and the turn names the plugin that changed the request. A loom.yml edit applies as a whole or not at all. A broken edit keeps the last good version and says why. Lines may also come from a pipe (a script driving dev).',
    options: [...CHAT, 'continue'],
    examples: ['loom dev', 'loom dev -c', 'loom dev --patch local.yml'],
  },
  {
    name: 'config',
    args: [],
    summary: "the deployment's rows, composed from its layers, as they boot",
    details: 'Each row under the layer files that inserted or changed it, in the YAML dialect the include reads.',
    options: ['json', ...LAYERS],
    examples: ['loom config', 'loom config --bundle minimal --json'],
  },
  {
    name: 'sessions list',
    args: [],
    summary: 'stored sessions: id, created, cwd, turns',
    options: STORED,
    examples: ['loom sessions list', 'loom sessions list --json'],
  },
  {
    name: 'sessions show',
    args: [REF],
    summary: 'a session log as a readable transcript',
    options: STORED,
    examples: [`loom sessions show ${SESSION}`],
  },
  {
    name: 'sessions resume',
    args: [REF, task('loom sessions resume ID "and now?"')],
    summary: 'a new turn on a stored session (output as for run)',
    details: 'The session is named by its id, a unique prefix of it, or last (the one used last in this folder). The task - is read from stdin, all of it.',
    options: TURN,
    examples: [`loom sessions resume ${SESSION} "and now the tests"`, 'loom sessions resume last - < next-task.txt'],
  },
  {
    name: 'sessions verify',
    args: [REF],
    summary: 'check a log: torn tail, open turn, corruption (exit 1 if not clean)',
    details: "Writes nothing and takes no lease. Reads the deployment's store: JSONL files, or PostgreSQL with a @loom/session-postgres row.",
    options: STORED,
    examples: [`loom sessions verify ${SESSION}`],
  },
  {
    name: 'sessions repair',
    args: [REF],
    summary: 'repair a log in its store and say what was done',
    details:
      'A torn tail is cut and an open turn is closed with explicit results, under the session\'s lease (refused while another process writes it); a clean log is left alone; corruption is never "repaired" (exit 1).',
    options: STORED,
    examples: [`loom sessions repair ${SESSION}`],
  },
  {
    name: 'sessions stats',
    args: [REF],
    summary: 'prefix reuse between consecutive requests, and their estimated input cost',
    details:
      "Every request rebuilt from the log: the share of the previous request it reuses as its prefix, estimated cache-hit, cache-miss and output tokens and cost. Costs are at the list prices of the session's provider and model (DeepSeek's and Anthropic's are built in) or the runner row's prices; a model with no known price shows none unless the hit, miss and output price flags are all given.",
    options: ['json', 'hit-price', 'miss-price', 'output-price', 'write-price', ...LAYERS],
    examples: [`loom sessions stats ${SESSION}`, `loom sessions stats ${SESSION} --hit-price 0.01 --json`],
  },
  {
    name: 'sessions manifest',
    args: [REF],
    summary: 'the manifest of a request the session sent, rebuilt from its log',
    details:
      'Every section of its system text and every runtime context it carried (owner, order, stability, trust, category, age and source hash, size: the rows loom prompt showed then), its tools and its history, with totals by owner; what an older log did not record reads unknown. --step picks the request (as sessions stats numbers them; default the last).',
    options: ['json', 'step', ...LAYERS],
    examples: [`loom sessions manifest ${SESSION}`, `loom sessions manifest ${SESSION} --step 2 --json`],
  },
  {
    name: 'sessions compact',
    args: [REF],
    summary: 'summarize the older part of a session now (exit 1 if the summary is refused)',
    details: 'Needs a @loom/compaction row (the default bundle has one).',
    options: ['json', ...ROUTE, ...LAYERS],
    examples: [`loom sessions compact ${SESSION}`],
  },
  {
    name: 'serve',
    args: [],
    summary: 'an HTTP API for the deployment: sessions over JSON, their events as a resumable SSE stream',
    details:
      "Boots the deployment as run does (tool calls answered by --approve; with --approve api, by the session's clients: approval/requested on the stream, POST /v1/sessions/ID/approvals/CALL to answer) and serves /v1/sessions: create a session with a task, post followup, steer or inject messages, cancel, list and read, and GET /v1/sessions/ID/events (Server-Sent Events, resumable with Last-Event-ID). Every request but /healthz needs Authorization: Bearer <token>, the token from $LOOM_SERVE_TOKEN or --token-file; without one it does not start. Several hosts can share one PostgreSQL store (see docs/operating.md). SIGTERM drains: new work gets 503, running turns get --drain-ms to finish, then they are cancelled and closed in their logs; exit 0.",
    options: [
      'port',
      'host',
      'token-file',
      'drain-ms',
      'approve',
      'approve-deadline-ms',
      'max-connections',
      'headers-timeout-ms',
      'request-timeout-ms',
      ...LAYERS,
    ],
    examples: [
      'LOOM_SERVE_TOKEN=$(openssl rand -hex 32) loom serve',
      'loom serve --host 0.0.0.0 --port 8080 --token-file /run/secrets/loom-token --drain-ms 30000',
      'loom serve --approve api --approve-deadline-ms 600000',
    ],
  },
  {
    name: 'inspect',
    args: [{ name: '[ID|prefix|last]', key: 'id', optional: true, missing: 'the session' }],
    summary: 'see what the model saw: the stored sessions in a web page on this machine (transcripts, manifests, cache, diffs)',
    details:
      "Serves the inspector on 127.0.0.1 (a free port unless --port) for the sessions of this deployment's store, and prints its address with a token made for this run: the page keeps the token in the tab and drops it from the address. With a session (its id, a unique prefix or last) the page opens on it. It reads the store only (no model, no plugins booted) and never writes a log. Ctrl-C stops it. The same page is served by loom serve at /ui, behind its bearer token.",
    options: ['port', 'open', ...LAYERS],
    examples: ['loom inspect', 'loom inspect last --open', 'loom inspect --port 7070'],
  },
  {
    name: 'trust',
    args: [{ name: '[PATH]', key: 'path', optional: true, missing: 'the layer file' }],
    summary: 'trust a project loom.yml that carries code or changes policy, so Loom runs it (as direnv allow)',
    details:
      "A project's loom.yml that carries code (a !!js value, a plugin mounted by path, an MCP server command) or changes policy (the permissions, @loom/tools, the shell's sandbox, network or secrets, where an API key is sent) runs only after you trusted its exact content: its sha256 is recorded in $LOOM_HOME/trust.json. Any change since, by the agent or anyone, needs trust again: on a terminal Loom shows what is new and asks; headless (loom run, loom serve, a script) it refuses with one line naming this command. PATH defaults to the loom.yml found from this folder. Review the file, then trust it; in CI, run loom trust ./loom.yml before loom run. Bundles, $LOOM_HOME/loom.yml and --patch files are yours and need no trust.",
    options: ['list', 'revoke', ...LAYERS],
    examples: ['loom trust', 'loom trust ./loom.yml', 'loom trust --list', 'loom trust --revoke ./loom.yml'],
  },
  {
    name: 'schema',
    args: [],
    summary: "a JSON Schema of loom.yml for editors: the rows, and each known plugin's config",
    details:
      'The plugins are those `loom plugins` lists; a patch by id is checked against the row of that id in the bundles. After `loom schema --out loom.schema.json`, make `# yaml-language-server: $schema=./loom.schema.json` the first line of loom.yml: an editor with the YAML language server then completes and checks it. Run it again after installing a plugin.',
    options: ['out', 'bundle'],
    examples: ['loom schema --out loom.schema.json', 'loom schema --bundle minimal > loom.schema.json'],
  },
  {
    name: 'plugins',
    args: [],
    summary: 'the plugins available here, bundled and installed, with their config keys',
    details:
      'Bundled: every plugin the CLI\'s bundles name. Installed: the packages in node_modules, from this folder up, whose package.json keywords include "loom-plugin". Each with its description and its config keys: type, default, description.',
    options: ['json'],
    examples: ['loom plugins', 'loom plugins --json'],
  },
  {
    name: 'new plugin',
    args: [{ name: 'NAME', key: 'name', missing: 'the name of the plugin, as in: loom new plugin my-tool' }],
    summary:
      'scaffold a plugin project in ./NAME: package.json, src/index.ts (a tool with its guidance section and a Config), a test with the test kit, README',
    details:
      "The packages the project depends on are copied as tarballs into its .loom/packs/ from the folder loom is installed in (the tarballs of --packs DIR first), and its package-lock.json locks each one there: npm install in it needs no registry. package.json names them as a registry install would (^0.1.0). A package found in neither place comes from the registry, and loom says which. The project's README lists its commands: npm install, npm test, npx loom prompt, and npx loom run --patch demo.yml, where a scripted model calls the tool.",
    options: ['packs'],
    examples: ['loom new plugin my-tool', 'loom new plugin @acme/word-count --packs ./packs'],
  },
  {
    name: 'help',
    args: [{ name: '[command]', key: 'topic', rest: true, optional: true, missing: 'the command' }],
    summary: "this overview, or a command's options and examples",
    options: [],
    examples: ['loom help sessions stats', 'loom sessions stats --help'],
  },
] as const satisfies readonly CommandSpec[]

export type CommandName = (typeof COMMANDS)[number]['name']

/**
 * `loom` with no command, on a terminal: a conversation with the agent of the
 * current directory. Not in the table (no word names it); its options are
 * checked against this, and the overview shows it.
 */
export const CONVERSATION = {
  name: 'loom',
  args: [],
  summary: 'a conversation with the agent in the current directory, on a terminal: one session, a turn per line',
  details:
    'Each message typed runs a turn, streamed as loom run streams it, with its tokens and cost after it; a status line above the prompt shows the route, the context used, cache hits and cost. Enter sends; a trailing \\, Shift+Enter or a paste makes a message of several lines; Tab completes commands and paths; @path attaches a file. Ctrl-C or Esc cancels the running turn and returns to the prompt (Ctrl-C twice quits); Ctrl-C or Ctrl-D at an empty prompt quits. Type /help for the slash commands (/prompt, /manifest, /stats, /sessions, /new, /resume, /model, /provider, /compact, /quit). -c opens the session used last in this folder; loom resume opens a stored one. Without a terminal, loom prints this help.',
  options: [...CHAT, 'continue'],
  examples: ['loom', 'loom -c', 'loom --model deepseek-pro'],
} as const satisfies CommandSpec

/** Commands with subcommands, and what they are about. */
export const GROUPS: Record<string, string> = {
  sessions: "stored sessions (the deployment's store: $LOOM_HOME/sessions, or PostgreSQL): list, read, continue, check, repair, measure and compact them",
  new: 'create a project from a template',
}

/** The commands that take this option, in table order. */
export function commandsFor(option: OptionName): string[] {
  return COMMANDS.filter(command => (command.options as readonly string[]).includes(option)).map(command => command.name)
}

export function subcommands(group: string): CommandSpec[] {
  return COMMANDS.filter(command => command.name.startsWith(`${group} `))
}

export type Lookup = { command: CommandSpec; rest: string[] } | { group: string; sub?: string } | { unknown: string } | undefined

/** The command the positionals name (and the words after it), a group missing or mistyping its subcommand, or an unknown word. */
export function lookup(positionals: readonly string[]): Lookup {
  const [first, second] = positionals
  if (first === undefined) return undefined
  if (Object.hasOwn(GROUPS, first)) {
    const command = COMMANDS.find(command => command.name === `${first} ${second}`)
    return command ? { command, rest: positionals.slice(2) } : { group: first, sub: second }
  }
  const command = COMMANDS.find(command => command.name === first)
  return command ? { command, rest: positionals.slice(1) } : { unknown: first }
}

/** The command the positionals name, and its arguments by key; a usage error otherwise. */
export function resolveCommand(positionals: readonly string[]): { command: CommandSpec; args: Record<string, string> } {
  const found = lookup(positionals)
  if (found === undefined) throw new UsageError('missing the command')
  if ('unknown' in found) throw new UsageError(`unknown command "${found.unknown}"`)
  if ('group' in found) {
    const names = subcommands(found.group).map(command => command.name.slice(found.group.length + 1))
    throw new UsageError(
      found.sub === undefined
        ? `${found.group}: missing the command (${names.join(', ')})`
        : `unknown ${found.group} command "${found.sub}" (${names.join(', ')})`,
    )
  }
  return { command: found.command, args: takeArgs(found.command, found.rest) }
}

function takeArgs(command: CommandSpec, words: readonly string[]): Record<string, string> {
  const args: Record<string, string> = {}
  for (const [index, arg] of command.args.entries()) {
    const value = arg.rest ? words.slice(index).join(' ').trim() : words[index]
    if (!value) {
      if (arg.optional) continue
      throw new UsageError(`${command.name}: missing ${arg.missing}`)
    }
    args[arg.key] = value
    if (arg.rest) return args
  }
  if (words.length > command.args.length) throw new UsageError(`${command.name}: unexpected argument "${words[command.args.length]}"`)
  return args
}

/** An option the command does not take is refused: silently ignoring `loom config --model x` would mislead. */
export function checkOptions(command: CommandSpec, given: readonly string[]) {
  for (const option of given as OptionName[]) {
    if (GLOBAL_OPTIONS.includes(option) || command.options.includes(option)) continue
    const takers = commandsFor(option)
    const where = command.name === CONVERSATION.name ? 'to the conversation' : 'here'
    const who = command.name === CONVERSATION.name ? '' : `${command.name}: `
    throw new UsageError(`${who}--${option} does not apply ${where} (it is for: ${takers.join(', ') || 'loom with no command'})`)
  }
}
