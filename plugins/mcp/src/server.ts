/**
 * One configured MCP server: its connection, its tools in the registry, its
 * prompts, its status, and its restarts. A server that fails to connect, dies
 * or stops answering pings loses its tools and is started again after an
 * exponential backoff; nothing it does can fail the plugin.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  ErrorCode,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Prompt,
  type Resource,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js'
import { defineTool, ToolTimeoutError, type ToolDefinition, type ToolRunContext } from '@loom/tools'
import type { Artifacts } from '@loom/tools/artifacts'
import { isStdio, type Config, type ServerConfig } from './config.ts'
import { blockText, callResultText, resourceText, toolNames } from './mapping.ts'
import { promptText, promptUsage, subject, type McpPrompt, type McpPromptResult, type PromptSource } from './prompts.ts'
import { callToolAsTask, requiresTask, TaskTimeoutError, taskProblem } from './tasks.ts'

/** Sent as `clientInfo` in `initialize`. */
const CLIENT_INFO = { name: 'loom', version: '0.1.0' }
/** Time between SIGTERM and SIGKILL when a stdio server is stopped; the longest wait for an HTTP session's DELETE. */
const KILL_GRACE_MS = 2_000
/** Characters of the server's stderr kept to explain a failure. */
const STDERR_TAIL = 4_000
/** Characters of a failure reason shown in the status. */
const MAX_REASON = 300
/** Resources listed (first page) for the guidance. */
const MAX_LISTED_RESOURCES = 50
/** Lines at the end of the server's stderr searched for the one that explains a failure. */
const STDERR_LINES = 10

export type ServerStatus =
  | { state: 'connecting' }
  | { state: 'connected'; tools: number; skipped: SkippedTool[] }
  | { state: 'failed'; reason: string; retryAt: number }
  | { state: 'stopped' }

/** A tool of the server that is not offered to the model, and why. */
export interface SkippedTool {
  tool: string
  reason: string
}

/** What a server needs from the plugin. */
export interface ServerHost {
  config: Config
  /** Registers a tool for the plugin (an effect on its fiber); returns its disposer. */
  register(tool: ToolDefinition): () => void
  /** Where a result over `maxOutputChars` is kept whole (`ctx.tools.artifacts`). */
  artifacts: Artifacts
  /** The server's tools, resources or status changed. */
  changed(): void
  log(message: string): void
}

/** One registered tool: the registry's name and the server's. */
export interface RemoteTool {
  name: string
  tool: string
}

type Transport = StdioClientTransport | StreamableHTTPClientTransport

/** One connection attempt and, once connected, the live connection. */
interface Link {
  client: Client
  transport: Transport
  /** Aborts the attempt (connect and first listing). */
  abort: AbortController
  /** Settles when the transport closed, whoever closed it. */
  closed: Promise<void>
  /** Calls, reads and prompt requests in flight; a busy server is not pinged. */
  busy: number
  /** When the server last answered (ms since the epoch). */
  answeredAt: number
  pingTimer?: NodeJS.Timeout
}

/** The message with its causes (`fetch failed (connect ECONNREFUSED 127.0.0.1:8931)`). */
function messageOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  return error.cause === undefined ? error.message : `${error.message} (${messageOf(error.cause)})`
}

/** The message without the SDK's `MCP error -32603: ` prefixes: the server's own words. */
function serverMessage(error: unknown): string {
  return messageOf(error).replace(/^(MCP error -?\d+: )+/, '')
}

function shorten(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

function seconds(ms: number): string {
  return String(Math.round(ms) / 1000)
}

export class ServerConnection implements PromptSource {
  readonly name: string
  private readonly server: ServerConfig
  private readonly host: ServerHost
  status: ServerStatus = { state: 'connecting' }
  /** The server's `instructions` from `initialize`, when it gave some. */
  instructions: string | undefined
  tools: RemoteTool[] = []
  /** The server's resources (first page), `undefined` when it does not offer resources. */
  resources: Resource[] | undefined
  /** Its prompts as slash commands, while connected. */
  prompts: McpPrompt[] = []
  private link: Link | undefined
  private unregister: (() => void)[] = []
  /** Bumped whenever the current link is given up: callbacks of older links are ignored. */
  private generation = 0
  private failures = 0
  private connectedAt = 0
  private retryTimer: NodeJS.Timeout | undefined
  private stderr = ''
  private refreshing: Promise<void> | undefined
  private refreshAgain = false
  /** Bumped by each prompt listing: an older listing that answers late is dropped. */
  private promptListing = 0
  private resolveFirst!: () => void
  /** Settles when the first connection attempt succeeded or failed. */
  readonly firstAttempt = new Promise<void>(resolve => {
    this.resolveFirst = resolve
  })

  constructor(name: string, server: ServerConfig, host: ServerHost) {
    this.name = name
    this.server = server
    this.host = host
  }

  get transportName(): string {
    return isStdio(this.server) ? 'stdio' : 'Streamable HTTP'
  }

  /** Starts a connection attempt; on failure a restart is scheduled. */
  async connect(): Promise<void> {
    if (this.status.state === 'stopped') return
    const generation = ++this.generation
    this.retryTimer = undefined
    this.stderr = ''
    this.setStatus({ state: 'connecting' })
    const link = this.open(generation)
    this.link = link
    const { connectTimeoutMs } = this.host.config
    try {
      await link.client.connect(link.transport, { timeout: connectTimeoutMs, signal: link.abort.signal })
      if (generation !== this.generation) return
      this.instructions = link.client.getInstructions()
      const capabilities = link.client.getServerCapabilities() ?? {}
      link.client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refresh(generation))
      link.client.setNotificationHandler(ResourceListChangedNotificationSchema, () => this.refresh(generation))
      link.client.setNotificationHandler(PromptListChangedNotificationSchema, () => this.refreshPrompts(generation))
      const [tools, resources, prompts] = await Promise.all([
        capabilities.tools ? this.listTools(link, connectTimeoutMs) : [],
        capabilities.resources ? this.listResources(link, connectTimeoutMs) : undefined,
        capabilities.prompts ? this.listPrompts(link, connectTimeoutMs) : [],
      ])
      if (generation !== this.generation) return
      this.connectedAt = Date.now()
      // What the server wrote while it started (a banner) does not explain a later failure.
      this.stderr = ''
      this.resources = resources
      this.prompts = prompts
      link.answeredAt = Date.now()
      this.install(tools)
      this.schedulePing(link, generation)
    } catch (error) {
      if (generation !== this.generation) return
      await this.fail(this.reasonOf(error))
    } finally {
      this.resolveFirst()
    }
  }

  /** The transport and client of one attempt; the client's close reports the loss of a live link. */
  private open(generation: number): Link {
    const server = this.server
    let transport: Transport
    if (isStdio(server)) {
      // Only the SDK's basic variables (PATH, HOME, USER, ...) and `env`: no host secrets.
      const stdio = new StdioClientTransport({ command: server.command, args: server.args, env: server.env, cwd: server.cwd, stderr: 'pipe' })
      stdio.stderr?.on('data', (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL)
      })
      transport = stdio
    } else {
      transport = new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } })
    }
    const client = new Client(CLIENT_INFO, { capabilities: {} })
    let closed!: () => void
    const link: Link = {
      client,
      transport,
      abort: new AbortController(),
      closed: new Promise<void>(resolve => (closed = resolve)),
      busy: 0,
      answeredAt: 0,
    }
    client.onclose = () => {
      closed()
      if (generation === this.generation && this.status.state === 'connected') void this.fail(this.closedReason())
    }
    // Transport errors (a broken SSE stream, a bad line on stdout) surface as failed requests or a close.
    client.onerror = error => this.host.log(`MCP server "${this.name}": ${messageOf(error)}`)
    return link
  }

  private async listTools(link: Link, timeout: number): Promise<Tool[]> {
    const tools: Tool[] = []
    let cursor: string | undefined
    do {
      const page = await link.client.listTools(cursor ? { cursor } : undefined, { timeout, signal: link.abort.signal })
      tools.push(...page.tools)
      cursor = page.nextCursor
    } while (cursor)
    return tools
  }

  private async listResources(link: Link, timeout: number): Promise<Resource[]> {
    const page = await link.client.listResources(undefined, { timeout, signal: link.abort.signal })
    return page.resources.slice(0, MAX_LISTED_RESOURCES)
  }

  /** Every prompt of the server (all pages), named as slash commands. */
  private async listPrompts(link: Link, timeout: number): Promise<McpPrompt[]> {
    const listed: Prompt[] = []
    let cursor: string | undefined
    do {
      const page = await link.client.listPrompts(cursor ? { cursor } : undefined, { timeout, signal: link.abort.signal })
      listed.push(...page.prompts)
      cursor = page.nextCursor
    } while (cursor)
    const commands = toolNames(
      this.name,
      listed.map(prompt => prompt.name),
    )
    return listed.map(prompt => {
      const command = commands.get(prompt.name)!
      const args = (prompt.arguments ?? []).map(({ name, description, required }) => ({ name, description, required: required === true }))
      return {
        command,
        server: this.name,
        prompt: prompt.name,
        ...(prompt.title !== undefined && { title: prompt.title }),
        ...(prompt.description !== undefined && { description: prompt.description }),
        arguments: args,
        usage: promptUsage(command, args),
      }
    })
  }

  /** Replaces this server's tools in the registry with `tools` and marks it connected. */
  private install(tools: readonly Tool[]): void {
    this.removeTools()
    const names = toolNames(
      this.name,
      tools.map(tool => tool.name),
    )
    const capabilities = this.link?.client.getServerCapabilities() ?? {}
    const skipped: SkippedTool[] = []
    const skip = (tool: string, reason: string) => {
      skipped.push({ tool, reason })
      this.host.log(`MCP server "${this.name}": tool "${tool}" is not offered to the model: ${reason}`)
    }
    for (const tool of [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const name = names.get(tool.name)!
      const problem = taskProblem(tool, capabilities)
      if (problem) {
        skip(tool.name, problem)
        continue
      }
      try {
        this.unregister.push(this.host.register(this.define(name, tool)))
        this.tools.push({ name, tool: tool.name })
      } catch (error) {
        skip(tool.name, `invalid schema: ${messageOf(error)}`)
      }
    }
    this.setStatus({ state: 'connected', tools: this.tools.length, skipped })
  }

  private removeTools(): void {
    for (const dispose of this.unregister.splice(0)) dispose()
    this.tools = []
  }

  /** A registry tool that forwards its calls to the server's tool. */
  private define(name: string, tool: Tool): ToolDefinition {
    const server = this.name
    return defineTool({
      name,
      description: tool.description?.trim() || tool.title || `Tool "${tool.name}" of the MCP server "${server}".`,
      parameters: { ...tool.inputSchema, type: 'object' },
      // The server says so; it is only a hint, but a read-only call has nothing to race with.
      isConcurrencySafe: tool.annotations?.readOnlyHint === true,
      // Anything but a read acts outside Loom; MCP's default for destructiveHint is true.
      effects: tool.annotations?.readOnlyHint === true ? ['read'] : ['outside'],
      origin: `MCP server "${server}"`,
      ...(tool.annotations?.readOnlyHint !== true && { destructive: tool.annotations?.destructiveHint !== false }),
      execute: async (args: Record<string, unknown>, exec) => {
        const link = this.liveLink()
        const { timeoutMs, maxOutputChars } = this.host.config
        const params = { name: tool.name, arguments: args }
        let result: CallToolResult | Awaited<ReturnType<Client['callTool']>>
        try {
          result = await this.busy(link, () =>
            requiresTask(tool)
              ? callToolAsTask(link.client, params, { signal: exec.signal, timeoutMs })
              : link.client.callTool(params, undefined, { signal: exec.signal, timeout: timeoutMs }),
          )
        } catch (error) {
          throw this.callError(`tool "${tool.name}"`, error, link)
        }
        // A call that changed the server's tool list (it notifies before it answers)
        // returns once the new list is registered, so the next step already sees it.
        await this.refreshing
        // `toolResult` is the pre-2024-11-05 result shape; it has no content blocks.
        const text = 'toolResult' in result ? JSON.stringify(result.toolResult, null, 2) : callResultText(result)
        const shown = await this.host.artifacts.shorten(exec, text, { maxChars: maxOutputChars })
        // An error the tool reports is an error result: the model reads `Error: <its text>`.
        if (result.isError === true) throw new Error(`MCP server "${server}", tool "${tool.name}": ${shown.text}`)
        return { content: shown.text, meta: { server, tool: tool.name, chars: text.length, ...keptMeta(shown) } }
      },
    })
  }

  /** Reads a resource of this server: its text, or head and tail when it is over `maxOutputChars` (the whole kept as an artifact). */
  async readResource(uri: string, exec: ToolRunContext): Promise<{ text: string; meta: Record<string, string | number> }> {
    const link = this.liveLink()
    const { timeoutMs, maxOutputChars } = this.host.config
    let text: string
    try {
      text = resourceText(await this.busy(link, () => link.client.readResource({ uri }, { signal: exec.signal, timeout: timeoutMs })))
    } catch (error) {
      throw this.callError(`resource <${uri}>`, error, link)
    }
    const shown = await this.host.artifacts.shorten(exec, text, { maxChars: maxOutputChars })
    return { text: shown.text, meta: { chars: text.length, ...keptMeta(shown) } }
  }

  /** Gets a prompt's messages with `args` (already mapped from the command line, see `promptArguments`). */
  async getPrompt(prompt: McpPrompt, args: Record<string, string>, signal?: AbortSignal): Promise<McpPromptResult> {
    const link = this.liveLink(subject(prompt))
    let result: Awaited<ReturnType<Client['getPrompt']>>
    try {
      result = await this.busy(link, () =>
        link.client.getPrompt({ name: prompt.prompt, arguments: args }, { timeout: this.host.config.timeoutMs, ...(signal && { signal }) }),
      )
    } catch (error) {
      throw this.callError(`prompt "${prompt.prompt}"`, error, link)
    }
    const messages = result.messages.map(message => ({ role: message.role, text: blockText(message.content) }))
    return {
      command: prompt.command,
      ...(result.description !== undefined && { description: result.description }),
      messages,
      text: promptText(messages),
    }
  }

  /** Runs one request of a call; while it runs the server is busy (not pinged), and its answer shows the server alive. */
  private async busy<T>(link: Link, request: () => Promise<T>): Promise<T> {
    link.busy++
    try {
      const answer = await request()
      link.answeredAt = Date.now()
      return answer
    } finally {
      link.busy--
    }
  }

  /**
   * Pings the server once it has been idle for `pingIntervalMs`: a server that
   * does not answer within `connectTimeoutMs`, or cannot be reached, is failed
   * now rather than at the next call. An error answer is an answer.
   */
  private schedulePing(link: Link, generation: number, delay = this.host.config.pingIntervalMs): void {
    const every = this.host.config.pingIntervalMs
    if (every <= 0) return
    link.pingTimer = setTimeout(async () => {
      if (generation !== this.generation) return
      const idle = Date.now() - link.answeredAt
      if (link.busy > 0 || idle < every) return this.schedulePing(link, generation, link.busy > 0 ? every : every - idle)
      const timeout = this.host.config.connectTimeoutMs
      try {
        await link.client.ping({ timeout, signal: link.abort.signal })
        link.answeredAt = Date.now()
      } catch (error) {
        const answered = error instanceof McpError && error.code !== ErrorCode.RequestTimeout && error.code !== ErrorCode.ConnectionClosed
        if (!answered) {
          if (generation === this.generation && this.status.state === 'connected') {
            const timedOut = error instanceof McpError && error.code === ErrorCode.RequestTimeout
            void this.fail(timedOut ? `no answer to a ping within ${seconds(timeout)} s` : `ping failed: ${messageOf(error)}`)
          }
          return
        }
      }
      if (generation === this.generation) this.schedulePing(link, generation)
    }, delay)
  }

  private liveLink(what?: string): Link {
    if (this.status.state !== 'connected' || !this.link) {
      throw new Error(`${what ? `${what}: ` : ''}MCP server "${this.name}" is not connected (${this.describe()})`)
    }
    return this.link
  }

  /** The error of a failed call, naming the server; a broken HTTP link is given up and restarted. */
  private callError(what: string, error: unknown, link: Link): Error {
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
      return new ToolTimeoutError(`MCP server "${this.name}": ${what} timed out after ${seconds(this.host.config.timeoutMs)} s`)
    }
    if (error instanceof TaskTimeoutError) {
      return new ToolTimeoutError(
        `MCP server "${this.name}": ${what} timed out after ${seconds(this.host.config.timeoutMs)} s (${error.progress}); the task was cancelled`,
      )
    }
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
      return new Error(`MCP server "${this.name}" closed the connection during the call of ${what} (${this.closedReason()}); it will be restarted`)
    }
    // Over HTTP there is no connection to watch: a request that fails below the protocol means the server is gone.
    if (!(error instanceof McpError) && !isStdio(this.server) && link === this.link && this.status.state === 'connected') {
      void this.fail(`request failed: ${messageOf(error)}`)
    }
    return new Error(`MCP server "${this.name}": ${what} failed: ${serverMessage(error)}`)
  }

  /** Re-lists tools and resources after a list_changed notification; calls during a refresh queue one more. */
  private refresh(generation: number): Promise<void> {
    if (generation !== this.generation) return Promise.resolve()
    if (this.refreshing) {
      this.refreshAgain = true
      return this.refreshing
    }
    const run = async () => {
      do {
        this.refreshAgain = false
        const link = this.link
        const current = this.generation
        if (!link || this.status.state !== 'connected') return
        const capabilities = link.client.getServerCapabilities() ?? {}
        try {
          const [tools, resources] = await Promise.all([
            capabilities.tools ? this.listTools(link, this.host.config.connectTimeoutMs) : [],
            capabilities.resources ? this.listResources(link, this.host.config.connectTimeoutMs) : undefined,
          ])
          if (current !== this.generation || this.status.state !== 'connected') return
          this.resources = resources
          this.install(tools)
        } catch (error) {
          this.host.log(`MCP server "${this.name}": cannot list its tools after a change: ${messageOf(error)}`)
        }
      } while (this.refreshAgain)
    }
    this.refreshing = run().finally(() => {
      this.refreshing = undefined
    })
    return this.refreshing
  }

  /** Lists the prompts again after notifications/prompts/list_changed; a listing that answers after a newer one is dropped. */
  private async refreshPrompts(generation: number): Promise<void> {
    const link = this.link
    if (generation !== this.generation || !link || this.status.state !== 'connected') return
    const listing = ++this.promptListing
    try {
      const prompts = await this.listPrompts(link, this.host.config.connectTimeoutMs)
      if (generation === this.generation && listing === this.promptListing) this.prompts = prompts
    } catch (error) {
      this.host.log(`MCP server "${this.name}": cannot list its prompts after a change: ${messageOf(error)}`)
    }
  }

  /** Gives up the current link: tools removed, status failed, a restart scheduled after the backoff. */
  private async fail(reason: string): Promise<void> {
    const link = this.link
    this.generation++
    this.link = undefined
    this.removeTools()
    this.resources = undefined
    this.prompts = []
    this.instructions = undefined
    const { initialDelayMs, maxDelayMs, factor } = this.host.config.restart
    // A connection that stayed up for a full backoff period starts the backoff over.
    if (this.connectedAt && Date.now() - this.connectedAt >= maxDelayMs) this.failures = 0
    this.connectedAt = 0
    const delay = Math.min(initialDelayMs * factor ** this.failures, maxDelayMs)
    this.failures++
    const reasonText = shorten(reason, MAX_REASON)
    this.setStatus({ state: 'failed', reason: reasonText, retryAt: Date.now() + delay })
    this.host.log(`MCP server "${this.name}" failed (${reasonText}); restarting in ${seconds(delay)} s`)
    this.retryTimer = setTimeout(() => void this.connect(), delay)
    if (link) await this.close(link)
  }

  private reasonOf(error: unknown): string {
    const message = serverMessage(error)
    const stderr = this.stderrLine()
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) return stderr ? `connection closed: ${stderr}` : 'connection closed'
    return stderr && !message.includes(stderr) ? `${message}: ${stderr}` : message
  }

  private closedReason(): string {
    const stderr = this.stderrLine()
    const what = isStdio(this.server) ? 'the server process exited' : 'the connection closed'
    return stderr ? `${what}: ${stderr}` : what
  }

  /**
   * The line of the server's stderr tail that best says what went wrong: among
   * the last lines, the last that reads like an error, else the last one. Only
   * what it wrote since it connected counts once it has (not its banner).
   */
  private stderrLine(): string | undefined {
    const lines = this.stderr
      .split('\n')
      .map(line => line.trim())
      .filter(Boolean)
      .slice(-STDERR_LINES)
    return lines.findLast(line => /error|exception|fatal|panic/i.test(line)) ?? lines.at(-1)
  }

  private setStatus(status: ServerStatus): void {
    this.status = status
    this.host.changed()
  }

  /** The status as one phrase: `connected (3 tools)`, `failed (reason); restarting in 4 s`. */
  describe(now = Date.now()): string {
    const status = this.status
    switch (status.state) {
      case 'connecting':
        return 'connecting'
      case 'connected': {
        const skipped = status.skipped.length ? `; not offered: ${status.skipped.map(({ tool, reason }) => `${tool} (${reason})`).join(', ')}` : ''
        return `connected (${status.tools} ${status.tools === 1 ? 'tool' : 'tools'}${skipped})`
      }
      case 'failed':
        return `failed (${status.reason}); restarting in ${Math.max(1, Math.ceil((status.retryAt - now) / 1000))} s`
      case 'stopped':
        return 'stopped'
    }
  }

  /** Stops for good: no restart, tools removed, the connection closed and a stdio server's process ended. */
  async dispose(): Promise<void> {
    const link = this.link
    this.generation++
    this.link = undefined
    this.status = { state: 'stopped' }
    clearTimeout(this.retryTimer)
    this.retryTimer = undefined
    this.removeTools()
    this.prompts = []
    this.resolveFirst()
    if (link) await this.close(link)
  }

  /** SIGKILL to a stdio server's process, synchronously (the host is exiting). */
  kill(): void {
    const pid = this.link?.transport instanceof StdioClientTransport ? this.link.transport.pid : null
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {}
    }
  }

  /**
   * Ends a link. A stdio server gets SIGTERM, then SIGKILL after a grace period
   * if it is still there (the SDK's own close would leave its timers behind).
   * An HTTP session is ended on the server (DELETE with its `Mcp-Session-Id`).
   */
  private async close(link: Link): Promise<void> {
    link.abort.abort()
    clearTimeout(link.pingTimer)
    const { transport } = link
    if (transport instanceof StdioClientTransport && transport.pid !== null) {
      const pid = transport.pid
      const signal = (name: NodeJS.Signals) => {
        try {
          process.kill(pid, name)
        } catch {}
      }
      signal('SIGTERM')
      let timer: NodeJS.Timeout | undefined
      const graceOver = new Promise<'grace'>(resolve => (timer = setTimeout(() => resolve('grace'), KILL_GRACE_MS)))
      const outcome = await Promise.race([link.closed.then(() => 'closed' as const), graceOver])
      clearTimeout(timer)
      if (outcome === 'grace') {
        signal('SIGKILL')
        await link.closed
      }
      return
    }
    // A stdio process that never started has nothing to close (the SDK's close would wait for it).
    if (transport instanceof StreamableHTTPClientTransport) {
      // A server that is gone or slow does not hold the close up: the session then ends on its own terms.
      if (transport.sessionId !== undefined) {
        const ended = transport.terminateSession().catch(() => {})
        await within(KILL_GRACE_MS, ended)
      }
      await link.client.close().catch(() => {})
    }
  }
}

/** Waits for `promise`, at most `ms`. */
async function within(ms: number, promise: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([promise, new Promise(resolve => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}

/** What the result's meta says about a cut: characters not shown, and the artifact that keeps them. */
function keptMeta(shown: { omitted?: { size: number }; reference?: string }): Record<string, string | number> {
  return { omittedChars: shown.omitted?.size ?? 0, ...(shown.reference !== undefined && { artifact: shown.reference }) }
}
