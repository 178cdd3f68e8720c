// A connection that waiting seldom heals (a refused port, a port fetch blocks, a
// URL that does not parse) fails as UNREACHABLE, naming the address and what to
// check, and the retry policy tries it once more at most; a reset stays NETWORK,
// retried as before.
import { createServer, type Server } from 'node:net'
import { describe, expect, it } from 'vitest'
import { DEFAULT_RETRY_POLICY, fetchEventStream, LlmError, maxRetriesOf, retryDelay, type ResolvedRetryPolicy } from '@loom/llm'

/** The first error of one request to `url`. */
async function failure(url: string): Promise<LlmError> {
  const events = fetchEventStream({
    provider: 'deepseek',
    url,
    headers: {},
    body: '{}',
    idleTimeoutMs: 30_000,
    httpError: status => new LlmError(`HTTP ${status}`, 'SERVER', { status }),
  })
  try {
    for await (const _ of events) {
    }
  } catch (error) {
    if (error instanceof LlmError) return error
    throw error
  }
  throw new Error(`${url}: no error`)
}

const listen = (server: Server) => new Promise<number>(resolve => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)))
const close = (server: Server) => new Promise(resolve => server.close(resolve))

describe('a connection that cannot be made', () => {
  it('a closed port: UNREACHABLE, naming the address, ECONNREFUSED and the baseUrl to check', async () => {
    const server = createServer()
    const port = await listen(server)
    await close(server)
    const error = await failure(`http://127.0.0.1:${port}/v1/chat/completions?key=secret`)
    expect(error.code).toBe('UNREACHABLE')
    expect(error.message).toBe(
      `deepseek: cannot reach http://127.0.0.1:${port}: connection refused (ECONNREFUSED): is the server running on that port?; check the route's baseUrl`,
    )
  })

  it('port 1, which fetch never connects to, and a URL that does not parse: UNREACHABLE, saying why', async () => {
    const blocked = await failure('http://127.0.0.1:1/v1/chat/completions')
    expect([blocked.code, blocked.message]).toEqual([
      'UNREACHABLE',
      "deepseek: cannot reach http://127.0.0.1:1: fetch does not connect to that port (a blocked port: use another one); check the route's baseUrl",
    ])
    const typo = await failure('htp//api.example.com/v1')
    expect([typo.code, typo.message]).toEqual(['UNREACHABLE', `deepseek: cannot reach "htp//api.example.com/v1": not a valid URL; check the route's baseUrl`])
  })

  it('a connection reset by the server stays NETWORK (it may heal)', async () => {
    const server = createServer(socket => socket.destroy())
    const port = await listen(server)
    try {
      const error = await failure(`http://127.0.0.1:${port}/v1`)
      expect(error.code).toBe('NETWORK')
    } finally {
      await close(server)
    }
  })
})

describe('the retry policy', () => {
  const policy = DEFAULT_RETRY_POLICY as ResolvedRetryPolicy & { mode: 'normal' }
  const unreachable = { code: 'UNREACHABLE', message: 'deepseek: cannot reach …' }
  const reset = { code: 'NETWORK', message: 'deepseek: connection failed: reset' }

  it('retries UNREACHABLE once, NETWORK up to maxRetries', () => {
    expect(policy.retryableCodes).toContain('UNREACHABLE')
    expect(retryDelay(policy, unreachable, 0, 0, () => 0.5)).toBe(500)
    expect(retryDelay(policy, unreachable, 1, 500, () => 0.5)).toBeUndefined()
    expect(maxRetriesOf(policy, unreachable)).toBe(1)
    expect(retryDelay(policy, reset, 1, 500, () => 0.5)).toBe(1000)
    expect(retryDelay(policy, reset, 4, 7500, () => 0.5)).toBe(8000)
    expect(maxRetriesOf(policy, reset)).toBe(5)
    // A route that allows no retries retries neither.
    expect(retryDelay({ ...policy, maxRetries: 0 }, unreachable, 0, 0)).toBeUndefined()
  })
})
