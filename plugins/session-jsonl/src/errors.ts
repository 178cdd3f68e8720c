// The read failures of a stored log are backend-agnostic and live in @loom/session;
// re-exported here so this package's modules and its public API keep their names.
export { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '@loom/session'
