// `loom prompt`: the request the deployment would send next, without a model
// call; `loom prompt --diff A [B]`: how the manifests of two sides differ.
import { nothing, type PlanMaker, runner } from '../context.ts'
import { UsageError } from '../errors.ts'

export const plan: PlanMaker = ({ against }, parsed) => {
  if (parsed.diff !== undefined) {
    const [a, b] = [parsed.diff, against ?? 'deployment']
    return nothing(async context => {
      const { manifestOf } = await import('../manifest-ref.ts')
      const { printManifestDiff } = await import('../present/prompt.ts')
      const before = await manifestOf(a, context)
      const after = await manifestOf(b, context)
      printManifestDiff(context.io, before, after, parsed.json)
      return 0
    })
  }
  if (against !== undefined) throw new UsageError(`prompt: "${against}" is the second side of a comparison: give the first with --diff`)
  return runner(async (runner, { parsed, io, cwd }) => {
    const { printPrompt } = await import('../present/prompt.ts')
    const report = await runner.prompt({ ...parsed, cwd })
    printPrompt(io, report, parsed.json)
    // What would fail `loom dev`'s turns fails here too; a session section that follows its file only warns.
    return report.unstable.some(instability => instability.severe) ? 1 : 0
  })
}
