// How fast the compiled `loom` starts, as a user runs it: `node dist/main.js`
// (what the installed bin runs) with every @loom package from its dist/, in a
// fresh process per run. Medians, and ratios to a bare `node -e 0` on the same
// machine, which takes the machine's speed out of the comparison.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))
const MAIN = join(REPO, 'apps', 'cli', 'dist', 'main.js')

export interface StartupFigure {
  bench: 'cli/startup'
  command: string
  median_ms: number
  node_ratio: number
  runs: number
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const round = (value: number, places = 1) => Math.round(value * 10 ** places) / 10 ** places

/** The commands, each run `runs` times after one run that fills Node's compile cache; compiles first (`pnpm build`). */
export function benchStartup(runs = 9): StartupFigure[] {
  const built = spawnSync(process.execPath, [join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', join(REPO, 'tsconfig.build.json')], {
    encoding: 'utf8',
  })
  if (built.status !== 0) throw new Error(`cli/startup: the build failed:\n${built.stdout}${built.stderr}`)
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-startup-'))
  // A user's shell: no workspace source condition, no keys (the offline model answers).
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(NODE_OPTIONS|DEEPSEEK_|ANTHROPIC_|OPENAI_)/.test(key)))
  env.LOOM_HOME = join(cwd, 'home')
  const time = (args: string[]) => {
    const started = performance.now()
    const child = spawnSync(process.execPath, args, { cwd, env, encoding: 'utf8' })
    const ms = performance.now() - started
    if (child.status !== 0) throw new Error(`cli/startup: node ${args.join(' ')} failed: ${child.stderr}`)
    return ms
  }
  const measure = (args: string[]) => {
    time(args)
    return median(Array.from({ length: runs }, () => time(args)))
  }
  const node = measure(['-e', '0'])
  const commands: [string, string[]][] = [
    ['node -e 0', ['-e', '0']],
    ['loom --version', [MAIN, '--version']],
    ['loom sessions list', [MAIN, 'sessions', 'list']],
    ['loom prompt', [MAIN, 'prompt']],
  ]
  return commands.map(([command, args]) => {
    const ms = command === 'node -e 0' ? node : measure(args)
    return { bench: 'cli/startup', command, median_ms: round(ms), node_ratio: round(ms / node, 2), runs }
  })
}

/**
 * `loom inspect` serves until it is stopped: its start is the time from the
 * spawn to the address it prints, in a fresh process per run (after
 * `benchStartup`, which compiles). Resolves to the same figure as the others.
 */
export async function benchInspectStartup(runs = 9): Promise<StartupFigure> {
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-inspect-'))
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(NODE_OPTIONS|DEEPSEEK_|ANTHROPIC_|OPENAI_)/.test(key)))
  env.LOOM_HOME = join(cwd, 'home')
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now()
      const child = spawn(process.execPath, [MAIN, 'inspect'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
      child.stdout.setEncoding('utf8').on('data', (text: string) => {
        output += text
        if (!output.includes('loom inspect: http')) return
        const ms = performance.now() - started
        child.once('exit', () => resolve(ms))
        child.kill('SIGINT')
      })
      child.stderr.setEncoding('utf8').on('data', (text: string) => (output += text))
      child.once('exit', code => {
        clearTimeout(timer)
        if (!output.includes('loom inspect: http')) reject(new Error(`cli/startup: loom inspect exited ${code} before it printed its address: ${output}`))
      })
    })
  const node = (() => {
    const times = Array.from({ length: runs }, () => {
      const started = performance.now()
      spawnSync(process.execPath, ['-e', '0'])
      return performance.now() - started
    })
    return median(times)
  })()
  await once()
  const times: number[] = []
  for (let run = 0; run < runs; run++) times.push(await once())
  const ms = median(times)
  return { bench: 'cli/startup', command: 'loom inspect', median_ms: round(ms), node_ratio: round(ms / node, 2), runs }
}
