// "The database cannot be reached" as one typed error. A caller can answer it
// differently from every other failure: nothing was written, the same request
// may succeed later (an HTTP server answers 503 with Retry-After, not 500).
// Every query of this backend goes through `storePool`, so a refused, reset or
// timed-out connection, or a server shutting down, surfaces as this error
// wherever it happens; a statement the server refused (a constraint, a lost
// lease) stays what it was.
import pg from 'pg'

/** The database could not be reached (or went away mid-statement); what failed did not take effect, unless a commit's answer was lost. */
export class StoreUnavailableError extends Error {
  readonly code = 'STORE_UNAVAILABLE'

  constructor(where: string, cause: unknown) {
    super(`the session store PostgreSQL at ${where} is unreachable: ${(cause as Error)?.message ?? String(cause)}`, { cause })
    this.name = 'StoreUnavailableError'
  }
}

/** Socket errors of a server that is down, restarting or cut off. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED'])
/** What node-postgres says when a connection dies or cannot be had in time. */
const CONNECTION_LOST = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/
/** SQLSTATE class 08 (connection exception); admin, crash shutdown and "cannot connect now" (starting up); too many connections. */
const SERVER_GONE = /^(08...|57P0[123]|53300)$/

/** Whether `error` says the server could not be reached, rather than that it refused a statement. */
export function isConnectionError(error: unknown): boolean {
  for (
    let cause = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    cause && depth < 4;
    cause = cause.cause as typeof cause, depth++
  ) {
    if (cause instanceof StoreUnavailableError) return true
    const code = typeof cause.code === 'string' ? cause.code : ''
    if (NETWORK_CODES.has(code) || SERVER_GONE.test(code)) return true
    if (typeof cause.message === 'string' && CONNECTION_LOST.test(cause.message)) return true
    if (cause instanceof AggregateError && cause.errors.some(isConnectionError)) return true
  }
  return false
}

/** `error` as a StoreUnavailableError when it is a connection failure; else unchanged. */
export function storeError(error: unknown, where: string): unknown {
  return error instanceof StoreUnavailableError || !isConnectionError(error) ? error : new StoreUnavailableError(where, error)
}

/** A pool whose `query` and `connect` reject with StoreUnavailableError when the server cannot be reached. */
export function storePool(where: string, config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config)
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown
  // pg's overloads are kept: only a returned promise is wrapped (callback callers are pg's own).
  const classified = (result: unknown) => (result instanceof Promise ? result.catch(error => Promise.reject(storeError(error, where))) : result)
  pool.query = ((...args: unknown[]) => classified(query(...args))) as typeof pool.query
  pool.connect = ((...args: unknown[]) => classified(connect(...args))) as typeof pool.connect
  return pool
}
