// `loom sessions show ID|prefix|last`: a session log as a readable transcript.
import { type PlanMaker, store } from '../context.ts'

export const plan: PlanMaker = ({ id: ref }) =>
  store(async (store, { parsed, io, cwd }) => {
    const id = await store.resolve(ref, cwd)
    const { printSession } = await import('../present/sessions.ts')
    printSession(io, await store.show(id), parsed.json)
    return 0
  })
