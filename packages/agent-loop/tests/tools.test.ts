// Tool scheduling: spec section 5.6 (contracts 101–110), plus the model calling
// an unknown tool or passing bad arguments.
import { Context } from '@deepseek-ai/cordis'
import AgentLoop from '@loom/agent-loop'
import Llm, { HarnessError } from '@loom/llm'
import SessionStore, { type SessionEvent } from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool, type ToolRunContext } from '@loom/tools'
import { describe, expect, it } from 'vitest'
import { harness, textResponse, toolCallResponse } from './harness.ts'
import { danglingToolCalls, gate, logProblems, ofType, quiesce, rawToolCall, toolCallsResponse, turnEndReasons, type Gate } from './failure-kit.ts'

const EMPTY = { type: 'object', properties: {} }

/** `tool/call:c1`, `tool/result:c1`, … */
function callsAndResults(events: readonly SessionEvent[]): string[] {
  return events.flatMap(event => {
    if (event.type === 'tool/call') return [`tool/call:${(event.data as any).callId}`]
    if (event.type === 'tool/result') return [`tool/result:${(event.data as any).message.source.callId}`]
    return []
  })
}

function resultIds(events: readonly SessionEvent[]): string[] {
  return ofType(events, 'tool/result').map(event => (event.data as any).message.source.callId)
}

/** The text the model reads in the n-th tool result. */
function resultText(event: SessionEvent): string {
  return (event.data as any).message.content[0].content.map((block: any) => block.text).join('')
}

/** A parallel-safe tool `gated` whose call `{id}` records its start and waits for `gates[id]`. */
function gatedTool(started: string[], gates: Record<string, Gate>) {
  return defineTool<{ id: string }>({
    name: 'gated',
    description: 'Waits for its gate.',
    parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
    isConcurrencySafe: () => true,
    async execute({ id }) {
      started.push(id)
      await gates[id].promise
      return `done ${id}`
    },
  })
}

function gatedCalls(ids: string[]) {
  return toolCallsResponse(ids.map(id => ({ id: `c${id}`, name: 'gated', args: { id } })))
}

/** A fresh root with the spine services but no agent loop, for constructing one by hand. */
async function bareHost(): Promise<Context> {
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: '' })
  await root.plugin(SessionStore)
  await root.plugin(Llm)
  await root.plugin(ToolRuntime)
  return (await root.plugin({ name: 'bare', inject: ['systemPrompt', 'sessions', 'llm', 'tools'], apply() {} })).ctx
}

describe('tool scheduling (5.6)', () => {
  it('parallel-safe calls all start before any is released (101)', async () => {
    const started: string[] = []
    const gates = { 1: gate(), 2: gate(), 3: gate() }
    const h = await harness({
      script: [gatedCalls(['1', '2', '3']), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(gatedTool(started, gates))
      },
    })
    h.send('go')
    await quiesce()

    expect(started).toEqual(['1', '2', '3'])
    expect(ofType(h.events(), 'tool/result')).toEqual([])
    Object.values(gates).forEach(g => g.release())
    await h.settle()
    expect(resultIds(h.events())).toEqual(['c1', 'c2', 'c3'])
  })

  it('an exclusive call is a barrier between parallel groups (102)', async () => {
    const order: string[] = []
    const h = await harness({
      script: [
        toolCallsResponse([
          { id: 'c1', name: 'r', args: { id: 'A1' } },
          { id: 'c2', name: 'w', args: { id: 'A2' } },
          { id: 'c3', name: 'r', args: { id: 'A3' } },
        ]),
        textResponse('ok'),
      ],
      setup: ctx => {
        const parameters = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }
        ctx.tools.register(
          defineTool<{ id: string }>({
            name: 'r',
            description: 'Reads.',
            parameters,
            isConcurrencySafe: true,
            async execute({ id }) {
              order.push(`r-start-${id}`)
              await quiesce()
              order.push(`r-end-${id}`)
              return 'read'
            },
          }),
        )
        ctx.tools.register(
          defineTool<{ id: string }>({
            name: 'w',
            description: 'Writes.',
            parameters,
            execute({ id }) {
              order.push(`w-${id}`)
              return 'written'
            },
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    expect(order).toEqual(['r-start-A1', 'r-end-A1', 'w-A2', 'r-start-A3', 'r-end-A3'])
    expect(resultIds(h.events())).toEqual(['c1', 'c2', 'c3'])
  })

  it('results are committed in model order (103)', async () => {
    const started: string[] = []
    const gates = { 1: gate(), 2: gate() }
    const h = await harness({
      script: [gatedCalls(['1', '2']), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(gatedTool(started, gates))
      },
    })
    h.send('go')
    await quiesce()
    expect(started).toEqual(['1', '2'])

    gates[2].release()
    await quiesce()
    expect(ofType(h.events(), 'tool/result')).toEqual([])
    gates[1].release()
    await h.settle()

    const events = h.events()
    expect(resultIds(events)).toEqual(['c1', 'c2'])
    expect(resultText(ofType(events, 'tool/result')[0])).toBe('done 1')
    const history = h.adapter.requests[1].messages
    expect(history.map(m => m.role)).toEqual(['user', 'assistant', 'user', 'user'])
    expect(history[1].content.map(block => block.type === 'tool-call' && block.id)).toEqual(['c1', 'c2'])
    expect(history.slice(2).map(m => m.content[0].type === 'tool-result' && m.content[0].toolCallId)).toEqual(['c1', 'c2'])
  })

  it('the pool cap bounds the bodies in flight (104)', async () => {
    const started: string[] = []
    const gates = { 1: gate(), 2: gate(), 3: gate(), 4: gate() }
    const h = await harness({
      loop: { maxParallelToolCalls: 2 },
      script: [gatedCalls(['1', '2', '3', '4']), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(gatedTool(started, gates))
      },
    })
    h.send('go')
    await quiesce()
    expect(started).toEqual(['1', '2'])
    gates[1].release()
    await quiesce()
    expect(started).toEqual(['1', '2', '3'])
    gates[2].release()
    await quiesce()
    expect(started).toEqual(['1', '2', '3', '4'])
    gates[3].release()
    gates[4].release()
    await h.settle()

    const events = h.events()
    expect(callsAndResults(events).slice(0, 4)).toEqual(['tool/call:c1', 'tool/call:c2', 'tool/result:c1', 'tool/call:c3'])
    expect(resultIds(events)).toEqual(['c1', 'c2', 'c3', 'c4'])

    // Cap 1: strictly serial.
    const trace: string[] = []
    const serial = await harness({
      loop: { maxParallelToolCalls: 1 },
      script: [gatedCalls(['1', '2', '3']), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          defineTool<{ id: string }>({
            name: 'gated',
            description: 'Records its span.',
            parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
            isConcurrencySafe: true,
            async execute({ id }) {
              trace.push(`start-${id}`)
              await quiesce()
              trace.push(`end-${id}`)
              return id
            },
          }),
        )
      },
    })
    serial.send('go')
    await serial.settle()
    expect(trace).toEqual(['start-1', 'end-1', 'start-2', 'end-2', 'start-3', 'end-3'])
    expect(callsAndResults(serial.events())).toEqual(['tool/call:c1', 'tool/result:c1', 'tool/call:c2', 'tool/result:c2', 'tool/call:c3', 'tool/result:c3'])
  })

  it('the cap must be a positive integer and defaults to 10 (105)', async () => {
    const zero = await bareHost()
    const fraction = await bareHost()
    expect(() => new AgentLoop(zero, { maxParallelToolCalls: 0 })).toThrow('maxParallelToolCalls must be a positive integer')
    expect(() => new AgentLoop(fraction, { maxParallelToolCalls: 1.5 })).toThrow('maxParallelToolCalls must be a positive integer')
    const omitted = await bareHost()
    expect(new AgentLoop(omitted, {}).config.maxParallelToolCalls).toBe(10)
    const bare = await bareHost()
    expect(new AgentLoop(bare).config.maxParallelToolCalls).toBe(10)
  })

  it('a pre-execute deny is an error result without error info (106)', async () => {
    let runs = 0
    const h = await harness({
      script: [toolCallResponse('c1', 'danger', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'danger',
            description: 'Dangerous.',
            parameters: EMPTY,
            execute: () => {
              runs++
              return 'done'
            },
          }),
        )
      },
    })
    h.agent.ctx.on('tools/pre-execute', async () => ({ kind: 'deny', reason: 'blocked dangerous tool' }))
    h.send('go')
    await h.settle()

    expect(runs).toBe(0)
    const [result] = ofType(h.events(), 'tool/result')
    expect((result.data as any).message.content).toEqual([
      { type: 'tool-result', toolCallId: 'c1', isError: true, content: [{ type: 'text', text: 'Error: blocked dangerous tool' }] },
    ])
    expect(result.data).not.toHaveProperty('error')
    expect(h.adapter.requests).toHaveLength(2)
  })

  it('a HarnessError from the body is a structured error result (107)', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'bomb', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'bomb',
            description: 'Explodes.',
            parameters: EMPTY,
            execute: () => {
              throw new HarnessError('exploded', 'BOOM')
            },
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    const [result] = ofType(h.events(), 'tool/result')
    expect((result.data as any).error).toEqual({ name: 'HarnessError', code: 'BOOM' })
    expect((result.data as any).message.content[0].isError).toBe(true)
    expect(resultText(result)).toBe('Error: exploded')
    expect(turnEndReasons(h.events())).toEqual([{ kind: 'completed' }])
  })

  it('raw argument text reaches the log and the execution as is; empty text is {} (108)', async () => {
    const bodies: unknown[] = []
    const seen: unknown[] = []
    const h = await harness({
      script: [
        [...rawToolCall('c1', 'probe', 'not json'), { type: 'finish', reason: { kind: 'tool-calls' } }],
        [...rawToolCall('c2', 'probe', ''), { type: 'finish', reason: { kind: 'tool-calls' } }],
        textResponse('ok'),
      ],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'probe',
            description: 'Takes anything.',
            parameters: EMPTY,
            execute: (args: unknown) => {
              bodies.push(args)
              return 'probed'
            },
          }),
        )
      },
    })
    h.agent.ctx.on('tools/pre-execute', async (exec: ToolRunContext, next) => {
      seen.push(exec.arguments)
      return next()
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(ofType(events, 'tool/call').map(event => (event.data as any).arguments)).toEqual(['not json', ''])
    expect(resultIds(events)).toEqual(['c1', 'c2'])
    expect(seen).toEqual(['not json', {}])
    expect(bodies).toEqual([{}])
    expect(h.adapter.requests).toHaveLength(3)
    expect(turnEndReasons(events)).toEqual([{ kind: 'completed' }])
  })

  it('an unknown tool is a ToolNotFoundError result, after pre-execute (109)', async () => {
    const preExecuted: string[] = []
    const h = await harness({
      script: [toolCallResponse('c1', 'nope', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(defineTool({ name: 'read', description: 'Reads.', parameters: EMPTY, execute: () => 'content' }))
      },
    })
    h.agent.ctx.on('tools/pre-execute', async (exec: ToolRunContext, next) => {
      preExecuted.push(exec.name)
      return next()
    })
    h.send('go')
    await h.settle()

    const [result] = ofType(h.events(), 'tool/result')
    expect(resultText(result)).toBe('Error: unknown tool "nope"; available tools: read')
    expect((result.data as any).error).toEqual({ name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' })
    expect((result.data as any).message.content[0].isError).toBe(true)
    expect(preExecuted).toEqual(['nope'])
  })

  it('presentation meta lands in tool/result.data.meta, not in the model history (110)', async () => {
    const meta = { kind: 'diff', files: [{ path: 'a.ts', added: 3, removed: 1 }], ok: true, note: null }
    const h = await harness({
      script: [toolCallResponse('c1', 'edit', {}), textResponse('ok')],
      setup: ctx => {
        ctx.tools.register(defineTool({ name: 'edit', description: 'Edits.', parameters: EMPTY, execute: () => ({ content: 'edited', meta }) }))
      },
    })
    h.send('go')
    await h.settle()

    const [result] = ofType(h.events(), 'tool/result')
    expect((result.data as any).meta).toEqual(meta)
    expect(resultText(result)).toBe('edited')
    expect(JSON.stringify(h.adapter.requests[1].messages)).not.toContain('a.ts')
  })

  it('an unknown tool: the model reads UNKNOWN_TOOL and the turn goes on to a second request', async () => {
    const h = await harness({
      script: [toolCallResponse('c1', 'nope', { x: 1 }), textResponse('sorry')],
      setup: ctx => {
        ctx.tools.register(defineTool({ name: 'read', description: 'Reads.', parameters: EMPTY, execute: () => 'content' }))
        ctx.tools.register(defineTool({ name: 'bash', description: 'Runs.', parameters: EMPTY, execute: () => 'ran' }))
      },
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(h.adapter.requests).toHaveLength(2)
    const second = h.adapter.requests[1].messages
    expect(second.map(m => m.role)).toEqual(['user', 'assistant', 'user'])
    expect(second[2].content).toEqual([
      {
        type: 'tool-result',
        toolCallId: 'c1',
        isError: true,
        content: [{ type: 'text', text: 'Error: unknown tool "nope"; available tools: bash, read' }],
      },
    ])
    expect((ofType(events, 'tool/result')[0].data as any).error).toEqual({ name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' })
    expect(ofType(events, 'step/start')).toHaveLength(2)
    expect(turnEndReasons(events)).toEqual([{ kind: 'completed' }])
    expect(logProblems(events)).toEqual([])
    expect(danglingToolCalls(h.agent.session.deriveMessages())).toEqual([])
  })

  it('arguments that violate the schema: the model reads INVALID_ARGS and the turn goes on', async () => {
    let runs = 0
    const h = await harness({
      script: [toolCallResponse('c1', 'edit', { path: 7, extra: true }), textResponse('fixed')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'edit',
            description: 'Edits a file.',
            parameters: {
              type: 'object',
              properties: { command: { type: 'string' }, path: { type: 'string' } },
              required: ['command'],
              additionalProperties: false,
            },
            execute: () => {
              runs++
              return 'edited'
            },
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(runs).toBe(0)
    const [result] = ofType(events, 'tool/result')
    expect((result.data as any).error).toEqual({ name: 'ToolArgsError', code: 'INVALID_ARGS' })
    expect(resultText(result)).toBe(
      'Error: invalid arguments for tool "edit": must have required property \'command\'; must NOT have additional properties ("extra"); /path must be string',
    )
    expect(h.adapter.requests).toHaveLength(2)
    expect(h.adapter.requests[1].messages[2].content[0]).toMatchObject({ type: 'tool-result', toolCallId: 'c1', isError: true })
    expect(turnEndReasons(events)).toEqual([{ kind: 'completed' }])
    expect(logProblems(events)).toEqual([])
  })

  it('argument text that is not JSON: the model reads INVALID_ARGS and the turn goes on', async () => {
    let runs = 0
    const h = await harness({
      script: [[...rawToolCall('c1', 'edit', '{"command": "x",'), { type: 'finish', reason: { kind: 'tool-calls' } }], textResponse('fixed')],
      setup: ctx => {
        ctx.tools.register(
          defineTool({
            name: 'edit',
            description: 'Edits a file.',
            parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
            execute: () => {
              runs++
              return 'edited'
            },
          }),
        )
      },
    })
    h.send('go')
    await h.settle()

    const events = h.events()
    expect(runs).toBe(0)
    expect((ofType(events, 'tool/call')[0].data as any).arguments).toBe('{"command": "x",')
    const [result] = ofType(events, 'tool/result')
    expect((result.data as any).error).toEqual({ name: 'ToolArgsError', code: 'INVALID_ARGS' })
    let parserMessage = ''
    try {
      JSON.parse('{"command": "x",')
    } catch (error) {
      parserMessage = (error as Error).message
    }
    expect(resultText(result)).toBe(`Error: invalid arguments for tool "edit": arguments are not valid JSON (${parserMessage})`)
    expect(h.adapter.requests).toHaveLength(2)
    const answer = h.adapter.requests[1].messages[2].content[0]
    expect(answer).toMatchObject({ type: 'tool-result', toolCallId: 'c1', isError: true })
    expect(turnEndReasons(events)).toEqual([{ kind: 'completed' }])
    expect(logProblems(events)).toEqual([])
  })
})
