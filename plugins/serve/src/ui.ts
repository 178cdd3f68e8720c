// The inspector (@loom/inspector) at /ui: the page and its assets need no token
// (they hold no data; the page asks for the token and keeps it in the tab), its
// API (/ui/api/…) takes the server's bearer token. It shows this server's
// project only, as /v1/sessions does, and follows a running session as the event
// stream does. The inspector is loaded on the first /ui request.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { InspectorHandler, InspectorSource } from '@loom/inspector'
import type { CachePrices } from '@loom/session'
import type { HostedSessions, Persistence } from './sessions.ts'

export const UI_BASE = '/ui'

/** `/ui` and everything under it. */
export const isUiPath = (pathname: string) => pathname === UI_BASE || pathname.startsWith(`${UI_BASE}/`)

export interface UiOptions {
  sessions: HostedSessions
  store: Persistence
  /** Whether a request's Authorization header carries the server's token. */
  authorize: (authorization: string | undefined) => boolean
  /** The runner's prices of a route (null: unknown). */
  prices?: (provider: string, model: string) => CachePrices | null
  report: (error: unknown) => void
}

export function createUi(options: UiOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  let handler: Promise<InspectorHandler> | undefined
  return async (req, res) => {
    handler ??= import('@loom/inspector').then(({ createInspector, persistenceSource }) =>
      createInspector({
        base: UI_BASE,
        authorize: options.authorize,
        report: options.report,
        source: projectSource(options, persistenceSource(options.store)),
      }),
    )
    await (await handler)(req, res)
  }
}

/** The store's sessions of this server's project: read from the store, followed through the hosted sessions. */
function projectSource({ sessions, prices }: UiOptions, store: InspectorSource): InspectorSource {
  const ours = async () => new Set((await sessions.list()).map(session => session.id))
  return {
    ...store,
    list: async () => {
      const owned = await ours()
      return (await store.list()).filter(header => owned.has(header.id))
    },
    read: async (id, from) => ((await ours()).has(id) ? store.read(id, from) : undefined),
    follow: (id, after, signal) => sessions.follow(id, after, signal),
    prices: (provider, model) => prices?.(provider, model) ?? undefined,
  }
}
