// The server's parts on their own: the token rules, the bearer check, where an
// event stream resumes, and the SSE framing with its heartbeat. The endpoints
// are tested through `loom serve` (apps/cli/tests/serve*.test.ts).
import { EventEmitter } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { bearerCheck, loadToken } from '../src/auth.ts'
import { ApiError, Router } from '../src/http.ts'
import { EventStream, resumeAfter } from '../src/sse.ts'

describe('tokens', () => {
  it('come from the file (line breaks dropped) before the variable; missing, short or spaced ones are refused without printing them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'loom-serve-token-'))
    writeFileSync(join(dir, 'token'), 'file-token-0123456789\n')
    expect(loadToken({ file: join(dir, 'token'), env: { LOOM_SERVE_TOKEN: 'env-token-0123456789' } })).toBe('file-token-0123456789')
    expect(loadToken({ env: { LOOM_SERVE_TOKEN: 'env-token-0123456789' } })).toBe('env-token-0123456789')
    expect(() => loadToken({ env: {} })).toThrow('no bearer token: set LOOM_SERVE_TOKEN or pass --token-file FILE')
    expect(() => loadToken({ env: { LOOM_SERVE_TOKEN: '   ' } })).toThrow('$LOOM_SERVE_TOKEN is empty')
    expect(() => loadToken({ env: { LOOM_SERVE_TOKEN: 'short-secret' } })).toThrow('is 12 characters long; use at least 16')
    expect(() => loadToken({ env: { LOOM_SERVE_TOKEN: 'two words 0123456789' } })).toThrow('whitespace inside the token')
    expect(() => loadToken({ file: join(dir, 'missing') })).toThrow(`cannot read the token file ${join(dir, 'missing')}: ENOENT`)
  })

  it('the bearer check takes exactly `Bearer <token>`', () => {
    const check = bearerCheck('a-token-of-20-chars!')
    expect(check('Bearer a-token-of-20-chars!')).toBe(true)
    expect(check('bearer a-token-of-20-chars!')).toBe(true)
    for (const header of [
      undefined,
      '',
      'Bearer',
      'Bearer a-token-of-20-chars',
      'Bearer a-token-of-20-chars!!',
      'Basic a-token-of-20-chars!',
      'a-token-of-20-chars!',
    ]) {
      expect(check(header), String(header)).toBe(false)
    }
  })
})

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage

describe('where a stream resumes', () => {
  it('after Last-Event-ID, else after ?after=, else from the start; anything else is a 400 naming the source', () => {
    const url = (query = '') => new URL(`http://x/v1/sessions/s/events${query}`)
    expect(resumeAfter(request({}), url())).toBe(-1)
    expect(resumeAfter(request({}), url('?after=7'))).toBe(7)
    expect(resumeAfter(request({ 'last-event-id': '12' }), url('?after=7'))).toBe(12)
    expect(resumeAfter(request({ 'last-event-id': ' ' }), url('?after=3'))).toBe(3)
    for (const [headers, query, field] of [
      [{ 'last-event-id': 'abc' }, '', 'Last-Event-ID'],
      [{}, '?after=-2', 'after'],
      [{}, '?after=1.5', 'after'],
    ] as const) {
      const error = (() => {
        try {
          resumeAfter(request(headers), url(query))
        } catch (caught) {
          return caught as ApiError
        }
      })()
      expect(error).toBeInstanceOf(ApiError)
      expect([error!.status, error!.details?.field]).toEqual([400, field])
    }
  })
})

describe('the event stream', () => {
  it('frames each event with its seq as id, sends heartbeats, and stops writing once closed', async () => {
    const written: string[] = []
    const res = Object.assign(new EventEmitter(), {
      writableEnded: false,
      head: undefined as unknown,
      writeHead(status: number, headers: unknown) {
        this.head = [status, headers]
      },
      write(text: string) {
        written.push(text)
      },
      end() {
        this.writableEnded = true
      },
    })
    const stream = new EventStream(res as unknown as ServerResponse, { heartbeatMs: 100, retryMs: 1500 })
    expect(res.head).toEqual([200, expect.objectContaining({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store' })])
    stream.send(4, { seq: 4, type: 'turn/start', data: { turn: 1, text: 'two\nlines' } })
    await new Promise(resolve => setTimeout(resolve, 250))
    expect(written[0]).toBe('retry: 1500\n\n')
    expect(written[1]).toBe('id: 4\ndata: {"seq":4,"type":"turn/start","data":{"turn":1,"text":"two\\nlines"}}\n\n')
    expect(written.slice(2)).toContain(': heartbeat\n\n')
    res.emit('close')
    const count = written.length
    stream.send(5, {})
    await new Promise(resolve => setTimeout(resolve, 150))
    expect(written.length).toBe(count)
    expect(stream.open).toBe(false)
  })

  it('writes a batch of events as one chunk, one message per event', () => {
    const written: string[] = []
    const res = Object.assign(new EventEmitter(), {
      writableEnded: false,
      writeHead() {},
      write(text: string) {
        written.push(text)
      },
      end() {
        this.writableEnded = true
      },
    })
    const stream = new EventStream(res as unknown as ServerResponse, { heartbeatMs: 60_000, retryMs: 1000 })
    const events = [
      { seq: 7, type: 'step/end' },
      { seq: 8, type: 'turn/end' },
    ]
    stream.sendEvents(events)
    stream.sendEvents([])
    expect(written.slice(1)).toEqual(['id: 7\ndata: {"seq":7,"type":"step/end"}\n\nid: 8\ndata: {"seq":8,"type":"turn/end"}\n\n'])
    stream.end()
  })
})

describe('routes', () => {
  it('match by segment with decoded parameters; a known path with another method is 405 with Allow, an unknown one 404', async () => {
    const router = new Router().add('GET', '/v1/sessions/:id', async () => {}).add('POST', '/v1/sessions/:id/cancel', async () => {})
    expect(router.match('GET', '/v1/sessions/a%20b').params).toEqual({ id: 'a b' })
    expect(() => router.match('DELETE', '/v1/sessions/x')).toThrow(expect.objectContaining({ status: 405, headers: { allow: 'GET' } }))
    expect(() => router.match('GET', '/v1/sessions/x/y')).toThrow(expect.objectContaining({ status: 404, code: 'NOT_FOUND' }))
  })
})
