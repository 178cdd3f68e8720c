// `pnpm bench`: one JSON object per line, so runs can be compared by machine.
// Figures, not thresholds: nothing here fails on a slow machine.
import { benchBoot, benchDefaultStep, benchReload } from '../apps/cli/bench/boot.ts'
import { budgetSession } from '../apps/cli/bench/budget-session.ts'
import { benchInspectStartup, benchStartup } from '../apps/cli/bench/startup.ts'
import { benchStep } from '../packages/agent-loop/bench/step.ts'
import { benchCacheEconomics } from '../packages/agent-loop/bench/cache-economics.ts'
import { benchDerive } from '../packages/session/bench/derive.ts'
import { benchAssemble } from '../packages/system-prompt/bench/assemble.ts'
import { compareAssemble } from '../packages/system-prompt/bench/compare.ts'
import { benchAppend, benchLoadFresh } from '../plugins/session-jsonl/bench/persistence.ts'
import { benchPostgres } from '../plugins/session-postgres/bench/persistence.ts'
import { benchHost } from '../plugins/serve/bench/host.ts'
import { benchSse } from '../packages/llm/bench/sse.ts'
import { benchFirstView } from '../packages/inspector/bench/first-view.ts'
import { benchSearch } from '../plugins/tool-search/bench/search.ts'
import { benchToolCatalog } from '../plugins/tool-catalog/bench/catalog.ts'
import { benchProtect } from '../plugins/tool-fs/bench/protect.ts'
import { benchReadRules } from '../plugins/tool-fs/bench/read-rules.ts'
import { benchGate } from '../plugins/permissions/bench/gate.ts'
import { benchProviderCache } from './provider-cache.ts'
import { benchToolResultsCap } from './tool-results-cap.ts'

const iterations = Number(process.env.BENCH_ITERATIONS ?? 2000)
const print = (figure: object) => console.log(JSON.stringify(figure))
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100

const assembled = await benchAssemble(iterations)
assembled.forEach(print)
for (const figure of assembled.slice(1)) {
  print({
    bench: 'system-prompt/assemble+render growth',
    size_ratio: figure.sections / assembled[0].sections,
    median_ratio: ratio(figure.median_us, assembled[0].median_us),
  })
}
// BENCH_BASELINE=<another checkout>: the base deployment there and here, side by side.
if (process.env.BENCH_BASELINE) print(await compareAssemble(process.env.BENCH_BASELINE))

benchDerive().forEach(print)
;(await benchAppend()).forEach(print)
print(benchLoadFresh())
;(await benchPostgres()).forEach(print)
print(await benchHost())

// The loop alone, then inside the default deployment (every plugin's per-step work included).
for (const steps of [await benchStep(), await benchDefaultStep()]) {
  steps.forEach(print)
  for (const figure of steps.slice(1)) {
    print({
      bench: 'agent-loop/step growth',
      deployment: figure.deployment,
      history_ratio: figure.history / steps[0].history,
      median_ratio: ratio(figure.median_us, steps[0].median_us),
    })
  }
}

benchStartup().forEach(print)
print(await benchInspectStartup())
print(await benchFirstView())

const boots = await benchBoot()
boots.forEach(print)
print(await benchReload())

;(await benchCacheEconomics()).forEach(print)
;(await benchProviderCache()).forEach(print)
;(await benchToolResultsCap()).forEach(print)

benchSse().forEach(print)
;(await benchSearch()).forEach(print)
;(await benchToolCatalog()).forEach(print)
print(await benchProtect())
print(await benchReadRules())
print(await benchGate())
print(await budgetSession('total'))
print(await budgetSession('own'))
