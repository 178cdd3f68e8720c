// `loom sessions compact ID|prefix|last`: summarize the older part of a session now; exit 1 if the summary is refused.
import { type PlanMaker, runner } from '../context.ts'

export const plan: PlanMaker = ({ id: ref }) =>
  runner(async (runner, { parsed, io, cwd }) => {
    // Named as every sessions command names it: an id, a unique prefix, or last.
    const report = await runner.compactSession(await runner.resolve(ref, cwd), parsed)
    const { printCompact } = await import('../present/sessions.ts')
    printCompact(io, report, parsed.json)
    return report.status === 'refused' || report.status === 'failed' ? 1 : 0
  })
