// Scope primitives: tags, parent chains and scope disposal (spec §1.1, §1.3 items 2, 5, 8; N1–N4, N9, N10).
import { describe, expect, it } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import { bindScopeParent, createScope, scopeChainOf, scopeOf, scopeParentOf, withScope } from '@loom/scope'

async function host(name = 'host') {
  const root = new Context()
  const fiber = await root.plugin({ name, apply() {} })
  return { root, fiber, ctx: fiber.ctx }
}

/** Lets pending microtasks and timers run, so that anything not gated has settled. */
const settle = () => new Promise<void>(resolve => setTimeout(resolve, 10))

describe('createScope and scopeOf', () => {
  it('N1: an untagged context has no scope; a scope tag is read from the scope context and from contexts extended from it', async () => {
    const { root, ctx } = await host()
    const outerKey = { name: 'outer' }
    const outer = createScope(ctx, outerKey)
    expect(scopeOf(root)).toBeUndefined()
    expect(scopeOf(ctx)).toBeUndefined()
    expect(scopeOf(outer.ctx)).toBe(outerKey)
    expect(scopeOf(outer.ctx.extend({}))).toBe(outerKey)
    expect(scopeOf(outer.ctx.extend({ agent: {} }).extend({}))).toBe(outerKey)
  })

  it('N1: the nearest tag wins when a scope is minted from a scoped context, and the outer scope keeps its own tag', async () => {
    const { ctx } = await host()
    const outerKey = { name: 'outer' }
    const innerKey = { name: 'inner' }
    const outer = createScope(ctx, outerKey)
    const inner = createScope(outer.ctx, innerKey)
    expect(scopeOf(inner.ctx)).toBe(innerKey)
    expect(scopeOf(inner.ctx.extend({}))).toBe(innerKey)
    expect(scopeOf(outer.ctx)).toBe(outerKey)
    expect(scopeOf(ctx)).toBeUndefined()
  })

  it('child plugins mounted under a scope context inherit its tag', async () => {
    const { ctx } = await host()
    const key = { name: 'k' }
    const scope = createScope(ctx, key)
    let seenInApply: unknown = 'not called'
    const child = await scope.ctx.plugin({
      name: 'child',
      apply(c: Context) {
        seenInApply = scopeOf(c)
      },
    })
    expect(seenInApply).toBe(key)
    expect(scopeOf(child.ctx)).toBe(key)
    const grandchild = await child.ctx.plugin({ name: 'grandchild', apply() {} })
    expect(scopeOf(grandchild.ctx)).toBe(key)
  })

  it('the scope fiber reports the name of the plugin that minted it', async () => {
    const { ctx } = await host('minter')
    const scope = createScope(ctx, {})
    expect(scope.ctx.fiber).not.toBe(ctx.fiber)
    expect(scope.ctx.fiber.name).toBe('minter')
  })

  it("N2: a scope is usable synchronously inside the minting plugin's apply, and dispose() runs its effects", async () => {
    const root = new Context()
    const events: string[] = []
    let scope!: ReturnType<typeof createScope>
    await root.plugin({
      name: 'minter',
      apply(ctx: Context) {
        scope = createScope(ctx, { name: 'k' })
        scope.ctx.effect(() => {
          events.push('registered')
          return () => {
            events.push('disposed')
          }
        }, 'probe')
      },
    })
    expect(events).toEqual(['registered'])
    await scope.dispose()
    expect(events).toEqual(['registered', 'disposed'])
  })

  it("unloading the minting plugin disposes the scope's effects", async () => {
    const { fiber } = await host()
    const events: string[] = []
    const scope = createScope(fiber.ctx, {})
    scope.ctx.effect(
      () => () => {
        events.push('disposed')
      },
      'probe',
    )
    await fiber.dispose()
    expect(events).toEqual(['disposed'])
  })

  it('nesting scope contexts does not create a parent link', async () => {
    const { ctx } = await host()
    const outerKey = {}
    const innerKey = {}
    const outer = createScope(ctx, outerKey)
    createScope(outer.ctx, innerKey)
    expect(scopeParentOf(innerKey)).toBeUndefined()
    expect(scopeChainOf(innerKey)).toEqual([innerKey])
  })
})

describe('parent chains', () => {
  it('N9: createScope with { parent } links the key to its parent, and scopeChainOf lists key, parent, grandparent', async () => {
    const { ctx } = await host()
    const preset = { name: 'preset' }
    const agent = { name: 'agent' }
    createScope(ctx, agent, { parent: preset })
    expect(scopeParentOf(agent)).toBe(preset)
    expect(scopeParentOf(preset)).toBeUndefined()
    expect(scopeChainOf(agent)).toEqual([agent, preset])
    expect(scopeChainOf(preset)).toEqual([preset])

    const child = { name: 'child' }
    createScope(ctx, child, { parent: agent })
    expect(scopeChainOf(child)).toEqual([child, agent, preset])
  })

  it('N9: scopeChainOf(undefined) is empty', () => {
    expect(scopeChainOf(undefined)).toEqual([])
  })

  it('N9: a link that would close a cycle is refused, including a key naming itself, and leaves no link behind', () => {
    const preset = {}
    const agent = {}
    bindScopeParent(agent, preset)
    expect(() => bindScopeParent(preset, agent)).toThrow(/cycle/)
    expect(() => bindScopeParent(preset, preset)).toThrow(/cycle/)
    expect(scopeParentOf(preset)).toBeUndefined()
    expect(scopeChainOf(agent)).toEqual([agent, preset])

    const a = {}
    const b = {}
    const c = {}
    bindScopeParent(a, b)
    bindScopeParent(b, c)
    expect(() => bindScopeParent(c, a)).toThrow(/cycle/)
    expect(scopeParentOf(c)).toBeUndefined()
  })

  it('N10: a bound key cannot be bound again; only the original binding can rebind, and the chain changes at once', () => {
    const agent = {}
    const presetA = {}
    const presetB = {}
    const binding = bindScopeParent(agent, presetA)
    expect(() => bindScopeParent(agent, presetB)).toThrow(/already bound/)
    expect(scopeChainOf(agent)).toEqual([agent, presetA])
    binding.rebind(presetB)
    expect(scopeParentOf(agent)).toBe(presetB)
    expect(scopeChainOf(agent)).toEqual([agent, presetB])
    // Still bound after a rebind: a fresh bind keeps being refused.
    expect(() => bindScopeParent(agent, presetA)).toThrow(/already bound/)
  })

  it('N10: rebind applies the cycle check and keeps the previous link when refused', () => {
    const agent = {}
    const preset = {}
    const child = {}
    const binding = bindScopeParent(agent, preset)
    bindScopeParent(child, agent)
    expect(() => binding.rebind(child)).toThrow(/cycle/)
    expect(() => binding.rebind(agent)).toThrow(/cycle/)
    expect(scopeChainOf(child)).toEqual([child, agent, preset])
  })

  it('createScope with a { parent } that cannot be bound throws before creating the scope fiber', async () => {
    const { ctx } = await host()
    const key = {}
    bindScopeParent(key, {})
    const before = ctx.fiber.getEffects().length
    expect(() => createScope(ctx, key, { parent: {} })).toThrow(/already bound/)
    expect(ctx.fiber.getEffects().length).toBe(before)

    const fresh = {}
    expect(() => createScope(ctx, fresh, { parent: fresh })).toThrow(/cycle/)
    expect(ctx.fiber.getEffects().length).toBe(before)
    expect(scopeParentOf(fresh)).toBeUndefined()
  })
})

describe('scope disposal', () => {
  it('N3: dispose() is memoised and, even after rawDispose() ran first, settles only after async teardown finished', async () => {
    const { ctx } = await host()
    const scope = createScope(ctx, {})
    let open!: () => void
    const gate = new Promise<void>(resolve => {
      open = resolve
    })
    let finished = false
    scope.ctx.effect(
      () => async () => {
        await gate
        finished = true
      },
      'slow teardown',
    )

    const settled: [string, boolean][] = []
    const raw = scope.rawDispose()
    const first = scope.dispose()
    const second = scope.dispose()
    expect(second).toBe(first)
    const all = [
      Promise.resolve(raw).then(() => {
        settled.push(['rawDispose', finished])
      }),
      first.then(() => {
        settled.push(['dispose#1', finished])
      }),
      second.then(() => {
        settled.push(['dispose#2', finished])
      }),
    ]
    await settle()
    expect(settled).toEqual([])
    open()
    await Promise.all(all)
    expect(finished).toBe(true)
    expect(settled).toEqual(
      expect.arrayContaining([
        ['rawDispose', true],
        ['dispose#1', true],
        ['dispose#2', true],
      ]),
    )
  })

  it('N3: dispose() called first also waits for async teardown, and a later dispose() returns the same promise', async () => {
    const { ctx } = await host()
    const scope = createScope(ctx, {})
    let open!: () => void
    const gate = new Promise<void>(resolve => {
      open = resolve
    })
    let finished = false
    scope.ctx.effect(
      () => async () => {
        await gate
        finished = true
      },
      'slow teardown',
    )
    const first = scope.dispose()
    let settledEarly = false
    void first.then(() => {
      settledEarly = !finished
    })
    await settle()
    expect(scope.dispose()).toBe(first)
    open()
    await first
    expect(finished).toBe(true)
    expect(settledEarly).toBe(false)
  })

  it('N4: rawDispose nests inside a composite effect and runs between the disposers yielded around it', async () => {
    const { ctx } = await host()
    const scope = createScope(ctx, {})
    const order: string[] = []
    scope.ctx.effect(
      () => () => {
        order.push('scope')
      },
      'scoped',
    )
    const dispose = ctx.effect(function* () {
      yield () => {
        order.push('outer')
      }
      yield scope.rawDispose
      yield () => {
        order.push('inner')
      }
    }, 'composite')
    expect(order).toEqual([])
    await dispose()
    expect(order).toEqual(['inner', 'scope', 'outer'])
  })

  it('registering an effect or a listener through a disposed scope throws INACTIVE_EFFECT', async () => {
    const { ctx } = await host()
    const scope = createScope(ctx, {})
    await scope.dispose()
    expect(() => scope.ctx.effect(() => () => {}, 'late')).toThrow(/cannot create effect on inactive context/)
    expect(() => scope.ctx.extend({}).effect(() => () => {}, 'late')).toThrow(/cannot create effect on inactive context/)
    expect(() => scope.ctx.on('internal/status', () => {})).toThrow(/cannot create effect on inactive context/)
    // The minting context is unaffected.
    expect(() => ctx.effect(() => () => {}, 'alive')()).not.toThrow()
  })
})

describe('withScope', () => {
  it('tags a view of a plugin context without a new fiber: same owner, the other scope', async () => {
    const { ctx } = await host('contributor')
    const agentKey = { name: 'agent' }
    const view = withScope(ctx, agentKey)
    expect(scopeOf(view)).toBe(agentKey)
    expect(scopeOf(ctx)).toBeUndefined()
    expect(view.fiber).toBe(ctx.fiber)
    expect(view.fiber.name).toBe('contributor')
  })
})
