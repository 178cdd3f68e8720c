// Figures of the `loom` command: how long a deployment takes to boot, and how
// long `loom dev` takes from saving a plugin file to the next assembly.
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { benchStep, type StepFigure } from '../../../packages/agent-loop/bench/step.ts'
import { boot } from '../src/boot.ts'
import { trustWritten } from '../src/trust.ts'

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const round = (ms: number) => Math.round(ms * 10) / 10

export interface BootFigure {
  bench: 'cli/cold-boot'
  bundle: string
  median_ms: number
  warm_median_ms: number
  runs: number
}
export interface ReloadFigure {
  bench: 'cli/hot-reload'
  median_ms: number
  max_ms: number
  edits: number
}

/**
 * Booting a deployment in-process: compose the layers, mount the rows, await
 * every row. `median_ms`: 5 boots, each in a fresh process (module imports count:
 * a user's cold start minus Node's own startup); `warm_median_ms`: 5 more in this
 * process, with the modules cached.
 */
export async function benchBoot(bundles = ['default', 'minimal'], runs = 5): Promise<BootFigure[]> {
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-boot-'))
  const env = { ...process.env, LOOM_HOME: join(cwd, 'home') }
  const bootUrl = new URL('../src/boot.ts', import.meta.url).href
  const cold = (bundle: string) => {
    const script = `
      const { boot } = await import(${JSON.stringify(bootUrl)})
      const started = performance.now()
      const deployment = await boot({ cwd: ${JSON.stringify(cwd)}, bundles: [${JSON.stringify(bundle)}], project: false, log: () => {} })
      const ms = performance.now() - started
      await deployment.dispose()
      console.log(ms)`
    const child = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '--eval', script], { cwd, env, encoding: 'utf8' })
    if (child.status !== 0) throw new Error(`cli/cold-boot (${bundle}) failed: ${child.stderr}`)
    return Number(child.stdout.trim().split('\n').at(-1))
  }
  process.env.LOOM_HOME ??= env.LOOM_HOME
  const warm = async (bundle: string) => {
    const started = performance.now()
    const deployment = await boot({ cwd, bundles: [bundle], project: false, log: () => {} })
    const ms = performance.now() - started
    await deployment.dispose()
    return ms
  }
  const figures: BootFigure[] = []
  for (const bundle of bundles) {
    const colds: number[] = []
    const warms: number[] = []
    for (let i = 0; i < runs; i++) colds.push(cold(bundle))
    for (let i = 0; i < runs; i++) warms.push(await warm(bundle))
    figures.push({ bench: 'cli/cold-boot', bundle, median_ms: round(median(colds)), warm_median_ms: round(median(warms)), runs })
  }
  return figures
}

/**
 * The loop's step inside the default deployment, whose plugins (runtime contexts,
 * memory, compaction, the JSONL log and its checkpoints...) all run at every
 * step, over histories of several lengths: what a step costs a user, and
 * whether that grows with the session. The agents work in a small git
 * repository with one uncommitted change, as a user's agent does, so the
 * workspace's git state is part of the figure (not the state of the checkout
 * the bench runs in).
 */
export async function benchDefaultStep(): Promise<StepFigure[]> {
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-step-'))
  const project = join(cwd, 'project')
  mkdirSync(join(project, 'src'), { recursive: true })
  writeFileSync(join(project, 'package.json'), '{ "scripts": { "test": "node --test" } }\n')
  writeFileSync(join(project, 'src', 'index.js'), 'export const answer = 42\n')
  const git = (...args: string[]) => {
    const child = spawnSync('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', '-c', 'commit.gpgsign=false', ...args], { cwd: project })
    if (child.status !== 0) throw new Error(`agent-loop/step (default): git ${args.join(' ')} failed: ${child.stderr}`)
  }
  git('init', '-q', '-b', 'main')
  git('add', '-A')
  git('commit', '-q', '-m', 'start')
  writeFileSync(join(project, 'src', 'index.js'), 'export const answer = 43\n')
  const home = process.env.LOOM_HOME
  process.env.LOOM_HOME = join(cwd, 'home')
  const deployment = await boot({ cwd: project, bundles: ['default'], project: false, user: false, log: () => {} })
  try {
    return await benchStep([10, 1_000, 10_000], 100, 5, { name: 'default', root: deployment.root, cwd: project })
  } finally {
    await deployment.dispose()
    if (home === undefined) delete process.env.LOOM_HOME
    else process.env.LOOM_HOME = home
  }
}

/** `loom dev` on the minimal bundle: save a plugin file, wait for the reloaded prompt; `edits` times. */
export async function benchReload(edits = 5): Promise<ReloadFigure> {
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-reload-'))
  const plugin = (n: number) => `export const name = 'bench-plugin'
export const inject = ['systemPrompt']
export function apply(ctx: any) { ctx.systemPrompt.section({ name: 'bench:v${n}', order: 200, text: 'version ${n}' }) }
`
  writeFileSync(join(cwd, 'bench-plugin.ts'), plugin(0))
  writeFileSync(join(cwd, 'loom.yml'), '- insert:\n    - id: bench\n      name: ./bench-plugin.ts\n')
  // A layer that mounts a plugin by path runs only once trusted, as after `loom trust`.
  trustWritten(join(cwd, 'loom.yml'), join(cwd, 'home'))
  const bin = fileURLToPath(new URL('../bin/loom.js', import.meta.url))
  const child = spawn(process.execPath, [bin, 'dev', '--bundle', 'minimal'], { cwd, env: { ...process.env, LOOM_HOME: join(cwd, 'home') } })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (data: string) => {
    out += data
  })
  child.stderr.setEncoding('utf8').on('data', (data: string) => {
    err += data
  })
  const waitFor = async (pattern: RegExp) => {
    const start = Date.now()
    while (!pattern.test(out)) {
      if (Date.now() - start > 30_000) throw new Error(`cli/hot-reload: timed out waiting for ${pattern}; loom dev said:\n${out}${err}`)
      await new Promise(resolve => setTimeout(resolve, 5))
    }
  }
  try {
    await waitFor(/bench:v0/)
    const times: number[] = []
    for (let n = 1; n <= edits; n++) {
      // The watcher must see each save as its own change.
      await new Promise(resolve => setTimeout(resolve, 300))
      const started = performance.now()
      writeFileSync(join(cwd, 'bench-plugin.ts'), plugin(n))
      await waitFor(new RegExp(`prompt: .*bench:v${n}`))
      times.push(performance.now() - started)
    }
    return { bench: 'cli/hot-reload', median_ms: round(median(times)), max_ms: round(Math.max(...times)), edits }
  } finally {
    child.kill('SIGKILL')
  }
}
