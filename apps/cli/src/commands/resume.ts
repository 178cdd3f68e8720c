// `loom resume ID|prefix|last`: the conversation on a stored session.
import type { PlanMaker } from '../context.ts'
import { conversation } from './conversation.ts'

export const plan: PlanMaker = ({ id }) => conversation(id)
