// "The database cannot be reached" as one typed error. A caller can answer it
// differently from every other failure: nothing was written, the same request
// may succeed later (an HTTP server answers 503 with Retry-After, not 500).
// Every query of this backend goes through `PrimaryPool` (hosts.ts), so a
// refused, reset or timed-out connection, a server shutting down, or a server
// that is not the writable primary (a standby, a primary demoted by a failover:
// the primary is elsewhere or not there yet) surfaces as this error wherever it
// happens; a statement the server refused (a constraint, a lost lease) stays
// what it was.

/** The database could not be reached (or went away mid-statement); what failed did not take effect, unless a commit's answer was lost. */
export class StoreUnavailableError extends Error {
  readonly code = 'STORE_UNAVAILABLE'

  constructor(where: string, cause: unknown) {
    super(`the session store PostgreSQL at ${where} is unreachable: ${(cause as Error)?.message ?? String(cause)}`, { cause })
    this.name = 'StoreUnavailableError'
  }
}

/** A connection's server does not take writes (see hosts.ts): a standby, or a primary being promoted or demoted. */
export class NotPrimaryError extends Error {
  readonly code = 'NOT_PRIMARY'

  constructor(host: string, what: string) {
    super(`${host} is not the writable primary: it is ${what}`)
    this.name = 'NotPrimaryError'
  }
}

/** Socket errors of a server that is down, restarting or cut off. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED'])
/** What node-postgres says when a connection dies or cannot be had in time. */
const CONNECTION_LOST = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/
/**
 * SQLSTATE class 08 (connection exception); admin, crash shutdown and "cannot connect now" (starting up);
 * too many connections; a write refused as read-only (25006: the server was demoted, or is a standby).
 */
const SERVER_GONE = /^(08...|57P0[123]|53300|25006)$/

/** Whether `error` says the server could not be reached, or is not the writable primary, rather than that it refused a statement. */
export function isConnectionError(error: unknown): boolean {
  for (
    let cause = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    cause && depth < 4;
    cause = cause.cause as typeof cause, depth++
  ) {
    if (cause instanceof StoreUnavailableError || cause instanceof NotPrimaryError) return true
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
