// `loom serve`: the deployment as an HTTP API, until a stop signal drains it.
import { type PlanMaker, runner } from '../context.ts'

export const plan: PlanMaker = async (_args, parsed) => {
  const { checkApprovalFlags, serve, serveToken } = await import('../serve.ts')
  // Checked before anything boots: no token, no server.
  checkApprovalFlags(parsed)
  const token = serveToken(parsed.tokenFile)
  return runner((runner, context) => serve(runner, { ...context, root: context.root!, token }))
}
