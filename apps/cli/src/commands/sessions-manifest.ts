// `loom sessions manifest ID|prefix|last [--step N]`: the manifest of a request the session sent.
import { type PlanMaker, store } from '../context.ts'

export const plan: PlanMaker = ({ id: ref }, parsed) =>
  store(async (store, { io, cwd }) => {
    const report = await store.manifest(await store.resolve(ref, cwd), parsed.step)
    const { printSessionManifest } = await import('../present/prompt.ts')
    printSessionManifest(io, report, parsed.json)
    return 0
  })
