// The two failures a stored log can produce on read. They are distinct classes
// because callers treat them differently: corruption may be repairable or must be
// reported as damage, while an unsupported format is an intact log this build
// simply cannot read (upgrading the harness is the fix, not repair).

/** The stored bytes are damaged in a way the scanner must not silently skip. */
export class SessionPersistenceCorruptionError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'SessionPersistenceCorruptionError'
  }
}

/** The log was written in a format version this build does not read. */
export class SessionFormatUnsupportedError extends Error {
  /** Where the refused log lives (a file path for this backend), when known. */
  readonly location?: string

  constructor(message: string, options?: ErrorOptions & { location?: string }) {
    super(message, options)
    this.name = 'SessionFormatUnsupportedError'
    if (options?.location !== undefined) this.location = options.location
  }
}
