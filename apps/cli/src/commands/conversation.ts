// `loom` (no command) and `loom -c`: the conversation on a terminal, on a new
// session or on the one used last in this folder; `loom resume` opens it on
// a stored session.
import type { Asking } from '../approve.ts'
import { type Plan, type PlanMaker, runner } from '../context.ts'

/** The conversation, on a new session or the stored one `ref` names. */
export function conversation(ref: string | undefined): Plan {
  // Shared by the terminal approver and the conversation: a question is open.
  const asking: Asking = { asking: false }
  return runner(async (runner, { parsed, io, cwd, onInterrupt }) => {
    const { converse } = await import('../conversation.ts')
    return converse({ runner: () => runner, io, flags: { ...parsed, cwd }, session: ref, onInterrupt, asking })
  }, asking)
}

export const plan: PlanMaker = (_args, parsed) => conversation(parsed.continue ? 'last' : undefined)
