export { MemoryPersistence, type MemoryLogs, type MemoryPersistenceConfig } from './memory.ts'
export { CWD, live, meta, openStart, openToolTurn, raw, shortTurn, type Sink, toolTurn } from './logs.ts'
