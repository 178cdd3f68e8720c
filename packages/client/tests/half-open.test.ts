// A half-open event stream, on a real socket: the server sends a few events and
// then nothing more, not even its heartbeat comments, without closing the
// connection (a host that froze, a proxy that lost the other side). The client
// takes the silence for a dead connection after `heartbeatTimeoutMs` and
// resumes on a new one with Last-Event-ID; a stream that only sends heartbeats
// for longer than that is left alone. The margins are wide (heartbeats 20 times
// as often as the timeout), so a busy machine does not make a live stream look dead.
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { LoomClient, type SessionEvent } from '../src/index.ts'

const event = (seq: number) => `id: ${seq}\ndata: ${JSON.stringify({ type: 'step', seq, time: 1, data: { n: seq } })}\n\n`

let server: Server | undefined
afterEach(async () => {
  server?.closeAllConnections()
  await new Promise(resolve => server?.close(resolve) ?? resolve(undefined))
  server = undefined
})

/** A server whose event stream is `serve(res, lastEventId, connection number)`; resolves with its URL. */
async function listen(serve: (res: ServerResponse, lastEventId: string | undefined, connection: number) => void): Promise<string> {
  let connections = 0
  server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    serve(res, req.headers['last-event-id'] as string | undefined, ++connections)
  })
  await new Promise<void>(resolve => server!.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`
}

/** Reads `events` up to seq `last`, or fails naming what it saw once `deadlineMs` passes. */
async function readTo(events: AsyncGenerator<SessionEvent>, last: number, deadlineMs = 10_000): Promise<number[]> {
  const seen: number[] = []
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no seq ${last} within ${deadlineMs} ms; saw ${JSON.stringify(seen)}`)), deadlineMs)
  })
  try {
    await Promise.race([
      (async () => {
        for await (const next of events) {
          seen.push(next.seq)
          if (next.seq === last) return
        }
      })(),
      deadline,
    ])
  } finally {
    clearTimeout(timer)
    await events.return(undefined)
  }
  return seen
}

describe('a half-open event stream', () => {
  it('is dropped after heartbeatTimeoutMs of silence and resumed with Last-Event-ID: no gap, no duplicate', async () => {
    const resumedAfter: (string | undefined)[] = []
    const url = await listen((res, lastEventId, connection) => {
      resumedAfter.push(lastEventId)
      // The first connection sends two events, then falls silent and stays open.
      if (connection === 1) res.write(`retry: 10\n\n${event(0)}${event(1)}`)
      else res.write(`${event(1)}${event(2)}${event(3)}`)
    })
    const client = new LoomClient({ url, token: 'token', heartbeatTimeoutMs: 1000 })
    expect(await readTo(client.events('s1'), 3)).toEqual([0, 1, 2, 3])
    expect(resumedAfter).toEqual(['-1', '1'])
  })

  it('a stream that only sends heartbeats, for longer than heartbeatTimeoutMs, is alive: no reconnect', async () => {
    let connections = 0
    const url = await listen(res => {
      connections++
      res.write(event(0))
      const beat = setInterval(() => res.write(': heartbeat\n\n'), 100)
      // Heartbeats alone for two and a half timeouts, then the next event.
      const next = setTimeout(() => {
        clearInterval(beat)
        res.write(event(1))
      }, 5000)
      res.on('close', () => {
        clearInterval(beat)
        clearTimeout(next)
      })
    })
    const client = new LoomClient({ url, token: 'token', heartbeatTimeoutMs: 2000 })
    expect(await readTo(client.events('s1'), 1)).toEqual([0, 1])
    expect(connections).toBe(1)
  })

  it('the time the caller spends with an event is not silence', async () => {
    let connections = 0
    const url = await listen(res => {
      connections++
      res.write(event(0))
      // Arrives while the caller is still busy with event 0.
      const later = setTimeout(() => res.write(event(1)), 1000)
      res.on('close', () => clearTimeout(later))
    })
    const client = new LoomClient({ url, token: 'token', heartbeatTimeoutMs: 500 })
    const events = client.events('s1')
    expect((await events.next()).value?.seq).toBe(0)
    await new Promise(resolve => setTimeout(resolve, 1500))
    expect((await events.next()).value?.seq).toBe(1)
    await events.return(undefined)
    expect(connections).toBe(1)
  })
})
