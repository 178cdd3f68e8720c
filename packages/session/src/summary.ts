// What a stored session's log says about it at a glance, without rebuilding its
// requests: how many turns, how the last one ended, whether one is still open,
// and the route it last ran on. `loom sessions list` and the inspector read them.
import type { SessionEvent } from './events.ts'

export interface SessionOutline {
  turns: number
  events: number
  /** How the last finished turn ended (`completed`, `error`, `aborted`, ...); null before any turn ended. */
  lastStatus: string | null
  /** A turn was started and not ended: the session runs, or its writer died (a load would close it). */
  openTurn: boolean
}

/** One pass over the log. */
export function outlineSession(events: readonly SessionEvent[]): SessionOutline {
  let turns = 0
  let lastStatus: string | null = null
  let openTurn = false
  for (const event of events) {
    if (event.type === 'turn/start') {
      turns++
      openTurn = true
    } else if (event.type === 'turn/end') {
      lastStatus = event.data.reason.kind
      openTurn = false
    }
  }
  return { turns, events: events.length, lastStatus, openTurn }
}

/** The route of the last request header in `events`. */
export function lastRoute(events: readonly SessionEvent[]): { provider: string; model: string } | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i]
    if (event.type === 'request/header') return event.data.header.config
  }
  return undefined
}
