// The approver of headless commands (`loom run --approve MODE`): nobody is at a
// terminal to answer an `ask`, so the mode answers every one the same way.
// Prompting on a terminal is not done here.
import { type Context, type Fiber, Service } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { ApprovalAnswer, ApprovalRequest, Approver } from '@loom/tools'
import { type ApproveMode, DEFAULT_APPROVE_MODE } from './commands.ts'

/** The note a denied call carries to the model: why nobody approved it. */
export const DENIAL_NOTES: Record<Exclude<ApproveMode, 'all'>, string> = {
  never: 'approvals are turned off for this run (--approve never)',
  policy: 'this headless run has no one to ask (--approve policy); the call needs a rule that allows it',
}

/** How a mode answers: the same for every request. */
export function answerOf(mode: ApproveMode): ApprovalAnswer {
  return mode === 'all' ? { kind: 'allow' } : { kind: 'deny', note: DENIAL_NOTES[mode] }
}

export interface Config {
  mode: ApproveMode
}

/** `ctx.approver` for a headless command, answering by its mode. */
export class HeadlessApprover extends Service implements Approver {
  static override readonly name = '@loom/cli/approve'
  static readonly Config: Schema<Config> = Schema.object({
    mode: Schema.union(['never', 'policy', 'all'] as const)
      .default(DEFAULT_APPROVE_MODE)
      .description('How every ask is answered: never (deny), policy (deny: no one can answer here), all (allow).'),
  }) as Schema<Config>

  readonly mode: ApproveMode

  constructor(ctx: Context, config: Config) {
    super(ctx, 'approver')
    this.mode = config.mode ?? DEFAULT_APPROVE_MODE
  }

  async approve(_request: ApprovalRequest): Promise<ApprovalAnswer> {
    return answerOf(this.mode)
  }
}

/** Loads the headless approver on a booted deployment's root; dispose the returned fiber (or the root) to remove it. */
export async function provideApprover(root: Context, mode: ApproveMode = DEFAULT_APPROVE_MODE): Promise<Fiber> {
  return root.plugin(HeadlessApprover, { mode })
}

/** The approver as a boot plugin: `boot({ ...layers, log, plugins: [headlessApprover(mode)] })` provides it before the deployment's rows start. */
export function headlessApprover(mode: ApproveMode = DEFAULT_APPROVE_MODE): { plugin: typeof HeadlessApprover; config: Config } {
  return { plugin: HeadlessApprover, config: { mode } }
}
