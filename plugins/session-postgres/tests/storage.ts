// The contract suite's storage over one schema of the test server: direct writes
// for what a crashed writer left, and row snapshots for "nothing was written".
import type { ContractStorage } from '@loom/session/contract'
import PostgresPersistence from '../src/index.ts'
import { Db } from '../src/db.ts'
import type { TestPostgres } from '../src/testing.ts'

export function schemaStorage(server: TestPostgres, schema = server.schema()): ContractStorage & { schema: string; db: Db } {
  const db = new Db({ url: server.url, schema, poolMax: 2 }, () => {})
  let migrated: Promise<void> | undefined
  const ready = () => (migrated ??= db.migrate())
  return {
    schema,
    db,
    apply: (root, options) => root.plugin(PostgresPersistence, { url: server.url, schema, ...options }),
    async writeRaw(header, events) {
      await ready()
      await db.insertHeader(header, db.pool)
      await db.insertEvents(header.id, events, db.pool)
    },
    async writeVersion(id, version) {
      await ready()
      const header = { type: 'session', version, id, createdAt: 1, delegationDepth: 0 }
      await db.pool.query(`INSERT INTO "${schema}".sessions (id, version, created_at, header) VALUES ($1, $2, 1, $3)`, [id, version, JSON.stringify(header)])
      await db.pool.query(`INSERT INTO "${schema}".session_events (session_id, seq, event) VALUES ($1, 0, $2)`, [
        id,
        '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}',
      ])
    },
    async snapshot(id) {
      await ready()
      const head = await db.pool.query(`SELECT version, created_at, header FROM "${schema}".sessions WHERE id = $1`, [id])
      if (!head.rows.length) return undefined
      const events = await db.pool.query(`SELECT seq, event FROM "${schema}".session_events WHERE session_id = $1 ORDER BY seq`, [id])
      return JSON.stringify([head.rows, events.rows])
    },
    dispose: () => db.pool.end(),
  }
}
