import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import { afterEach, describe, expect, it } from 'vitest'
import Llm, { BlockAssembler, deepFreeze, userText, type GenerateOptions, type StreamChunk } from '@loom/llm'
import * as Scripted from '@loom/llm-scripted'
import {
  Config,
  estimateInputTokens,
  loadReplay,
  ScriptedAdapter,
  scriptedAdapterOf,
  textResponse,
  toolCallResponse,
  type ScriptedConfig,
} from '@loom/llm-scripted'

async function mount(config: ScriptedConfig, baseUrl?: string) {
  const root = new Context()
  if (baseUrl) root.baseUrl = baseUrl
  await root.plugin(Llm)
  const host = await root.plugin({ name: 'host', inject: ['llm'], apply() {} })
  const fiber = await host.ctx.plugin(Scripted, config)
  const ctx = host.ctx
  const adapter = scriptedAdapterOf(ctx, config.provider)!
  return { root, ctx, fiber, adapter, llm: ctx.llm }
}

async function collect(stream: AsyncIterable<StreamChunk>): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = []
  for await (const chunk of stream) chunks.push(chunk)
  return chunks
}

function assembled(chunks: StreamChunk[]) {
  const assembler = new BlockAssembler()
  for (const chunk of chunks) assembler.push(chunk)
  return assembler
}

const request = (extra: Partial<GenerateOptions> = {}): GenerateOptions => ({
  provider: 'scripted',
  model: 'any',
  messages: [userText('hello')],
  ...extra,
})

/** Streams one request straight through the adapter (no runtime). */
const direct = (adapter: ScriptedAdapter, extra?: Partial<GenerateOptions>) => collect(adapter.stream(request(extra)))

const exhaustedFinish = (played: number): StreamChunk => ({
  type: 'finish',
  reason: { kind: 'error', failure: { message: `the scripted model has no more responses (${played} played)`, code: 'SCRIPT_EXHAUSTED' } },
})

describe('the plugin', () => {
  it('registers a scripted adapter for config.provider (default "scripted")', async () => {
    const { llm, adapter } = await mount({ script: ['hi'] })
    expect(adapter).toBeInstanceOf(ScriptedAdapter)
    expect(llm.listProviders()).toEqual([{ id: 'scripted', name: 'scripted (scripted)' }])
    const other = await mount({ provider: 'mock', model: 'mock-1' })
    expect(other.llm.listProviders().map(p => p.id)).toEqual(['mock'])
    expect(await other.llm.listModels('mock')).toEqual([{ provider: 'mock', id: 'mock-1', name: 'mock-1' }])
    expect(await other.llm.resolveModelInfo('mock', 'anything')).toEqual({ provider: 'mock', id: 'anything', name: 'anything' })
  })

  it('has the plugin module shape and config defaults', () => {
    expect(Scripted.name).toBe('@loom/llm-scripted')
    expect(Scripted.inject).toEqual(['llm'])
    expect(Config({})).toEqual({ provider: 'scripted', script: [], loop: false })
    expect(() => Config({ script: [{ text: 3 }] } as never)).toThrow(/script\[0\]/)
  })

  it('its route dies with the plugin', async () => {
    const { llm, fiber } = await mount({ script: ['hi'] })
    await fiber.dispose()
    expect(llm.listProviders()).toEqual([])
  })

  it('answers through ctx.llm.stream, with usage estimated from the request', async () => {
    const { llm } = await mount({ script: ['Hello there, world'] })
    const req = request({ system: 'You are terse.' })
    const chunks = await collect(llm.stream(req))
    expect(chunks[0]).toEqual({ type: 'block-start', index: 0, blockType: 'text' })
    const deltas = chunks.filter(c => c.type === 'text-delta')
    expect(deltas.length).toBeGreaterThan(1)
    expect(deltas.map(d => (d as { text: string }).text).join('')).toBe('Hello there, world')
    expect(chunks.at(-3)).toEqual({ type: 'block-end', index: 0, block: { type: 'text', text: 'Hello there, world' } })
    expect(chunks.at(-2)).toEqual({ type: 'usage', usage: { inputTokens: estimateInputTokens(req), outputTokens: 5 } })
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: { kind: 'stop' } })
    // system ceil(14/4)+4 = 8; message (ceil(5/4)+4)+4 = 10
    expect(estimateInputTokens(req)).toBe(18)
  })

  it('resolves a relative replay path against the host base URL', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'loom-scripted-'))
    writeFileSync(join(dir, 'log.jsonl'), sessionLog([assistantMessage(1, [{ type: 'text', text: 'from the log' }])]))
    const { llm } = await mount({ replay: 'log.jsonl' }, pathToFileURL(dir + '/').href)
    expect(assembled(await collect(llm.stream(request()))).blocks()).toEqual([{ type: 'text', text: 'from the log' }])
  })
})

describe('scripted answers', () => {
  it('a reply streams reasoning, text and tool calls as separate blocks', async () => {
    const adapter = new ScriptedAdapter({
      script: [
        {
          reasoning: 'The user wants a file listing.',
          text: 'Let me look.',
          toolCalls: [
            { id: 'c1', name: 'bash', arguments: { command: 'ls -la /tmp/some/where' } },
            { name: 'read', arguments: { path: 'a.txt' } },
          ],
        },
      ],
    })
    const chunks = await direct(adapter)
    const a = assembled(chunks)
    expect(a.blocks()).toEqual([
      { type: 'reasoning', text: 'The user wants a file listing.' },
      { type: 'text', text: 'Let me look.' },
      { type: 'tool-call', id: 'c1', name: 'bash', arguments: '{"command":"ls -la /tmp/some/where"}' },
      { type: 'tool-call', id: 'scripted-1', name: 'read', arguments: '{"path":"a.txt"}' },
    ])
    expect(a.finish).toEqual({ kind: 'tool-calls' })
    expect(a.usage?.reasoningTokens).toBeGreaterThan(0)
    const bashDeltas = chunks.filter(c => c.type === 'tool-call-delta' && c.index === 2)
    expect(bashDeltas.length).toBeGreaterThan(1)
    expect(bashDeltas[0]).toMatchObject({ id: 'c1', name: 'bash' })
    expect(bashDeltas.slice(1).every(d => !('name' in d))).toBe(true)
    expect(chunks.filter(c => c.type === 'block-start').map(c => (c as { blockType: string }).blockType)).toEqual([
      'reasoning',
      'text',
      'tool-call',
      'tool-call',
    ])
  })

  it('defaulted tool-call ids keep counting across calls', async () => {
    const adapter = new ScriptedAdapter({ script: [{ toolCalls: [{ name: 'a' }] }, { toolCalls: [{ name: 'b' }] }] })
    const first = assembled(await direct(adapter)).blocks()
    const second = assembled(await direct(adapter)).blocks()
    expect(first).toEqual([{ type: 'tool-call', id: 'scripted-1', name: 'a', arguments: '{}' }])
    expect(second).toEqual([{ type: 'tool-call', id: 'scripted-2', name: 'b', arguments: '{}' }])
  })

  it('an empty reply is an empty completion', async () => {
    const adapter = new ScriptedAdapter({ script: [''] })
    const chunks = await direct(adapter)
    expect(chunks.map(c => c.type)).toEqual(['usage', 'finish'])
  })

  it('an error entry fails the call with that failure', async () => {
    const { llm } = await mount({ script: [{ error: { code: 'RATE_LIMIT', message: 'slow down' } }, 'after'] })
    expect(await collect(llm.stream(request()))).toEqual([{ type: 'finish', reason: { kind: 'error', failure: { message: 'slow down', code: 'RATE_LIMIT' } } }])
    expect(assembled(await collect(llm.stream(request()))).blocks()).toEqual([{ type: 'text', text: 'after' }])
  })

  it('a chunk array is streamed verbatim', async () => {
    const adapter = new ScriptedAdapter({ script: [textResponse('ok'), toolCallResponse('c1', 'echo', { text: 'ping' }, 'calling echo')] })
    expect(await direct(adapter)).toEqual(textResponse('ok'))
    expect(await direct(adapter)).toEqual(toolCallResponse('c1', 'echo', { text: 'ping' }, 'calling echo'))
  })

  it('a function entry answers from the request, with any entry kind or its own stream', async () => {
    const adapter = new ScriptedAdapter({
      script: [
        req => `you said ${(req.messages[0].content[0] as { text: string }).text}`,
        async () => ({ error: { code: 'AUTH', message: 'provider 401' } }),
        () =>
          (async function* () {
            yield* textResponse('own')
          })(),
        () => {
          throw new Error('script function failed')
        },
      ],
    })
    expect(assembled(await direct(adapter)).blocks()).toEqual([{ type: 'text', text: 'you said hello' }])
    expect(await direct(adapter)).toEqual([{ type: 'finish', reason: { kind: 'error', failure: { message: 'provider 401', code: 'AUTH' } } }])
    expect(await direct(adapter)).toEqual(textResponse('own'))
    await expect(direct(adapter)).rejects.toThrow('script function failed')
  })

  it('a throwing function becomes a finish error through the runtime', async () => {
    const root = new Context()
    await root.plugin(Llm)
    const host = await root.plugin({ name: 'host', inject: ['llm'], apply() {} })
    host.ctx.llm.registerAdapter(
      ['scripted'],
      new ScriptedAdapter({
        script: [
          () => {
            throw new Error('boom')
          },
        ],
      }),
    )
    expect(await collect(host.ctx.llm.stream(request()))).toEqual([
      { type: 'finish', reason: { kind: 'error', failure: { message: 'boom', code: 'UNKNOWN' } } },
    ])
  })

  it('rejects malformed entries, naming them', () => {
    expect(() => new ScriptedAdapter({ script: ['ok', { txt: 'typo' } as never] })).toThrow('script entry 1 has unknown key "txt"')
    expect(() => new ScriptedAdapter({ script: [{ error: { code: 'X' } } as never] })).toThrow(/script entry 0.*"code" and "message"/)
    expect(() => new ScriptedAdapter({ script: [{ toolCalls: [{ arguments: {} }] } as never] })).toThrow(/tool call 0 needs a non-empty "name"/)
    expect(() => new ScriptedAdapter({ script: [{ toolCalls: [{ name: 'x', arguments: [] }] } as never] })).toThrow(/"arguments" must be an object/)
    expect(() => new ScriptedAdapter({ script: [42 as never] })).toThrow(/script entry 0 must be/)
  })

  it('honours the request signal between chunks', async () => {
    const root = new Context()
    await root.plugin(Llm)
    const host = await root.plugin({ name: 'host', inject: ['llm'], apply() {} })
    host.ctx.llm.registerAdapter(['scripted'], new ScriptedAdapter({ script: ['one two three four'] }))
    const controller = new AbortController()
    const chunks: StreamChunk[] = []
    for await (const chunk of host.ctx.llm.stream(request({ signal: controller.signal }))) {
      chunks.push(chunk)
      if (chunk.type === 'text-delta') controller.abort()
    }
    expect(chunks.map(c => c.type)).toEqual(['block-start', 'text-delta', 'finish'])
    expect(chunks[2]).toMatchObject({ reason: { kind: 'aborted' } })
  })
})

describe('running out', () => {
  it('fails every later call with SCRIPT_EXHAUSTED, counting what was played', async () => {
    const adapter = new ScriptedAdapter({ script: ['one', 'two'] })
    await direct(adapter)
    await direct(adapter)
    expect(adapter.played).toBe(2)
    expect(adapter.remaining).toBe(0)
    expect(await direct(adapter)).toEqual([exhaustedFinish(2)])
    expect(await direct(adapter)).toEqual([exhaustedFinish(2)])
    expect(await direct(new ScriptedAdapter())).toEqual([exhaustedFinish(0)])
  })

  it('with loop, starts over', async () => {
    const adapter = new ScriptedAdapter({ script: ['one', 'two'], loop: true })
    const texts: unknown[] = []
    for (let i = 0; i < 5; i++) texts.push(assembled(await direct(adapter)).blocks()[0])
    expect(texts).toEqual(['one', 'two', 'one', 'two', 'one'].map(text => ({ type: 'text', text })))
    expect(adapter.played).toBe(5)
    expect(await direct(new ScriptedAdapter({ loop: true }))).toEqual([exhaustedFinish(0)])
  })

  it('append adds answers at the end', async () => {
    const adapter = new ScriptedAdapter({ script: ['one'] })
    await direct(adapter)
    adapter.append('two')
    expect(assembled(await direct(adapter)).blocks()).toEqual([{ type: 'text', text: 'two' }])
  })
})

describe('recorded requests', () => {
  it('records every request as received, exhausted ones included', async () => {
    const { llm, adapter } = await mount({ script: ['one'] })
    const first = deepFreeze(request({ system: 'sys' }))
    const second = request({ messages: [] })
    await collect(llm.stream(first))
    await collect(llm.stream(second))
    expect(adapter.requests).toHaveLength(2)
    expect(adapter.requests[0]).toBe(first)
    expect(adapter.requests[1]).toBe(second)
  })

  it('records requests that come through a prepared call', async () => {
    const { llm, adapter } = await mount({ script: ['one'] })
    const prepared = await llm.prepareCall({ provider: 'scripted', model: 'x' })
    await collect(prepared.stream({ ...prepared.config, messages: [userText('q')] }))
    expect(adapter.requests.map(r => r.model)).toEqual(['x'])
  })

  it('scriptedAdapterOf finds only scripted adapters', async () => {
    const { ctx } = await mount({ script: [] })
    expect(scriptedAdapterOf(ctx)).toBeInstanceOf(ScriptedAdapter)
    expect(scriptedAdapterOf(ctx, 'other')).toBeUndefined()
  })
})

// A session log as the JSONL backend writes it: a header line, then events.
function sessionLog(events: object[]): string {
  const header = { type: 'session', version: 0, id: 's1', createdAt: 1, delegationDepth: 0 }
  return [header, ...events].map(line => JSON.stringify(line)).join('\n') + '\n'
}

let seq = 0
function assistantMessage(turn: number, content: object[], extra: object = {}) {
  return {
    type: 'assistant/message',
    seq: ++seq,
    time: 1000 + seq,
    data: { turn, step: 1, message: { id: `m${seq}`, role: 'assistant', content, source: { kind: 'model', provider: 'openai', model: 'gpt' } }, ...extra },
    surfaceOp: 'append',
    sourceEventSeqs: [],
  }
}

describe('replay', () => {
  let dir: string
  afterEach(() => {
    seq = 0
  })

  function writeLog(events: object[]) {
    dir = mkdtempSync(join(tmpdir(), 'loom-replay-'))
    const file = join(dir, 'session.jsonl')
    writeFileSync(file, sessionLog(events))
    return file
  }

  const log = () =>
    writeLog([
      { type: 'turn/start', seq: 1, time: 1, data: { turn: 1 } },
      { type: 'user/message', seq: 2, time: 2, data: { id: 'u1', role: 'user', content: [{ type: 'text', text: 'list files' }], source: { kind: 'user' } } },
      // A packed chunk row: ignored.
      { type: 'text-chunks', turn: 1, step: 1, index: 0, seq: 3, time: 3, texts: ['a', 'b', 'c'] },
      assistantMessage(
        1,
        [
          { type: 'reasoning', text: 'use bash' },
          { type: 'tool-call', id: 'call_9', name: 'bash', arguments: '{"command":"ls"}' },
        ],
        { usage: { inputTokens: 120, outputTokens: 30 } },
      ),
      assistantMessage(1, [{ type: 'text', text: 'cancelled half' }], { interrupted: true }),
      assistantMessage(2, [{ type: 'text', text: 'Here are the files.' }]),
    ])

  it('loadReplay reads the recorded assistant messages in order, skipping interrupted ones', () => {
    expect(loadReplay(log())).toEqual([
      {
        blocks: [
          { type: 'reasoning', text: 'use bash' },
          { type: 'tool-call', id: 'call_9', name: 'bash', arguments: '{"command":"ls"}' },
        ],
        usage: { inputTokens: 120, outputTokens: 30 },
      },
      { blocks: [{ type: 'text', text: 'Here are the files.' }] },
    ])
  })

  it('answers with the recorded messages, then the script, then runs out', async () => {
    const adapter = new ScriptedAdapter({ replay: log(), script: ['scripted tail'] })
    const first = await direct(adapter)
    const a = assembled(first)
    expect(a.blocks()).toEqual([
      { type: 'reasoning', text: 'use bash' },
      { type: 'tool-call', id: 'call_9', name: 'bash', arguments: '{"command":"ls"}' },
    ])
    expect(a.finish).toEqual({ kind: 'tool-calls' })
    expect(a.usage).toEqual({ inputTokens: 120, outputTokens: 30 })
    const second = assembled(await direct(adapter))
    expect(second.blocks()).toEqual([{ type: 'text', text: 'Here are the files.' }])
    expect(second.finish).toEqual({ kind: 'stop' })
    expect(second.usage?.inputTokens).toBe(estimateInputTokens(request()))
    expect(assembled(await direct(adapter)).blocks()).toEqual([{ type: 'text', text: 'scripted tail' }])
    expect(await direct(adapter)).toEqual([exhaustedFinish(3)])
  })

  it('through the plugin config', async () => {
    const { llm } = await mount({ replay: log() })
    expect(assembled(await collect(llm.stream(request()))).finish).toEqual({ kind: 'tool-calls' })
  })

  it('fails loud on a missing file, a file that is not a session log, or a broken line', () => {
    expect(() => new ScriptedAdapter({ replay: join(tmpdir(), 'does-not-exist.jsonl') })).toThrow(/cannot read the replay log/)
    dir = mkdtempSync(join(tmpdir(), 'loom-replay-'))
    const notLog = join(dir, 'not-a-log.jsonl')
    writeFileSync(notLog, '{"type":"turn/start"}\n')
    expect(() => new ScriptedAdapter({ replay: notLog })).toThrow(/not a session log/)
    const broken = join(dir, 'broken.jsonl')
    writeFileSync(broken, sessionLog([]) + '{not json\n')
    expect(() => new ScriptedAdapter({ replay: broken })).toThrow(/line 2/)
  })
})

describe('textResponse and toolCallResponse', () => {
  it('textResponse: one delta per character, usage {10, length}, finish stop', () => {
    expect(textResponse('ok')).toEqual([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text: 'o' },
      { type: 'text-delta', index: 0, text: 'k' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'ok' } },
      { type: 'usage', usage: { inputTokens: 10, outputTokens: 2 } },
      { type: 'finish', reason: { kind: 'stop' } },
    ])
    expect(textResponse('abc')).toHaveLength(7)
  })

  it('toolCallResponse with text: a text block, then the call split at 5 characters', () => {
    expect(toolCallResponse('c1', 'echo', { text: 'ping' }, 'calling echo')).toEqual([
      { type: 'block-start', index: 0, blockType: 'text' },
      { type: 'text-delta', index: 0, text: 'calling echo' },
      { type: 'block-end', index: 0, block: { type: 'text', text: 'calling echo' } },
      { type: 'block-start', index: 1, blockType: 'tool-call' },
      { type: 'tool-call-delta', index: 1, id: 'c1', name: 'echo', argumentsDelta: '{"tex' },
      { type: 'tool-call-delta', index: 1, id: 'c1', argumentsDelta: 't":"ping"}' },
      { type: 'block-end', index: 1, block: { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":"ping"}' } },
      { type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } },
      { type: 'finish', reason: { kind: 'tool-calls' } },
    ])
  })

  it('toolCallResponse without text starts at index 0', () => {
    const chunks = toolCallResponse('c2', 'noop', {})
    expect(chunks).toHaveLength(6)
    expect(chunks[0]).toEqual({ type: 'block-start', index: 0, blockType: 'tool-call' })
    expect(chunks[1]).toEqual({ type: 'tool-call-delta', index: 0, id: 'c2', name: 'noop', argumentsDelta: '{}' })
    expect(chunks[2]).toEqual({ type: 'tool-call-delta', index: 0, id: 'c2', argumentsDelta: '' })
  })
})
