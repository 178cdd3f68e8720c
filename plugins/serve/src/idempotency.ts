// Idempotency keys: a client that retries a write with the same
// `Idempotency-Key` gets the first answer, and the write happens once. The
// answer is kept where it is cheapest and where it survives:
//   * in memory (`Answers`), for a retry that reaches the same host, including
//     one that arrives while the first request still runs;
//   * in the session's log, durably: the message a keyed request appends gets an
//     id made of the key's hash and the body's, so a retry on any host, after a
//     crash too, finds it by reading the session. A keyed new session gets an id
//     derived from the key, so a retry finds the session itself.
// A key is scoped (to a session for messages, to the project for new sessions)
// and lives `ttlMs`; the same key with another body is refused (422).
import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { SessionEvent } from '@loom/session'
import { ApiError } from './http.ts'

/** How long a key is honoured unless configured otherwise: a day. */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000

/** A key as a client may send it: visible ASCII, at most 255 characters (as common practice has it). */
const KEY = /^[\x21-\x7e]{1,255}$/

/** The request's `Idempotency-Key`, if any; 400 for one that cannot be a key. */
export function idempotencyKey(req: IncomingMessage): string | undefined {
  const raw = req.headers['idempotency-key']
  if (raw === undefined) return undefined
  if (typeof raw !== 'string' || !KEY.test(raw)) {
    throw new ApiError(400, 'INVALID_REQUEST', 'header "Idempotency-Key" must be 1 to 255 visible ASCII characters (a UUID, say)', {
      details: { field: 'Idempotency-Key' },
    })
  }
  return raw
}

/** A keyed request: its key's hash within its scope, and its body's. */
export interface Keyed {
  /** What `Answers` files it under. */
  slot: string
  /** 32 hex digits of the scoped key. */
  key: string
  /** 16 hex digits of the request's body, as the handler normalized it. */
  body: string
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

export function keyed(scope: string, key: string, body: unknown): Keyed {
  const hash = sha256(`${scope}\n${key}`).slice(0, 32)
  return { slot: `${scope}\n${hash}`, key: hash, body: sha256(JSON.stringify(body)).slice(0, 16) }
}

/** The id of the message a keyed request appends: found again by its key, checked by its body. */
export const keyedMessageId = (request: Keyed) => `idem-${request.key}-${request.body}`

/** The id of a session a keyed `POST /v1/sessions` creates. */
export const keyedSessionId = (request: Keyed) => `k${request.key.slice(0, 24)}`

/** The seq of the inbox event that added the keyed message within the key's lifetime, and the body it had; undefined when none did. */
export function findKeyed(events: readonly SessionEvent[], request: Keyed, notBefore: number): { seq: number; body: string } | undefined {
  const prefix = `idem-${request.key}-`
  // Newest first, and only as far back as a key lives.
  for (let i = events.length - 1; i >= 0 && events[i].time >= notBefore; i--) {
    const event = events[i]
    if (event.type !== 'agent/inbox/spliced') continue
    const message = event.data.inserted.find(inserted => inserted.id.startsWith(prefix))
    if (message) return { seq: event.seq, body: message.id.slice(prefix.length) }
  }
  return undefined
}

export function mismatch(): ApiError {
  return new ApiError(
    422,
    'IDEMPOTENCY_MISMATCH',
    'this Idempotency-Key was used with another request body; a retry must repeat the first request exactly (or use a new key)',
    { details: { field: 'Idempotency-Key' } },
  )
}

/**
 * The answers of keyed requests on this host, for `ttlMs`, at most `max` of
 * them (the oldest go first). A request that failed leaves nothing: an error
 * means not accepted, and its retry runs again.
 */
export class Answers {
  private readonly entries = new Map<string, { body: string; answer: Promise<unknown>; at: number }>()
  private readonly ttlMs: number
  private readonly max: number

  constructor(ttlMs: number, max = 10_000) {
    this.ttlMs = ttlMs
    this.max = max
  }

  /** The first answer for `request` (awaited if it is still running), else `produce()`'s, kept. */
  once<T>(request: Keyed, produce: () => Promise<T>): Promise<T> {
    const now = Date.now()
    const known = this.entries.get(request.slot)
    if (known && now - known.at < this.ttlMs) {
      if (known.body !== request.body) return Promise.reject(mismatch())
      return known.answer as Promise<T>
    }
    for (const [slot, entry] of this.entries) {
      if (now - entry.at < this.ttlMs && this.entries.size < this.max) break
      this.entries.delete(slot)
    }
    const answer = produce()
    const entry = { body: request.body, answer, at: now }
    this.entries.set(request.slot, entry)
    answer.catch(() => {
      if (this.entries.get(request.slot) === entry) this.entries.delete(request.slot)
    })
    return answer
  }

  /** When a key seen now was first used, at the earliest, to still count. */
  notBefore(): number {
    return Date.now() - this.ttlMs
  }
}
