import { Worker } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { REDACTED, hostRedactor, redact, redactDeep } from '../src/index.ts'

const KEY = 'sk-test-0123456789abcdef'
const TOKEN = 'ghp_0123456789abcdefghij'

describe('redact', () => {
  it('replaces every occurrence of every known secret', () => {
    expect(redact(`a ${KEY} b ${TOKEN} c ${KEY}`, [KEY, TOKEN])).toBe(`a ${REDACTED} b ${REDACTED} c ${REDACTED}`)
  })

  it('replaces a secret that contains another one whole', () => {
    expect(redact('x=abcdefgh12345678', ['abcdefgh', 'abcdefgh12345678'])).toBe(`x=${REDACTED}`)
  })

  it('treats secrets as literal text, not patterns', () => {
    expect(redact('a.b*c+d?(e) and aXb', ['a.b*c+d?(e)'])).toBe(`${REDACTED} and aXb`)
  })

  it('leaves text without secrets unchanged', () => {
    const text = 'npm test\n  42 passed\n[exit code: 0]'
    expect(redact(text, [KEY])).toBe(text)
    expect(redact(text, [])).toBe(text)
  })

  it('redacts header and assignment echoes of unknown credentials', () => {
    const cases: Array<[string, string]> = [
      ['> Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig', `> Authorization: Bearer ${REDACTED}`],
      ['authorization: basic dXNlcjpwYXNzd29yZA==', `authorization: basic ${REDACTED}`],
      ['Proxy-Authorization: Basic dXNlcjpwYXNz', `Proxy-Authorization: Basic ${REDACTED}`],
      ['{"Authorization":"Bearer abc123def456"}', `{"Authorization":"Bearer ${REDACTED}"}`],
      ['x-api-key: abcd1234efgh5678', `x-api-key: ${REDACTED}`],
      ['api-key: abcd1234efgh5678', `api-key: ${REDACTED}`],
      ['OPENAI_API_KEY=sk-proj-99999999', `OPENAI_API_KEY=${REDACTED}`],
      ['GITHUB_TOKEN=ghp_1234567890', `GITHUB_TOKEN=${REDACTED}`],
      ['"password": "hunter2hunter2"', `"password": "${REDACTED}"`],
      ['GET /v1?api_key=abc&x=1', `GET /v1?api_key=${REDACTED}&x=1`],
      ['postgres://app:pw-secret@db/app', `postgres://app:${REDACTED}@db/app`],
    ]
    for (const [text, expected] of cases) expect(redact(text, [])).toBe(expected)
  })

  it('leaves code that merely names credentials alone', () => {
    for (const text of [
      'password: string',
      'const token = getToken()',
      'headers: { Authorization: `Bearer ${token}` }',
      'apiKey: process.env.OPENAI_API_KEY,',
      'Bearer authentication is described in RFC 6750',
      'url = `https://user:${pass}@host`',
      'max_tokens: 4096',
    ])
      expect(redact(text, [])).toBe(text)
  })

  it('with headCut, redacts the end of a secret that starts a cut text', () => {
    expect(redact('89abcdef rest', [KEY], { headCut: true })).toBe(`${REDACTED} rest`)
    expect(redact('89abcdef rest', [KEY])).toBe('89abcdef rest')
    // Fewer than 4 characters are not taken for a fragment.
    expect(redact('def rest', [KEY], { headCut: true })).toBe('def rest')
  })

  it('with tailCut, redacts the start of a secret that ends a cut text', () => {
    expect(redact('rest sk-test-01', [KEY], { tailCut: true })).toBe(`rest ${REDACTED}`)
    expect(redact('rest sk-test-01', [KEY])).toBe('rest sk-test-01')
    expect(redact('rest sk-', [KEY], { tailCut: true })).toBe('rest sk-')
  })

  // A redactor runs on every tool output: a pattern that backtracks over the text (quadratic or worse) would hold
  // the host for minutes on one large output. Each input is 8 MB: a linear scan takes well under a second even on a
  // loaded machine, a quadratic one hours, so the deadline of the worker tells them apart without timing anything.
  it('is linear in the text: 8 MB of output and of repeated credential contexts, with many secrets', { timeout: 180_000 }, async () => {
    const secrets = Array.from({ length: 30 }, (_, i) => `secret-value-${i}-${'x'.repeat(20)}`)
    const line = 'ordinary build output: compiling module 42 of 97, Authorization: none, ok\n'
    const output = `${line.repeat((8 * 1024 * 1024) / line.length)}${secrets[7]}\n`
    const redacted = await redactInWorker(secrets, output)
    expect(redacted.endsWith(`${REDACTED}\n`)).toBe(true)
    expect(redacted.length).toBe(output.length - secrets[7].length + REDACTED.length)

    // A context with no credential after it, over and over: each alternative of the patterns, and a private key.
    for (const context of [
      'Authorization: Bearer ',
      'bearer ',
      'password: ',
      'token=',
      '"api_key": "',
      'x://u:',
      '?key=',
      'ghp_',
      '-----BEGIN PRIVATE KEY-----',
    ]) {
      const text = context.repeat(Math.ceil((8 * 1024 * 1024) / context.length))
      await expect(redactInWorker(secrets, text), context).resolves.toBeTypeOf('string')
    }
  })
})

/** How long a worker may take for one 8 MB text: a linear scan needs far less, a quadratic one far more. */
const DEADLINE_MS = 60_000

/** `createRedactor(secrets)(text)` in a worker thread, which is terminated if it runs past `DEADLINE_MS`. */
async function redactInWorker(secrets: string[], text: string): Promise<string> {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    import(workerData.module).then(({ createRedactor }) => parentPort.postMessage(createRedactor(workerData.secrets)(workerData.text)))
  `
  const module = new URL('../src/index.ts', import.meta.url).href
  const worker = new Worker(source, { eval: true, workerData: { module, secrets, text } })
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redacting ${text.length} characters starting ${JSON.stringify(text.slice(0, 40))} took over ${DEADLINE_MS} ms: not linear`)),
        DEADLINE_MS,
      )
      worker.once('message', (out: string) => {
        clearTimeout(timer)
        resolve(out)
      })
      worker.once('error', error => {
        clearTimeout(timer)
        reject(error)
      })
    })
  } finally {
    await worker.terminate()
  }
}

describe('redactDeep', () => {
  it('redacts secret-named keys at any depth, and known values in every string', () => {
    const config = {
      provider: 'deepseek',
      apiKey: KEY,
      headers: { Authorization: 'Bearer abc', 'x-trace': 'on' },
      rows: [{ id: 'llm', config: { token: 'short', baseUrl: 'https://api.example.com', note: `uses ${TOKEN}` } }],
      credentials: { user: 'bob', pass: 'hunter2' },
      maxTokens: 4096,
      password: '',
      enabled: true,
    }
    expect(redactDeep(config, [TOKEN])).toEqual({
      provider: 'deepseek',
      apiKey: REDACTED,
      headers: { Authorization: REDACTED, 'x-trace': 'on' },
      rows: [{ id: 'llm', config: { token: REDACTED, baseUrl: 'https://api.example.com', note: `uses ${REDACTED}` } }],
      credentials: { user: REDACTED, pass: REDACTED },
      maxTokens: 4096,
      password: '',
      enabled: true,
    })
    expect(config.apiKey).toBe(KEY)
  })

  it('can leave keys alone or use other key patterns', () => {
    expect(redactDeep({ token: 'abc', note: KEY }, [KEY], { keys: false })).toEqual({ token: 'abc', note: REDACTED })
    expect(redactDeep({ token: 'abc', dsn: 'https://k@sentry' }, [], { keys: ['dsn'] })).toEqual({ token: 'abc', dsn: REDACTED })
  })

  it('keeps non-plain objects and survives cycles', () => {
    const when = new Date(0)
    const node: Record<string, unknown> = { when, name: 'a' }
    node.self = node
    const copy = redactDeep(node)
    expect(copy.when).toBe(when)
    expect(copy.self).toBe('[Circular]')
    expect(redactDeep(KEY, [KEY])).toBe(REDACTED)
  })
})

describe('hostRedactor', () => {
  it('redacts the secret values of the environment as it is now; none, no redactor', () => {
    expect(hostRedactor({ env: { HOME: '/home/x' } })).toBeUndefined()
    const env: Record<string, string> = { MY_SERVICE_TOKEN: 'tok-aaaa-1111' }
    expect(hostRedactor({ env })!('x tok-aaaa-1111 y')).toBe('x [REDACTED] y')
    env.MY_SERVICE_TOKEN = 'tok-bbbb-2222'
    expect(hostRedactor({ env })!('tok-aaaa-1111 tok-bbbb-2222')).toBe('tok-aaaa-1111 [REDACTED]')
    // Values only: a credential recognized by its context stays unless contextual.
    expect(hostRedactor({ env, contextual: false })!('password: "hunter2abc9"')).toBe('password: "hunter2abc9"')
    expect(hostRedactor({ env })!('password: "hunter2abc9"')).toBe('password: "[REDACTED]"')
  })
})
