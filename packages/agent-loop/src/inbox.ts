import { freezeMessage, type UserMessage } from '@loom/llm'
import type { Session, SessionEventMap } from '@loom/session'

export type InboxTarget = 'next-turn' | 'next-step'
type Splice = SessionEventMap['agent/inbox/spliced']

export interface InboxNotify {
  inserted(message: UserMessage): void
  discarded(message: UserMessage): void
  claimed(message: UserMessage, turn: number): void
}

/**
 * Input waiting for the agent: `next-turn` holds prompts (one per turn),
 * `next-step` holds steering and context for the next model step. Every change is
 * written to the session first (`agent/inbox/spliced`), so pending input survives
 * a restart and the in-memory lists can always be rebuilt from the log.
 */
export class Inbox {
  private readonly session: Session
  private readonly notify: InboxNotify
  #lists: Record<InboxTarget, UserMessage[]> = { 'next-turn': [], 'next-step': [] }

  constructor(session: Session, notify: InboxNotify) {
    this.session = session
    this.notify = notify
    const from = session.header.seedLength ?? 0
    for (const event of session.eventsOfType('agent/inbox/spliced', from)) {
      const data = event.data
      try {
        this.#check(data.target, data.start, data.removedCount ?? 0, data.inserted)
      } catch (cause) {
        throw new Error(`invalid persisted inbox splice at session seq ${event.seq}`, { cause })
      }
      this.#lists[data.target].splice(data.start, data.removedCount ?? 0, ...data.inserted)
    }
  }

  get nextTurn(): readonly UserMessage[] {
    return this.#lists['next-turn'].slice()
  }

  get nextStep(): readonly UserMessage[] {
    return this.#lists['next-step'].slice()
  }

  get hasPending(): boolean {
    return this.#lists['next-turn'].length > 0 || this.#lists['next-step'].length > 0
  }

  append(target: InboxTarget, message: UserMessage): void {
    this.splice(target, Infinity, 0, [message])
  }

  prepend(target: InboxTarget, message: UserMessage): void {
    this.splice(target, 0, 0, [message])
  }

  /** Swaps a pending message for another in place; `false` when the id is not pending. */
  replace(id: string, message: UserMessage): boolean {
    for (const target of ['next-turn', 'next-step'] as const) {
      const index = this.#lists[target].findIndex(m => m.id === id)
      if (index !== -1) {
        this.splice(target, index, 1, [message])
        return true
      }
    }
    return false
  }

  remove(id: string): boolean {
    for (const target of ['next-turn', 'next-step'] as const) {
      const index = this.#lists[target].findIndex(m => m.id === id)
      if (index !== -1) {
        this.splice(target, index, 1, [])
        return true
      }
    }
    return false
  }

  /** Discards everything pending (steering first, then prompts). */
  clear(): void {
    if (this.#lists['next-step'].length) this.splice('next-step', 0, Infinity, [])
    if (this.#lists['next-turn'].length) this.splice('next-turn', 0, Infinity, [])
  }

  /** `Array.prototype.splice` coordinates; a removal here counts as canceled input. */
  splice(target: InboxTarget, start: number, deleteCount: number, inserted: readonly UserMessage[]): UserMessage[] {
    return this.#splice(target, start, deleteCount, inserted, true)
  }

  /**
   * Takes the input of the next step: all of `next-step`, then (at a turn
   * boundary) the first prompt of `next-turn`. A pure deletion: nothing is canceled.
   */
  claim(target: InboxTarget, turn: number): UserMessage[] {
    const steps = this.#lists['next-step'].length ? this.#splice('next-step', 0, Infinity, [], false) : []
    const prompt = target === 'next-turn' && this.#lists['next-turn'].length ? this.#splice('next-turn', 0, 1, [], false) : []
    const claimed = [...steps, ...prompt]
    for (const message of claimed) this.notify.claimed(message, turn)
    return claimed
  }

  #splice(target: InboxTarget, rawStart: number, rawDelete: number, rawInserted: readonly UserMessage[], cancels: boolean): UserMessage[] {
    const list = this.#lists[target]
    const length = list.length
    let start = Math.trunc(rawStart) || 0
    start = start < 0 ? Math.max(0, length + start) : Math.min(start, length)
    const deleteCount = Math.min(Math.max(Math.trunc(rawDelete) || 0, 0), length - start)
    if (deleteCount === 0 && rawInserted.length === 0) return []
    const inserted = rawInserted.map(message => freezeMessage(message))
    this.#check(target, start, deleteCount, inserted)

    const data: Splice = {
      target,
      start,
      ...(deleteCount > 0 && { removedCount: deleteCount }),
      inserted,
      ...(cancels && deleteCount > 0 && { outcome: 'canceled' as const }),
    }
    // Durable first: a failed append leaves the inbox as it was.
    this.session.append('agent/inbox/spliced', data)
    const removed = list.splice(start, deleteCount, ...inserted)
    if (cancels) for (const message of removed) this.notify.discarded(message)
    for (const message of inserted) this.notify.inserted(message)
    return removed
  }

  #check(target: InboxTarget, start: number, deleteCount: number, inserted: readonly UserMessage[]) {
    const list = this.#lists[target]
    if (
      !Number.isInteger(start) ||
      start < 0 ||
      start > list.length ||
      !Number.isInteger(deleteCount) ||
      deleteCount < 0 ||
      start + deleteCount > list.length
    ) {
      throw new Error(`invalid inbox splice: start ${start}, removing ${deleteCount} of ${list.length} in ${target}`)
    }
    const removed = new Set(list.slice(start, start + deleteCount).map(m => m.id))
    const pending = new Set([...this.#lists['next-turn'], ...this.#lists['next-step']].map(m => m.id).filter(id => !removed.has(id)))
    for (const message of inserted) {
      if (pending.has(message.id)) throw new Error(`message "${message.id}" is already pending`)
      pending.add(message.id)
    }
  }
}
