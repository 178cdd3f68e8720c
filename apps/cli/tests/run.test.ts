// `loom run`: one headless turn, streamed; --json; exit codes; SIGINT; the
// offline demo really calling the tools; a real OpenAI-compatible route.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { boot } from '../src/boot.ts'
import { DEMO_LABEL } from '../src/demo-model.ts'
import { describeUsage } from '../src/present/turn.ts'
import type { RunReport } from '../src/present/turn-view.ts'
import type { Runner } from '../src/runner.ts'
import { ESC, events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

const README = '# Sample project\n\nThis sample project exists to show what the offline demo model does with a README.\n'

/** A model whose tool sleeps ten minutes: only a cancel that stops the tool ends its turn within a test's timeout. */
const STUCK_MODEL = scriptedModel(`
- text: Sleeping.
  toolCalls:
    - { name: bash, arguments: { command: 'sleep 600' } }
- Woke up.
`)

const FAILING_MODEL = scriptedModel(`
- error: { code: QUOTA, message: no balance left }
`)

describe('loom run with the offline demo model', () => {
  it('lists the directory with bash, reads the README, answers from the results, and logs it all', async () => {
    const { cwd, home } = project({ 'README.md': README, 'src/index.ts': 'export {}\n', 'notes.txt': 'hello\n' })
    const run = await loom(['run', 'what is in this directory?'], { cwd, home })
    expect(run.stderr).not.toContain('error')
    expect(run.code).toBe(0)

    // Streamed in order: text, the call, its result, the next call, the answer.
    const out = run.stdout
    const order = ['Let me look at the current directory.', '→ bash: ls -la', '✓', '→ read: README.md', '✓', DEMO_LABEL, 'README.md is titled "Sample project"']
    let at = 0
    for (const piece of order) {
      const found = out.indexOf(piece, at)
      expect(found, `"${piece}" after offset ${at} in:\n${out}`).toBeGreaterThanOrEqual(0)
      at = found + piece.length
    }
    expect(out).toMatch(/- folders: src/)
    expect(out).toMatch(/- files: .*README\.md/)
    expect(out).toContain('notes.txt')
    // Not a TTY: no escape codes, no spinner.
    expect(out).not.toContain(ESC)
    expect(run.stderr).not.toContain(ESC)
    // The offline demo model costs nothing: its footer has the tokens and no price or cost.
    expect(run.stderr).toMatch(/^session \S+ · scripted\/loom-demo · \d+ in \(0 cached, 0%\) \/ \d+ out tokens\n$/m)
    expect(run.stderr).not.toMatch(/price|\$/)

    // The session log holds the real tool calls and their real results.
    const [file] = sessionFiles(home)
    const log = events(file)
    const calls = log.filter(event => event.type === 'tool/call')
    expect(calls.map(call => [call.data.name, JSON.parse(call.data.arguments)])).toEqual([
      ['bash', { command: 'ls -la' }],
      ['read', { path: 'README.md' }],
    ])
    const results = log.filter(event => event.type === 'tool/result').map(event => event.data.message.content[0])
    expect(results.map(result => result.isError ?? false)).toEqual([false, false])
    expect(results[0].content[0].text).toContain('notes.txt')
    expect(results[1].content[0].text).toContain('This sample project exists')
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } })
    expect(readHeader(file).cwd).toBe(cwd)
  })

  it('--json prints the result as data', async () => {
    const { cwd, home } = project({ 'README.md': README })
    const run = await loom(['run', '--json', 'what is in this directory?'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report).toMatchObject({ status: 'completed', reason: null, provider: 'scripted', model: 'loom-demo' })
    expect(report.sessionId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/)
    expect(report.text.startsWith(DEMO_LABEL)).toBe(true)
    expect(report.toolCalls.map((call: { name: string }) => call.name)).toEqual(['bash', 'read'])
    expect(report.toolCalls[0]).toMatchObject({ arguments: { command: 'ls -la' }, isError: false })
    expect(report.toolCalls[0].result).toContain('README.md')
    expect(report.usage.inputTokens).toBeGreaterThan(0)
    expect(report.usage.outputTokens).toBeGreaterThan(0)
    expect(sessionFiles(home).map(file => readHeader(file).id)).toEqual([report.sessionId])
  })

  it('without a README it answers after the listing alone', async () => {
    const { cwd, home } = project({ 'data.csv': 'a,b\n' })
    const run = await loom(['run', '--json', 'what is here?'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report.toolCalls.map((call: { name: string }) => call.name)).toEqual(['bash'])
    expect(report.text).toContain('data.csv')
  })

  it('the minimal bundle runs without tools or persistence', async () => {
    const { cwd, home } = project()
    const run = await loom(['--bundle', 'minimal', 'run', 'hi'], { cwd, home })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('the minimal bundle has no tools')
    expect(sessionFiles(home)).toEqual([])
  })
})

/** A plugin whose runtime context notes every time it is assembled, in `file`. */
const COUNTER = (file: string) => `import { appendFileSync } from 'node:fs'
export const name = 'counter'
export const inject = ['systemPrompt']
export function apply(ctx) {
  ctx.systemPrompt.context({ name: 'counter', order: 300, text: () => { appendFileSync(${JSON.stringify(file)}, 'x'); return 'Counted.' } })
}
`

describe('loom run: one assembly per model request', () => {
  it('a context provider runs once for a turn of one request (the prompt check before the turn is that assembly)', async () => {
    const { cwd, home } = project({ 'loom.yml': '- insert:\n    - id: counter\n      name: ./counter.mjs\n' })
    const file = join(cwd, 'assembled')
    writeFileSync(join(cwd, 'counter.mjs'), COUNTER(file))
    const run = await loom(['--bundle', 'minimal', 'run', 'hi'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(readFileSync(file, 'utf8')).toBe('x')
  })
})

describe('loom run: failures and cancellation', () => {
  it('exits 1 when the turn ends with an error, and says why', async () => {
    const { cwd, home } = project({ 'loom.yml': FAILING_MODEL })
    const run = await loom(['run', 'hi'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('the turn ended: error: QUOTA: no balance left')
    const json = await loom(['run', '--json', 'hi'], { cwd, home })
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'error', reason: { code: 'QUOTA', message: 'no balance left' } })
  })

  it('SIGINT cancels the running turn: the tool is stopped, the log is closed, exit 130', async () => {
    const { cwd, home } = project({ 'loom.yml': STUCK_MODEL })
    const run = await loom(['run', 'sleep please'], {
      cwd,
      home,
      onStart: running => {
        const poll = setInterval(() => {
          if (running.stdout().includes('→ bash: sleep 600')) {
            clearInterval(poll)
            setTimeout(() => running.signal('SIGINT'), 200)
          }
        }, 50)
      },
    })
    expect(run.code).toBe(130)
    expect(run.stderr).toContain('the turn ended: aborted (user)')
    const log = events(sessionFiles(home)[0])
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted', reason: { kind: 'user' } } } })
    const result = log.find(event => event.type === 'tool/result')
    expect(result?.data.message.content[0].isError).toBe(true)
  })

  it("a cancel stops one turn: the runner's next turn (the next task of loom dev) runs", async () => {
    const { cwd } = project()
    const deployment = await boot({ cwd, bundles: ['minimal'], log: () => {} })
    try {
      const runner = deployment.root.get('runner') as Runner
      // A stop signal before the turn starts (while the deployment booted) still stops it.
      runner.cancel()
      const stopped = await runner.run('hi', { cwd })
      expect(stopped).toMatchObject({ reason: { kind: 'aborted', reason: { kind: 'user' } }, cancelled: true })
      const next = await runner.run('hi again', { cwd })
      expect(next).toMatchObject({ reason: { kind: 'completed' }, cancelled: false })
    } finally {
      await deployment.dispose()
    }
  })

  it('an unknown --provider fails before any model call', async () => {
    const { cwd, home } = project()
    const run = await loom(['run', '--provider', 'deepseek', 'hi'], { cwd, home })
    expect(run.code).not.toBe(0)
    expect(run.stderr).toContain('provider "deepseek" is not served by this deployment (available: scripted); set DEEPSEEK_API_KEY to enable it')
    expect(sessionFiles(home)).toEqual([])
  })

  it('run without a task is a usage error', async () => {
    const { cwd, home } = project()
    const run = await loom(['run'], { cwd, home })
    expect(run.code).toBe(2)
    expect(run.stderr).toContain('run: missing the task')
  })
})

describe('loom run with a key uses the real OpenAI-compatible route', () => {
  let server: Server
  let url = ''
  const requests: { path: string; auth: string | undefined; body: any }[] = []

  beforeAll(async () => {
    server = createServer(async (req: IncomingMessage, res) => {
      let body = ''
      for await (const chunk of req) body += chunk
      requests.push({ path: req.url ?? '', auth: req.headers.authorization, body: JSON.parse(body) })
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`)
      send({ id: 'r1', choices: [{ index: 0, delta: { role: 'assistant', content: 'Hello from ' } }] })
      send({ id: 'r1', choices: [{ index: 0, delta: { content: 'the mock server.' } }] })
      send({ id: 'r1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 12, completion_tokens: 4 } })
      res.end('data: [DONE]\n\n')
    })
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => new Promise<void>(resolve => server.close(() => resolve())))

  it('DEEPSEEK_API_KEY selects the deepseek route (the demo model is off)', async () => {
    const { cwd, home } = project()
    const run = await loom(['run', '--json', 'hi'], { cwd, home, env: { DEEPSEEK_API_KEY: 'test-key', DEEPSEEK_BASE_URL: url } })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({ status: 'completed', provider: 'deepseek', model: 'deepseek-flash', text: 'Hello from the mock server.' })
    const request = requests.at(-1)!
    expect(request).toMatchObject({
      path: '/chat/completions',
      auth: 'Bearer test-key',
      body: { model: 'deepseek-flash', stream: true, reasoning_effort: 'high' },
    })
    expect(request.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toContain('bash')
  })

  it('OPENAI_BASE_URL and OPENAI_API_KEY select the openai route, OPENAI_MODEL its model', async () => {
    const { cwd, home } = project()
    const run = await loom(['run', 'hi'], { cwd, home, env: { OPENAI_API_KEY: 'k2', OPENAI_BASE_URL: url, OPENAI_MODEL: 'local-model' } })
    expect(run.code).toBe(0)
    expect(run.stdout).toBe('Hello from the mock server.\n')
    expect(run.stderr).toMatch(/· openai\/local-model ·/)
    expect(requests.at(-1)).toMatchObject({ auth: 'Bearer k2', body: { model: 'local-model' } })
  })
})

function readHeader(file: string): { id: string; cwd: string } {
  return JSON.parse(readFileSync(file, 'utf8').split('\n')[0])
}

describe('the cost in the footer', () => {
  const report = (provider: string, costUsd: number | null): RunReport => ({
    sessionId: 's',
    status: 'completed',
    reason: null,
    text: '',
    toolCalls: [],
    usage: { inputTokens: 1000, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
    cacheHitShare: 0,
    costUsd,
    provider,
    model: 'm',
  })

  it('a cost when there is one; unknown price for a paid route with none; nothing when it is zero or the route is offline', () => {
    expect(describeUsage(report('deepseek', 0.0012))).toBe('1000 in (0 cached, 0%) / 10 out tokens · ~$0.0012')
    expect(describeUsage(report('deepseek', null))).toBe('1000 in (0 cached, 0%) / 10 out tokens · unknown price')
    expect(describeUsage(report('openai', 0))).toBe('1000 in (0 cached, 0%) / 10 out tokens')
    expect(describeUsage(report('scripted', null))).toBe('1000 in (0 cached, 0%) / 10 out tokens')
  })
})
