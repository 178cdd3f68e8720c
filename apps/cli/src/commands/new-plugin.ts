// `loom new plugin NAME`: scaffold a plugin project in ./NAME.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = ({ name }, parsed) =>
  nothing(async ({ io, cwd }) => {
    const { newPlugin } = await import('../scaffold.ts')
    return newPlugin(name, { cwd, io, packs: parsed.packs })
  })
