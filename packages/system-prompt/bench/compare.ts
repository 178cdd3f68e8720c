// assemble+render of the base deployment, this checkout against another one (for
// example `git worktree add /tmp/base HEAD` after `pnpm install` there), in one
// process: the two take turns, a round of steps each, so a busy machine slows both
// alike. Usage: pnpm exec tsx packages/system-prompt/bench/compare.ts <other checkout>
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { BASE, deployment, type PromptModules } from './assemble.ts'

async function modulesOf(checkout: string): Promise<PromptModules> {
  const pkg = resolve(checkout, 'packages/system-prompt')
  const load = (file: string) => import(pathToFileURL(file).href)
  // The other checkout's own cordis: a context and its services must come from one copy.
  const cordis = await load(createRequire(resolve(pkg, 'package.json')).resolve('@deepseek-ai/cordis'))
  const prompt = await load(resolve(pkg, 'src/index.ts'))
  const scope = await load(resolve(checkout, 'packages/scope/src/index.ts'))
  return {
    Context: cordis.Context,
    createScope: scope.createScope,
    SystemPrompt: prompt.default,
    renderPrompt: prompt.renderPrompt,
    renderContextSnapshot: prompt.renderContextSnapshot,
  }
}

export async function compareAssemble(other: string, rounds = 20, perRound = 200) {
  const steps = { this: await deployment(BASE), other: await deployment(BASE, await modulesOf(other)) }
  const samples: Record<keyof typeof steps, number[]> = { this: [], other: [] }
  for (const step of Object.values(steps)) for (let i = 0; i < 500; i++) await step()
  for (let round = 0; round < rounds; round++) {
    for (const name of ['this', 'other'] as const) {
      for (let i = 0; i < perRound; i++) {
        const start = process.hrtime.bigint()
        await steps[name]()
        samples[name].push(Number(process.hrtime.bigint() - start) / 1000)
      }
    }
  }
  const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]
  const round = (n: number) => Math.round(n * 10) / 10
  const figures = { this: median(samples.this), other: median(samples.other) }
  return {
    bench: 'system-prompt/assemble+render compare',
    other: resolve(other),
    samples: rounds * perRound,
    this_median_us: round(figures.this),
    other_median_us: round(figures.other),
    ratio: Math.round((figures.this / figures.other) * 100) / 100,
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const other = process.argv[2]
  if (!other) throw new Error('usage: tsx packages/system-prompt/bench/compare.ts <other checkout>')
  console.log(JSON.stringify(await compareAssemble(other)))
}
