import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Seen {
  url: string
  headers: IncomingHttpHeaders
  /** Resolves when the client closed or finished the exchange. */
  closed: Promise<void>
}

type Route = (res: ServerResponse, base: string) => void

/** A loopback HTTP server with fixed routes; it records every request it gets. */
export async function startServer(routes: Record<string, Route>) {
  const seen: Seen[] = []
  const server = createServer((req, res) => {
    const closed = new Promise<void>(resolve => res.once('close', () => resolve()))
    seen.push({ url: req.url ?? '', headers: req.headers, closed })
    const route = routes[req.url ?? '']
    if (route) route(res, base)
    else res.writeHead(404, { 'content-type': 'text/plain' }).end('not here')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const base = `http://127.0.0.1:${port}`
  return {
    base,
    port,
    seen,
    close: () =>
      new Promise<void>(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The text of a tool result (its text blocks joined). */
export function textOf(result: { content: readonly { type: string; text?: string }[] }): string {
  return result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}
