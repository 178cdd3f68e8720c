// The SessionPersistence contract, run against MemoryPersistence. It stores a
// live session's events at once (no write-behind, no flush listener, no
// durable signal), eagerly, without leases or format versions, and never vetoes
// a publication: only the parts it implements are selected; the others are
// reported as skipped.
import { describe } from 'vitest'
import { persistenceContract } from '../src/testing/contract.ts'
import { type MemoryLogs, MemoryPersistence } from '../src/testing/index.ts'

describe('MemoryPersistence', () => {
  persistenceContract(
    'MemoryPersistence',
    () => {
      const logs: MemoryLogs = new Map()
      return {
        apply: root => root.plugin(MemoryPersistence, { logs }),
        async writeRaw(header, events) {
          logs.set(header.id, { header, events: structuredClone([...events]) })
        },
        async snapshot(id) {
          const log = logs.get(id)
          return log && JSON.stringify(log)
        },
      }
    },
    { parts: ['round-trip', 'repair', 'contiguity', 'reads'] },
  )
})
