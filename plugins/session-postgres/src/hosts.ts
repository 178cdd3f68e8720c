// Several hosts, one writable primary. A high-availability cluster is named by a
// libpq multi-host URL (`postgres://loom@db-1:5432,db-2:5432/loom?target_session_attrs=read-write`,
// what `pg_autoctl show uri` prints), and node-postgres connects to one host only.
// So this pool keeps a node-postgres pool per host and sends every query to the
// host that is the writable primary now:
//   * every new connection is checked before it is used (`pg_is_in_recovery()`
//     and `transaction_read_only`, as libpq's read-write does): a standby, or a
//     promoted one that does not take writes yet, is refused;
//   * the primary is found by asking every host at once (the same check, on a
//     new or idle connection) and taking the first that answers writable, so a
//     host that does not answer at all holds up only a search that finds none;
//   * a lost connection, a server shutting down (57P01) or a write refused as
//     read-only (25006, a primary demoted) sends the next query to look again.
// While no host is writable (a standby being promoted) every query fails with
// StoreUnavailableError naming each host and what it answered; nothing is
// written anywhere. A single host without target_session_attrs is used as is.
import pg from 'pg'
import { isConnectionError, NotPrimaryError, StoreUnavailableError, storeError } from './unavailable.ts'

/** One `host:port` of the URL. */
export interface Host {
  host: string
  port: number
}

export interface StoreUrl {
  /** Every host, in the URL's order. */
  hosts: Host[]
  /** `h1:5432,h2:5433/db`: every host and the database, never the password. */
  where: string
  /** New connections must be a writable primary: several hosts, or `target_session_attrs=read-write` (or `primary`). */
  writable: boolean
  /** The connection string of host `index` alone (target_session_attrs taken out: node-postgres does not know it). */
  forHost(index: number): string
}

/** `scheme://[userinfo@]hosts[/database][?query][#fragment]`; userinfo stops at the last `@` before the path. */
const URL_PARTS = /^(postgres(?:ql)?:\/\/)(?:([^/?#]*)@)?([^/?#@]*)(\/[^?#]*)?(\?[^#]*)?(#.*)?$/
/** One host of the list: `[v6]:port`, `name:port`, or either without a port. */
const HOST = /^(\[[^\]]+\]|[^:[\]]*)(?::(\d*))?$/
/** The target_session_attrs values that ask for a server this store can write to. */
const WRITABLE = new Set(['read-write', 'primary'])

/** Splits a connection string into its hosts; throws naming what is wrong (never echoing the password). */
export function parseStoreUrl(url: string): StoreUrl {
  const parts = URL_PARTS.exec(url)
  if (!parts) throw new Error('is not a postgres:// connection string')
  const [, scheme, userinfo, hostList, path = '', query = '', fragment = ''] = parts
  // An `@` after the hosts means the userinfo was cut short (a password with an unescaped `/`): the "host" may hold part of it.
  const shown = (text: string) => (`${path}${query}${fragment}`.includes('@') ? `number ${hostList.split(',').indexOf(text) + 1}` : `"${text}"`)
  const hosts = hostList.split(',').map(text => {
    const host = HOST.exec(text)
    const port = host?.[2] ? Number(host[2]) : 5432
    if (!host || (!host[1] && hostList.includes(',')) || port < 1 || port > 65535) {
      throw new Error(
        `has a host ${shown(text)} that is not host[:port] (several hosts are host1:port1,host2:port2; escape a password's special characters as %XX)`,
      )
    }
    return { host: host[1] || 'localhost', port }
  })
  const params = new URLSearchParams(query.slice(1))
  const attrs = params.get('target_session_attrs')
  if (attrs !== null && attrs !== 'any' && !WRITABLE.has(attrs)) {
    throw new Error(`asks for target_session_attrs=${attrs}, a server this store cannot write to; use read-write (or leave it out)`)
  }
  if (attrs === 'any' && hosts.length > 1) {
    throw new Error('asks for target_session_attrs=any with several hosts: the store could write to a standby; use read-write (or leave it out)')
  }
  params.delete('target_session_attrs')
  const rest = params.size ? `?${params}` : ''
  const database = path.length > 1 ? path : ''
  return {
    hosts,
    where: `${hosts.map(({ host, port }) => `${host}:${port}`).join(',')}${database}`,
    writable: hosts.length > 1 || (attrs !== null && WRITABLE.has(attrs)),
    forHost: index => `${scheme}${userinfo === undefined ? '' : `${userinfo}@`}${hostList.split(',')[index]}${path}${rest}${fragment}`,
  }
}

/** `host:port/database` of a connection string (every host of a multi-host one), never its password. */
export function describeUrl(url: string): string {
  try {
    return parseStoreUrl(url).where
  } catch {
    return '(unparsable url)'
  }
}

export interface PrimaryPoolOptions {
  /** Most connections to the primary at once. */
  max: number
  /** How long a connection may take, per host. */
  connectionTimeoutMillis: number
  /** An idle connection failed (its server went away). */
  onIdleError(error: Error): void
  /** The writable primary is found (again): `host:port`. */
  onPrimary?(host: string): void
}

/** The pool of one host, with the check of its new connections when the URL asks for a writable primary. */
interface HostPool {
  name: string
  pool: pg.Pool
}

/** Whether the server of a connection takes writes: not a standby, and not read-only by default. */
const WRITABLE_CHECK = "SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') = 'on' AS read_only"

/** Every query to the writable primary among the URL's hosts (see the top of this file). */
export class PrimaryPool {
  /** Every host and the database, for messages. */
  readonly where: string
  readonly #hosts: HostPool[]
  readonly #options: PrimaryPoolOptions
  /** Where queries go now; undefined until found, and again once it failed. */
  #primary: HostPool | undefined
  /** A single host as given: the primary by definition, nothing to find. */
  readonly #fixed: boolean
  #finding: Promise<HostPool> | undefined

  constructor(url: string, options: PrimaryPoolOptions) {
    const parsed = parseStoreUrl(url)
    this.where = parsed.where
    this.#options = options
    this.#hosts = parsed.hosts.map(({ host, port }, index) => {
      const name = `${host}:${port}`
      const pool = new pg.Pool({
        connectionString: parsed.forHost(index),
        max: options.max,
        connectionTimeoutMillis: options.connectionTimeoutMillis,
        keepAlive: true,
        ...(parsed.writable && { verify: (client: pg.PoolClient, done: (error?: Error) => void) => verifyWritable(client, name, done) }),
      })
      // An idle client whose server went away must not crash the process; the next query reports it.
      pool.on('error', error => {
        this.#lost(name, error)
        options.onIdleError(error)
      })
      return { name, pool }
    })
    this.#fixed = !parsed.writable
    if (this.#fixed) this.#primary = this.#hosts[0]
  }

  /** Runs one statement on the primary; a failure to reach it is StoreUnavailableError. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    const host = await this.#primaryPool()
    try {
      return await host.pool.query<R>(text, values)
    } catch (error) {
      throw this.#failed(host, error)
    }
  }

  /** Runs `work` in one transaction on one connection to the primary; rolls back when it throws. */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const host = await this.#primaryPool()
    let checkout: Checkout
    try {
      checkout = await checkOut(host.pool)
    } catch (error) {
      throw this.#failed(host, error)
    }
    const { client } = checkout
    try {
      await client.query('BEGIN')
      const result = await work(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      // A connection that cannot even roll back is not given to the next caller.
      await client.query('ROLLBACK').catch(() => checkout.broke(error as Error))
      throw this.#failed(host, error)
    } finally {
      checkout.release()
    }
  }

  /** Closes every connection. */
  async end(): Promise<void> {
    await Promise.all(this.#hosts.map(host => host.pool.end().catch(() => {})))
  }

  /** The writable primary, found once and again after it failed; concurrent callers share one search. */
  #primaryPool(): Promise<HostPool> {
    if (this.#primary) return Promise.resolve(this.#primary)
    this.#finding ??= this.#find().finally(() => {
      this.#finding = undefined
    })
    return this.#finding
  }

  /** Asks every host at once; the first whose connection passes the check is the primary. */
  async #find(): Promise<HostPool> {
    const tries = this.#hosts.map(async host => {
      try {
        // Checked here even when the pool had it idle: the server may have changed since it was opened.
        const checkout = await checkOut(host.pool)
        try {
          await checkWritable(checkout.client, host.name)
        } catch (error) {
          // A connection that failed is not given to the next caller; one to a standby is fine.
          if (!(error instanceof NotPrimaryError)) checkout.broke(error as Error)
          throw error
        } finally {
          checkout.release()
        }
        return host
      } catch (error) {
        // NotPrimaryError names its host already.
        throw error instanceof NotPrimaryError ? error : new Error(`${host.name}: ${(error as Error).message}`, { cause: error })
      }
    })
    try {
      const found = await Promise.any(tries)
      this.#primary = found
      this.#options.onPrimary?.(found.name)
      return found
    } catch (error) {
      const reasons = (error as AggregateError).errors as Error[]
      throw new StoreUnavailableError(
        this.where,
        new AggregateError(reasons, `no host is a writable primary: ${reasons.map(reason => reason.message).join('; ')}`),
      )
    }
  }

  /** The error of a statement on `host`, classified; the primary is looked for again when the failure says it is gone. */
  #failed(host: HostPool, error: unknown): unknown {
    this.#lost(host.name, error)
    return storeError(error, this.where)
  }

  #lost(name: string, error: unknown) {
    if (!this.#fixed && this.#primary?.name === name && isConnectionError(error)) this.#primary = undefined
  }
}

/** A connection taken from a pool, until `release` gives it back (or, once it `broke`, closes it). */
interface Checkout {
  client: pg.PoolClient
  broke(error: Error): void
  release(): void
}

/**
 * Takes a connection from `pool`. While it is out, the pool does not listen to its errors: a connection that
 * dies between two statements would emit an 'error' event nobody hears, which ends the process. Here it is
 * heard, and the connection's next statement fails instead (a connection error: the store is unavailable).
 */
async function checkOut(pool: pg.Pool): Promise<Checkout> {
  const client = await pool.connect()
  let broken: Error | undefined
  const broke = (error: Error) => {
    broken ??= error
  }
  client.on('error', broke)
  return {
    client,
    broke,
    release() {
      client.off('error', broke)
      client.release(broken)
    },
  }
}

/**
 * The pool's check of a new connection. While it runs the pool listens to none of the connection's errors
 * (neither idle nor checked out), so a server killed in the middle would emit an 'error' event nobody hears.
 * Here it is heard; the check's own query fails with the same error, which `done` passes on.
 */
function verifyWritable(client: pg.PoolClient, name: string, done: (error?: Error) => void): void {
  const heard = () => {}
  client.on('error', heard)
  checkWritable(client, name).then(
    () => {
      client.off('error', heard)
      done()
    },
    error => {
      client.off('error', heard)
      done(error)
    },
  )
}

/** Resolves when the connection's server takes writes; else NotPrimaryError saying what it is. */
async function checkWritable(client: pg.PoolClient, name: string): Promise<void> {
  const { rows } = await client.query<{ standby: boolean; read_only: boolean }>(WRITABLE_CHECK)
  if (rows[0].standby) throw new NotPrimaryError(name, 'a standby (in recovery)')
  if (rows[0].read_only)
    throw new NotPrimaryError(name, 'read-only (default_transaction_read_only is on: a standby being promoted, or a primary being demoted)')
}
