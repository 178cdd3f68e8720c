// `loom sessions stats ID`: prefix reuse and estimated cost of a session written by `loom run`.
import { beforeAll, describe, expect, it } from 'vitest'
import { loom, project } from './helpers.ts'

describe('loom sessions stats', () => {
  const { cwd, home } = project({ 'README.md': '# Stats sample\n\nA folder whose session the tests price.\n' })
  const at = { cwd, home }
  let id = ''

  beforeAll(async () => {
    const run = await loom(['run', '--json', 'what is in this directory?'], at)
    expect(run.code).toBe(0)
    id = JSON.parse(run.stdout).sessionId
  })

  it('--json: the offline demo makes 3 requests, each reusing all of the previous one', async () => {
    const run = await loom(['sessions', 'stats', id, '--json', '--hit-price', '0.006', '--miss-price', '0.3', '--output-price', '1.2'], at)
    expect(run.code).toBe(0)
    const stats = JSON.parse(run.stdout)
    expect(stats).toMatchObject({ id, prices: { hit: 0.006, miss: 0.3, output: 1.2 } })
    expect(stats.requests.map((r: any) => [r.index, r.turn, r.step])).toEqual([
      [0, 1, 1],
      [1, 1, 2],
      [2, 1, 3],
    ])
    expect(stats.requests.map((r: any) => r.reuse)).toEqual([null, 1, 1])
    const [first, second, third] = stats.requests
    expect(first).toMatchObject({ reusedChars: 0, hitTokens: 0, missTokens: Math.ceil(first.chars / 4) })
    // The whole previous request is the cached part of the next one.
    expect(second.reusedChars).toBe(first.chars)
    expect(third.reusedChars).toBe(second.chars)
    expect(second.chars).toBeGreaterThan(first.chars)
    for (const row of stats.requests) {
      expect(row.hitTokens + row.missTokens).toBe(Math.ceil(row.chars / 4))
      expect(row.inputCost).toBeCloseTo((row.hitTokens * 0.006 + row.missTokens * 0.3) / 1e6, 12)
    }
    expect(stats.totals).toMatchObject({ requests: 3, meanReuse: 1, minReuse: 1 })
    expect(stats.totals.inputCost).toBeCloseTo(
      stats.requests.reduce((sum: number, r: any) => sum + r.inputCost, 0),
      12,
    )
    expect(stats.totals.inputCost).toBeLessThan(stats.totals.uncachedInputCost)
  })

  it("the demo model has no price: the figures without a cost, never another model's rates", async () => {
    const run = await loom(['sessions', 'stats', id, '--json'], at)
    expect(run.code).toBe(0)
    const stats = JSON.parse(run.stdout)
    expect(stats.prices).toBeNull()
    expect(stats.totals).toMatchObject({ requests: 3, meanReuse: 1, inputCost: null, outputCost: null, uncachedInputCost: null })
    for (const row of stats.requests) expect(row).toMatchObject({ inputCost: null, reported: { inputCost: null, outputCost: null } })
    // One price flag alone does not make a price.
    expect(JSON.parse((await loom(['sessions', 'stats', id, '--json', '--hit-price', '0.01'], at)).stdout).prices).toBeNull()
  })

  it('prints a table; the price flags give the cost', async () => {
    const run = await loom(['sessions', 'stats', id], at)
    expect(run.code).toBe(0)
    const lines = run.stdout.split('\n')
    expect(lines[0]).toBe(`session ${id}: 3 requests`)
    expect(run.stdout).toContain('  unknown price: this model has no built-in list price')
    expect(run.stdout).toContain('estimated cost: unknown price')
    const head = lines.findIndex(line =>
      /^#\s+TURN\s+STEP\s+CHARS\s+REUSE\s+HIT TOK\s+MISS TOK\s+OUT TOK\s+INPUT COST\s+REPORTED IN\s+CACHED\s+REPORTED COST$/.test(line),
    )
    expect(head).toBeGreaterThan(0)
    // The demo model reports usage without cache reads: 0% cached; no price, so no cost.
    expect(lines[head + 1]).toMatch(/^1\s+1\s+1\s+\d+\s+-\s+0\s+\d+\s+\d+\s+-\s+\d+\s+0\.0%\s+-$/)
    expect(lines[head + 2]).toMatch(/^2\s+1\s+2\s+\d+\s+100\.0%\s/)
    expect(lines[head + 3]).toMatch(/^3\s+1\s+3\s+\d+\s+100\.0%\s/)
    expect(lines[head + 4]).toMatch(/^total\s/)
    expect(run.stdout).toContain('prefix reuse: mean 100.0%, min 100.0%')
    expect(run.stdout).toMatch(/reported by the provider \(3 of 3 requests\): \d+ input tokens, 0\.0% from its cache; unknown price\n/)

    const free = JSON.parse((await loom(['sessions', 'stats', id, '--json', '--hit-price', '0', '--miss-price', '1', '--output-price', '2'], at)).stdout)
    expect(free.prices).toEqual({ hit: 0, miss: 1, output: 2 })
    for (const row of free.requests) expect(row.inputCost).toBeCloseTo(row.missTokens / 1e6, 12)
    const writes = JSON.parse(
      (await loom(['sessions', 'stats', id, '--json', '--hit-price', '0', '--miss-price', '1', '--output-price', '2', '--write-price', '3'], at)).stdout,
    )
    expect(writes.prices).toEqual({ hit: 0, miss: 1, output: 2, write: 3 })
    const priced = await loom(['sessions', 'stats', id, '--hit-price', '0', '--miss-price', '1', '--output-price', '2'], at)
    expect(priced.stdout).toContain('prices per million tokens: cache hit 0, cache miss 1, output 2;')
    expect(priced.stdout).toMatch(/\nestimated input cost: \$\d+\.\d{6} \(/)
  })

  it("the runner row's prices apply, read from the composed layers without booting the runner", async () => {
    const priced = project({ 'loom.yml': '- id: runner\n  config:\n    prices:\n      loom-demo: { hit: 1, miss: 2, output: 3 }\n' })
    const run = await loom(['sessions', 'stats', id, '--json'], { cwd: priced.cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout).prices).toEqual({ hit: 1, miss: 2, output: 3 })
    // By provider and model, over the bare model id.
    const routed = project({
      'loom.yml':
        "- id: runner\n  config:\n    prices:\n      loom-demo: { hit: 1, miss: 2, output: 3 }\n      'scripted/loom-demo': { hit: 4, miss: 5, output: 6, write: 7 }\n",
    })
    expect(JSON.parse((await loom(['sessions', 'stats', id, '--json'], { cwd: routed.cwd, home })).stdout).prices).toEqual({
      hit: 4,
      miss: 5,
      output: 6,
      write: 7,
    })
  })

  it('rejects a bad price and an unknown session', async () => {
    const bad = await loom(['sessions', 'stats', id, '--hit-price', 'cheap'], at)
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('--hit-price: expected a price per million tokens (a number >= 0), got "cheap"')
    const missing = await loom(['sessions', 'stats', 'no-such-session'], at)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('no-such-session')
  })
})
