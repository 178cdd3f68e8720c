// `loom run` against a loopback server that speaks DeepSeek's protocol: thinking
// mode through a tool loop, retries said on the terminal, run limits, the
// provider's cache figures in the footer and in `sessions stats`, priced by
// provider and model.
import { afterEach, describe, expect, it } from 'vitest'
import { REASONING_REQUIRED, startMockServer, type Behaviour, type MockServer } from '../../../plugins/llm-openai/tests/mock-server.ts'
import { events, loom, project, sessionFiles } from './helpers.ts'

let servers: MockServer[] = []
afterEach(async () => {
  await Promise.all(servers.map(server => server.close()))
  servers = []
})

async function deepseek(script: Behaviour[]) {
  const server = await startMockServer(script, { requireReasoningContent: true })
  servers.push(server)
  const { cwd, home } = project({ 'notes.txt': 'alpha\n' })
  const env = { DEEPSEEK_API_KEY: 'sk-test-key', DEEPSEEK_BASE_URL: server.url }
  return { server, cwd, home, env, run: (args: string[]) => loom(args, { cwd, home, env }) }
}

const readNotes = (id: string): Behaviour => ({
  type: 'tool_call',
  reasoning: 'The notes file has the answer.',
  calls: [{ id, name: 'read', arguments: '{"path":"notes.txt"}' }],
  usage: { prompt: 1000, completion: 20, cacheHit: 0 },
})

describe('DeepSeek thinking mode through the CLI', () => {
  it('a tool loop completes; --show-reasoning prints the reasoning; sessions show has it', async () => {
    const { server, run, home } = await deepseek([
      readNotes('c1'),
      { type: 'success', reasoning: 'It says alpha.', text: 'The notes say alpha.', usage: { prompt: 1100, completion: 10, cacheHit: 1000 } },
    ])
    const result = await run(['run', '--show-reasoning', 'what do the notes say?'])
    expect(result.stderr).not.toContain(REASONING_REQUIRED)
    expect(result.code).toBe(0)
    expect(server.requests).toHaveLength(2)
    expect(result.stdout).toContain('The notes file has the answer.')
    expect(result.stdout).toContain('The notes say alpha.')
    // The footer: the provider's cache figures and the estimated cost.
    expect(result.stderr).toMatch(/2100 in \(1000 cached, 48%\) \/ 30 out tokens · ~\$0\.\d{4}/)

    const [file] = sessionFiles(home)
    const id = file.split('/').at(-2)!
    const shown = await loom(['sessions', 'show', id], { cwd: home, home })
    expect(shown.stdout).toContain('reasoning:')
    expect(shown.stdout).toContain('┊ The notes file has the answer.')

    const stats = await loom(['sessions', 'stats', id, '--json'], { cwd: home, home })
    const report = JSON.parse(stats.stdout)
    expect(report.totals.reported).toMatchObject({ requests: 2, inputTokens: 2100, hitTokens: 1000 })
    expect(report.requests[1].reported.hitShare).toBeCloseTo(1000 / 1100)
    expect(report.prices).toEqual({ hit: 0.006, miss: 0.3, output: 1.2 })
  })

  it('without --show-reasoning the reasoning is not printed; --thinking off sends effort off', async () => {
    const { server, run } = await deepseek([{ type: 'success', reasoning: 'secret musings', text: 'Hi.' }])
    const result = await run(['run', '--thinking', 'off', 'hi'])
    expect(result.code).toBe(0)
    expect(result.stdout).not.toContain('secret musings')
    expect(server.requests[0].body.thinking).toEqual({ type: 'disabled' })
  })

  it('an effort the route does not offer fails before any request', async () => {
    const { server, run } = await deepseek([])
    const result = await run(['run', '--reasoning-effort', 'extreme', 'hi'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('does not offer reasoning effort "extreme"')
    expect(server.requests).toHaveLength(0)
  })
})

describe('retries and limits through the CLI', () => {
  it('a 429 and a reset mid-stream are retried, and the terminal says so', async () => {
    const { server, run } = await deepseek([
      { type: 'rate_limit', retryAfter: null, retryAfterMs: 100 },
      'reset_mid_stream',
      { type: 'success', reasoning: null, text: 'Recovered answer.' },
    ])
    const result = await run(['run', 'hi'])
    expect(result.code).toBe(0)
    expect(server.requests).toHaveLength(3)
    expect(result.stdout).toContain('retrying in 100 ms: deepseek: HTTP 429: Rate limit reached for requests (retry 1 of 5)')
    expect(result.stdout).toMatch(/\(that partial answer is discarded\) retrying in [\d.]+ m?s: deepseek: connection failed: .* \(retry 2 of 5\)/)
    expect(result.stdout).toContain('Recovered answer.')
  })

  it('a baseUrl that cannot be reached (port 1) is retried once, not five times, and the turn says why', async () => {
    const { cwd, home } = project()
    const result = await loom(['run', 'hi'], { cwd, home, env: { DEEPSEEK_API_KEY: 'sk-test-key', DEEPSEEK_BASE_URL: 'http://127.0.0.1:1' } })
    expect(result.code).toBe(1)
    expect(result.stdout.match(/retrying in/g)).toHaveLength(1)
    expect(result.stdout).toContain('deepseek: cannot reach http://127.0.0.1:1: fetch does not connect to that port')
    expect(result.stdout).toContain('(retry 1 of 1)')
    expect(result.stderr).toContain(
      "loom: the turn ended: error: UNREACHABLE: deepseek: cannot reach http://127.0.0.1:1: fetch does not connect to that port (a blocked port: use another one); check the route's baseUrl",
    )
    const log = events(sessionFiles(home)[0])
    expect(log.filter(event => event.type === 'request/retry').map(event => event.data.maxRetries)).toEqual([1])
  })

  it('a failed tool call reaches the model as `Error: …` once', async () => {
    const { server, run } = await deepseek([
      {
        type: 'tool_call',
        reasoning: 'Read it.',
        calls: [{ id: 'c1', name: 'read', arguments: '{"path":"missing.txt"}' }],
        usage: { prompt: 100, completion: 5, cacheHit: 0 },
      },
      { type: 'success', reasoning: null, text: 'It is missing.' },
    ])
    const result = await run(['run', 'read missing.txt'])
    expect(result.code).toBe(0)
    const tool = server.requests[1].body.messages.find((message: { role: string }) => message.role === 'tool')
    expect(tool.content).toMatch(/^Error: (?!Error)/)
    expect(tool.content).toContain('missing.txt')
  })

  it('a 401 is not retried: one message naming the route, the variable and the provider text', async () => {
    const { server, run } = await deepseek(['auth_error'])
    const result = await run(['run', 'hi'])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(1)
    expect(result.stderr).toContain('deepseek: HTTP 401: Authentication Fails, Your api key is invalid (route "deepseek": check DEEPSEEK_API_KEY)')
    expect(result.stderr).not.toContain('sk-test-key')
  })

  it('--max-steps stops a model that keeps calling tools: exit 1, the reason in the log', async () => {
    const { server, run, home } = await deepseek([readNotes('c1'), readNotes('c2'), readNotes('c3'), readNotes('c4')])
    const result = await run(['run', '--max-steps', '2', 'loop'])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(2)
    expect(result.stderr).toContain('loom: the turn ended: stopped at the limit of 2 model requests per turn (--max-steps)')
    const end = events(sessionFiles(home)[0])
      .filter(event => event.type === 'turn/end')
      .at(-1)!
    expect(end.data.reason).toEqual({ kind: 'limit', limit: 'max-steps', used: 2, max: 2 })
  })

  it('--max-cost stops the turn once the reported usage costs that much', async () => {
    const { server, run } = await deepseek([readNotes('c1'), readNotes('c2'), readNotes('c3')])
    // 1000 uncached input tokens at $0.30 per million: $0.0003 a request.
    const result = await run(['run', '--max-cost', '0.0005', 'loop'])
    expect(result.code).toBe(1)
    expect(server.requests).toHaveLength(2)
    expect(result.stderr).toContain('stopped at the limit of $0.0005 per turn')
  })

  it('a model with no known price: the footer says so, stats have no cost, and --max-cost is refused before any request', async () => {
    const { server, run, home } = await deepseek([{ type: 'success', reasoning: null, text: 'Hi.', usage: { prompt: 1000, completion: 10, cacheHit: 0 } }])
    const result = await run(['run', '--model', 'deepseek-next', 'hi'])
    expect(result.code).toBe(0)
    expect(result.stderr).toMatch(/deepseek\/deepseek-next · 1000 in \(0 cached, 0%\) \/ 10 out tokens · unknown price\n/)
    const id = sessionFiles(home)[0].split('/').at(-2)!
    const stats = await loom(['sessions', 'stats', id], { cwd: home, home })
    expect(stats.stdout).toContain('unknown price: this model has no built-in list price')
    expect(stats.stdout).toContain('estimated cost: unknown price')
    const report = JSON.parse((await loom(['sessions', 'stats', id, '--json'], { cwd: home, home })).stdout)
    expect(report.prices).toBeNull()
    expect(report.totals).toMatchObject({ inputCost: null, reported: { inputTokens: 1000, inputCost: null } })

    const limited = await run(['run', '--model', 'deepseek-next', '--max-cost', '1', 'hi'])
    expect(limited.code).toBe(2)
    expect(limited.stderr).toContain("--max-cost: deepseek/deepseek-next has no known price: set one in the runner row's prices")
    expect(server.requests).toHaveLength(1)
  })

  it('a bad limit is a usage error', async () => {
    const { run } = await deepseek([])
    const result = await run(['run', '--max-steps', '0', 'hi'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--max-steps: expected a whole number >= 1, got "0"')
  })
})

describe('the anthropic route', () => {
  it('ANTHROPIC_API_KEY selects it; a tool loop with signed thinking completes', async () => {
    const { startMockServer: startAnthropic } = await import('../../../plugins/llm-anthropic/tests/mock-server.ts')
    const server = await startAnthropic(
      [
        {
          type: 'message',
          blocks: [
            { type: 'thinking', thinking: 'Read the notes.' },
            { type: 'tool_use', id: 'tu_1', name: 'read', input: { path: 'notes.txt' } },
          ],
          stopReason: 'tool_use',
          usage: { input: 900, output: 30, cacheRead: 0, cacheWrite: 800 },
        },
        {
          type: 'message',
          blocks: [{ type: 'text', text: 'The notes say alpha.' }],
          stopReason: 'end_turn',
          usage: { input: 50, output: 10, cacheRead: 800, cacheWrite: 100 },
        },
      ],
      { apiKey: 'sk-ant-cli' },
    )
    servers.push(server as unknown as MockServer)
    const { cwd, home } = project({ 'notes.txt': 'alpha\n' })
    const result = await loom(['run', 'what do the notes say?'], { cwd, home, env: { ANTHROPIC_API_KEY: 'sk-ant-cli', ANTHROPIC_BASE_URL: server.url } })
    expect(result.stderr).toContain('anthropic/claude-sonnet-5-5')
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('The notes say alpha.')
    expect(server.requests.map(request => request.outcome)).toEqual(['message', 'message'])
    // Input, cache writes and reads: 900 + 800, then 50 + 100 + 800 read from the cache.
    expect(result.stderr).toMatch(/2650 in \(800 cached, 30%\)/)
    // At Claude Sonnet 5.5's list prices ($2 input, $2.50 cache write, $0.10 cache read, $10 output per million):
    // 950 × 2 + 900 × 2.5 + 800 × 0.1 + 40 × 10 = 4630 millionths of a dollar.
    expect(result.stderr).toContain('2650 in (800 cached, 30%) / 40 out tokens · ~$0.0046\n')

    const [file] = sessionFiles(home)
    const stats = JSON.parse((await loom(['sessions', 'stats', file.split('/').at(-2)!, '--json'], { cwd, home })).stdout)
    expect(stats.prices).toEqual({ hit: 0.1, miss: 2, output: 10, write: 2.5 })
    expect(stats.totals.reported).toMatchObject({ requests: 2, inputTokens: 2650, hitTokens: 800, writeTokens: 900 })
    expect(stats.totals.reported.inputCost).toBeCloseTo((950 * 2 + 900 * 2.5 + 800 * 0.1) / 1e6, 12)
    expect(stats.totals.reported.outputCost).toBeCloseTo((40 * 10) / 1e6, 12)
  })

  it('without the key, --provider anthropic names the variable', async () => {
    const { cwd, home } = project()
    const result = await loom(['run', '--provider', 'anthropic', 'hi'], { cwd, home })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('provider "anthropic" is not served by this deployment (available: scripted); set ANTHROPIC_API_KEY to enable it')
  })
})
