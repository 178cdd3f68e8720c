// The tables of one schema and every statement this backend runs against them.
// Events are stored as text, not jsonb: jsonb reorders object keys and rewrites
// numbers, and a session log must read back byte-identical to what was appended.
import {
  interruptedTurnClosers,
  isKnownEventType,
  SESSION_FORMAT_VERSION,
  SessionFormatUnsupportedError,
  SessionPersistenceCorruptionError,
  type SessionEvent,
  type SessionHeader,
} from '@loom/session'
import type pg from 'pg'
import { PrimaryPool } from './hosts.ts'

/** A client in a transaction, or the pool itself: anything that runs a query. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>
}

/** What a cold read of a stored session found, before anything is written. */
export interface StoredRows {
  header: SessionHeader
  events: SessionEvent[]
  /** Events that close what a crash left open (explicit error results, step/end, turn/end). */
  closers: SessionEvent[]
}

export interface DbOptions {
  /** A connection string; several hosts (`h1:5432,h2:5432`) for a cluster whose writable primary may move. */
  url: string
  schema: string
  poolMax: number
  /** Called when the writable primary of a multi-host URL is found (again), with its `host:port`. */
  onPrimary?(host: string): void
}

/** The largest PostgreSQL integer. */
const INT_MAX = 2 ** 31 - 1

/** How long a query waits for a connection before the store counts as unreachable. */
const CONNECT_TIMEOUT_MS = 5000

/** `"name"`, quoted for SQL. */
const ident = (name: string) => `"${name.replaceAll('"', '""')}"`

export class Db {
  readonly pool: PrimaryPool
  readonly schema: string
  /** `host:port/database` (every host of a multi-host URL), for messages. */
  readonly where: string
  readonly #sessions: string
  readonly #events: string
  readonly #leases: string
  readonly #artifacts: string

  constructor(options: DbOptions, onIdleError: (error: Error) => void) {
    this.schema = options.schema
    // A server that is down fails a query within CONNECT_TIMEOUT_MS, as StoreUnavailableError, instead of hanging it.
    this.pool = new PrimaryPool(options.url, {
      max: options.poolMax,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      onIdleError,
      ...(options.onPrimary && { onPrimary: options.onPrimary }),
    })
    this.where = this.pool.where
    const schema = ident(options.schema)
    this.#sessions = `${schema}.sessions`
    this.#events = `${schema}.session_events`
    this.#leases = `${schema}.session_leases`
    this.#artifacts = `${schema}.session_artifacts`
  }

  /** Names a stored session in messages, as a file path would. */
  locate(id: string): string {
    return `${this.where} ${this.schema}.sessions id=${JSON.stringify(id)}`
  }

  /** Creates the schema and its tables if missing; concurrent hosts serialize on an advisory lock. */
  async migrate(): Promise<void> {
    await this.transaction(async client => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`loom-session-schema:${this.schema}`])
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident(this.schema)}`)
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#sessions} (
        id text PRIMARY KEY,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        header text NOT NULL
      )`)
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#events} (
        session_id text NOT NULL REFERENCES ${this.#sessions} (id),
        seq integer NOT NULL,
        event text NOT NULL,
        PRIMARY KEY (session_id, seq)
      )`)
      // A released lease keeps its row (holder columns null) so its token keeps counting up.
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#leases} (
        session_id text PRIMARY KEY,
        token bigint NOT NULL,
        pid integer,
        host text,
        command text,
        since timestamptz,
        heartbeat timestamptz
      )`)
      // Added after the first three: a database made before it gets it at the next start. Content is
      // bytea, not text: text refuses NUL, which command output may hold, and must read back whole.
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#artifacts} (
        session_id text NOT NULL REFERENCES ${this.#sessions} (id) ON DELETE CASCADE,
        name text NOT NULL,
        content bytea NOT NULL,
        bytes integer NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (session_id, name)
      )`)
    })
  }

  /** Runs `work` in one transaction on one client of the primary; rolls back when it throws. */
  transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.pool.transaction(work)
  }

  async ids(): Promise<string[]> {
    const { rows } = await this.pool.query<{ id: string }>(`SELECT id FROM ${this.#sessions}`)
    return rows.map(row => row.id)
  }

  async exists(id: string): Promise<boolean> {
    const { rows } = await this.pool.query(`SELECT 1 FROM ${this.#sessions} WHERE id = $1`, [id])
    return rows.length > 0
  }

  async headers(): Promise<SessionHeader[]> {
    const { rows } = await this.pool.query<{ id: string; version: number; header: string }>(
      `SELECT id, version, header FROM ${this.#sessions} ORDER BY created_at, id`,
    )
    return rows.map(row => this.#header(row.id, row.version, row.header))
  }

  /** The stored session `id` from `fromSeq` on, checked; undefined when nothing is stored. Writes nothing. */
  async read(id: string, fromSeq = 0, db: Queryable = this.pool): Promise<StoredRows | undefined> {
    const head = await db.query<{ version: number; header: string }>(`SELECT version, header FROM ${this.#sessions} WHERE id = $1`, [id])
    if (!head.rows.length) return undefined
    const header = this.#header(id, head.rows[0].version, head.rows[0].header)
    const { rows } = await db.query<{ seq: number; event: string }>(`SELECT seq, event FROM ${this.#events} WHERE session_id = $1 AND seq >= $2 ORDER BY seq`, [
      id,
      // seq is an integer column: a larger start (a caller after the header alone) reads nothing rather than failing.
      Math.min(fromSeq, INT_MAX),
    ])
    const events = rows.map((row, i) => this.#event(id, row.seq, row.event, fromSeq + i))
    return { header, events, closers: fromSeq === 0 ? interruptedTurnClosers(events) : [] }
  }

  /** The time of the newest event of `id` (its creation when it has none); undefined when nothing is stored. One row read, by the key. */
  async lastActivity(id: string): Promise<number | undefined> {
    const { rows } = await this.pool.query<{ created_at: string; event: string | null }>(
      `SELECT s.created_at, (SELECT e.event FROM ${this.#events} e WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1) AS event FROM ${this.#sessions} s WHERE s.id = $1`,
      [id],
    )
    if (!rows.length) return undefined
    const time = rows[0].event === null ? undefined : (JSON.parse(rows[0].event) as { time?: unknown }).time
    return typeof time === 'number' ? time : Number(rows[0].created_at)
  }

  /** The number of events stored for `id` (the seq the next one must carry). */
  async length(id: string, db: Queryable): Promise<number> {
    const { rows } = await db.query<{ next: number }>(`SELECT coalesce(max(seq) + 1, 0)::integer AS next FROM ${this.#events} WHERE session_id = $1`, [id])
    return rows[0].next
  }

  /** Records the header; false when a row for the id exists already (an id collision). */
  async insertHeader(header: SessionHeader, db: Queryable): Promise<boolean> {
    const { rowCount } = await db.query(`INSERT INTO ${this.#sessions} (id, version, created_at, header) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`, [
      header.id,
      header.version,
      header.createdAt,
      JSON.stringify(header),
    ])
    return rowCount === 1
  }

  /** One statement for the whole batch: the primary key refuses a seq stored twice. */
  async insertEvents(id: string, events: readonly SessionEvent[], db: Queryable): Promise<void> {
    await db.query(`INSERT INTO ${this.#events} (session_id, seq, event) SELECT $1, seq, event FROM unnest($2::integer[], $3::text[]) AS batch (seq, event)`, [
      id,
      events.map(event => event.seq),
      events.map(event => JSON.stringify(event)),
    ])
  }

  get leasesTable(): string {
    return this.#leases
  }

  get artifactsTable(): string {
    return this.#artifacts
  }

  #header(id: string, version: number, text: string): SessionHeader {
    // The version comes first: a row of another format may have any shape at all.
    if (version !== SESSION_FORMAT_VERSION) throw SessionFormatUnsupportedError.forVersion(id, version, this.locate(id))
    let header: SessionHeader
    try {
      header = JSON.parse(text)
    } catch (error) {
      throw new SessionPersistenceCorruptionError(`stored session "${id}" has an unparsable header (raw log: ${this.locate(id)})`, { cause: error })
    }
    if (header?.id !== id || header.version !== version) {
      throw new SessionPersistenceCorruptionError(`stored session "${id}" has a header that does not match its row (raw log: ${this.locate(id)})`)
    }
    return header
  }

  #event(id: string, seq: number, text: string, expected: number): SessionEvent {
    const where = `(raw log: ${this.locate(id)} seq ${seq})`
    if (seq !== expected) throw new SessionPersistenceCorruptionError(`stored session "${id}" misses event seq ${expected} ${where}`)
    let event: SessionEvent
    try {
      event = JSON.parse(text)
    } catch (error) {
      throw new SessionPersistenceCorruptionError(`stored session "${id}" has an unparsable event ${where}`, { cause: error })
    }
    if (event?.seq !== seq) throw new SessionPersistenceCorruptionError(`stored session "${id}" has an event whose seq is not its row's ${where}`)
    if (!isKnownEventType(event.type) && event.ignorable !== true) {
      throw new SessionPersistenceCorruptionError(
        `stored session "${id}" has event type "${event.type}" at seq ${seq}, which this build does not know (raw log: ${this.locate(id)})`,
      )
    }
    return event
  }
}
