// A total prompt budget under pressure, on the default bundle: a 30-step DeepSeek
// thinking-mode session through `loom run`, in a git repository with AGENTS.md and
// memory, where a plugin's runtime context (a build log) grows by about 300
// characters a step. The loopback server caches prefixes as DeepSeek documents it
// (any repeated prefix, in 64-token units) and reports its hits. Figures: how often
// the system text changed, the smallest prefix reuse between consecutive
// requests, and the provider-reported hit share, with the total budget and,
// for scale, with the log cut by a budget of its own and no total.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, sep } from 'node:path'
import { startMockServer, type Behaviour } from '../../../plugins/llm-openai/tests/mock-server.ts'
import { main } from '../src/cli.ts'
import { trustWritten } from '../src/trust.ts'

export const STEPS = 30

export interface BudgetSessionFigure {
  bench: 'cli/budget-session'
  /** `total`: `budgets.maxChars` for everything; `own`: the growing context cut by its own budget, no total. */
  budget: 'total' | 'own'
  requests: number
  /** Distinct system texts over the session's requests (1: it never changed). */
  system_texts: number
  /** The smallest share of a request's serialization the next one reuses as its prefix. */
  min_reuse: number
  /** Cache hits over input tokens, as the server reported them. */
  reported_hit_share: number
}

/** The growing context: about 300 characters more at each step of the session that asks. */
const GROWING_PLUGIN = `import type { Context } from '@deepseek-ai/cordis'
export const name = 'build-log'
export const inject = ['systemPrompt', 'sessions']
export function apply(ctx: Context, config: { maxChars?: number } = {}) {
  ctx.systemPrompt.context({
    name: 'build:log',
    order: 40,
    stability: 'step',
    literal: true,
    ...(config?.maxChars && { budget: { maxChars: config.maxChars } }),
    text: context => {
      const id = context.agent?.sessionId
      const steps = id ? (ctx.sessions.get(id)?.eventsOfType('step/start').length ?? 0) : 0
      const lines = Array.from({ length: steps * 5 }, (_, i) => \`[build] step \${Math.floor(i / 5)} line \${i}: compiled module \${i} in \${(i * 37) % 900} ms\`)
      return ['Build log (newest last):', ...lines].join('\\n')
    },
  })
}
`

const AGENTS_MD = `# Project notes for agents

- Use pnpm, never npm: the lockfile is pnpm-lock.yaml.
- Run the tests with \`pnpm test\` before you say a change is done.
- Modules live under src/, one concern per file; keep exports named.
- Write commit messages in the imperative mood.
`

const MEMORY_INDEX = `- [Release checklist](records/release.md): how releases are cut and tagged
- [Module layout](records/layout.md): where each kind of module lives
`

/** One module file per step the model reads. */
const moduleText = (i: number) =>
  `// src/mod${i}.ts\nexport const value${i} = ${i * 7}\nexport function check${i}(input: number): boolean {\n  return input % ${i + 2} === 0\n}\n`

/** DeepSeek's cache: the common prefix with the previous request, in 64-token units (characters / 4). */
function deepseekCache() {
  let previous = ''
  return (body: { tools?: unknown; messages: unknown[] }) => {
    const text = [JSON.stringify(body.tools ?? []), ...body.messages.map(message => JSON.stringify(message))].join('\n')
    let same = 0
    const n = Math.min(previous.length, text.length)
    while (same < n && previous.charCodeAt(same) === text.charCodeAt(same)) same++
    previous = text
    const prompt = Math.ceil(text.length / 4)
    return { prompt, cacheHit: Math.min(prompt, Math.floor(Math.floor(same / 4) / 64) * 64) }
  }
}

function project(budget: BudgetSessionFigure['budget']): { cwd: string; home: string; base: string } {
  const base = mkdtempSync(join(tmpdir(), 'loom-bench-budget-'))
  const cwd = join(base, 'project')
  const home = join(base, 'home')
  mkdirSync(join(cwd, 'src'), { recursive: true })
  mkdirSync(join(cwd, '.loom', 'memory', 'records'), { recursive: true })
  for (let i = 1; i < STEPS; i++) writeFileSync(join(cwd, 'src', `mod${i}.ts`), moduleText(i))
  writeFileSync(join(cwd, 'AGENTS.md'), AGENTS_MD)
  writeFileSync(join(cwd, '.loom', 'memory', 'MEMORY.md'), MEMORY_INDEX)
  writeFileSync(join(cwd, '.loom', 'memory', 'records', 'release.md'), 'Releases: bump the version, tag vX.Y.Z, push the tag.\n')
  writeFileSync(join(cwd, '.loom', 'memory', 'records', 'layout.md'), 'Modules live under src/, tests under tests/.\n')
  writeFileSync(join(cwd, 'build-log.ts'), GROWING_PLUGIN)
  const prompt = budget === 'total' ? `- id: prompt\n  config:\n    budgets:\n      maxChars: 6000\n` : ''
  const log = budget === 'own' ? `      config:\n        maxChars: 1750\n` : ''
  writeFileSync(
    join(cwd, 'loom.yml'),
    `${prompt}- insert:\n    - id: memory\n      name: '@loom/memory'\n    - id: build-log\n      name: ./build-log.ts\n${log}`,
  )
  const git = (...args: string[]) => execFileSync('git', args, { cwd, stdio: 'ignore' })
  git('init', '-q')
  git('-c', 'user.name=Bench', '-c', 'user.email=bench@example.invalid', 'add', '.')
  git('-c', 'user.name=Bench', '-c', 'user.email=bench@example.invalid', 'commit', '-q', '-m', 'start')
  trustWritten(join(cwd, 'loom.yml'), home)
  return { cwd, home, base }
}

/** Runs the session and measures it from its log. */
export async function budgetSession(budget: BudgetSessionFigure['budget']): Promise<BudgetSessionFigure> {
  const { cwd, home, base } = project(budget)
  const cache = deepseekCache()
  const server = await startMockServer(
    ({ body }, index): Behaviour => {
      const usage = { ...cache(body), completion: 20 }
      if (index + 1 < STEPS) {
        const call = { id: `call_${index + 1}`, name: 'read', arguments: JSON.stringify({ path: `src/mod${index + 1}.ts` }) }
        return { type: 'tool_call', reasoning: `Step ${index + 1}: the next module to check is mod${index + 1}.`, calls: [call], usage }
      }
      return { type: 'success', reasoning: 'All modules read.', text: 'The values are consistent.', usage }
    },
    { requireReasoningContent: true },
  )
  const saved = { ...process.env }
  Object.assign(process.env, { LOOM_HOME: home, DEEPSEEK_API_KEY: 'sk-bench-key', DEEPSEEK_BASE_URL: server.url })
  let output = ''
  const io = { stdout: { write: (text: string) => void (output += text) }, stderr: { write: (text: string) => void (output += text) } }
  try {
    const code = await main(['run', '--thinking', 'on', '--max-steps', String(STEPS + 5), 'Read every module under src/ and check their values.'], { io, cwd })
    if (code !== 0) throw new Error(`cli/budget-session (${budget}): loom run exited ${code}:\n${output}`)
    // The figures `loom sessions stats` reads from the stored log.
    output = ''
    if ((await main(['sessions', 'stats', sessionId(home), '--json'], { io, cwd })) !== 0)
      throw new Error(`cli/budget-session: sessions stats failed:\n${output}`)
    const stats = JSON.parse(output) as { requests: { system?: string }[]; totals: { minReuse: number | null; reported: { hitShare: number } | null } }
    return {
      bench: 'cli/budget-session',
      budget,
      requests: stats.requests.length,
      system_texts: systemTexts(home),
      min_reuse: Math.round((stats.totals.minReuse ?? 0) * 10000) / 10000,
      reported_hit_share: Math.round((stats.totals.reported?.hitShare ?? 0) * 10000) / 10000,
    }
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key]
    Object.assign(process.env, saved)
    await server.close()
    rmSync(base, { recursive: true, force: true })
  }
}

/** The one session log under `home`. */
function sessionLog(home: string): string {
  const find = (dir: string): string | undefined => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      const found = entry.isDirectory() ? find(path) : entry.name === 'session.jsonl' ? path : undefined
      if (found) return found
    }
    return undefined
  }
  const file = find(join(home, 'sessions'))
  if (!file) throw new Error(`cli/budget-session: no session log under ${home}`)
  return file
}

const sessionId = (home: string) => sessionLog(home).split(sep).at(-2)!

/** Distinct system texts of the session's request headers (1: the system text never changed). */
function systemTexts(home: string): number {
  const systems = new Set<string>()
  for (const line of readFileSync(sessionLog(home), 'utf8').split('\n').slice(1)) {
    if (!line.includes('"request/header"')) continue
    const event = JSON.parse(line)
    if (event.type === 'request/header') systems.add(event.data.header.system ?? '')
  }
  return systems.size
}
