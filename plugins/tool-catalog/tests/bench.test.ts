import { expect, it } from 'vitest'
import { benchToolCatalog, deploymentTools, STEPS } from '../bench/catalog.ts'

it('the deployment has 100 tools of varied size', () => {
  const tools = deploymentTools()
  expect(new Set(tools.map(tool => tool.name)).size).toBe(100)
  const sizes = tools.map(tool => JSON.stringify(tool).length).sort((a, b) => a - b)
  expect(sizes[sizes.length - 1]).toBeGreaterThan(3 * sizes[10])
})

it('on demand, the header shrinks and every request extends the previous one', async () => {
  const [allIn, onDemand, grown, ratio] = await benchToolCatalog()
  expect(allIn).toMatchObject({ mode: 'all-in', tools_in_request: 100, requests: STEPS, min_reuse: 1 })
  expect(onDemand).toMatchObject({ mode: 'on-demand', tools_in_request: 8, requests: STEPS + 5, min_reuse: 1 })
  expect(onDemand.header_tokens * 5).toBeLessThan(allIn.header_tokens)
  expect(onDemand.input_tokens).toBeLessThan(allIn.input_tokens)
  // Growing the tools array instead breaks the cached prefix at every load.
  expect(grown.min_reuse).toBeLessThan(0.5)
  expect(grown.input_cost_usd).toBeGreaterThan(onDemand.input_cost_usd)
  expect(ratio.all_in_over_on_demand_input_tokens).toBeGreaterThan(1)
}, 30_000)
