// `loom sessions resume ID|prefix|last "<task>"`: a headless turn on a stored session, shown as `run` shows it.
import { type PlanMaker, turn } from '../context.ts'

export const plan: PlanMaker = ({ id, task }) => turn((runner, { parsed, cwd }, watch) => runner.resume(id, task, { ...parsed, cwd }, watch))
