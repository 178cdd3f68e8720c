export { MemoryPersistence, type MemoryLogs, type MemoryPersistenceConfig } from './memory.ts'
