// The loop's own cost per step: a model that answers at once, so what is
// measured is claim, assemble, runtime-context snapshot, header check, request
// freeze, chunk logging and projection. It should stay flat as history grows.
import { Context } from '@deepseek-ai/cordis'
import Llm, { createAssistantMessage, LlmAdapter, userText, type StreamChunk } from '@loom/llm'
import SessionStore, { type Session } from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import AgentLoop from '@loom/agent-loop'

export interface StepFigure {
  bench: 'agent-loop/step'
  /** The plugins around the loop: the spine alone, or a deployment's (`default`: the CLI's default bundle). */
  deployment: string
  history: number
  steps: number
  median_us: number
  p90_us: number
}

const answer: StreamChunk[] = [
  { type: 'block-start', index: 0, blockType: 'text' },
  { type: 'text-delta', index: 0, text: 'done' },
  { type: 'block-end', index: 0, block: { type: 'text', text: 'done' } },
  { type: 'usage', usage: { inputTokens: 10, outputTokens: 1 } },
  { type: 'finish', reason: { kind: 'stop' } },
]

/** A model that answers `done` at once. */
export class InstantAdapter extends LlmAdapter {
  async *stream() {
    yield* answer
  }
}

/** Closed turns of one question and one answer each: `messages` history messages. */
function writeHistory(session: Session, messages: number) {
  for (let turn = 1; turn <= messages / 2; turn++) {
    session.append('turn/start', { turn })
    session.append('step/start', { turn, step: 1 })
    session.append('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
    const message = createAssistantMessage({ content: [{ type: 'text', text: `answer ${turn}` }], source: { provider: 'instant', model: 'm' } })
    session.append('assistant/message', { turn, step: 1, message }, { surfaceOp: 'append' })
    session.append('step/end', { turn, step: 1 })
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
  }
}

/** The spine alone: prompt, sessions, models, tools and the loop, with one runtime context. */
async function spine(): Promise<Context> {
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: 'You are a benchmark.' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  const host = await root.plugin({ name: 'bench', inject: ['systemPrompt'], apply() {} })
  host.ctx.systemPrompt.context({ name: 'clock', order: 0, text: () => 'Step clock.' })
  return root
}

/**
 * Steps of agents over histories of several lengths. `deployment`: the context of
 * a booted deployment to measure in instead of the spine (its own plugins then
 * run at every step, as they would for a user), and the folder its agents work in.
 */
export async function benchStep(
  histories = [10, 1_000, 10_000],
  steps = 100,
  rounds = 5,
  deployment?: { name: string; root: Context; cwd?: string },
): Promise<StepFigure[]> {
  const root = deployment?.root ?? (await spine())
  const host = await root.plugin({ name: 'bench-agents', inject: ['llm', 'agents'], apply() {} })
  host.ctx.llm.registerAdapter(['instant'], new InstantAdapter())

  const agents = histories.map(history => {
    const agent = host.ctx.agents.create(`bench-${history}`, { provider: 'instant', model: 'm', ...(deployment?.cwd && { cwd: deployment.cwd }) })
    writeHistory(agent.session, history)
    return agent
  })
  const step = async (agent: (typeof agents)[number], i: number) => {
    const start = process.hrtime.bigint()
    agent.followup(userText(`step ${i}`))
    await agent.idle()
    return Number(process.hrtime.bigint() - start) / 1000
  }
  // Every history warms up, then the histories take turns (a round of steps each),
  // so a busy moment of the machine does not land on one history alone.
  for (const agent of agents) for (let i = 0; i < 20; i++) await step(agent, i)
  const times = agents.map((): number[] => [])
  const perRound = Math.ceil(steps / rounds)
  for (let round = 0; round < rounds; round++) {
    for (const [k, agent] of agents.entries()) {
      for (let i = 0; i < perRound; i++) times[k].push(await step(agent, i))
    }
  }
  for (const agent of agents) await agent.dispose()
  const round = (n: number) => Math.round(n * 10) / 10
  return histories.map((history, k) => {
    const sorted = times[k].sort((a, b) => a - b)
    return {
      bench: 'agent-loop/step' as const,
      deployment: deployment?.name ?? 'spine',
      history,
      steps: sorted.length,
      median_us: round(sorted[sorted.length >> 1]),
      p90_us: round(sorted[Math.floor(sorted.length * 0.9)]),
    }
  })
}
