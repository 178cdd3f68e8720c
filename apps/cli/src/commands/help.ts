// `loom help [command]`: the overview, or a command's options and examples.
import { nothing, type PlanMaker } from '../context.ts'
import { helpFor } from '../help.ts'

export const plan: PlanMaker = ({ topic }) => {
  // Built now: an unknown topic is a usage error.
  const text = helpFor(topic ? topic.split(/\s+/) : [])
  return nothing(async ({ io }) => {
    io.stdout.write(text)
    return 0
  })
}
