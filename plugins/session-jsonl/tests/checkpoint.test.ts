// The checkpoint policy of the JSONL backend, end to end: by the time the model
// is called, or a tool runs, everything it acts on is on disk.
import { Context } from '@deepseek-ai/cordis'
import Llm, { LlmAdapter, userText, type GenerateOptions, type StreamChunk } from '@loom/llm'
import { textResponse, toolCallResponse } from '@loom/llm/testing'
import SessionStore from '@loom/session'
import JsonlPersistence from '../src/index.ts'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import AgentLoop from '@loom/agent-loop'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

/** A model whose every answer is computed from its request, so it can look at the disk first. */
class ProbeAdapter extends LlmAdapter {
  private readonly answers: ((request: GenerateOptions) => StreamChunk[])[]
  constructor(answers: ((request: GenerateOptions) => StreamChunk[])[]) {
    super()
    this.answers = answers
  }

  override async resolveModel(provider: string, model: string) {
    return { provider, id: model, name: model }
  }

  async *stream(request: GenerateOptions): AsyncIterable<StreamChunk> {
    const answer = this.answers.shift()
    if (!answer) throw new Error('ProbeAdapter: no answer left')
    yield* answer(request)
  }
}

async function host(checkpoints: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'loom-checkpoint-'))
  const root = new Context()
  await root.plugin(SystemPrompt)
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
  // A window far longer than the test: only a checkpoint can make anything durable.
  await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 60_000, checkpoints })
  const fiber = await root.plugin({ name: 'owner', inject: ['llm', 'tools', 'agents', 'sessionPersistence'], apply() {} })
  return fiber.ctx
}

/** The event types stored on disk right now. */
function storedTypes(ctx: Context, id: string): string[] {
  const path = ctx.sessionPersistence.locate({ id })
  try {
    return readFileSync(path.path, 'utf8')
      .split('\n')
      .slice(1)
      .filter(Boolean)
      .map(line => JSON.parse(line).type)
  } catch {
    return []
  }
}

describe('checkpoint policy', () => {
  it('flushes before the model is called and before a tool runs', async () => {
    const ctx = await host(true)
    const seenByModel: string[][] = []
    const seenByTool: string[][] = []
    const adapter = new ProbeAdapter([
      request => {
        seenByModel.push(storedTypes(ctx, request.sessionId!))
        return toolCallResponse('c1', 'probe', {})
      },
      request => {
        seenByModel.push(storedTypes(ctx, request.sessionId!))
        return textResponse('done')
      },
    ])
    ctx.llm.registerAdapter(['mock'], adapter)
    ctx.tools.register(
      defineTool({
        name: 'probe',
        description: 'Looks at the disk.',
        parameters: { type: 'object', properties: {} },
        execute: () => {
          seenByTool.push(storedTypes(ctx, 'cp'))
          return 'ok'
        },
      }),
    )
    const agent = ctx.agents.create('cp', { provider: 'mock', model: 'mock' })
    agent.followup(userText('go'))
    await agent.idle()

    expect(seenByModel[0]).toEqual([
      'agent/inbox/spliced',
      'turn/start',
      'agent/inbox/spliced',
      'step/start',
      'user/message',
      'request/header',
      'request/context',
    ])
    expect(seenByTool[0].slice(-2)).toEqual(['assistant/message', 'tool/call'])
    expect(seenByModel[1].slice(-4)).toEqual(['tool/call', 'tool/result', 'step/end', 'step/start'])
  })

  it('writes before each step, each model call and each tool: a later step first writes what the step before produced', async () => {
    const ctx = await host(true)
    const writes: string[][] = []
    let written = 0
    ctx.on('session/durable', (id: string) => {
      const types = storedTypes(ctx, id)
      writes.push(types.slice(written))
      written = types.length
    })
    ctx.llm.registerAdapter(['mock'], new ProbeAdapter([() => toolCallResponse('c1', 'probe', {}), () => textResponse('done')]))
    ctx.tools.register(defineTool({ name: 'probe', description: 'Does nothing.', parameters: { type: 'object', properties: {} }, execute: () => 'ok' }))
    const agent = ctx.agents.create('writes', { provider: 'mock', model: 'mock' })
    agent.followup(userText('go'))
    await agent.idle()
    // Before step 1 (the input it claimed); before its model call; before the tool; before step 2 (the tool's result); before its model call.
    expect(writes.map(batch => batch.at(-1))).toEqual(['agent/inbox/spliced', 'request/context', 'tool/call', 'step/end', 'step/start'])
    expect(writes[3].slice(-2)).toEqual(['tool/result', 'step/end'])
  })

  it('without checkpoints, nothing is durable inside the write-behind window', async () => {
    const ctx = await host(false)
    const seenByModel: string[][] = []
    ctx.llm.registerAdapter(
      ['mock'],
      new ProbeAdapter([
        request => {
          seenByModel.push(storedTypes(ctx, request.sessionId!))
          return textResponse('ok')
        },
      ]),
    )
    const agent = ctx.agents.create('no-cp', { provider: 'mock', model: 'mock' })
    agent.followup(userText('go'))
    await agent.idle()
    expect(seenByModel).toEqual([[]])
  })
})
