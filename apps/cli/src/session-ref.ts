// How a session is named on the command line (`loom resume`, `loom sessions
// resume`, `/resume` in a conversation): its id, a unique prefix of it, or
// `last`, the session most recently used in this folder (its last event, not
// its start: a session resumed yesterday is more recent than one started today
// and left).
import type { SessionEvent, SessionHeader, SessionPersistence } from '@loom/session'

/** The sessions `last` may name in `cwd`: started there, and not a subagent's (part of its parent's conversation). */
function candidates(headers: readonly SessionHeader[], cwd: string): SessionHeader[] {
  return headers.filter(header => header.cwd === cwd && header.origin !== 'subagent')
}

/**
 * The id `ref` names among the stored sessions' headers; an error when it names
 * none, or more than one. `usedAt` gives each session's last use (ms); a session
 * it does not list counts from its creation.
 */
export function resolveSessionRef(headers: readonly SessionHeader[], ref: string, cwd: string, usedAt?: ReadonlyMap<string, number>): string {
  if (ref === 'last') {
    const time = (header: SessionHeader) => usedAt?.get(header.id) ?? header.createdAt
    const last = candidates(headers, cwd).reduce<SessionHeader | undefined>(
      (latest, header) => (latest && time(latest) > time(header) ? latest : header),
      undefined,
    )
    if (!last) throw new Error(`no stored session was started in ${cwd} (see: loom sessions list)`)
    return last.id
  }
  if (headers.some(header => header.id === ref)) return ref
  const matches = headers.filter(header => header.id.startsWith(ref)).map(header => header.id)
  if (matches.length === 1) return matches[0]
  if (!matches.length) throw new Error(`session "${ref}" not found: no stored session has that id or id prefix (see: loom sessions list)`)
  throw new Error(`the id prefix "${ref}" names ${matches.length} sessions: ${matches.join(', ')}; give more of the id`)
}

/**
 * When each session `last` may name in `cwd` was last used: when the store last
 * wrote it (`lastActivity`: a file's mtime, a row's time, no log read through),
 * else the time of its last event, read without a lease (one that cannot be read
 * counts from its creation).
 */
export async function lastUsed(
  persistence: Pick<SessionPersistence, 'inspect' | 'lastActivity'>,
  headers: readonly SessionHeader[],
  cwd: string,
): Promise<Map<string, number>> {
  const times = await Promise.all(
    candidates(headers, cwd).map(async header => {
      try {
        if (persistence.lastActivity) return [header.id, (await persistence.lastActivity(header.id)) ?? header.createdAt] as const
        const { events } = await persistence.inspect(header.id)
        const last: SessionEvent | undefined = events.at(-1)
        return [header.id, last?.time ?? header.createdAt] as const
      } catch {
        return [header.id, header.createdAt] as const
      }
    }),
  )
  return new Map(times)
}
