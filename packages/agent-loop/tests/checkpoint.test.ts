// The checkpoint policy of the JSONL backend, end to end: by the time the model
// is called, or a tool runs, everything it acts on is on disk.
import { Context } from '@deepseek-ai/cordis'
import Llm, { userText } from '@loom/llm'
import SessionStore from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import AgentLoop from '@loom/agent-loop'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { MockAdapter, textResponse, toolCallResponse } from './harness.ts'

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
    const adapter = new MockAdapter([
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

  it('without checkpoints, nothing is durable inside the write-behind window', async () => {
    const ctx = await host(false)
    const seenByModel: string[][] = []
    ctx.llm.registerAdapter(
      ['mock'],
      new MockAdapter([
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
