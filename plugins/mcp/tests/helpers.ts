import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { Host, Mounted } from '@loom/testkit'
import type { ToolExecutionResult } from '@loom/tools'
import * as mcp from '../src/index.ts'
import type { StdioServerConfig } from '../src/index.ts'
import { createServer, type FixtureOptions } from './fixtures/server.ts'

export const FIXTURE = fileURLToPath(new URL('./fixtures/server.ts', import.meta.url))

// The fixture loads the SDK and zod: Node's compile cache (not among the basic
// variables a server gets) spares compiling them again in every server started.
const CACHE: Record<string, string> = process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}

/** The fixture server over stdio, run by this Node. */
export function stdioServer(args: string[] = [], extra: Partial<StdioServerConfig> = {}): Partial<StdioServerConfig> {
  return { command: process.execPath, args: [FIXTURE, ...args], ...extra, env: { ...CACHE, ...extra.env } }
}

export function textOf(result: ToolExecutionResult): string {
  return result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

/** The text of the `mcp:status` context. */
export async function statusOf(mounted: Mounted): Promise<string> {
  return (await mounted.delta()).contexts.find(context => context.name === mcp.CONTEXT_NAME)?.text ?? ''
}

/** Mounts the plugin and waits until every server is connected. */
export async function mountConnected(host: Host, config: Record<string, unknown>): Promise<Mounted> {
  const mounted = await host.mount(mcp, config)
  const servers = Object.keys(config.servers as object)
  await waitFor('the servers to connect', async () => {
    const status = await statusOf(mounted)
    return servers.every(server => new RegExp(`- ${server} \\([^)]*\\): connected`).test(status))
  })
  return mounted
}

/** The names of the registered MCP tools. */
export function mcpTools(host: Host): string[] {
  return host.ctx.tools
    .schemas()
    .map(tool => tool.name)
    .filter(name => name.startsWith('mcp'))
}

/** Waits until `check` returns a truthy value (checked every 20 ms), or fails after a generous deadline. */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, deadlineMs = 20_000): Promise<T> {
  const end = Date.now() + deadlineMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

/** Whether a process exists (and is not a zombie). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return true
  }
}

export interface FixtureHttpServer {
  url: string
  /** Sessions the server opened (`initialize`) and ended (DELETE); stateful servers only. */
  sessions: { opened: number; ended: number }
  /** Answers the next POST with HTTP 500, as a server in trouble would. */
  failNextRequest(): void
  close(): Promise<void>
}

/**
 * The fixture served over Streamable HTTP on a loopback port: stateless (a
 * server per request), or `stateful`, one server per session (`Mcp-Session-Id`),
 * which the client ends with DELETE.
 */
export async function httpServer(options: FixtureOptions & { stateful?: boolean } = {}): Promise<FixtureHttpServer> {
  const sessions = { opened: 0, ended: 0 }
  const live = new Map<string, StreamableHTTPServerTransport>()
  let failNext = false
  const http = createHttpServer(async (req, res) => {
    if (failNext && req.method === 'POST') {
      failNext = false
      res.writeHead(500).end('the fixture failed this request on purpose')
      return
    }
    if (!options.stateful) {
      const server = createServer(options)
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
      res.on('close', () => {
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(req, res)
      return
    }
    const id = req.headers['mcp-session-id']
    let transport = typeof id === 'string' ? live.get(id) : undefined
    if (!transport) {
      if (id !== undefined) {
        res.writeHead(404).end('no such session')
        return
      }
      const server = createServer(options)
      const fresh = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: session => {
          sessions.opened++
          live.set(session, fresh)
        },
        onsessionclosed: session => {
          sessions.ended++
          live.delete(session)
          void server.close()
        },
      })
      await server.connect(fresh)
      transport = fresh
    }
    await transport.handleRequest(req, res)
  })
  await new Promise<void>(resolve => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions,
    failNextRequest: () => {
      failNext = true
    },
    close: () =>
      new Promise<void>(resolve => {
        for (const transport of live.values()) void transport.close()
        live.clear()
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  }
}
