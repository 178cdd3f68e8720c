// Group K (the change event) and group L (signal and AssembleContext passthrough), spec §1.2, §1.5, §2 K, L.
import type { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import type { AssembleContext, PromptAssembly } from '@loom/system-prompt'
import { BUILT_INS, changeCounter, contrib, names, root, schema, toolNames, type Host } from './helpers.ts'

/** Every registration kind, as `(host) => disposer`, with a probe telling whether it is visible. */
const KINDS: Record<string, { register: (h: Host) => () => void; visible: (a: PromptAssembly) => boolean }> = {
  section: {
    register: h => h.sp.section({ name: 'p', order: 0, text: 'persona' }),
    visible: a => contrib(a).some(s => s.name === 'p'),
  },
  context: {
    register: h => h.sp.context({ name: 'p', order: 0, text: 'policy' }),
    visible: a => a.contexts.some(c => c.name === 'p'),
  },
  variable: {
    register: h => h.sp.variable('p', () => 'v'),
    visible: a => Object.hasOwn(a.variables, 'p'),
  },
  tools: {
    register: h => h.sp.tools(() => ({ schemas: [schema('bash')] })),
    visible: a => a.tools.length > 0,
  },
  suppressRuntimeContext: {
    register: h => h.sp.suppressRuntimeContext(),
    // Probed through a context registered by the test before the suppressor.
    visible: a => a.contexts.length === 0,
  },
}

/** A change listener that throws on its first call only. */
function throwOnce(ctx: Context) {
  const state = { calls: 0 }
  const dispose = ctx.on('system-prompt/change', () => {
    if (state.calls++ === 0) throw new Error('boom change listener')
  })
  return { state, dispose }
}

describe('K. the change event', () => {
  it('K1: each kind emits exactly once on registration and once on its first disposal', async () => {
    for (const [kind, { register, visible }] of Object.entries(KINDS)) {
      const h = await root({})
      if (kind === 'suppressRuntimeContext') h.sp.context({ name: 'probe', order: 0, text: 'probe' })
      const changes = changeCounter(h.ctx)
      const d = register(h)
      expect(changes.count, `${kind} registered`).toBe(1)
      expect(visible(await h.asm()), `${kind} visible`).toBe(true)
      d()
      expect(changes.count, `${kind} disposed`).toBe(2)
      expect(visible(await h.asm()), `${kind} gone`).toBe(false)
      d()
      expect(changes.count, `${kind} disposed twice`).toBe(2)
    }
  })

  it('K1: fiber disposal emits once per live registration, and not again for one already disposed', async () => {
    const h = await root({})
    const p = await h.plugin('plugin-a')
    const changes = changeCounter(h.ctx)
    const d = p.systemPrompt.section({ name: 'a', order: 1, text: 'a' })
    p.systemPrompt.section({ name: 'b', order: 1, text: 'b' })
    p.systemPrompt.variable('v', () => 'v')
    expect(changes.count).toBe(3)
    d()
    expect(changes.count).toBe(4)
    await p.fiber.dispose()
    expect(changes.count).toBe(6)
    expect(names(await h.asm())).toEqual(BUILT_INS)
  })

  it('K1: failed registrations emit nothing', async () => {
    const h = await root({})
    h.sp.section({ name: 'dup', order: 0, text: 'x' })
    h.sp.context({ name: 'dup', order: 0, text: 'x' })
    h.sp.variable('dup', () => 'x')
    const s = h.mint()
    s.sp.section({ name: 'dup', order: 0, text: 'x' })
    const changes = changeCounter(h.ctx)
    const failures: Array<() => unknown> = [
      () => h.sp.section({ name: 'dup', order: 1, text: 'y' }),
      () => s.sp.section({ name: 'dup', order: 1, text: 'y' }),
      () => h.sp.context({ name: 'dup', order: 1, text: 'y' }),
      () => h.sp.variable('dup', () => 'y'),
      () => h.sp.section({ name: 'nan', order: NaN, text: 'y' }),
      () => h.sp.context({ name: 'inf', order: Infinity, text: 'y' }),
      () => h.sp.variable('Bad-Name', () => 'y'),
      () => h.sp.variable('', () => 'y'),
    ]
    for (const fail of failures) expect(fail).toThrow()
    expect(changes.count).toBe(0)
  })

  it('K2: a throwing change listener rolls back the registration, which emits a second time', async () => {
    for (const [kind, { register, visible }] of Object.entries(KINDS)) {
      const h = await root({})
      if (kind === 'suppressRuntimeContext') h.sp.context({ name: 'probe', order: 0, text: 'probe' })
      const listener = throwOnce(h.ctx)
      expect(() => register(h), kind).toThrow('boom change listener')
      expect(listener.state.calls, `${kind} emits`).toBe(2)
      expect(visible(await h.asm()), `${kind} rolled back`).toBe(false)

      listener.dispose()
      const changes = changeCounter(h.ctx)
      expect(() => register(h), `${kind} re-registers`).not.toThrow()
      expect(visible(await h.asm()), `${kind} visible`).toBe(true)
      expect(changes.count).toBe(1)
    }
  })

  it('K2: the rolled-back section leaves its name free (section "p", scoped and global)', async () => {
    const h = await root({})
    const s = h.mint()
    let listener = throwOnce(h.ctx)
    expect(() => h.sp.section({ name: 'p', order: 0, text: 'persona' })).toThrow('boom change listener')
    expect(contrib(await h.asm())).toHaveLength(0)
    listener.dispose()
    listener = throwOnce(h.ctx)
    expect(() => s.sp.section({ name: 'p', order: 0, text: 'scoped' })).toThrow('boom change listener')
    expect(contrib(await h.asm(s.key))).toHaveLength(0)
    listener.dispose()

    h.sp.section({ name: 'p', order: 0, text: 'persona' })
    s.sp.section({ name: 'p', order: 0, text: 'scoped' })
    expect(contrib(await h.asm()).map(x => x.name)).toEqual(['p'])
    expect(contrib(await h.asm(s.key)).map(x => x.text)).toEqual(['scoped'])
  })

  it('K2: a rolled-back tool provider and variable leave tools and variables empty', async () => {
    const h = await root({})
    const listener = throwOnce(h.ctx)
    let providerCalls = 0
    expect(() => h.sp.tools(() => (providerCalls++, { schemas: [schema('bash')] }))).toThrow('boom change listener')
    listener.dispose()
    const again = throwOnce(h.ctx)
    expect(() => h.sp.variable('model', () => 'm')).toThrow('boom change listener')
    again.dispose()
    const a = await h.asm()
    expect(a.tools).toEqual([])
    expect(a.variables).toEqual({})
    expect(a.variableInfo).toEqual({})
    expect(providerCalls).toBe(0)
  })

  it('K3: the change event is unfiltered: a scoped listener hears global and unrelated-scope changes', async () => {
    const h = await root({})
    const s = h.mint()
    const t = h.mint()
    const heardInS = changeCounter(s.ctx)
    const heardInT = changeCounter(t.ctx)
    const dGlobal = h.sp.section({ name: 'g', order: 1, text: 'g' })
    expect(heardInS.count).toBe(1)
    const dT = t.sp.section({ name: 't', order: 1, text: 't' })
    expect(heardInS.count).toBe(2)
    dT()
    dGlobal()
    expect(heardInS.count).toBe(4)
    s.sp.variable('s', () => 's')
    expect(heardInT.count).toBe(5)
  })

  it('K4: change listeners run after the mutation, on registration and on disposal', async () => {
    const h = await root({})
    const seen: Array<Promise<PromptAssembly>> = []
    h.ctx.on('system-prompt/change', () => {
      seen.push(h.sp.assemble())
    })
    const d = h.sp.section({ name: 'new', order: 1, text: 'n' })
    const dv = h.sp.variable('v', () => 'v')
    d()
    dv()
    const [afterSection, afterVariable, afterDispose, afterVariableDispose] = await Promise.all(seen)
    expect(names(afterSection)).toEqual([...BUILT_INS, 'new'])
    expect(afterVariable.variables).toEqual({ v: 'v' })
    expect(names(afterDispose)).toEqual(BUILT_INS)
    expect(afterDispose.variables).toEqual({ v: 'v' })
    expect(afterVariableDispose.variables).toEqual({})
  })

  it('K4: a scoped change is visible to a listener assembling that scope', async () => {
    const h = await root({})
    const s = h.mint()
    const seen: Array<Promise<PromptAssembly>> = []
    h.ctx.on('system-prompt/change', () => {
      seen.push(h.asm(s.key))
    })
    s.sp.tools(() => ({ schemas: [schema('bash')] }))
    const [a] = await Promise.all(seen)
    expect(toolNames(a)).toEqual(['bash'])
  })
})

describe('L. signal and AssembleContext passthrough', () => {
  it('L1: assemble does not check the signal: an aborted signal still resolves with every provider run', async () => {
    const h = await root({})
    let calls = 0
    h.sp.section({ name: 's', order: 1, text: () => `s${++calls}` })
    h.sp.tools(() => (calls++, { schemas: [schema('bash')] }))
    const signal = AbortSignal.abort()
    const a = await h.sp.assemble({ signal })
    expect(names(a)).toEqual([...BUILT_INS, 's'])
    expect(toolNames(a)).toEqual(['bash'])
    expect(calls).toBe(2)
  })

  it('L1: aborting during the waterfall does not reject the assembly', async () => {
    const h = await root({})
    const controller = new AbortController()
    h.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      controller.abort(new Error('cancelled'))
      return next()
    })
    await expect(h.sp.assemble({ signal: controller.signal })).resolves.toMatchObject({ sections: expect.any(Array) })
  })

  it('L2: the identical context object reaches every text, variable and tool provider and every listener', async () => {
    const h = await root({ persona: 'p' })
    const s = h.mint()
    const received: Record<string, unknown[]> = {}
    const spy = (kind: string) => (context: AssembleContext) => {
      ;(received[kind] ??= []).push(context)
    }
    h.sp.section({ name: 'global-section', order: 1, text: c => (spy('global-section')(c), 'g') })
    s.sp.section({ name: 'scoped-section', order: 2, text: c => (spy('scoped-section')(c), 's') })
    h.sp.context({ name: 'global-context', order: 1, text: c => (spy('global-context')(c), 'g') })
    s.sp.context({ name: 'scoped-context', order: 2, text: c => (spy('scoped-context')(c), 's') })
    h.sp.variable('gv', c => (spy('global-variable')(c), 'g'))
    s.sp.variable('sv', c => (spy('scoped-variable')(c), 's'))
    h.sp.tools(c => (spy('global-tools')(c), { schemas: [schema('a')] }))
    s.sp.tools(c => (spy('scoped-tools')(c), { schemas: [schema('b')] }))
    h.ctx.on('system-prompt/assemble', async (_assembly, context, next) => (spy('global-listener')(context), next()))
    s.ctx.on('system-prompt/assemble', async (_assembly, context, next) => (spy('scoped-listener')(context), next()))

    const agent = { id: 'agent-1', sessionId: 'agent-1' }
    const signal = new AbortController().signal
    const context: AssembleContext = { scope: s.key, signal, who: 'alice', agent }
    await h.sp.assemble(context)

    const kinds = [
      'global-section',
      'scoped-section',
      'global-context',
      'scoped-context',
      'global-variable',
      'scoped-variable',
      'global-tools',
      'scoped-tools',
      'global-listener',
      'scoped-listener',
    ]
    expect(Object.keys(received).sort()).toEqual([...kinds].sort())
    for (const kind of kinds) {
      expect(received[kind], kind).toHaveLength(1)
      expect(received[kind][0], kind).toBe(context)
    }
    expect(context).toEqual({ scope: s.key, signal, who: 'alice', agent })
    expect(context.signal).toBe(signal)
    expect(context.agent).toBe(agent)
  })

  it('L2: without an argument every consumer shares one fresh empty context per assembly', async () => {
    const h = await root({})
    const received: AssembleContext[] = []
    h.sp.section({ name: 's', order: 1, text: c => (received.push(c), 's') })
    h.sp.variable('v', c => (received.push(c), 'v'))
    h.sp.tools(c => (received.push(c), { schemas: [] }))
    h.ctx.on('system-prompt/assemble', async (_assembly, context, next) => (received.push(context), next()))
    await h.sp.assemble()
    await h.sp.assemble()
    expect(received).toHaveLength(8)
    const [first, second] = [received.slice(0, 4), received.slice(4)]
    for (const batch of [first, second]) {
      expect(batch[0]).toEqual({})
      for (const c of batch) expect(c).toBe(batch[0])
    }
    expect(first[0]).not.toBe(second[0])
  })
})
