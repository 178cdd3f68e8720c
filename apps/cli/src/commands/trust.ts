// `loom trust [PATH]`, `--list`, `--revoke`: the trust records of project layers.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = ({ path }) =>
  nothing(async ({ parsed, io, cwd }) => {
    const { trustCommand } = await import('../trust.ts')
    return trustCommand({ cwd, io, path, list: parsed.list, revoke: parsed.revoke, bundles: parsed.bundles, patches: parsed.patches })
  })
