// `loom sessions verify ID|prefix|last`: check a log without writing; exit 1 if it is not clean.
import { type PlanMaker, store } from '../context.ts'

export const plan: PlanMaker = ({ id: ref }) =>
  store(async (store, { parsed, io, cwd }) => {
    const report = await store.verify(await store.resolve(ref, cwd))
    const { printVerify } = await import('../present/sessions.ts')
    printVerify(io, report, parsed.json)
    return report.clean ? 0 : 1
  })
