// The SessionPersistence contract, run against PostgreSQL: a real server for the
// file (see postgres.ts), a fresh schema for every test.
import { persistenceContract } from '@loom/session/contract'
import { afterAll, beforeAll } from 'vitest'
import { startTestPostgres, type TestPostgres } from '../src/testing.ts'
import { schemaStorage } from './storage.ts'

let server: TestPostgres

beforeAll(async () => {
  server = await startTestPostgres()
  console.log(`test PostgreSQL ready in ${server.startupMs} ms`)
}, 180_000)
afterAll(() => server?.stop())

persistenceContract('PostgreSQL', () => schemaStorage(server))
