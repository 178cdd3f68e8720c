// `pnpm bench`: one JSON object per line, so runs can be compared by machine.
// Figures, not thresholds: nothing here fails on a slow machine.
import { benchStep } from '../packages/agent-loop/bench/step.ts'
import { benchDerive } from '../packages/session/bench/derive.ts'
import { benchAssemble } from '../packages/system-prompt/bench/assemble.ts'
import { benchAppend, benchLoad } from '../plugins/session-jsonl/bench/persistence.ts'

const iterations = Number(process.env.BENCH_ITERATIONS ?? 2000)
const print = (figure: object) => console.log(JSON.stringify(figure))
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100

const assembled = await benchAssemble(iterations)
assembled.forEach(print)
for (const figure of assembled.slice(1)) {
  print({ bench: 'system-prompt/assemble+render growth', size_ratio: figure.sections / assembled[0].sections, median_ratio: ratio(figure.median_us, assembled[0].median_us) })
}

benchDerive().forEach(print)
;(await benchAppend()).forEach(print)
print(await benchLoad())

const steps = await benchStep()
steps.forEach(print)
for (const figure of steps.slice(1)) {
  print({ bench: 'agent-loop/step growth', history_ratio: figure.history / steps[0].history, median_ratio: ratio(figure.median_us, steps[0].median_us) })
}

// cli/cold-boot: booting a deployment in-process: compose the layers, mount the
// rows through the Cordis loader, await every row. `median_ms` is the median of
// 5 boots, each in a fresh process (so module imports count: a user's cold
// start, minus Node's own startup); `warm_median_ms` is the median of 5 more
// boots in this process, with the modules cached.
{
  const { spawnSync } = await import('node:child_process')
  const { mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const bootUrl = new URL('../apps/cli/src/boot.ts', import.meta.url).href
  const cwd = mkdtempSync(join(tmpdir(), 'loom-bench-boot-'))
  const env = { ...process.env, LOOM_HOME: join(cwd, 'home') }
  const timed = (bundle: string) => `
    const { boot } = await import(${JSON.stringify(bootUrl)})
    const started = performance.now()
    const deployment = await boot({ cwd: ${JSON.stringify(cwd)}, bundles: [${JSON.stringify(bundle)}], project: false, log: () => {} })
    const ms = performance.now() - started
    await deployment.dispose()
    console.log(ms)`
  const cold = (bundle: string) => {
    const child = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '--eval', timed(bundle)], { cwd, env, encoding: 'utf8' })
    if (child.status !== 0) throw new Error(`cli/cold-boot (${bundle}) failed: ${child.stderr}`)
    return Number(child.stdout.trim().split('\n').at(-1))
  }
  const { boot } = await import('../apps/cli/src/boot.ts')
  process.env.LOOM_HOME ??= env.LOOM_HOME
  const warm = async (bundle: string) => {
    const started = performance.now()
    const deployment = await boot({ cwd, bundles: [bundle], project: false, log: () => {} })
    const ms = performance.now() - started
    await deployment.dispose()
    return ms
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
  const round = (ms: number) => Math.round(ms * 10) / 10
  for (const bundle of ['default', 'minimal']) {
    const colds: number[] = []
    const warms: number[] = []
    for (let i = 0; i < 5; i++) colds.push(cold(bundle))
    for (let i = 0; i < 5; i++) warms.push(await warm(bundle))
    print({ bench: 'cli/cold-boot', bundle, median_ms: round(median(colds)), warm_median_ms: round(median(warms)), runs: 5 })
  }
}
