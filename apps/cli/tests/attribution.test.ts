// `loom sessions show` prints the attribution of a request header change: a log
// written in-process by the real loop across a simulated hot reload of a plugin.
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import AgentLoop from '@loom/agent-loop'
import Llm, { LlmAdapter, userText, type GenerateOptions, type StreamChunk } from '@loom/llm'
import SessionStore, { type SessionEventMap } from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import { describe, expect, it } from 'vitest'
import { describeHeaderChanges } from '../src/present/describe.ts'
import { events, loom, project, sessionFiles } from './helpers.ts'

class EchoAdapter extends LlmAdapter {
  readonly requests: GenerateOptions[] = []
  override async resolveModel(provider: string, model: string) {
    return { provider, id: model, name: model }
  }

  async *stream(request: GenerateOptions): AsyncIterable<StreamChunk> {
    this.requests.push(request)
    yield { type: 'block-start', index: 0, blockType: 'text' }
    yield { type: 'text-delta', index: 0, text: 'ok' }
    yield { type: 'block-end', index: 0, block: { type: 'text', text: 'ok' } }
    yield { type: 'finish', reason: { kind: 'stop' } }
  }
}

function greeter(text: string) {
  return {
    name: 'greeter',
    inject: ['systemPrompt'],
    apply(ctx: Context) {
      ctx.systemPrompt.section({ name: 'greeter:one', order: 200, text })
    },
  }
}

describe('loom sessions show: header change attribution', () => {
  it('prints which section of which plugin changed and the first differing byte', async () => {
    const { cwd, home } = project()
    const root = new Context()
    await root.plugin(SystemPrompt, { persona: '' })
    await root.plugin(SessionStore)
    const persistence = await root.plugin(JsonlPersistence, { root: join(home, 'sessions'), maxDelayMs: 10 })
    await root.plugin(Llm)
    await root.plugin(ToolRuntime)
    await root.plugin(AgentLoop, { maxParallelToolCalls: 10 })
    const adapter = new EchoAdapter()
    root.llm.registerAdapter(['mock'], adapter)
    const fiber = await root.plugin(greeter('Greet the user.'))
    const host = await root.plugin({ name: 'test-host', inject: ['agents'], apply() {} })
    const agent = host.ctx.agents.create('attributed', { provider: 'mock', model: 'mock', cwd })
    agent.followup(userText('first'))
    await agent.idle()
    await fiber.dispose()
    await root.plugin(greeter('Greet the user by name.'))
    agent.followup(userText('second'))
    await agent.idle()
    await root.sessions.flush(agent.session)
    await agent.dispose()
    await persistence.dispose()

    const [file] = sessionFiles(home)
    const change = events(file).filter(event => event.type === 'request/header')[1].data as SessionEventMap['request/header']
    expect(change.reason).toBe('change')
    const offset = change.changes!.firstDifference!
    expect(offset).toBeGreaterThan(0)
    const line = `request header changed (section "greeter:one" of plugin "greeter" changed; first difference at byte ${offset})`
    expect(describeHeaderChanges(change.changes!)).toBe(line)

    const shown = await loom(['sessions', 'show', 'attributed'], { cwd, home })
    expect(shown.code).toBe(0)
    const lines = shown.stdout.split('\n')
    // The transcript prints the change the loop recorded in the log, nothing recomputed.
    expect(lines).toContain(`[request header, change] ${line}`)
  })

  it('words tools, config keys and a prefix-preserving change', () => {
    expect(
      describeHeaderChanges({
        sections: [],
        tools: [{ name: 'zap', owner: '@loom/tools', change: 'added' }],
        config: ['model', 'temperature'],
      }),
    ).toBe('request header changed (tool "zap" of plugin "@loom/tools" added; config "model", "temperature" changed)')
  })
})
