// Where the inspector reads sessions from. `loom inspect` reads the deployment's
// store through the SessionPersistence contract (any backend); `loom serve` gives
// its hosted sessions, so the page shows only that server's project. Reads never
// write and take no lease: a session stays writable by whoever runs it.
import {
  type CachePrices,
  modelPrices,
  type SessionEvent,
  type SessionHeader,
  type SessionLeaseHolder,
  type SessionPersistence,
  type StoredSession,
} from '@loom/session'

export interface InspectorSource {
  /** Headers of the sessions to show, oldest first. */
  list(): Promise<SessionHeader[]>
  /**
   * The stored session as written (no repair: an open turn stays open), its
   * events from seq `from` on (default all); undefined when there is none.
   */
  read(id: string, from?: number): Promise<StoredSession | undefined>
  /** The events after seq `after`, batch by batch as they are stored, until `signal` aborts. */
  follow(id: string, after: number, signal: AbortSignal): AsyncIterable<readonly SessionEvent[]>
  /** Whether a writer holds the session now (an open turn with no writer was interrupted); undefined: cannot tell. */
  running?(id: string): Promise<boolean | undefined>
  /** Prices per million tokens of a route; undefined when unknown (costs are then shown as unknown). */
  prices(provider: string, model: string): CachePrices | undefined
}

/** A store's persistence, with the lease lookup the JSONL and PostgreSQL backends have. */
export type Persistence = SessionPersistence & { holder?(id: string): Promise<SessionLeaseHolder | undefined> }

export interface PersistenceSourceOptions {
  /** The deployment's configured prices (`provider/model` or model id); list prices otherwise. */
  prices?: Readonly<Record<string, CachePrices>>
  /** How often a followed session is read again while it is quiet (ms; it slows down to 8 times this). */
  pollMs?: number
}

/** A `session "…" not found` of a backend: nothing stored under that id. */
export const isNotFound = (error: unknown) => /^session ".*" not found\b/.test((error as Error)?.message ?? '')

/** The sessions of a store, read through its SessionPersistence. */
export function persistenceSource(persistence: Persistence, options: PersistenceSourceOptions = {}): InspectorSource {
  const pollMs = options.pollMs ?? 250
  const read = async (id: string, from: number) => {
    try {
      return await persistence.readFrom(id, from)
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }
  return {
    list: () => persistence.list(),
    read: (id, from = 0) => read(id, from),
    async *follow(id, after, signal) {
      let cursor = after
      let quiet = 0
      while (!signal.aborted) {
        const batch = (await read(id, cursor + 1))?.events ?? []
        if (batch.length) {
          cursor = batch.at(-1)!.seq
          quiet = 0
          yield batch
          continue
        }
        await sleep(pollMs * 2 ** Math.min(quiet++, 3), signal)
      }
    },
    running: persistence.holder && (async id => Boolean(await persistence.holder!(id).catch(() => undefined))),
    prices: (provider, model) => modelPrices(provider, model, options.prices),
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise(resolve => {
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done)
  })
}
