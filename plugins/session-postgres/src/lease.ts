// The write lease of a session, as a row of `session_leases` (see the README):
//   * taking it is one statement: an upsert that succeeds only on a free row or
//     one whose heartbeat (database clock) is older than `staleMs`; every grant
//     increments the row's `token`, so a token names one tenure for good;
//   * a holder on this host whose pid is gone is taken over at once, by an
//     update conditional on the token that was judged dead;
//   * every write transaction first locks the row (`FOR UPDATE`) and checks that
//     it still carries this writer's token (fencing);
//   * the holder refreshes `heartbeat = now()` every `heartbeatMs` (an unref'd
//     timer); releasing clears the holder columns but keeps the token.
import { processExists, SessionLeaseError, type SessionLeaseHolder } from '@loom/session'
import { hostname } from 'node:os'
import type { Db, Queryable } from './db.ts'

export interface LeaseOptions {
  heartbeatMs: number
  staleMs: number
  command: string
  /** The host name written into the lease; a holder of the same name whose pid is gone is taken over at once. */
  host?: string
}

interface HolderRow {
  token: string
  pid: number | null
  host: string | null
  command: string | null
  since: Date | null
}

const holderOf = (row: HolderRow | undefined): SessionLeaseHolder | undefined =>
  row && row.pid !== null && row.host !== null && row.since !== null
    ? { pid: row.pid, host: row.host, since: row.since.getTime(), ...(row.command !== null && { command: row.command }) }
    : undefined

/** Who holds the lease of `id` now, if anyone; takes nothing. */
export async function readHolder(db: Db, id: string): Promise<SessionLeaseHolder | undefined> {
  const { rows } = await db.pool.query<HolderRow>(`SELECT token, pid, host, command, since FROM ${db.leasesTable} WHERE session_id = $1`, [id])
  return holderOf(rows[0])
}

export class Lease {
  readonly sessionId: string
  /** This tenure's token, as PostgreSQL returns a bigint: a decimal string. */
  readonly token: string
  readonly #db: Db
  readonly #timer: ReturnType<typeof setInterval>
  readonly #heartbeatMs: number
  readonly #staleMs: number
  /** A release the database did not take yet, tried again. */
  #retry: ReturnType<typeof setTimeout> | undefined

  private constructor(db: Db, sessionId: string, token: string, options: Pick<LeaseOptions, 'heartbeatMs' | 'staleMs'>) {
    this.#db = db
    this.sessionId = sessionId
    this.token = token
    this.#heartbeatMs = options.heartbeatMs
    this.#staleMs = options.staleMs
    this.#timer = setInterval(() => this.#beat(), options.heartbeatMs)
    this.#timer.unref()
  }

  /** Takes the lease of `id`, taking over a stale or dead holder; `SESSION_LEASE_HELD` names a live one. */
  static async acquire(db: Db, id: string, options: LeaseOptions): Promise<Lease> {
    const host = options.host ?? hostname()
    const me = [id, process.pid, host, options.command]
    // Each round either wins or meets a holder; a holder that let go in between is retried.
    for (let round = 0; round < 5; round++) {
      const taken = await db.pool.query<{ token: string }>(
        `INSERT INTO ${db.leasesTable} AS lease (session_id, token, pid, host, command, since, heartbeat)
         VALUES ($1, 1, $2, $3, $4, now(), now())
         ON CONFLICT (session_id) DO UPDATE
           SET token = lease.token + 1, pid = excluded.pid, host = excluded.host, command = excluded.command, since = now(), heartbeat = now()
           WHERE lease.heartbeat IS NULL OR lease.heartbeat < now() - make_interval(secs => $5::double precision / 1000)
         RETURNING token`,
        [...me, options.staleMs],
      )
      if (taken.rows.length) return new Lease(db, id, taken.rows[0].token, options)
      const { rows } = await db.pool.query<HolderRow>(`SELECT token, pid, host, command, since FROM ${db.leasesTable} WHERE session_id = $1`, [id])
      const holder = holderOf(rows[0])
      if (!holder) continue
      // Only on this host can a pid be checked; elsewhere the heartbeat decides.
      if (holder.host !== host || processExists(holder.pid)) throw SessionLeaseError.held(id, holder)
      const dead = await db.pool.query<{ token: string }>(
        `UPDATE ${db.leasesTable} SET token = token + 1, pid = $2, host = $3, command = $4, since = now(), heartbeat = now()
         WHERE session_id = $1 AND token = $5 RETURNING token`,
        [...me, rows[0].token],
      )
      if (dead.rows.length) return new Lease(db, id, dead.rows[0].token, options)
    }
    const holder = await readHolder(db, id)
    throw holder ? SessionLeaseError.held(id, holder) : new Error(`session ${id}: the write lease kept changing hands; try again`)
  }

  /** Fencing, inside a write transaction: locks the lease row until commit; `SESSION_LEASE_LOST` unless it is still ours. */
  async fence(client: Queryable): Promise<void> {
    const { rows } = await client.query<HolderRow>(`SELECT token, pid, host, command, since FROM ${this.#db.leasesTable} WHERE session_id = $1 FOR UPDATE`, [
      this.sessionId,
    ])
    if (rows[0]?.token === this.token && rows[0].pid !== null) return
    throw SessionLeaseError.lost(this.sessionId, holderOf(rows[0]))
  }

  /**
   * Stops the heartbeat and frees the row if it still carries this tenure's
   * token; idempotent, never throws. When the database cannot be reached, the
   * release is retried every heartbeat in the background until it is done or
   * the lease is stale anyway, so a session is free as soon as the database is
   * back rather than `staleMs` later.
   */
  async release(): Promise<void> {
    clearInterval(this.#timer)
    clearTimeout(this.#retry)
    if (await this.#free()) return
    const giveUpAt = Date.now() + this.#staleMs
    const retry = () => {
      this.#retry = setTimeout(async () => {
        if (!(await this.#free()) && Date.now() < giveUpAt) retry()
      }, this.#heartbeatMs)
      this.#retry.unref()
    }
    retry()
  }

  /** Clears the holder columns if the row is still this tenure's; false when the database could not be asked. */
  async #free(): Promise<boolean> {
    try {
      await this.#db.pool.query(
        `UPDATE ${this.#db.leasesTable} SET pid = NULL, host = NULL, command = NULL, since = NULL, heartbeat = NULL WHERE session_id = $1 AND token = $2`,
        [this.sessionId, this.token],
      )
      return true
    } catch {
      // Left behind, a lease is taken over once its heartbeat is stale.
      return false
    }
  }

  #beat() {
    this.#db.pool
      .query(`UPDATE ${this.#db.leasesTable} SET heartbeat = now() WHERE session_id = $1 AND token = $2 AND pid IS NOT NULL`, [this.sessionId, this.token])
      .catch(() => {
        // A missed heartbeat is retried at the next tick.
      })
  }
}
