import type { Context } from '@deepseek-ai/cordis'
import type {} from '@loom/system-prompt'
import { defineTool } from '@loom/tools'
import { fileURLToPath } from 'node:url'
import { serverCode } from './code.ts'
import { Config, configProblem, isStdio, type ServerConfig } from './config.ts'
import { cleanPart, TOOL_PREFIX } from './mapping.ts'
import { PROMPTS_EVENT } from './prompts.ts'
import { ServerConnection } from './server.ts'

export { Config, isStdio, type HttpServerConfig, type RestartConfig, type ServerConfig, type StdioServerConfig } from './config.ts'
export { callResultText, resourceText, toolNames, TOOL_PREFIX } from './mapping.ts'
export {
  getPrompt,
  listPrompts,
  promptArguments,
  PROMPTS_EVENT,
  promptText,
  splitWords,
  type McpPrompt,
  type McpPromptArgument,
  type McpPromptMessage,
  type McpPromptResult,
  type PromptSource,
} from './prompts.ts'
export { ServerConnection, type RemoteTool, type ServerStatus, type SkippedTool } from './server.ts'
export { DEFAULT_POLL_MS } from './tasks.ts'

export const name = '@loom/mcp'
export const inject = ['systemPrompt', 'tools']

/** The guidance section: session-stable (it follows the connected servers), so after every static section (300..399). */
export const SECTION_NAME = 'mcp:servers'
export const SECTION_ORDER = 300
/** The status of every server, a runtime context: it changes between steps. */
export const CONTEXT_NAME = 'mcp:status'
export const CONTEXT_ORDER = 60
export const RESOURCE_TOOL = 'mcp_read_resource'

const INTRO =
  'Tools of MCP (Model Context Protocol) servers are named `mcp__<server>__<tool>`: each call runs on that server, and its result is what the server answered.'

/** The guidance: each connected server, its tools, its resources and its own instructions ('' when none is connected). */
export function guidanceText(servers: readonly ServerConnection[]): string {
  const connected = servers.filter(server => server.status.state === 'connected')
  if (!connected.length) return ''
  const blocks = connected.map(server => {
    const lines = [`## MCP server "${server.name}"`]
    lines.push(server.tools.length ? `Tools: ${server.tools.map(tool => `\`${tool.name}\``).join(', ')}` : 'Tools: none')
    if (server.resources?.length) {
      const listed = server.resources.map(resource => `- ${resource.uri}${resource.name && resource.name !== resource.uri ? ` (${resource.name})` : ''}`)
      lines.push(`Resources (read them with \`${RESOURCE_TOOL}\`, server "${server.name}"):`, ...listed)
    }
    const instructions = server.instructions?.trim()
    if (instructions) lines.push('Instructions from the server:', instructions)
    return lines.join('\n')
  })
  return [INTRO, ...blocks].join('\n\n')
}

/** One line per configured server: `- docs (stdio): connected (3 tools)`. */
export function statusText(servers: readonly ServerConnection[], now = Date.now()): string {
  if (!servers.length) return ''
  return ['MCP servers:', ...servers.map(server => `- ${server.name} (${server.transportName}): ${server.describe(now)}`)].join('\n')
}

/** A stdio server runs in the project folder (the deployment's base URL), and a relative `cwd` is relative to it. */
function inProject(server: ServerConfig, baseUrl: string | undefined): ServerConfig {
  if (!isStdio(server) || !baseUrl?.startsWith('file:')) return server
  return { ...server, cwd: fileURLToPath(new URL(server.cwd ?? '.', baseUrl)) }
}

function sleep(ms: number, until: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([until, new Promise(resolve => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer))
}

export async function apply(ctx: Context, config: Config) {
  const problem = configProblem(config)
  if (problem) throw new Error(`${name}: ${problem}`)
  const prefixes = new Map<string, string>()
  for (const server of Object.keys(config.servers)) {
    const prefix = cleanPart(server)
    const other = prefixes.get(prefix)
    if (other !== undefined)
      throw new Error(`${name}: config servers "${other}" and "${server}" would both name their tools ${TOOL_PREFIX}${prefix}__*: rename one`)
    prefixes.set(prefix, server)
  }

  const logger = ctx.logger('mcp')
  let resourceTool: { key: string; dispose: () => void } | undefined
  let section: { text: string; dispose: () => void } | undefined
  const host = {
    config,
    register: (tool: Parameters<Context['tools']['register']>[0]) => ctx.tools.register(tool),
    artifacts: ctx.tools.artifacts,
    changed: () => {
      syncSection()
      syncResourceTool()
    },
    // Info, not warn: a server that is down is a status the model and `--verbose` see, not a deployment problem.
    log: (message: string) => logger.info(message),
  }
  const configured = Object.keys(config.servers)
    .sort()
    .map(server => [server, inProject(config.servers[server], ctx.baseUrl)] as const)
  for (const [server, started] of configured) {
    if (!isStdio(started)) continue
    for (const path of serverCode(started, started.cwd ?? process.cwd())) {
      ctx.tools.protect(path, `code MCP server "${server}" runs as the user, outside the sandbox, at the next start`)
    }
  }
  const servers = configured.map(([server, started]) => new ServerConnection(server, started, host))
  let stopping = false

  /**
   * The guidance section is registered again whenever its text changes (a server
   * connected, failed, changed its tools): a registry change, so the prompt's
   * stability check sees a deliberate change, not a section changing on its own.
   */
  function syncSection() {
    if (stopping) return
    const text = guidanceText(servers)
    if (section?.text === text) return
    section?.dispose()
    // Server names, tool lists and instructions are external text: literal, never interpolated.
    section = { text, dispose: ctx.systemPrompt.section({ name: SECTION_NAME, order: SECTION_ORDER, stability: 'session', literal: true, text }) }
  }

  /** `mcp_read_resource` exists while a connected server offers resources; its `server` enum follows them. */
  function syncResourceTool() {
    if (stopping) return
    const offering = servers.filter(server => server.status.state === 'connected' && server.resources !== undefined).map(server => server.name)
    const key = offering.join('\0')
    if (resourceTool?.key === key) return
    resourceTool?.dispose()
    resourceTool = undefined
    if (!offering.length) return
    const tool = defineTool<{ server: string; uri: string }>({
      name: RESOURCE_TOOL,
      description: `Reads a resource of an MCP server by its URI and returns its contents as text. Servers with resources: ${offering.join(', ')}.`,
      parameters: {
        type: 'object',
        properties: {
          server: { type: 'string', enum: offering, description: 'The MCP server, as named in the guidance.' },
          uri: { type: 'string', minLength: 1, description: 'The URI of the resource, e.g. one listed in the guidance.' },
        },
        required: ['server', 'uri'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      async execute(args, exec) {
        const server = servers.find(candidate => candidate.name === args.server)!
        const read = await server.readResource(args.uri, exec)
        return { content: read.text, meta: { server: server.name, uri: args.uri, ...read.meta } }
      },
    })
    resourceTool = { key, dispose: ctx.tools.register(tool) }
  }

  ctx.effect(
    () => async () => {
      stopping = true
      await Promise.all(servers.map(server => server.dispose()))
    },
    `${name}: server connections`,
  )
  // A stdio server must not outlive a host that exits without unloading its plugins.
  ctx.effect(() => {
    const onExit = () => {
      for (const server of servers) server.kill()
    }
    process.on('exit', onExit)
    return () => process.off('exit', onExit)
  }, `${name}: kill servers on exit`)

  syncSection()
  ctx.systemPrompt.context({ name: CONTEXT_NAME, order: CONTEXT_ORDER, stability: 'step', literal: true, text: () => statusText(servers) })
  // The servers' prompts, for a host that offers them as slash commands (`listPrompts`, `getPrompt`).
  ctx.on(PROMPTS_EVENT, into => {
    into.push(...servers)
  })
  // Registered last, so it runs first on unload: no re-registration through a fiber that is going.
  ctx.effect(
    () => () => {
      stopping = true
    },
    `${name}: stop following the servers`,
  )

  for (const server of servers) void server.connect()
  // The boot waits a little for the first attempts, so that a first step usually sees the tools; never longer.
  if (servers.length && config.startupWaitMs > 0) await sleep(config.startupWaitMs, Promise.all(servers.map(server => server.firstAttempt)))
}
