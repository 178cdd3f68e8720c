// `SessionPersistence.check`: what a load would repair in a stored log, or why
// no load can read it, found without writing (`loom sessions verify` on any
// backend). Damage is part of the answer; a store that cannot be reached is not.
import type { SessionEvent } from './events.ts'

/** What `check` found in the stored log of one session. */
export interface StoredSessionCheck {
  /** Where the log is stored, for people: a file path, a database row. */
  location: string
  /** Events stored whole (the committed prefix a load keeps). */
  events: number
  /** Bytes stored after the last whole event (a write cut short), which a load cuts; 0 where every write is atomic. */
  tornBytes: number
  /** The events a load appends to close what a crash left open: compaction ends, then the open turn's closers. */
  closers: readonly SessionEvent[]
  /** Why no load can read the log (it is corrupt, or of a format this build does not read); nothing repairs it. Null when readable. */
  corruption: string | null
}

/** The two read failures that are the log's own (errors.ts), by name: a hot-reloaded backend may hold another copy of the classes. */
const DAMAGE = new Set(['SessionPersistenceCorruptionError', 'SessionFormatUnsupportedError'])

/**
 * A backend's `check`: `read` reads and validates the stored log as a load
 * would; its damage becomes the report's `corruption`, any other failure (a
 * missing session, an unreachable store) rejects.
 */
export async function checkStored(location: string, read: () => Promise<Omit<StoredSessionCheck, 'location' | 'corruption'>>): Promise<StoredSessionCheck> {
  try {
    return { location, ...(await read()), corruption: null }
  } catch (error) {
    if (!DAMAGE.has((error as Error)?.name)) throw error
    return { location, events: 0, tornBytes: 0, closers: [], corruption: (error as Error).message }
  }
}
