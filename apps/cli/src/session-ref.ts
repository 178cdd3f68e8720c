// How a session is named on the command line (`loom resume`, `loom sessions
// resume`, `/resume` in a conversation): its id, a unique prefix of it, or
// `last`, the most recent session started in this folder.
import type { SessionHeader } from '@loom/session'

/** The id `ref` names among the stored sessions' headers; an error when it names none, or more than one. */
export function resolveSessionRef(headers: readonly SessionHeader[], ref: string, cwd: string): string {
  if (ref === 'last') {
    // A subagent's session is part of its parent's conversation, not one to continue.
    const here = headers.filter(header => header.cwd === cwd && header.origin !== 'subagent')
    const last = here.reduce<SessionHeader | undefined>((latest, header) => (latest && latest.createdAt > header.createdAt ? latest : header), undefined)
    if (!last) throw new Error(`no stored session was started in ${cwd} (see: loom sessions list)`)
    return last.id
  }
  if (headers.some(header => header.id === ref)) return ref
  const matches = headers.filter(header => header.id.startsWith(ref)).map(header => header.id)
  if (matches.length === 1) return matches[0]
  if (!matches.length) throw new Error(`session "${ref}" not found: no stored session has that id or id prefix (see: loom sessions list)`)
  throw new Error(`the id prefix "${ref}" names ${matches.length} sessions: ${matches.join(', ')}; give more of the id`)
}
