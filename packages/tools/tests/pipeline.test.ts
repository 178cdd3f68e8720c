// The per-call pipeline (spec 1.10 steps 1-11) through ctx.tools.execute.
import { describe, expect, it } from 'vitest'
import { HarnessError, type UserMessage } from '@loom/llm'
import { defineTool, ToolTimeoutError, type ToolExecutionResult, type ToolRunContext } from '@loom/tools'
import { deferred, host, simple, text, userText } from './helpers.ts'

const ABORTED_BEFORE = {
  isError: true,
  error: { message: 'tool call aborted before dispatch', info: { name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' } },
  content: [{ type: 'text', text: 'Error: tool call aborted before dispatch' }],
}
const ABORTED = {
  isError: true,
  error: { message: 'tool call aborted', info: { name: 'AbortError', code: 'ABORTED' } },
  content: [{ type: 'text', text: 'Error: tool call aborted' }],
}

function tool(name: string, execute: (args: any, exec: ToolRunContext) => unknown, extra: object = {}) {
  return defineTool({ name, description: name, parameters: { type: 'object' }, execute: execute as never, ...extra })
}

/** Records which hooks ran, in order. */
function trace(h: Awaited<ReturnType<typeof host>>) {
  const seen: string[] = []
  h.ctx.on('tools/pre-execute', async (exec, next) => {
    seen.push(`pre:${exec.name}`)
    return next()
  })
  h.ctx.on('tools/execute', async (exec, next) => {
    seen.push(`execute:${exec.name}`)
    return next()
  })
  h.ctx.on('tools/post-execute', async (exec, _result, next) => {
    seen.push(`post:${exec.name}`)
    return next()
  })
  h.ctx.on('tools/result', exec => {
    seen.push(`result:${exec.name}`)
  })
  return seen
}

describe('results', () => {
  it('a string becomes one text block; the result is deeply frozen', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t', 'hello'))
    const result = await h.run('t')
    expect(result).toEqual({ isError: false, content: [{ type: 'text', text: 'hello' }] })
    expect(Object.isFrozen(result)).toBe(true)
    expect(Object.isFrozen(result.content[0])).toBe(true)
  })

  it('content blocks, meta and concludesTurn pass through; meta is detached', async () => {
    const h = await host()
    const meta = { lines: 2 }
    h.ctx.tools.register(
      tool('blocks', () => [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ]),
    )
    h.ctx.tools.register(tool('full', () => ({ content: 'x', meta, concludesTurn: true })))
    expect(await h.run('blocks')).toEqual({
      isError: false,
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    })
    const full = await h.run('full')
    meta.lines = 3
    expect(full).toEqual({ isError: false, content: [{ type: 'text', text: 'x' }], meta: { lines: 2 }, concludesTurn: true })
  })

  it('exec.concludeTurn() concludes the turn', async () => {
    const h = await host()
    h.ctx.tools.register(
      tool('done', (_args, exec) => {
        exec.concludeTurn()
        return 'bye'
      }),
    )
    expect(await h.run('done')).toEqual({ isError: false, content: [{ type: 'text', text: 'bye' }], concludesTurn: true })
  })

  it('deferred contexts become additionalContexts, in order, detached and frozen', async () => {
    const h = await host()
    const a = { ...userText('a') } as UserMessage
    h.ctx.tools.register(
      tool('notes', (_args, exec) => {
        exec.deferContext(a)
        exec.deferContext(userText('b'))
        return 'ok'
      }),
    )
    const result = await h.run('notes')
    ;(a as { id: string }).id = 'changed'
    expect(result.additionalContexts?.map(m => m.content)).toEqual([[{ type: 'text', text: 'a' }], [{ type: 'text', text: 'b' }]])
    expect(result.additionalContexts?.[0].id).not.toBe('changed')
    expect(Object.isFrozen(result.additionalContexts?.[0])).toBe(true)
  })

  it('deferContext rejects something that is not a user message', async () => {
    const h = await host()
    h.ctx.tools.register(
      tool('bad', (_args, exec) => {
        exec.deferContext({ role: 'assistant' } as never)
        return ''
      }),
    )
    expect(text(await h.run('bad'))).toMatch(/^Error: deferContext\(message\) must be a user message/)
  })

  it.each([
    ['undefined', undefined],
    ['a number', 42],
    ['an object without content', { text: 'x' }],
    ['a bad block', [{ text: 'no type' }]],
    ['non-JSON meta', { content: 'x', meta: { f: () => 1 } }],
  ])('an invalid output (%s) is an INVALID_TOOL_OUTPUT error', async (_label, output) => {
    const h = await host()
    h.ctx.tools.register(tool('odd', () => output))
    const result = await h.run('odd')
    expect(result.isError && result.error.info).toEqual({ name: 'ToolOutputError', code: 'INVALID_TOOL_OUTPUT' })
    expect(text(result)).toMatch(/^Error: tool "odd" returned an invalid output: /)
  })
})

describe('arguments', () => {
  it('are snapshotted and deeply frozen before anything sees them', async () => {
    const h = await host()
    const gate = deferred()
    const seen: unknown[] = []
    h.ctx.on('tools/pre-execute', async (exec, next) => {
      seen.push(exec.arguments)
      return next()
    })
    h.ctx.tools.register(
      tool('t', async (args: { list: number[] }) => {
        await gate.promise
        expect(() => args.list.push(3)).toThrow(TypeError)
        return JSON.stringify(args)
      }),
    )
    const args = { list: [1, 2] }
    const pending = h.run('t', args)
    args.list.push(99)
    gate.resolve()
    expect(text(await pending)).toBe('{"list":[1,2]}')
    expect(Object.isFrozen(seen[0])).toBe(true)
  })

  it.each([
    ['a function', { f: () => 1 }, 'a value of type function at /f'],
    ['a Date', { when: new Date(0) }, 'an instance of Date at /when'],
    ['NaN', { n: Number.NaN }, 'non-finite number NaN at /n'],
    ['undefined', { u: undefined }, 'a value of type undefined at /u'],
  ])('not losslessly JSON (%s) is an error result; the body never runs', async (_label, args, problem) => {
    const h = await host()
    const seen = trace(h)
    let ran = false
    h.ctx.tools.register(
      tool('t', () => {
        ran = true
        return ''
      }),
    )
    const result = await h.run('t', args)
    expect(result).toEqual({
      isError: true,
      error: {
        message: `tool execution arguments must be losslessly JSON-serializable (found ${problem})`,
        info: { name: 'ToolArgsError', code: 'INVALID_ARGS' },
      },
      content: [{ type: 'text', text: `Error: tool execution arguments must be losslessly JSON-serializable (found ${problem})` }],
    })
    expect(ran).toBe(false)
    expect(seen).toEqual(['post:t', 'result:t'])
  })

  it('raw text that is not JSON is INVALID_ARGS; hooks see the raw string', async () => {
    const h = await host()
    const seen: unknown[] = []
    h.ctx.on('tools/pre-execute', async (exec, next) => {
      seen.push(exec.arguments)
      return next()
    })
    h.ctx.tools.register(simple('t'))
    const result = await h.run('t', 'not json')
    expect(seen).toEqual(['not json'])
    expect(result.isError && result.error.info).toEqual({ name: 'ToolArgsError', code: 'INVALID_ARGS' })
    expect(text(result)).toMatch(/^Error: invalid arguments for tool "t": arguments are not valid JSON \(.+\)$/)
  })

  it('JSON text is parsed; empty text is no arguments', async () => {
    const h = await host()
    h.ctx.tools.register(tool('echo', args => JSON.stringify(args)))
    expect(text(await h.run('echo', '{"a":1}'))).toBe('{"a":1}')
    expect(text(await h.run('echo', ''))).toBe('{}')
  })
})

describe('pre-execute', () => {
  it('an already-aborted call never reaches a hook or the body', async () => {
    const h = await host()
    const seen = trace(h)
    h.ctx.tools.register(simple('t'))
    const controller = new AbortController()
    controller.abort()
    expect(await h.run('t', {}, { signal: controller.signal })).toEqual(ABORTED_BEFORE)
    expect(seen).toEqual(['result:t'])
  })

  it('deny: Error: <reason>, no info, the body does not run, post-execute still does', async () => {
    const h = await host()
    const seen = trace(h)
    let ran = false
    h.ctx.on('tools/pre-execute', () => ({ kind: 'deny', reason: 'blocked dangerous tool' }))
    h.ctx.tools.register(
      tool('danger', () => {
        ran = true
        return ''
      }),
    )
    const result = await h.run('danger')
    expect(result).toEqual({
      isError: true,
      error: { message: 'blocked dangerous tool' },
      content: [{ type: 'text', text: 'Error: blocked dangerous tool' }],
      meta: { decision: { policy: 'deny', reason: 'blocked dangerous tool' } },
    })
    expect(ran).toBe(false)
    expect(seen).toEqual(['pre:danger', 'post:danger', 'result:danger'])
  })

  it('ask without an approver is a denial saying no one can approve here', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    let reason: string | undefined
    h.ctx.on('tools/pre-execute', () => ({ kind: 'ask', ...(reason && { reason }) }))
    const base = 'tool "t" requires approval, and no one can approve here (no approver is registered)'
    expect(await h.run('t')).toEqual({
      isError: true,
      error: { message: base },
      content: [{ type: 'text', text: `Error: ${base}` }],
      meta: { decision: { policy: 'ask', answer: 'no-approver' } },
    })
    reason = 'writes outside the workspace'
    expect(text(await h.run('t'))).toBe(`Error: ${base}: writes outside the workspace`)
  })

  it('an abort during pre-execute stops the call before dispatch', async () => {
    const h = await host()
    const controller = new AbortController()
    let ran = false
    h.ctx.on('tools/pre-execute', async (_exec, next) => {
      controller.abort()
      return next()
    })
    h.ctx.tools.register(
      tool('t', () => {
        ran = true
        return ''
      }),
    )
    expect(await h.run('t', {}, { signal: controller.signal })).toEqual(ABORTED_BEFORE)
    expect(ran).toBe(false)
  })

  it.each([
    ['undefined', undefined],
    ['an unknown kind', { kind: 'maybe' }],
    ['a deny without reason', { kind: 'deny' }],
  ])('a malformed decision (%s) rejects the call, naming the tool', async (_label, decision) => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/pre-execute', () => decision as never)
    await expect(h.run('t')).rejects.toThrow(/tools\/pre-execute listener returned .* for tool "t"/)
  })

  it('a throwing hook rejects the call', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/pre-execute', () => {
      throw new Error('policy broke')
    })
    await expect(h.run('t')).rejects.toThrow('policy broke')
  })
})

describe('execute', () => {
  it('unknown tool: UNKNOWN_TOOL listing the available tools; pre-execute still ran', async () => {
    const h = await host()
    const seen = trace(h)
    h.ctx.tools.register(simple('read'))
    h.ctx.tools.register(simple('bash'))
    const result = await h.run('nope')
    expect(result).toEqual({
      isError: true,
      error: { message: 'unknown tool "nope"; available tools: bash, read', info: { name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' } },
      content: [{ type: 'text', text: 'Error: unknown tool "nope"; available tools: bash, read' }],
    })
    expect(seen).toEqual(['pre:nope', 'execute:nope', 'post:nope', 'result:nope'])
  })

  it('a throw is Error: <message> without info; a HarnessError carries its name and code', async () => {
    const h = await host()
    h.ctx.tools.register(
      tool('plain', () => {
        throw new Error('disk full')
      }),
    )
    h.ctx.tools.register(
      tool('sync', () => {
        throw new TypeError('bad')
      }),
    )
    h.ctx.tools.register(
      tool('harness', async () => {
        throw new HarnessError('exploded', 'BOOM')
      }),
    )
    h.ctx.tools.register(
      tool('caused', () => {
        throw new Error('write failed', { cause: new Error('EACCES') })
      }),
    )
    h.ctx.tools.register(
      tool('value', () => {
        throw 'just a string'
      }),
    )
    expect(await h.run('plain')).toEqual({ isError: true, error: { message: 'disk full' }, content: [{ type: 'text', text: 'Error: disk full' }] })
    expect(text(await h.run('sync'))).toBe('Error: bad')
    expect(await h.run('harness')).toEqual({
      isError: true,
      error: { message: 'exploded', info: { name: 'HarnessError', code: 'BOOM' } },
      content: [{ type: 'text', text: 'Error: exploded' }],
    })
    expect(text(await h.run('caused'))).toBe('Error: write failed: EACCES')
    expect(text(await h.run('value'))).toBe('Error: just a string')
  })

  it('a wrapper sees the result and may replace it, or answer without the body', async () => {
    const h = await host()
    let ran = 0
    h.ctx.tools.register(
      tool('t', () => {
        ran++
        return 'body'
      }),
    )
    const dispose = h.ctx.on('tools/execute', async (_exec, next) => {
      const result = await next()
      return { ...result, content: [{ type: 'text', text: `wrapped ${text(result)}` }] }
    })
    expect(text(await h.run('t'))).toBe('wrapped body')
    dispose()
    h.ctx.on('tools/execute', () => ({ isError: false, content: [{ type: 'text', text: 'cached' }] }))
    expect(text(await h.run('t'))).toBe('cached')
    expect(ran).toBe(1)
  })

  it('a wrapper returning a malformed result rejects the call', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/execute', () => ({ content: 'x' }) as never)
    await expect(h.run('t')).rejects.toThrow(/tools\/execute listener returned an invalid result for tool "t"/)
  })

  it('an abort after the body started is ABORTED, even if the body ignores it; its contexts are kept', async () => {
    const h = await host()
    const controller = new AbortController()
    const started = deferred()
    h.ctx.tools.register(
      tool('stuck', (_args, exec) => {
        exec.deferContext(userText('partial'))
        started.resolve()
        return new Promise(() => {})
      }),
    )
    const pending = h.run('stuck', {}, { signal: controller.signal })
    await started.promise
    controller.abort()
    const result = await pending
    expect(result).toEqual({ ...ABORTED, additionalContexts: [expect.objectContaining({ content: [{ type: 'text', text: 'partial' }] })] })
  })

  it('a body that fails because of the abort is ABORTED too', async () => {
    const h = await host()
    const controller = new AbortController()
    h.ctx.tools.register(
      tool(
        'polite',
        (_args, exec) =>
          new Promise((_resolve, reject) => {
            exec.signal.addEventListener('abort', () => reject(exec.signal.reason))
            queueMicrotask(() => controller.abort())
          }),
      ),
    )
    expect(await h.run('polite', {}, { signal: controller.signal })).toEqual(ABORTED)
  })

  it('a success that lands after an abort is reviewed (its contexts count) but replaced by ABORTED', async () => {
    const h = await host()
    const controller = new AbortController()
    const seen = trace(h)
    h.ctx.on('tools/execute', async (_exec, next) => {
      const result = await next()
      controller.abort()
      return result
    })
    h.ctx.tools.register(simple('t'))
    expect(await h.run('t', {}, { signal: controller.signal })).toEqual(ABORTED)
    expect(seen).toEqual(['pre:t', 'execute:t', 'post:t', 'result:t'])
  })

  it('an abort inside a wrapper before next() is ABORTED_BEFORE_DISPATCH', async () => {
    const h = await host()
    const controller = new AbortController()
    let ran = false
    h.ctx.on('tools/execute', async (_exec, next) => {
      controller.abort()
      return next()
    })
    h.ctx.tools.register(
      tool('t', () => {
        ran = true
        return ''
      }),
    )
    expect(await h.run('t', {}, { signal: controller.signal })).toEqual(ABORTED_BEFORE)
    expect(ran).toBe(false)
  })

  it('deferContext after the call settled throws', async () => {
    const h = await host()
    let saved: ToolRunContext | undefined
    h.ctx.tools.register(
      tool('t', (_args, exec) => {
        saved = exec
        return ''
      }),
    )
    await h.run('t')
    expect(() => saved!.deferContext(userText('late'))).toThrow(/has already settled/)
    expect(() => saved!.concludeTurn()).toThrow(/has already settled/)
  })
})

describe('timeoutMs', () => {
  it('a body past its timeout is aborted and the call returns TIMEOUT', async () => {
    const h = await host()
    let reason: unknown
    h.ctx.tools.register(
      tool(
        'slow',
        (_args, exec) => {
          exec.signal.addEventListener('abort', () => {
            reason = exec.signal.reason
          })
          return new Promise(() => {})
        },
        { timeoutMs: 20 },
      ),
    )
    // The body never settles: only the timeout can end the call.
    const result = await h.run('slow')
    expect(result).toEqual({
      isError: true,
      error: { message: 'tool "slow" timed out after 20 ms', info: { name: 'ToolTimeoutError', code: 'TIMEOUT' } },
      content: [{ type: 'text', text: 'Error: tool "slow" timed out after 20 ms' }],
    })
    expect(reason).toBeInstanceOf(ToolTimeoutError)
  })

  it('a body that rejects on the timeout signal is a TIMEOUT too', async () => {
    const h = await host()
    h.ctx.tools.register(
      tool(
        'polite',
        (_args, exec) =>
          new Promise((_resolve, reject) => {
            exec.signal.addEventListener('abort', () => reject(new Error('interrupted')))
          }),
        { timeoutMs: 10 },
      ),
    )
    const result = await h.run('polite')
    expect(result.isError && result.error.info).toEqual({ name: 'ToolTimeoutError', code: 'TIMEOUT' })
  })

  it('a body within its timeout succeeds; the caller signal stays untouched', async () => {
    const h = await host()
    const controller = new AbortController()
    // Ten minutes: however loaded the machine, the timeout cannot beat the body.
    h.ctx.tools.register(tool('quick', async () => 'fast', { timeoutMs: 600_000 }))
    expect(text(await h.run('quick', {}, { signal: controller.signal }))).toBe('fast')
    expect(controller.signal.aborted).toBe(false)
  })
})

describe('post-execute', () => {
  it("accept may replace content and append contexts after the body's", async () => {
    const h = await host()
    h.ctx.tools.register(
      tool('t', (_args, exec) => {
        exec.deferContext(userText('body'))
        return 'raw'
      }),
    )
    h.ctx.on('tools/post-execute', async (_exec, result, next) => {
      expect(text(result)).toBe('raw')
      await next()
      return { kind: 'accept', content: 'reviewed', additionalContexts: [userText('hook')] }
    })
    const result = await h.run('t')
    expect(result.content).toEqual([{ type: 'text', text: 'reviewed' }])
    expect(result.additionalContexts?.map(m => m.content[0])).toEqual([
      { type: 'text', text: 'body' },
      { type: 'text', text: 'hook' },
    ])
  })

  it("block turns the call into an error with the feedback; the body's contexts are dropped", async () => {
    const h = await host()
    h.ctx.tools.register(
      tool('t', (_args, exec) => {
        exec.deferContext(userText('body'))
        exec.concludeTurn()
        return { content: 'secret', meta: { m: 1 } }
      }),
    )
    h.ctx.on('tools/post-execute', () => ({
      kind: 'block',
      feedback: [
        { type: 'text', text: 'output withheld' },
        { type: 'text', text: 'ask the user' },
      ],
      additionalContexts: [userText('hook')],
    }))
    const result = await h.run('t')
    expect(result).toEqual({
      isError: true,
      error: { message: 'output withheld\nask the user' },
      content: [
        { type: 'text', text: 'output withheld' },
        { type: 'text', text: 'ask the user' },
      ],
      additionalContexts: [expect.objectContaining({ content: [{ type: 'text', text: 'hook' }] })],
    })
  })

  it('block accepts plain text feedback', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/post-execute', () => ({ kind: 'block', feedback: 'no' }))
    expect(await h.run('t')).toEqual({ isError: true, error: { message: 'no' }, content: [{ type: 'text', text: 'no' }] })
  })

  it('a malformed decision rejects the call', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    h.ctx.on('tools/post-execute', () => ({ kind: 'accept', content: 42 }) as never)
    await expect(h.run('t')).rejects.toThrow(/tools\/post-execute listener returned .* for tool "t"/)
  })
})

describe('tools/result and routing', () => {
  it('tools/result gets the exec and the final frozen result; a throwing listener is logged, not raised', async () => {
    const h = await host()
    const got: [ToolRunContext, ToolExecutionResult][] = []
    h.ctx.on('tools/result', () => {
      throw new Error('observer broke')
    })
    h.ctx.on('tools/result', (exec, result) => {
      got.push([exec, result])
    })
    h.ctx.tools.register(simple('t', 'out'))
    const agent = { id: 'agent-1', sessionId: 'agent-1' }
    const result = await h.run('t', {}, { callId: 'call-9', agent })
    expect(got).toHaveLength(1)
    expect(got[0][1]).toBe(result)
    expect(got[0][0]).toMatchObject({ callId: 'call-9', name: 't', arguments: {}, agent })
    expect(Object.isFrozen(got[0][0])).toBe(true)
    expect(h.errors).toEqual([expect.objectContaining({ message: 'observer broke' })])
  })

  it('hooks see one exec object for the whole call', async () => {
    const h = await host()
    const execs = new Set<ToolRunContext>()
    h.ctx.on('tools/pre-execute', async (exec, next) => {
      execs.add(exec)
      return next()
    })
    h.ctx.on('tools/execute', async (exec, next) => {
      execs.add(exec)
      return next()
    })
    h.ctx.on('tools/post-execute', async (exec, _result, next) => {
      execs.add(exec)
      return next()
    })
    h.ctx.on('tools/result', exec => {
      execs.add(exec)
    })
    h.ctx.tools.register(
      tool('t', (_args, exec) => {
        execs.add(exec)
        return ''
      }),
    )
    await h.run('t')
    expect(execs.size).toBe(1)
  })

  it("hooks registered through a scope hear that scope's calls (and its descendants') only", async () => {
    const h = await host()
    const a = h.mint()
    const child = h.mint({}, { parent: a.key })
    const b = h.mint()
    h.ctx.tools.register(simple('t'))
    const heard: Record<string, string[]> = { global: [], a: [] }
    h.ctx.on('tools/pre-execute', async (exec, next) => {
      heard.global.push(exec.callId)
      return next()
    })
    a.ctx.on('tools/pre-execute', async (exec, next) => {
      heard.a.push(exec.callId)
      return next()
    })
    a.ctx.on('tools/result', exec => {
      heard.a.push(`result:${exec.callId}`)
    })
    await h.run('t', {}, { callId: 'in-a', scope: a.key })
    await h.run('t', {}, { callId: 'in-child', scope: child.key })
    await h.run('t', {}, { callId: 'in-b', scope: b.key })
    await h.run('t', {}, { callId: 'unscoped' })
    expect(heard.global).toEqual(['in-a', 'in-child', 'in-b', 'unscoped'])
    expect(heard.a).toEqual(['in-a', 'result:in-a', 'in-child', 'result:in-child'])
  })

  it('rejects malformed input', async () => {
    const h = await host()
    await expect(h.tools.execute({ callId: '', name: 't', arguments: {}, signal: new AbortController().signal })).rejects.toThrow(TypeError)
    await expect(h.tools.execute({ callId: 'c', name: 't', arguments: {} } as never)).rejects.toThrow(/AbortSignal/)
  })
})

describe("the host's secrets never leave through a result", () => {
  it('redacts secret values of the environment from text and error messages, leaving everything else', async () => {
    const previous = process.env.DEEPSEEK_API_KEY
    process.env.DEEPSEEK_API_KEY = 'sk-live-0123456789abcdef'
    try {
      const h = await host()
      h.ctx.tools.register(
        tool('leak', ({ text }: { text: string }) => {
          if (text.startsWith('fail')) throw new Error(text)
          return text
        }),
      )
      const run = (name: string, args: object) => h.run(name, args)
      const ok = await run('leak', { text: 'key=sk-live-0123456789abcdef; password: "hunter22"' })
      expect(ok).toMatchObject({ isError: false, content: [{ type: 'text', text: 'key=[REDACTED]; password: "hunter22"' }] })
      const failed = await run('leak', { text: 'fail sk-live-0123456789abcdef' })
      expect(failed).toMatchObject({ isError: true, error: { message: 'fail [REDACTED]' } })
      expect(JSON.stringify(failed)).not.toContain('sk-live')
    } finally {
      if (previous === undefined) delete process.env.DEEPSEEK_API_KEY
      else process.env.DEEPSEEK_API_KEY = previous
    }
  })
})
