// A long session written to a real JSONL store, for the benchmark and the tests
// of big sessions: turns of 20 steps, each step a runtime-context snapshot, a
// streamed answer with a tool call, its result and the provider's usage; a
// request header change (with its cause) every 200 steps, a retry and an
// approval now and then. About 13 events a step.
import { Context } from '@deepseek-ai/cordis'
import { createAssistantMessage, createToolResultMessage, createUserMessage, type StreamChunk, userText } from '@loom/llm'
import SessionStore, { type RequestSources, type Session } from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'

const ROUTE = { provider: 'deepseek', model: 'deepseek-flash' } as const
const STEPS_PER_TURN = 20
const STEPS_PER_HEADER = 200
const TOOLS = ['read', 'grep', 'bash'].map(name => ({
  name,
  description: `The ${name} tool.`,
  parameters: { type: 'object', properties: { path: { type: 'string' } } },
}))

function header(version: number) {
  const guidance = `Guidance for the tools, version ${version}. `.repeat(40)
  const system = `You are an AI agent powered by Loom.\n\n${guidance}`
  const sources: RequestSources = {
    sections: [
      {
        name: 'harness:identity',
        owner: '@loom/system-prompt',
        sha256: 'a'.repeat(64),
        order: -100,
        stability: 'static',
        chars: 36,
        tokens: 9,
        trust: 'product',
        category: 'instructions',
      },
      {
        name: 'tool:guidance',
        owner: 'example-guidance',
        sha256: String(version).padStart(64, '0'),
        order: 200,
        stability: 'static',
        chars: guidance.length,
        tokens: Math.ceil(guidance.length / 4),
        trust: 'deployment',
        category: 'instructions',
      },
    ],
    tools: TOOLS.map(tool => ({ name: tool.name, owner: '@loom/tool-fs', sha256: 'b'.repeat(64) })),
    plugins: [{ name: 'example-guidance', digest: String(version) }],
  }
  return { header: { config: { ...ROUTE }, system, tools: TOOLS }, sources }
}

/** One model step: the snapshot, the streamed answer and its tool call with the result. */
function step(session: Session, turn: number, index: number, last: boolean, previousInput: number) {
  session.append('step/start', { turn, step: index })
  const time = `Current runtime context.\n\nCurrent time: step ${turn}.${index}`
  session.append(
    'user/message',
    createUserMessage({
      content: [{ type: 'text', text: time }],
      source: {
        kind: 'plugin',
        plugin: '@loom/system-prompt',
        form: 'snapshot',
        sections: [
          {
            name: 'runtime:time',
            text: `Current time: step ${turn}.${index}`,
            owner: '@loom/context-time',
            order: 10,
            stability: 'step',
            trust: 'product',
            category: 'runtime',
          },
        ],
      },
    }),
    { surfaceOp: 'append' },
  )
  session.append('request/context', { ...ROUTE })
  const callId = `call_${turn}_${index}`
  const text = last ? `All ${index} modules of turn ${turn} check out.` : `Reading module ${index} next.`
  const call = { type: 'tool-call' as const, id: callId, name: 'read', arguments: JSON.stringify({ path: `src/mod${index}.ts` }) }
  const input = previousInput + 120
  const chunks: StreamChunk[] = [
    { type: 'block-start', index: 0, blockType: 'text' },
    { type: 'text-delta', index: 0, text },
    { type: 'block-end', index: 0, block: { type: 'text', text } },
    ...(last ? [] : [{ type: 'block-end' as const, index: 1, block: call }]),
    { type: 'usage', usage: { inputTokens: 120, cacheReadTokens: previousInput, outputTokens: 24 } },
    { type: 'finish', reason: { kind: last ? 'stop' : 'tool-calls' } },
  ]
  for (const chunk of chunks) session.append('assistant/chunk', { turn, step: index, chunk })
  const content = last ? [{ type: 'text' as const, text }] : [{ type: 'text' as const, text }, call]
  session.append(
    'assistant/message',
    {
      turn,
      step: index,
      message: createAssistantMessage({ content, source: ROUTE }),
      usage: { inputTokens: 120, cacheReadTokens: previousInput, outputTokens: 24 },
    },
    {
      surfaceOp: 'append',
    },
  )
  if (!last) {
    const called = session.append('tool/call', { turn, step: index, callId, name: 'read', arguments: call.arguments }).seq
    const body = Array.from({ length: 8 }, (_, line) => `${line + 1}\texport const value${index}_${line} = ${index * line}`).join('\n')
    session.append(
      'tool/result',
      { turn, step: index, message: createToolResultMessage({ callId, content: [{ type: 'text', text: body }] }) },
      {
        surfaceOp: 'append',
        sourceEventSeqs: [called],
      },
    )
  }
  session.append('step/end', { turn, step: index })
  return input
}

export interface SyntheticStore {
  root: string
  id: string
  events: number
  dispose(): Promise<void>
}

/** Writes a session of at least `events` events under `root` (a JSONL store), and closes it. */
export async function writeSyntheticSession(root: string, events: number, cwd = '/srv/project'): Promise<{ id: string; events: number }> {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const fiber = await ctx.plugin(JsonlPersistence, { root, maxDelayMs: 50, checkpoints: false })
  const session = ctx.sessions.create(undefined, { meta: { cwd, createdAt: Date.parse('2026-11-30T09:00:00Z') } })
  let steps = 0
  let input = 0
  for (let turn = 1; session.seq < events; turn++) {
    session.append('turn/start', { turn })
    session.append('user/message', userText(`Check the modules of batch ${turn}.`), { surfaceOp: 'append' })
    for (let index = 1; index <= STEPS_PER_TURN; index++, steps++) {
      if (steps % STEPS_PER_HEADER === 0) {
        const version = steps / STEPS_PER_HEADER
        const { header: next, sources } = header(version)
        if (version === 0) session.append('request/header', { header: next, reason: 'initial', sources })
        else
          session.append('request/header', {
            header: next,
            reason: 'change',
            sources,
            changes: { sections: [{ name: 'tool:guidance', owner: 'example-guidance', change: 'changed' }], tools: [], config: [], firstDifference: 96 },
          })
        input = 0
      }
      if (steps % 97 === 50) {
        session.append('request/retry', {
          turn,
          step: index,
          retry: 1,
          maxRetries: 5,
          delayMs: 2000,
          failure: { code: 'RATE_LIMITED', message: 'deepseek: HTTP 429: slow down', status: 429 },
        })
      }
      input = step(session, turn, index, index === STEPS_PER_TURN, input)
    }
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
  }
  await ctx.sessions.flush(session)
  const written = { id: session.id, events: session.seq }
  await fiber.dispose()
  return written
}
