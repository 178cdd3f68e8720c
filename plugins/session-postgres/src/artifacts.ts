// The artifacts of a session (long tool output kept whole, see `@loom/tools/artifacts`) as
// rows of `session_artifacts`, keyed by session id and name. A row references its session's
// row and is deleted with it (ON DELETE CASCADE), so the session must be stored first: the
// backend stores the header of a session that has no events yet. One statement writes a
// whole artifact, so a reader sees all of it or none; the writes of a session this backend
// writes are fenced by its lease, like its events.
import { SessionLeaseError } from '@loom/session'
import type { ArtifactEntry, ArtifactStorage } from '@loom/tools/artifacts'
import type { Db, Queryable } from './db.ts'
import type { Lease } from './lease.ts'

/** PostgreSQL's `foreign_key_violation`: the session has no row. */
const NO_SESSION_ROW = '23503'

export class PostgresArtifacts implements ArtifactStorage {
  readonly #db: Db
  /** Before a write of `sessionId`: its row exists if this backend writes it; the lease that fences the write, if this backend holds one. */
  readonly #writer: (sessionId: string) => Promise<Lease | undefined>

  constructor(db: Db, writer: (sessionId: string) => Promise<Lease | undefined>) {
    this.#db = db
    this.#writer = writer
  }

  async put(sessionId: string, name: string, content: string): Promise<void> {
    const data = Buffer.from(content)
    await this.#write(sessionId, `artifact "${name}"`, 'stored', db =>
      db.query(
        `INSERT INTO ${this.#db.artifactsTable} (session_id, name, content, bytes, created_at)
         VALUES ($1, $2, $3, $4, (extract(epoch FROM now()) * 1000)::bigint)
         ON CONFLICT (session_id, name) DO UPDATE SET content = excluded.content, bytes = excluded.bytes, created_at = excluded.created_at`,
        [sessionId, name, data, data.length],
      ),
    )
  }

  async get(sessionId: string, name: string): Promise<string | undefined> {
    const { rows } = await this.#read(sessionId, `artifact "${name}"`, () =>
      this.#db.pool.query<{ content: Buffer }>(`SELECT content FROM ${this.#db.artifactsTable} WHERE session_id = $1 AND name = $2`, [sessionId, name]),
    )
    return rows[0]?.content.toString('utf8')
  }

  async list(sessionId: string): Promise<ArtifactEntry[]> {
    const { rows } = await this.#read(sessionId, 'the artifacts', () =>
      // bigint comes back as a decimal string.
      this.#db.pool.query<{ name: string; bytes: number; created_at: string }>(
        `SELECT name, bytes, created_at FROM ${this.#db.artifactsTable} WHERE session_id = $1`,
        [sessionId],
      ),
    )
    return rows.map(row => ({ name: row.name, bytes: row.bytes, createdAt: Number(row.created_at) }))
  }

  async remove(sessionId: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return
    await this.#write(sessionId, `artifacts ${names.map(name => `"${name}"`).join(', ')}`, 'removed', db =>
      db.query(`DELETE FROM ${this.#db.artifactsTable} WHERE session_id = $1 AND name = ANY($2::text[])`, [sessionId, names]),
    )
  }

  /** Runs one write statement, fenced in a transaction when this backend holds the session's lease. */
  async #write(sessionId: string, what: string, done: string, statement: (db: Queryable) => Promise<unknown>): Promise<void> {
    const failed = `${what} of session "${sessionId}" was not ${done}`
    try {
      const lease = await this.#writer(sessionId)
      if (!lease) {
        await statement(this.#db.pool)
        return
      }
      await this.#db.transaction(async client => {
        await lease.fence(client)
        await statement(client)
      })
    } catch (error) {
      if (error instanceof SessionLeaseError) throw new SessionLeaseError(error.code, error.sessionId, error.holder, `${failed}: ${error.message}`)
      if ((error as { code?: unknown }).code === NO_SESSION_ROW) {
        throw new Error(`${failed}: the session has no stored log in ${this.#db.where} (schema "${this.#db.schema}")`, { cause: error })
      }
      throw new Error(`${failed} in ${this.#db.where} (schema "${this.#db.schema}"): ${(error as Error).message}`, { cause: error })
    }
  }

  async #read<T>(sessionId: string, what: string, query: () => Promise<T>): Promise<T> {
    try {
      return await query()
    } catch (error) {
      throw new Error(`${what} of session "${sessionId}" could not be read from ${this.#db.where} (schema "${this.#db.schema}"): ${(error as Error).message}`, {
        cause: error,
      })
    }
  }
}
