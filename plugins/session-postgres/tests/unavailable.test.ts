// A database that goes away: every query of the backend's pool, and a write
// transaction, rejects with StoreUnavailableError (code STORE_UNAVAILABLE)
// rather than a bare socket error, while a statement the server refuses keeps
// its own error; once the server is back the same pool works again. A
// connection cut while a transaction holds it is the same error, never an
// unhandled 'error' event (which would end the process).
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

  it('cuts the connection of a transaction between two statements: StoreUnavailableError, not an error event that ends the process', async () => {
    const db = new Db({ url: server.url, schema: server.schema(), poolMax: 1 }, () => {})
    try {
      const cut = db.transaction(async client => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        // The server ends this connection while the transaction waits for something else (a lease, an artifact).
        const ended = new Promise(resolve => client.once('end', resolve))
        await server.query('SELECT pg_terminate_backend($1)', [rows[0].pid])
        await ended
        await client.query('SELECT 1')
      })
      const error = await cut.catch(error => error)
      expect(error).toBeInstanceOf(StoreUnavailableError)
      // The dead connection was not given back: the next transaction works.
      expect(await db.transaction(async client => (await client.query('SELECT 1 AS one')).rows)).toEqual([{ one: 1 }])
    } finally {
      await db.pool.end()
    }
  })
})
