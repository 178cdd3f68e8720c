// `loom schema [--out FILE]`: a JSON Schema of loom.yml for editors.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = () =>
  nothing(async ({ parsed, io, cwd }) => {
    const { writeSchema } = await import('../schema.ts')
    return writeSchema({ cwd, bundles: parsed.bundles, out: parsed.out, io })
  })
