// `loom run "<task>"`: one headless turn of a new agent, shown as it runs.
import { type PlanMaker, turn } from '../context.ts'

export const plan: PlanMaker = ({ task }) => turn((runner, { parsed, cwd }, watch) => runner.run(task, { ...parsed, cwd }, watch))
