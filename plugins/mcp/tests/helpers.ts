import { readFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { ToolExecutionResult } from '@loom/tools'
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

/** The fixture served over Streamable HTTP on a loopback port (stateless: a server per request). */
export async function httpServer(options: FixtureOptions = {}): Promise<{ url: string; close(): Promise<void> }> {
  const http = createHttpServer(async (req, res) => {
    const server = createServer(options)
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => {
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(req, res)
  })
  await new Promise<void>(resolve => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>(resolve => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  }
}
