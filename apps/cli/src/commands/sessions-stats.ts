// `loom sessions stats ID|prefix|last`: prefix reuse and estimated cost of every request of a session.
import type { CachePrices } from '@loom/session'
import { type PlanMaker, store } from '../context.ts'
import { UsageError } from '../errors.ts'
import type { Parsed } from '../parse.ts'

export const plan: PlanMaker = ({ id: ref }, parsed) => {
  const prices = statsPrices(parsed.prices)
  return store(async (store, { io, cwd }) => {
    const { printStats } = await import('../present/sessions.ts')
    printStats(io, await store.stats(await store.resolve(ref, cwd), prices), parsed.json)
    return 0
  })
}

/** The `--*-price` flags (over the model's prices); a price must be a finite number >= 0. */
function statsPrices(typed: Parsed['prices']): Partial<CachePrices> {
  const prices: Partial<CachePrices> = {}
  for (const key of ['hit', 'miss', 'output', 'write'] as const) {
    const raw = typed[key]
    if (raw === undefined) continue
    const value = Number(raw)
    if (raw.trim() === '' || !Number.isFinite(value) || value < 0)
      throw new UsageError(`--${key}-price: expected a price per million tokens (a number >= 0), got "${raw}"`)
    prices[key] = value
  }
  return prices
}
