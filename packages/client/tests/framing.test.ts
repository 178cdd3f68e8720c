// What a real server does not readily produce, on a fetch double: a stream
// framed with CRLF and cut mid-line between chunks, a reconnect that overlaps
// what was already yielded, and retries that are bounded and keep their key.
// The client against a real `loom serve`: client.test.ts.
import { describe, expect, it } from 'vitest'
import { LoomApiError, LoomClient, LoomConnectionError, type SessionEvent } from '../src/index.ts'

const event = (seq: number) => JSON.stringify({ type: 'step', seq, time: 1, data: { n: seq } })

/** A 200 event stream whose body is `chunks`, as they would arrive. */
const stream = (chunks: string[]) =>
  new Response(
    new ReadableStream({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk))
        controller.close()
      },
    }),
    { headers: { 'content-type': 'text/event-stream' } },
  )

describe('LoomClient on a fetch double', () => {
  it('events: CRLF framing split across chunks, comments skipped; a reconnect resumes after the last seq and drops what overlaps', async () => {
    const resumedAfter: (string | null)[] = []
    const bodies = [
      ['retry: 5\r\n\r\nid: 0\r\ndata: ', `${event(0)}\r`, `\n\r\n: heartbeat\n\nid: 1\ndata: ${event(1).slice(0, 9)}`, `${event(1).slice(9)}\n\n`],
      [`id: 1\ndata: ${event(1)}\n\nid: 2\ndata: ${event(2)}\n\n`],
    ]
    const client = new LoomClient({
      url: 'http://loom.invalid/',
      token: 'token',
      fetch: async (_input, init) => {
        resumedAfter.push(new Headers(init?.headers).get('last-event-id'))
        return stream(bodies.shift() ?? [])
      },
    })
    const seen: SessionEvent[] = []
    for await (const next of client.events('s1')) {
      seen.push(next)
      if (next.seq === 2) break
    }
    expect(seen.map(event => event.seq)).toEqual([0, 1, 2])
    expect(seen[1].data).toEqual({ n: 1 })
    expect(resumedAfter).toEqual(['-1', '1'])
  })

  it('events: a stream that brings nothing is retried `retries` times, then a LoomConnectionError names the session and seq', async () => {
    let connections = 0
    const client = new LoomClient({
      url: 'http://loom.invalid',
      token: 'token',
      retries: 2,
      fetch: async () => {
        connections++
        return stream(['retry: 0\n\n'])
      },
    })
    const error = await client
      .events('s1', { from: 5 })
      .next()
      .catch(error => error)
    expect(error).toBeInstanceOf(LoomConnectionError)
    expect(error.message).toBe('the event stream of session "s1" could not be resumed after seq 4 (3 attempts)')
    expect(connections).toBe(3)
  })

  it('a 503 with Retry-After is sent again under the same key, `retries` times; a 400 is not sent again', async () => {
    const keys: (string | null)[] = []
    const client = new LoomClient({
      url: 'http://loom.invalid',
      token: 'token',
      fetch: async (_input, init) => {
        const body = JSON.parse(String(init?.body))
        keys.push(new Headers(init?.headers).get('idempotency-key'))
        return body.text === 'bad'
          ? Response.json({ error: { code: 'INVALID_REQUEST', message: 'no', field: 'text' } }, { status: 400 })
          : Response.json({ error: { code: 'STORE_UNAVAILABLE', message: 'down' } }, { status: 503, headers: { 'retry-after': '0' } })
      },
    })
    const unavailable = await client.sendMessage('s1', 'hi').catch(error => error)
    expect(unavailable).toBeInstanceOf(LoomApiError)
    expect(unavailable).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE', retryAfter: 0 })
    expect(keys).toHaveLength(4)
    expect(new Set(keys).size).toBe(1)

    keys.length = 0
    expect(await client.sendMessage('s1', 'bad').catch(error => error)).toMatchObject({ status: 400, field: 'text' })
    expect(keys).toHaveLength(1)
  })
})
