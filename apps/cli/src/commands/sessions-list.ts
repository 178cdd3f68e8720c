// `loom sessions list`: the stored sessions.
import { type PlanMaker, store } from '../context.ts'

export const plan: PlanMaker = () =>
  store(async (store, { parsed, io }) => {
    const { printSessionList } = await import('../present/sessions.ts')
    printSessionList(io, await store.list(), parsed.json)
    return 0
  })
