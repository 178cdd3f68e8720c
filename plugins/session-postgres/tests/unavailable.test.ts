// A database that goes away: every query of the backend's pool, and a write
// transaction, rejects with StoreUnavailableError (code STORE_UNAVAILABLE)
// rather than a bare socket error, while a statement the server refuses keeps
// its own error; once the server is back the same pool works again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Db } from '../src/db.ts'
import { isConnectionError, StoreUnavailableError } from '../src/unavailable.ts'
import { startTestPostgres, type TestPostgres } from '../src/testing.ts'

let server: TestPostgres

beforeAll(async () => {
  server = await startTestPostgres()
}, 180_000)

afterAll(async () => {
  await server?.stop()
})

describe('the store unreachable', () => {
  it('is StoreUnavailableError for reads and write transactions while the server is down, and nothing else; the pool recovers', async () => {
    const db = new Db({ url: server.url, schema: server.schema(), poolMax: 2 }, () => {})
    try {
      await db.migrate()
      expect(await db.ids()).toEqual([])
      // A refused statement is not an outage.
      const refused = await db.pool.query('SELECT * FROM no_such_table').catch(error => error)
      expect(refused).not.toBeInstanceOf(StoreUnavailableError)
      expect(isConnectionError(refused)).toBe(false)

      await server.halt()
      const read = await db.ids().catch(error => error)
      expect(read).toBeInstanceOf(StoreUnavailableError)
      expect(read).toMatchObject({ code: 'STORE_UNAVAILABLE' })
      expect(read.message).toContain(`the session store PostgreSQL at ${db.where} is unreachable`)
      const write = await db.transaction(client => client.query('SELECT 1')).catch(error => error)
      expect(write).toBeInstanceOf(StoreUnavailableError)

      await server.restart()
      expect(await db.ids()).toEqual([])
    } finally {
      await db.pool.end()
    }
  })
})
