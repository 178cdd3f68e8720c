// `pnpm bench`: one JSON object per line, so runs can be compared by machine.
// Figures, not thresholds: nothing here fails on a slow machine.
import { benchAssemble } from '../packages/system-prompt/bench/assemble.ts'

const iterations = Number(process.env.BENCH_ITERATIONS ?? 2000)

const figures = await benchAssemble(iterations)
for (const figure of figures) console.log(JSON.stringify(figure))
const [base] = figures
for (const figure of figures.slice(1)) {
  console.log(JSON.stringify({
    bench: 'system-prompt/assemble+render growth',
    size_ratio: figure.sections / base.sections,
    median_ratio: Math.round((figure.median_us / base.median_us) * 100) / 100,
  }))
}
