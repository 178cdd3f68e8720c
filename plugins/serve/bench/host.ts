// What a `loom serve` host adds: one server process (the default deployment,
// JSONL sessions, the scripted model answering at once, so every millisecond
// measured is the host's: HTTP, the agent loop, the durable log) serving many
// sessions at once, each a conversation of several turns. Each session follows
// its own event stream (SSE); a turn's latency runs from the POST that starts it
// to the `turn/end` event on the stream, which the host sends once it is on disk.
import { spawn } from 'node:child_process'
import http from 'node:http'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export interface HostFigure {
  bench: 'serve/host'
  store: 'jsonl'
  sessions: number
  turns_per_session: number
  turns: number
  wall_ms: number
  turns_per_s: number
  /** From the POST that starts a turn to its `turn/end` on the session's stream. */
  p50_ms: number
  p99_ms: number
  /** Resident memory of the server with every session's agent open, over that before the first, per session. */
  rss_per_session_kb: number
  /** CPU time (user and system) the server process spent per turn: what a turn costs, less sensitive than the rate to a busy machine. */
  server_cpu_ms_per_turn: number
  /** Each figure above is the median of this many runs, each on a fresh server. */
  runs: number
  /** The lowest and highest rate of the runs: how much the machine moved them. */
  turns_per_s_range: [number, number]
}

type RunFigure = Omit<HostFigure, 'runs' | 'turns_per_s_range'>

const MAIN = fileURLToPath(new URL('../../../apps/cli/src/main.ts', import.meta.url))
const TOKEN = 'bench-token-0123456789abcdef'

/**
 * One answer per turn, forever. The rows that read the workspace at every step
 * (git state, instruction files, skill folders) are off: they cost the same
 * with or without a server, and this measures the server.
 */
const LAYER = `
${['workspace', 'instructions', 'skills'].map(id => `- id: ${id}\n  disabled: true`).join('\n')}
- id: scripted
  disabled: true
- insert:
    - id: script
      name: '@loom/llm-scripted'
      config:
        provider: scripted
        model: scripted-1
        loop: true
        script:
          - Done.
`

/**
 * `runs` runs of `sessions` conversations of `turns` turns, each on a fresh server; the medians. One run's
 * rate varies by a third from one minute to the next on a busy 2-core machine.
 */
export async function benchHost(sessions = 200, turns = 5, runs = 3): Promise<HostFigure> {
  const figures: RunFigure[] = []
  for (let run = 0; run < runs; run++) figures.push(await hostRun(sessions, turns))
  const median = (pick: (figure: RunFigure) => number) => {
    const values = figures.map(pick).sort((a, b) => a - b)
    return values[Math.floor(values.length / 2)]
  }
  const rates = figures.map(figure => figure.turns_per_s)
  return {
    ...figures[0],
    wall_ms: median(figure => figure.wall_ms),
    turns_per_s: median(figure => figure.turns_per_s),
    p50_ms: median(figure => figure.p50_ms),
    p99_ms: median(figure => figure.p99_ms),
    rss_per_session_kb: median(figure => figure.rss_per_session_kb),
    server_cpu_ms_per_turn: median(figure => figure.server_cpu_ms_per_turn),
    runs,
    turns_per_s_range: [Math.min(...rates), Math.max(...rates)],
  }
}

async function hostRun(sessions: number, turns: number): Promise<RunFigure> {
  const dir = mkdtempSync(join(tmpdir(), 'loom-bench-serve-'))
  writeFileSync(join(dir, 'loom.yml'), LAYER)
  const child = spawn(process.execPath, ['--conditions=loom-source', MAIN, 'serve', '--port', '0'], {
    cwd: dir,
    env: { ...process.env, LOOM_HOME: join(dir, 'home'), LOOM_SERVE_TOKEN: TOKEN, DEEPSEEK_API_KEY: '', ANTHROPIC_API_KEY: '', OPENAI_API_KEY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', data => {
    output += data
  })
  child.stderr.on('data', data => {
    output += data
  })
  try {
    const base = await until(
      () => /listening on (http:\S+)/.exec(output)?.[1],
      30_000,
      () => `the server to listen:\n${output}`,
    )
    const rssBefore = rssKb(child.pid!)
    const cpuBefore = cpuMs(child.pid!)
    const latencies: number[] = []
    const start = performance.now()
    await Promise.all(Array.from({ length: sessions }, () => conversation(base, turns, latencies))).catch(error => {
      throw new Error(`${(error as Error).message}\nthe server's output:\n${output.slice(-4000)}`)
    })
    const wall = performance.now() - start
    const rssAfter = rssKb(child.pid!)
    const cpu = cpuMs(child.pid!) - cpuBefore
    latencies.sort((a, b) => a - b)
    const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] * 10) / 10
    return {
      bench: 'serve/host',
      store: 'jsonl',
      sessions,
      turns_per_session: turns,
      turns: latencies.length,
      wall_ms: Math.round(wall),
      turns_per_s: Math.round((latencies.length / wall) * 1000),
      p50_ms: at(0.5),
      p99_ms: at(0.99),
      rss_per_session_kb: Math.round((rssAfter - rssBefore) / sessions),
      server_cpu_ms_per_turn: Math.round((cpu / latencies.length) * 100) / 100,
    }
  } finally {
    child.kill('SIGTERM')
    await new Promise(resolve => child.once('exit', resolve))
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * One session: a task, then followups, each awaited on the session's own event stream. The client is
 * node:http over kept-alive connections, not fetch: it shares the machine with the server, and fetch's
 * per-request cost would be counted against the host's rate.
 */
async function conversation(base: string, turns: number, latencies: number[]) {
  let sent = performance.now()
  const { status, body } = await post(base, '/v1/sessions', { task: 'turn 1' })
  if (status !== 201) throw new Error(`POST /v1/sessions: ${status} ${body}`)
  const { id } = JSON.parse(body) as { id: string }
  await new Promise<void>((resolve, reject) => {
    const request = http.get(`${base}/v1/sessions/${id}/events`, { agent, headers: { authorization: `Bearer ${TOKEN}` } }, response => {
      response.setEncoding('utf8')
      let buffer = ''
      let ended = 0
      response.on('data', (chunk: string) => {
        buffer += chunk
        const frames = buffer.split('\n\n')
        buffer = frames.pop() ?? ''
        for (const frame of frames) {
          if (!frame.includes('"type":"turn/end"')) continue
          latencies.push(performance.now() - sent)
          if (++ended === turns) {
            request.destroy()
            resolve()
            return
          }
          sent = performance.now()
          post(base, `/v1/sessions/${id}/messages`, { text: `turn ${ended + 1}`, mode: 'followup' }).then(posted => {
            if (posted.status !== 202) reject(new Error(`POST messages of ${id}: ${posted.status} ${posted.body}`))
          }, reject)
        }
      })
      response.on('end', () => reject(new Error(`the event stream of ${id} ended after ${ended} turns`)))
    })
    request.on('error', reject)
  })
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY })

function post(base: string, path: string, payload: unknown): Promise<{ status: number; body: string }> {
  const body = JSON.stringify(payload)
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${base}${path}`,
      { method: 'POST', agent, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      response => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => {
          text += chunk
        })
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }))
      },
    )
    request.on('error', reject)
    request.end(body)
  })
}

function rssKb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find(text => text.startsWith('VmRSS:'))
  return Number(/\d+/.exec(line ?? '')?.[0] ?? 0)
}

/** User and system CPU time of process `pid` so far, from /proc (in clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  // The command name, in parentheses, may hold spaces: the fields after it are counted from its end.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

async function until<T>(probe: () => T | undefined, timeoutMs: number, what: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

// `node host.ts`: the figure alone.
if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await benchHost()))
