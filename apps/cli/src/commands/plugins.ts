// `loom plugins`: the plugins available here, bundled and installed, with their config keys.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = () =>
  nothing(async ({ parsed, io, cwd }) => {
    const [{ catalogue }, { printCatalogue }] = await Promise.all([import('../catalogue.ts'), import('../present/catalogue.ts')])
    printCatalogue(io, await catalogue(cwd), parsed.json)
    return 0
  })
