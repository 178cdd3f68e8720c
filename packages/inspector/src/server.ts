// `loom inspect`'s own server: loopback only, a free port unless one is asked
// for, and a token made for this run. The URL it gives carries the token; the
// page moves it into the tab's session storage and drops it from the address bar.
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { bearerToken, createInspector, type InspectorHandler } from './handler.ts'
import type { InspectorSource } from './source.ts'

export interface InspectorServerOptions {
  source: InspectorSource
  /** 0 (the default) picks a free port. */
  port?: number
  /** Loopback by default: the token is the only lock, and it is printed. */
  host?: string
  /** The token (default: 32 random bytes, hex). */
  token?: string
  report?: (error: unknown) => void
}

export interface InspectorServer {
  /** `http://127.0.0.1:PORT` */
  origin: string
  token: string
  /** The page's address with the token, opening on session `id` when given. */
  url(id?: string): string
  readonly handler: InspectorHandler
  close(): Promise<void>
}

export async function startInspector(options: InspectorServerOptions): Promise<InspectorServer> {
  const token = options.token ?? randomBytes(32).toString('hex')
  const host = options.host ?? '127.0.0.1'
  const handler = createInspector({ source: options.source, authorize: bearerToken(token), report: options.report })
  const server = createServer((req, res) => void handler(req, res))
  await new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot listen on ${host}:${options.port ?? 0}: ${error.code ?? error.message}`, { cause: error }))
    server.once('error', failed)
    server.listen(options.port ?? 0, host, () => {
      server.off('error', failed)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const origin = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
  return {
    origin,
    token,
    url: id => `${origin}/?token=${token}${id === undefined ? '' : `#/s/${encodeURIComponent(id)}`}`,
    handler,
    close: () =>
      new Promise(resolve => {
        server.close(() => resolve())
        // Event streams and keep-alive connections would hold the close open.
        server.closeAllConnections()
      }),
  }
}
