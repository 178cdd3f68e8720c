// Where a session's log lives on disk:
//
//   <root>/<projectKey(cwd)>/<encodeSegment(id)>/session.jsonl
//
// The session directory name must be injective (two ids must never share a
// file), so it uses a reversible escape. The project directory is only a
// readable grouping by working directory, so it may be lossy; the header inside
// the log is the authority on which cwd and id a file belongs to.

import * as path from 'node:path'

/** The log file name inside a session directory (compression 'none'). */
export const LOG_FILENAME = 'session.jsonl'

/** The project directory for sessions that were started without a working directory. */
export const NO_CWD_PROJECT = '_no-cwd'

// The longest slug that still fits a 255-byte file name once wrapped in `--…--`.
const MAX_SLUG_LENGTH = 251

const SAFE_UNIT = /^[A-Za-z0-9._-]$/

// `~` is the escape character, so it is never literal; that is what makes the
// mapping reversible. Code units (not code points) are escaped, so lone
// surrogates get a name too and every JS string maps to a distinct segment.
function escapeUnit(unit: string): string {
  if (SAFE_UNIT.test(unit)) return unit
  return '~' + unit.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')
}

/** Maps any non-empty string to one path segment, injectively over UTF-16 code units. */
export function encodeSegment(s: string): string {
  if (s.length === 0) throw new Error('cannot encode an empty path segment')
  // `.` and `..` are the only all-safe strings a file system gives a meaning to.
  if (s === '.') return '~002E'
  if (s === '..') return '~002E~002E'
  let out = ''
  for (let i = 0; i < s.length; i++) out += escapeUnit(s[i])
  return out
}

/** The readable (lossy) project directory name for a working directory. */
export function projectKey(cwd: string | undefined): string {
  if (cwd === undefined) return NO_CWD_PROJECT
  let slug = ''
  let inSeparatorRun = false
  for (let i = 0; i < cwd.length; i++) {
    const unit = cwd[i]
    if (unit === '/' || unit === '\\' || unit === ':') {
      // A run of separators (`//`, `C:\`) reads as one break in the name.
      if (!inSeparatorRun) slug += '-'
      inSeparatorRun = true
      continue
    }
    inSeparatorRun = false
    slug += escapeUnit(unit)
  }
  slug = slug.replace(/^-+/, '')
  if (slug === '') slug = 'root'
  // The `--…--` wrapper keeps project directories apart from `_no-cwd` and from
  // anything else a user might drop into the root.
  return `--${slug.slice(0, MAX_SLUG_LENGTH)}--`
}

/** The log file of session `id` started in `cwd`, under the backend root. */
export function logPath(root: string, cwd: string | undefined, id: string): string {
  return path.join(root, projectKey(cwd), encodeSegment(id), LOG_FILENAME)
}
