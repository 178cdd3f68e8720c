// The two failures a stored log can produce on read, whatever the backend. They
// are distinct classes because callers treat them differently: corruption may be
// repairable or must be reported as damage, while an unsupported format is an
// intact log this build simply cannot read (upgrading the harness is the fix).
import { SESSION_FORMAT_VERSION } from './events.ts'

/** The stored log is damaged in a way a reader must not silently skip. */
export class SessionPersistenceCorruptionError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'SessionPersistenceCorruptionError'
  }
}

/** The log was written in a format version this build does not read. */
export class SessionFormatUnsupportedError extends Error {
  /** Where the refused log lives (a file path, a table row), when known. */
  readonly location?: string

  constructor(message: string, options?: ErrorOptions & { location?: string }) {
    super(message, options)
    this.name = 'SessionFormatUnsupportedError'
    if (options?.location !== undefined) this.location = options.location
  }

  /** The refusal of session `id` stored at format `version`, worded for the operator; `location` names the raw log. */
  static forVersion(id: string, version: number, location: string): SessionFormatUnsupportedError {
    const detail =
      version > SESSION_FORMAT_VERSION
        ? `but this harness reads only v${SESSION_FORMAT_VERSION}: the log was written by a newer harness — upgrade the harness to open it`
        : `which is older than the supported v${SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it`
    return new SessionFormatUnsupportedError(`session "${id}" uses log format v${version}, ${detail} (raw log: ${location})`, { location })
  }
}
