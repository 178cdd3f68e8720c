// `loom sessions repair ID|prefix|last`: repair a log in its store and say what was done.
import { type PlanMaker, store } from '../context.ts'

export const plan: PlanMaker = ({ id: ref }) =>
  store(async (store, { parsed, io, cwd }) => {
    const id = await store.resolve(ref, cwd)
    const repaired = await store.repair(id)
    const { printRepair } = await import('../present/sessions.ts')
    printRepair(io, id, repaired, parsed.json)
    return repaired.after.clean ? 0 : 1
  })
