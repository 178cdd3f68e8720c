// What a client is told about a failure that is not already an ApiError: the
// store errors a client (or its operator) can act on get a code of their own;
// anything else is 500 INTERNAL with no detail. No store message is passed on
// as is: they name log files and database locations. The server's log has the
// full error either way.
import { ApiError } from './http.ts'

const RETRY = { 'retry-after': '1' }

/** The answer for `error`, thrown while serving a request about session `id` (when the path names one). */
export function answerFor(error: unknown, id: string | undefined): ApiError {
  const session = id === undefined ? 'a stored session' : `session "${id}"`
  const kind = kindOf(error)
  if (kind === 'STORE_UNAVAILABLE') {
    return new ApiError(503, 'STORE_UNAVAILABLE', 'the session store cannot be reached; nothing was done: retry later (with the same Idempotency-Key)', {
      headers: RETRY,
    })
  }
  // The log is damaged: retrying cannot help and the client did nothing wrong, so a 5xx (what alerting counts), without Retry-After.
  if (kind === 'SessionPersistenceCorruptionError') {
    // A list fails on any damaged header: `loom sessions list` marks which.
    const find = id === undefined ? '`loom sessions list`' : `\`loom sessions verify ${id}\``
    return new ApiError(500, 'SESSION_CORRUPT', `${session} cannot be read: its stored log is damaged; nothing was done. An operator can run ${find}`)
  }
  // Written by a newer harness: during a rolling upgrade a host already upgraded reads it.
  if (kind === 'SessionFormatUnsupportedError') {
    return new ApiError(503, 'SESSION_FORMAT_UNSUPPORTED', `${session} was written by a newer Loom than this server runs; retry on an upgraded host`, {
      headers: RETRY,
    })
  }
  // Another host took the session while this one wrote it, and its name is not known: the next try finds it.
  if (kind === 'SESSION_LEASE_LOST') {
    return new ApiError(409, 'SESSION_LEASE_LOST', `another host took over ${session} while this one was writing it; nothing was done: retry`, {
      headers: RETRY,
    })
  }
  return new ApiError(500, 'INTERNAL', 'the server failed to answer this request; its log says why')
}

const KINDS = new Set(['STORE_UNAVAILABLE', 'SESSION_LEASE_LOST', 'SessionPersistenceCorruptionError', 'SessionFormatUnsupportedError'])

/** The store error kind of `error` (its code or class name), as the backend threw it or as the cause of another. */
function kindOf(error: unknown): string | undefined {
  for (
    let cause = error as { code?: unknown; name?: unknown; cause?: unknown } | undefined, depth = 0;
    cause && depth < 4;
    cause = cause.cause as typeof cause, depth++
  ) {
    for (const kind of [cause.code, cause.name]) if (typeof kind === 'string' && KINDS.has(kind)) return kind
  }
  return undefined
}
