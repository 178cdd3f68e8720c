// PostgreSQL storage figures, beside the JSONL ones of session-jsonl's bench:
// append throughput (each batch one transaction, fenced by the lease) at several
// batch sizes, and the load of a long session (`inspect`: read, check, restore)
// against a bare JSON.parse of the same lines. The server is a real one: the
// embedded PostgreSQL of `@loom/session-postgres/testing` (or LOOM_TEST_PG_URL) on loopback.
import { Context } from '@deepseek-ai/cordis'
import { type SessionHeader, type SessionPersistence, SessionStore } from '@loom/session'
import { longSession } from '../../../packages/session/bench/derive.ts'
import PostgresPersistence from '../src/index.ts'
import { startTestPostgres } from '../src/testing.ts'

export interface PostgresAppendFigure {
  bench: 'session-postgres/append'
  batch: number
  events: number
  events_per_s: number
  batches_per_s: number
}

export interface PostgresLoadFigure {
  bench: 'session-postgres/load'
  events: number
  load_ms: number
  json_parse_ms: number
  ratio: number
}

const header = (id: string): SessionHeader => ({ version: 0, id, createdAt: 0, cwd: '/bench' })
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6
const median = (samples: number[]) => samples.slice().sort((a, b) => a - b)[samples.length >> 1]

export async function benchPostgres(batchSizes = [1, 10, 100, 1000], loadSize = 100_000, rounds = 5): Promise<(PostgresAppendFigure | PostgresLoadFigure)[]> {
  // fsync on, as in production: an append is durable when its transaction commits, as a JSONL batch is after its fsync.
  const server = await startTestPostgres({ fsync: true })
  const root = new Context()
  await root.plugin(SessionStore)
  const backend = await root.plugin(PostgresPersistence, { url: server.url, schema: server.schema() })
  try {
    const persistence = root.get('sessionPersistence') as SessionPersistence
    const figures: (PostgresAppendFigure | PostgresLoadFigure)[] = []

    const events = longSession(2000).events
    for (const batch of batchSizes) {
      const id = `append-${batch}`
      const count = Math.min(events.length, Math.max(batch * 20, 200))
      persistence.create(header(id))
      const start = process.hrtime.bigint()
      for (let i = 0; i < count; i += batch) await persistence.append(id, events.slice(i, i + batch))
      const seconds = ms(start) / 1000
      await persistence.close(id)
      figures.push({
        bench: 'session-postgres/append',
        batch,
        events: count,
        events_per_s: Math.round(count / seconds),
        batches_per_s: Math.round(Math.ceil(count / batch) / seconds),
      })
    }

    // The long session, written in large batches, then loaded as a resume reads it (no lease: inspect).
    const long = longSession(loadSize).events
    persistence.create(header('load'))
    for (let i = 0; i < long.length; i += 5000) await persistence.append('load', long.slice(i, i + 5000))
    await persistence.close('load')
    const lines = long.map(event => JSON.stringify(event))
    const loads: number[] = []
    const parses: number[] = []
    for (let round = 0; round <= rounds; round++) {
      let start = process.hrtime.bigint()
      for (const line of lines) JSON.parse(line)
      const parse = ms(start)
      start = process.hrtime.bigint()
      await persistence.inspect('load')
      const load = ms(start)
      // The first round warms the server's cache and the code.
      if (round > 0) {
        parses.push(parse)
        loads.push(load)
      }
    }
    const load = median(loads)
    const parse = median(parses)
    figures.push({
      bench: 'session-postgres/load',
      events: long.length,
      load_ms: Math.round(load * 10) / 10,
      json_parse_ms: Math.round(parse * 10) / 10,
      ratio: Math.round((load / parse) * 100) / 100,
    })
    return figures
  } finally {
    await backend.dispose()
    await server.stop()
  }
}
