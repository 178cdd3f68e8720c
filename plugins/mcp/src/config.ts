import Schema from '@deepseek-ai/schemastery'

/** A server started as a subprocess, spoken to over its stdin and stdout. */
export interface StdioServerConfig {
  command: string
  args?: string[]
  /** The only variables the server gets besides `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL` and `TERM`. */
  env?: Record<string, string>
  cwd?: string
}

/** A server reached over Streamable HTTP. */
export interface HttpServerConfig {
  url: string
  headers?: Record<string, string>
}

export type ServerConfig = StdioServerConfig | HttpServerConfig

export interface RestartConfig {
  /** The wait before the first restart of a server that failed or died. */
  initialDelayMs: number
  /** The longest wait between two attempts; a connection that stayed up this long resets the backoff. */
  maxDelayMs: number
  /** Each failed attempt in a row multiplies the wait by this. */
  factor: number
}

export interface Config {
  servers: Record<string, ServerConfig>
  /** Timeout of one tool call or resource read. */
  timeoutMs: number
  /** Characters of a result the model gets; the rest is cut with a note. */
  maxOutputChars: number
  /** Deadline of one connection attempt: spawn or request, `initialize`, the first listing. */
  connectTimeoutMs: number
  /** How long the plugin's start waits for the first attempts before it lets the boot go on. */
  startupWaitMs: number
  /** A connected server that was idle this long is pinged; one that does not answer is failed and restarted. 0: never. */
  pingIntervalMs: number
  restart: RestartConfig
}

const Stdio: Schema<StdioServerConfig> = Schema.object({
  command: Schema.string().required().description('The executable that starts the server (found on PATH), e.g. `node` or `npx`.'),
  args: Schema.array(String).default([]).description('Its arguments.'),
  env: Schema.dict(String)
    .default({})
    .description(
      "Variables set for the server. It gets these and `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `TERM`, nothing else of the host's environment (no API keys).",
    ),
  cwd: Schema.string().description('The directory the server runs in, relative to the project folder (default: the project folder).'),
}).description('A server started as a subprocess (stdio transport).') as Schema<StdioServerConfig>

const Http: Schema<HttpServerConfig> = Schema.object({
  url: Schema.string().required().description('The endpoint of a server speaking Streamable HTTP, e.g. `https://example.com/mcp`.'),
  headers: Schema.dict(String).default({}).description('Headers sent with every request, e.g. `Authorization`.'),
}).description('A remote server (Streamable HTTP transport).') as Schema<HttpServerConfig>

export const Config: Schema<Config> = Schema.object({
  servers: Schema.dict(Schema.union([Stdio, Http]))
    .default({})
    .description(
      'MCP servers by name: `{ command, args?, env?, cwd? }` for stdio or `{ url, headers? }` for Streamable HTTP. Their tools are `mcp__<name>__<tool>`.',
    ),
  timeoutMs: Schema.natural().min(1).default(120_000).description('Timeout of one tool call or resource read, in ms.'),
  maxOutputChars: Schema.natural().min(1).default(64_000).description('Characters of a result the model gets; the rest is cut with a note.'),
  connectTimeoutMs: Schema.natural().min(1).default(30_000).description('Deadline of one connection attempt (start, `initialize`, first listing), in ms.'),
  startupWaitMs: Schema.natural()
    .default(5_000)
    .description("How long the plugin's start waits for the servers' first connection attempts, in ms; slower servers connect in the background."),
  pingIntervalMs: Schema.natural()
    .default(30_000)
    .description(
      'A connected server idle this long is pinged, in ms; one that does not answer within connectTimeoutMs is failed and restarted, before the next call meets it. 0: never.',
    ),
  restart: Schema.object({
    initialDelayMs: Schema.natural().min(1).default(1_000).description('Wait before the first restart of a server that failed or died, in ms.'),
    maxDelayMs: Schema.natural()
      .min(1)
      .default(60_000)
      .description('Longest wait between attempts, in ms; a connection that stays up this long resets the backoff.'),
    factor: Schema.number().min(1).default(2).description('Each failed attempt in a row multiplies the wait by this.'),
  }).description('Restarts of servers that fail to connect or die, with exponential backoff.'),
}) as Schema<Config>

export function isStdio(server: ServerConfig): server is StdioServerConfig {
  return 'command' in server
}

/** A config mistake the schema cannot express, named by its key; `undefined` when there is none. */
export function configProblem(config: Config): string | undefined {
  for (const [server, entry] of Object.entries(config.servers)) {
    if ('command' in entry && 'url' in entry) return `config servers.${server} has both command and url: give one (stdio or Streamable HTTP)`
    if (!isStdio(entry)) {
      try {
        new URL(entry.url)
      } catch {
        return `config servers.${server}.url is not a URL: ${JSON.stringify(entry.url)}`
      }
    }
  }
  if (config.restart.initialDelayMs > config.restart.maxDelayMs) {
    return `config restart.initialDelayMs (${config.restart.initialDelayMs}) exceeds restart.maxDelayMs (${config.restart.maxDelayMs})`
  }
  return undefined
}
