// `loom dev`: the conversation with hot reload. It boots its own deployment
// (with the HMR plugin), so main() loads nothing for it.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = () =>
  nothing(async ({ parsed, io, layers, onInterrupt }) => {
    const { dev } = await import('../dev.ts')
    return dev({ ...layers, flags: parsed, session: parsed.continue ? 'last' : undefined, io, onInterrupt })
  })
