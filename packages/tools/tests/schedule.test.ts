// runToolCalls: grouping, the pool cap, model-order commits, aborts and failures (spec 2.6, contracts 5.6).
import { describe, expect, it } from 'vitest'
import { defineTool, runToolCalls, type ToolExecutionResult } from '@loom/tools'
import { deferred, flush, host, simple, text, type Host } from './helpers.ts'

const ARGS = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }

/** Tools whose bodies wait for `release(id)`; `started` lists the ids whose body began. */
function gated(h: Host) {
  const gates = new Map<string, ReturnType<typeof deferred>>()
  const gate = (id: string) => {
    if (!gates.has(id)) gates.set(id, deferred())
    return gates.get(id)!
  }
  const started: string[] = []
  const finished: string[] = []
  const body = async (args: { id: string }) => {
    started.push(args.id)
    await gate(args.id).promise
    finished.push(args.id)
    return `out-${args.id}`
  }
  h.ctx.tools.register(defineTool({ name: 'par', description: 'parallel-safe', parameters: ARGS, isConcurrencySafe: () => true, execute: body }))
  h.ctx.tools.register(defineTool({ name: 'ex', description: 'exclusive', parameters: ARGS, execute: body }))
  return { started, finished, release: (id: string) => gate(id).resolve(undefined) }
}

const call = (id: string, name = 'par') => ({ callId: `c${id}`, name, arguments: { id } })

/** Runs the calls, logging `call:<id>` / `result:<id>` as the loop would append them. */
function schedule(
  h: Host,
  calls: { callId: string; name: string; arguments: unknown }[],
  options: { maxParallel?: number; signal?: AbortSignal; onCommit?: (id: string) => void } = {},
) {
  const log: string[] = []
  const results: Record<string, ToolExecutionResult> = {}
  const state = { settled: false }
  const promise = runToolCalls(h.tools, {
    calls,
    signal: options.signal ?? new AbortController().signal,
    maxParallel: options.maxParallel ?? 10,
    onStart: c => {
      log.push(`call:${c.callId}`)
    },
    onCommit: (c, result) => {
      log.push(`result:${c.callId}`)
      results[c.callId] = result
      options.onCommit?.(c.callId)
    },
  })
  promise.then(
    () => {
      state.settled = true
    },
    () => {
      state.settled = true
    },
  )
  return { log, results, promise, state, resultOrder: () => log.filter(e => e.startsWith('result:')) }
}

describe('grouping and the pool', () => {
  it('101: concurrency-safe calls all start before any is released', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1'), call('2'), call('3')])
    await flush()
    expect(g.started).toEqual(['1', '2', '3'])
    expect(run.log).toEqual(['call:c1', 'call:c2', 'call:c3'])
    for (const id of ['3', '2', '1']) g.release(id)
    expect(await run.promise).toEqual({ concluded: false })
    expect(run.resultOrder()).toEqual(['result:c1', 'result:c2', 'result:c3'])
  })

  it('102: an exclusive call is a barrier', async () => {
    const h = await host()
    const order: string[] = []
    const parameters = ARGS
    h.ctx.tools.register(
      defineTool<{ id: string }>({
        name: 'r',
        description: 'read',
        parameters,
        isConcurrencySafe: true,
        execute: async args => {
          order.push(`r-start-${args.id}`)
          await flush()
          order.push(`r-end-${args.id}`)
          return ''
        },
      }),
    )
    h.ctx.tools.register(
      defineTool<{ id: string }>({
        name: 'w',
        description: 'write',
        parameters,
        execute: args => {
          order.push(`w-${args.id}`)
          return ''
        },
      }),
    )
    const run = schedule(h, [call('A1', 'r'), call('A2', 'w'), call('A3', 'r')])
    await run.promise
    expect(order).toEqual(['r-start-A1', 'r-end-A1', 'w-A2', 'r-start-A3', 'r-end-A3'])
    expect(run.log).toEqual(['call:cA1', 'result:cA1', 'call:cA2', 'result:cA2', 'call:cA3', 'result:cA3'])
  })

  it('a parallel group stops admitting at the first exclusive call and resumes after it', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1'), call('2'), call('3', 'ex'), call('4'), call('5')])
    await flush()
    expect(g.started).toEqual(['1', '2'])
    g.release('2')
    await flush()
    expect(g.started).toEqual(['1', '2'])
    g.release('1')
    await flush()
    expect(g.started).toEqual(['1', '2', '3'])
    expect(run.log).toEqual(['call:c1', 'call:c2', 'result:c1', 'result:c2', 'call:c3'])
    g.release('3')
    await flush()
    expect(g.started).toEqual(['1', '2', '3', '4', '5'])
    g.release('5')
    g.release('4')
    await run.promise
    expect(run.resultOrder()).toEqual(['result:c1', 'result:c2', 'result:c3', 'result:c4', 'result:c5'])
  })

  it('103: results are committed in model order', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1'), call('2')])
    await flush()
    g.release('2')
    await flush()
    expect(run.resultOrder()).toEqual([])
    g.release('1')
    await run.promise
    expect(run.log).toEqual(['call:c1', 'call:c2', 'result:c1', 'result:c2'])
    expect(text(run.results.c1)).toBe('out-1')
    expect(text(run.results.c2)).toBe('out-2')
  })

  it('104: with a cap of 2, the third call starts when the first settles; results come out c1..c4', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1'), call('2'), call('3'), call('4')], { maxParallel: 2 })
    await flush()
    expect(g.started).toEqual(['1', '2'])
    g.release('1')
    await flush()
    expect(g.started).toEqual(['1', '2', '3'])
    expect(run.log).toEqual(['call:c1', 'call:c2', 'result:c1', 'call:c3'])
    g.release('3')
    await flush()
    // c3 settled but waits for c2; its slot is free, so c4 starts.
    expect(g.started).toEqual(['1', '2', '3', '4'])
    expect(run.resultOrder()).toEqual(['result:c1'])
    g.release('4')
    g.release('2')
    await run.promise
    expect(run.log).toEqual(['call:c1', 'call:c2', 'result:c1', 'call:c3', 'call:c4', 'result:c2', 'result:c3', 'result:c4'])
  })

  it('104: with a cap of 1, execution is strictly serial', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1'), call('2'), call('3')], { maxParallel: 1 })
    for (const id of ['1', '2', '3']) {
      await flush()
      expect(g.started.at(-1)).toBe(id)
      expect(g.started.length).toBe(g.finished.length + 1)
      g.release(id)
    }
    await run.promise
    expect(run.log).toEqual(['call:c1', 'result:c1', 'call:c2', 'result:c2', 'call:c3', 'result:c3'])
  })

  it.each([0, 1.5, -1, Number.NaN])('maxParallel %s is refused', async maxParallel => {
    const h = await host()
    await expect(runToolCalls(h.tools, { calls: [], signal: new AbortController().signal, maxParallel, onStart() {}, onCommit() {} })).rejects.toThrow(
      'maxParallel must be a positive integer',
    )
  })

  it('the pool counts running bodies: a denied call takes no slot', async () => {
    const h = await host()
    const g = gated(h)
    h.ctx.on('tools/pre-execute', async (exec, next) => (exec.callId === 'c2' ? { kind: 'deny', reason: 'no' } : next()))
    const run = schedule(h, [call('1'), call('2'), call('3')], { maxParallel: 2 })
    await flush()
    expect(g.started).toEqual(['1', '3'])
    g.release('1')
    g.release('3')
    await run.promise
    expect(run.results.c2).toEqual({
      isError: true,
      error: { message: 'no' },
      content: [{ type: 'text', text: 'Error: no' }],
      meta: { decision: { policy: 'deny', reason: 'no' } },
    })
  })
})

describe('results in a run', () => {
  it('bad calls produce error results and the run goes on', async () => {
    const h = await host()
    h.ctx.tools.register(simple('ok', 'fine'))
    const run = schedule(h, [
      { callId: 'a', name: 'ok', arguments: 'not json' },
      { callId: 'b', name: 'nope', arguments: {} },
      { callId: 'c', name: 'ok', arguments: {} },
    ])
    await run.promise
    expect(run.log).toEqual(['call:a', 'result:a', 'call:b', 'result:b', 'call:c', 'result:c'])
    expect(run.results.a.isError && run.results.a.error.info?.code).toBe('INVALID_ARGS')
    expect(text(run.results.a)).toMatch(/not valid JSON/)
    expect(run.results.b.isError && run.results.b.error.info?.code).toBe('UNKNOWN_TOOL')
    expect(text(run.results.c)).toBe('fine')
  })

  it('concluded is true when any committed result concludes the turn', async () => {
    const h = await host()
    h.ctx.tools.register(simple('plain'))
    h.ctx.tools.register(
      defineTool({
        name: 'finish',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, exec) => {
          exec.concludeTurn()
          return 'done'
        },
      }),
    )
    expect(await schedule(h, [{ callId: 'a', name: 'plain', arguments: {} }]).promise).toEqual({ concluded: false })
    expect(
      await schedule(h, [
        { callId: 'a', name: 'finish', arguments: {} },
        { callId: 'b', name: 'plain', arguments: {} },
      ]).promise,
    ).toEqual({ concluded: true })
  })

  it('calls run in the given scope with the given agent', async () => {
    const h = await host()
    const s = h.mint()
    const agent = { id: 'agent', sessionId: 'agent' }
    const seen: unknown[] = []
    s.ctx.tools.register(
      defineTool({
        name: 'mine',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, exec) => {
          seen.push(exec.agent, exec.scope)
          return ''
        },
      }),
    )
    const results: ToolExecutionResult[] = []
    await runToolCalls(h.tools, {
      calls: [{ callId: 'a', name: 'mine', arguments: {} }],
      agent,
      scope: s.key,
      signal: new AbortController().signal,
      maxParallel: 10,
      onStart() {},
      onCommit: (_c, r) => {
        results.push(r)
      },
    })
    expect(results[0].isError).toBe(false)
    expect(seen).toEqual([agent, s.key])
  })
})

describe('abort', () => {
  it('mid-group: in-flight calls are committed, every unstarted call (this and later groups) gets a synthetic pair', async () => {
    const h = await host()
    const g = gated(h)
    const controller = new AbortController()
    const heard: string[] = []
    h.ctx.on('tools/result', exec => {
      heard.push(exec.callId)
    })
    const run = schedule(h, [call('1'), call('2'), call('3'), call('4'), call('5', 'ex')], { maxParallel: 2, signal: controller.signal })
    await flush()
    expect(g.started).toEqual(['1', '2'])
    controller.abort()
    expect(await run.promise).toEqual({ concluded: false })
    expect(g.started).toEqual(['1', '2'])
    expect(run.log).toEqual(['call:c1', 'call:c2', 'result:c1', 'result:c2', 'call:c3', 'result:c3', 'call:c4', 'result:c4', 'call:c5', 'result:c5'])
    for (const id of ['c1', 'c2']) expect(run.results[id].isError && run.results[id].error.info).toEqual({ name: 'AbortError', code: 'ABORTED' })
    for (const id of ['c3', 'c4', 'c5']) {
      expect(run.results[id]).toEqual({
        isError: true,
        error: { message: 'tool call aborted before dispatch', info: { name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' } },
        content: [{ type: 'text', text: 'Error: tool call aborted before dispatch' }],
      })
      expect(Object.isFrozen(run.results[id])).toBe(true)
    }
    expect(heard).toEqual(['c1', 'c2'])
  })

  it('an in-flight call that finishes after the abort keeps the contexts it deferred', async () => {
    const h = await host()
    const controller = new AbortController()
    const { userText } = await import('./helpers.ts')
    h.ctx.tools.register(
      defineTool({
        name: 'note',
        description: 'd',
        parameters: { type: 'object' },
        execute: (_args, exec) => {
          exec.deferContext(userText('seen'))
          controller.abort()
          return 'x'
        },
      }),
    )
    const run = schedule(h, [{ callId: 'a', name: 'note', arguments: {} }], { signal: controller.signal })
    await run.promise
    expect(run.results.a.isError && run.results.a.error.info?.code).toBe('ABORTED')
    expect(run.results.a.additionalContexts?.map(m => m.content)).toEqual([[{ type: 'text', text: 'seen' }]])
  })

  it('before anything started: every call is a synthetic pair and no hook or body runs', async () => {
    const h = await host()
    const g = gated(h)
    let hooks = 0
    h.ctx.on('tools/pre-execute', async (_exec, next) => {
      hooks++
      return next()
    })
    const controller = new AbortController()
    controller.abort()
    const run = schedule(h, [call('1'), call('2', 'ex')], { signal: controller.signal })
    await run.promise
    expect(run.log).toEqual(['call:c1', 'result:c1', 'call:c2', 'result:c2'])
    expect(g.started).toEqual([])
    expect(hooks).toBe(0)
  })
})

describe('failures', () => {
  it('a throwing hook stops starting, waits for calls in flight and rethrows without fabricating results', async () => {
    const h = await host()
    const g = gated(h)
    h.ctx.on('tools/pre-execute', async (exec, next) => {
      if (exec.callId === 'c2') throw new Error('policy broke')
      return next()
    })
    const run = schedule(h, [call('1'), call('2'), call('3')])
    await flush()
    expect(g.started).toEqual(['1'])
    expect(run.state.settled).toBe(false)
    g.release('1')
    await expect(run.promise).rejects.toThrow('policy broke')
    expect(g.finished).toEqual(['1'])
    expect(g.started).toEqual(['1'])
    expect(run.log).toEqual(['call:c1', 'call:c2'])
  })

  it('the first failure wins', async () => {
    const h = await host()
    const g = gated(h)
    h.ctx.on('tools/execute', async (exec, next) => {
      const result = await next()
      throw new Error(`wrapper broke on ${exec.callId}`)
      return result
    })
    const run = schedule(h, [call('1'), call('2')])
    await flush()
    g.release('2')
    await flush()
    g.release('1')
    await expect(run.promise).rejects.toThrow('wrapper broke on c2')
    expect(run.resultOrder()).toEqual([])
  })

  it('a throwing onCommit stops the run', async () => {
    const h = await host()
    const g = gated(h)
    const run = schedule(h, [call('1', 'ex'), call('2', 'ex')], {
      onCommit: () => {
        throw new Error('append failed')
      },
    })
    await flush()
    g.release('1')
    await expect(run.promise).rejects.toThrow('append failed')
    expect(g.started).toEqual(['1'])
    expect(run.log).toEqual(['call:c1', 'result:c1'])
  })

  it('a throwing onStart stops the run before the call is prepared', async () => {
    const h = await host()
    let hooks = 0
    h.ctx.on('tools/pre-execute', async (_exec, next) => {
      hooks++
      return next()
    })
    h.ctx.tools.register(simple('t'))
    await expect(
      runToolCalls(h.tools, {
        calls: [{ callId: 'a', name: 't', arguments: {} }],
        signal: new AbortController().signal,
        maxParallel: 10,
        onStart() {
          throw new Error('log closed')
        },
        onCommit() {},
      }),
    ).rejects.toThrow('log closed')
    expect(hooks).toBe(0)
  })
})
