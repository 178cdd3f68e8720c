// Storage tables and per-scope layers (spec §1.3 items 7–9, §1.4 H3; N12–N20).
import { describe, expect, it, vi } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import { AnonymousEntries, NamedEntries, ScopedLayers, bindScopeParent, createScope, type ScopeKey } from '@loom/scope'

class DuplicateError extends Error {}
const named = <V>() => new NamedEntries<V>(name => new DuplicateError(`duplicate ${name}`))

/** A two-table aggregate layer, like the prompt registry's five tables. */
class Layer {
  readonly scope: ScopeKey | undefined
  readonly named = named<number>()
  readonly anon = new AnonymousEntries<string>()
  constructor(scope: ScopeKey | undefined) {
    this.scope = scope
  }
  isEmpty() {
    return this.named.isEmpty() && this.anon.isEmpty()
  }
}

function layers(onChange: () => void = () => {}) {
  const created: (ScopeKey | undefined)[] = []
  const store = new ScopedLayers<Layer>(scope => {
    created.push(scope)
    return new Layer(scope)
  }, onChange)
  return { store, created }
}

async function host() {
  const root = new Context()
  const fiber = await root.plugin({ name: 'host', apply() {} })
  return { root, ctx: fiber.ctx }
}

const labels = (ctx: Context) => ctx.fiber.getEffects().map(e => e.label)

describe('NamedEntries', () => {
  it('N12: a duplicate name throws the exact error returned by the factory, which receives the name', () => {
    const error = new Error('dup')
    const factory = vi.fn((_name: string) => error)
    const table = new NamedEntries<number>(factory)
    table.insert('a', 1)
    expect(factory).not.toHaveBeenCalled()
    let thrown: unknown
    try {
      table.insert('a', 2)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBe(error)
    expect(factory).toHaveBeenCalledWith('a')
    expect(table.get('a')).toBe(1)
  })

  it('N12: get, has, keys, entries, values and isEmpty reflect the insertions in order', () => {
    const table = named<number>()
    expect(table.isEmpty()).toBe(true)
    expect(table.get('a')).toBeUndefined()
    expect(table.has('a')).toBe(false)
    table.insert('b', 2)
    table.insert('a', 1)
    expect(table.isEmpty()).toBe(false)
    expect(table.get('a')).toBe(1)
    expect(table.has('b')).toBe(true)
    expect(table.has('c')).toBe(false)
    expect([...table.keys()]).toEqual(['b', 'a'])
    expect([...table.entries()]).toEqual([
      ['b', 2],
      ['a', 1],
    ])
    expect([...table.values()]).toEqual([2, 1])
  })

  it('N12: a values iterator sees entries inserted while it is being consumed', () => {
    const table = named<number>()
    table.insert('a', 1)
    const it = table.values()
    expect(it.next().value).toBe(1)
    table.insert('b', 2)
    expect([...it]).toEqual([2])
  })

  it('N12: undo is idempotent and removes only its own insertion, never a newer entry of the same name', () => {
    const table = named<number>()
    table.insert('keep', 0)
    const undoA = table.insert('a', 1)
    undoA()
    expect(table.has('a')).toBe(false)
    table.insert('a', 3)
    undoA()
    expect(table.get('a')).toBe(3)
    expect([...table.entries()]).toEqual([
      ['keep', 0],
      ['a', 3],
    ])
  })

  it('N12: a name can be inserted again after its undo ran', () => {
    const table = named<number>()
    const undo = table.insert('a', 1)
    undo()
    expect(() => table.insert('a', 2)).not.toThrow()
    expect(table.get('a')).toBe(2)
  })

  it('N13: a drained NamedEntries starts a fresh generation: old iterators stop and miss the replacement', () => {
    const table = named<number>()
    const undo = table.insert('a', 1)
    const it = table.values()
    expect(it.next().value).toBe(1)
    undo()
    expect(table.isEmpty()).toBe(true)
    table.insert('replacement', 2)
    expect(it.next().done).toBe(true)
    expect([...table.values()]).toEqual([2])
  })

  it('a table that does not drain keeps its iterators live across removals', () => {
    const table = named<number>()
    const undoA = table.insert('a', 1)
    table.insert('b', 2)
    const it = table.values()
    expect(it.next().value).toBe(1)
    undoA()
    table.insert('c', 3)
    expect([...it]).toEqual([2, 3])
  })
})

describe('AnonymousEntries', () => {
  it('N13: a drained AnonymousEntries starts a fresh generation: old iterators stop and miss the replacement', () => {
    const table = new AnonymousEntries<number>()
    const undo = table.append(1)
    const it = table.values()
    expect(it.next().value).toBe(1)
    undo()
    expect(table.isEmpty()).toBe(true)
    table.append(2)
    expect(it.next().done).toBe(true)
    expect([...table.values()]).toEqual([2])
  })

  it('N14: equal values appended twice stay independent registrations with idempotent undos', () => {
    const table = new AnonymousEntries<object>()
    const v = { same: true }
    const undo1 = table.append(v)
    const undo2 = table.append(v)
    expect([...table.values()]).toEqual([v, v])
    undo1()
    undo1()
    expect([...table.values()]).toEqual([v])
    expect(table.isEmpty()).toBe(false)
    undo2()
    expect(table.isEmpty()).toBe(true)
    expect([...table.values()]).toEqual([])
  })

  it('a values iterator over AnonymousEntries sees appends made while it is consumed', () => {
    const table = new AnonymousEntries<number>()
    table.append(1)
    const it = table.values()
    expect(it.next().value).toBe(1)
    table.append(2)
    expect([...it]).toEqual([2])
  })
})

describe('ScopedLayers', () => {
  it('N15: only the global layer is created at construction, and reads (peek, chainLayers, merge) never create layers', () => {
    const { store, created } = layers()
    const key = {}
    expect(created).toEqual([undefined])
    expect(store.global.scope).toBeUndefined()
    expect(store.peek(undefined)).toBeUndefined()
    expect(store.peek(key)).toBeUndefined()
    store.global.named.insert('a', 1)
    store.global.named.insert('shared', 2)
    expect([...store.merge(key, l => l.named)]).toEqual([
      ['a', 1],
      ['shared', 2],
    ])
    expect([...store.merge(undefined, l => l.named)]).toEqual([
      ['a', 1],
      ['shared', 2],
    ])
    expect(store.chainLayers(key)).toEqual([])
    expect(store.chainLayers(undefined)).toEqual([])
    expect(created).toEqual([undefined])
    expect(store.peek(key)).toBeUndefined()
  })

  it('N16: a scoped layer is created on first registration, shadows global names, and is reclaimed only when all its tables are empty', async () => {
    const { ctx } = await host()
    const { store, created } = layers()
    const key = { name: 'k' }
    const S = createScope(ctx, key)
    store.global.named.insert('a', 1)
    store.global.named.insert('shared', 1)
    const disposeShared = store.effect(S.ctx, l => l.named.insert('shared', 2), { label: 'shared' })
    const disposeC = store.effect(S.ctx, l => l.named.insert('c', 3), { label: 'c' })
    const disposeAnon = store.effect(S.ctx, l => l.anon.append('x'), { label: 'anon' })
    expect(created).toEqual([undefined, key])
    const layer = store.peek(key)
    expect(layer).toBeInstanceOf(Layer)
    expect(layer!.scope).toBe(key)
    expect([...store.merge(key, l => l.named)]).toEqual([
      ['a', 1],
      ['shared', 2],
      ['c', 3],
    ])
    // The global view never sees the scoped layer.
    expect([...store.merge(undefined, l => l.named)]).toEqual([
      ['a', 1],
      ['shared', 1],
    ])

    await disposeShared()
    expect([...store.merge(key, l => l.named)]).toEqual([
      ['a', 1],
      ['shared', 1],
      ['c', 3],
    ])
    await disposeC()
    expect(store.peek(key)).toBe(layer)
    await disposeAnon()
    expect(store.peek(key)).toBeUndefined()
    expect(created).toEqual([undefined, key])
  })

  it('registering again after reclamation creates a fresh layer', async () => {
    const { ctx } = await host()
    const { store, created } = layers()
    const key = {}
    const S = createScope(ctx, key)
    const dispose = store.effect(S.ctx, l => l.named.insert('a', 1), { label: 'a' })
    const first = store.peek(key)
    await dispose()
    expect(store.peek(key)).toBeUndefined()
    store.effect(S.ctx, l => l.named.insert('a', 2), { label: 'a' })
    const second = store.peek(key)
    expect(second).toBeDefined()
    expect(second).not.toBe(first)
    expect(created).toEqual([undefined, key, key])
    expect([...store.merge(key, l => l.named)]).toEqual([['a', 2]])
  })

  it('an untagged context registers into the global layer and creates no scoped layer', async () => {
    const { ctx } = await host()
    const { store, created } = layers()
    const dispose = store.effect(ctx, l => l.named.insert('g', 1), { label: 'g' })
    expect(store.global.named.get('g')).toBe(1)
    expect(created).toEqual([undefined])
    await dispose()
    expect(store.global.named.has('g')).toBe(false)
    // The global layer is never reclaimed.
    store.effect(ctx, l => l.named.insert('g', 2), { label: 'g' })
    expect(created).toEqual([undefined])
    expect(store.global.named.get('g')).toBe(2)
  })

  it("the layer is chosen by the registering context's tag, including contexts derived from the scope", async () => {
    const { ctx } = await host()
    const { store } = layers()
    const keyA = {}
    const keyB = {}
    const A = createScope(ctx, keyA)
    const B = createScope(A.ctx, keyB)
    const child = await A.ctx.plugin({ name: 'child', apply() {} })
    store.effect(A.ctx.extend({}), l => l.named.insert('extended', 1), { label: 'x' })
    store.effect(child.ctx, l => l.named.insert('child', 2), { label: 'x' })
    store.effect(B.ctx, l => l.named.insert('nested', 3), { label: 'x' })
    expect([...store.peek(keyA)!.named.keys()]).toEqual(['extended', 'child'])
    expect([...store.peek(keyB)!.named.keys()]).toEqual(['nested'])
    expect(store.global.isEmpty()).toBe(true)
  })

  it('chainLayers lists existing chain layers farthest ancestor first; merge lets the nearest scope win and peek stays blind to the chain', async () => {
    const { ctx } = await host()
    const { store, created } = layers()
    const preset = { name: 'preset' }
    const agent = { name: 'agent' }
    const child = { name: 'child' }
    bindScopeParent(agent, preset)
    bindScopeParent(child, agent)
    const P = createScope(ctx, preset)
    const C = createScope(ctx, child)
    store.global.named.insert('g', 0)
    store.global.named.insert('x', 0)
    store.effect(P.ctx, l => l.named.insert('x', 1), { label: 'p' })
    store.effect(P.ctx, l => l.named.insert('p', 1), { label: 'p' })
    store.effect(C.ctx, l => l.named.insert('x', 3), { label: 'c' })
    // agent has no layer: it is skipped, not created.
    expect(store.peek(agent)).toBeUndefined()
    expect(store.chainLayers(child)).toEqual([store.peek(preset), store.peek(child)])
    expect(store.chainLayers(agent)).toEqual([store.peek(preset)])
    expect(created).toEqual([undefined, preset, child])
    expect([...store.merge(child, l => l.named)]).toEqual([
      ['g', 0],
      ['x', 3],
      ['p', 1],
    ])
    expect([...store.merge(agent, l => l.named)]).toEqual([
      ['g', 0],
      ['x', 1],
      ['p', 1],
    ])
    expect([...store.merge(preset, l => l.named)]).toEqual([
      ['g', 0],
      ['x', 1],
      ['p', 1],
    ])
  })

  it("N17: the effect runs the action then notifies; disposing twice undoes and notifies once; the label is in the fiber's effects", async () => {
    const { ctx } = await host()
    const events: string[] = []
    const { store } = layers(() => {
      events.push('notify')
    })
    const S = createScope(ctx, {})
    const dispose = store.effect(
      S.ctx,
      l => {
        events.push('action')
        const undo = l.named.insert('a', 1)
        return () => {
          events.push('undo')
          undo()
        }
      },
      { label: 'store.order' },
    )
    expect(events).toEqual(['action', 'notify'])
    expect(labels(S.ctx)).toContain('store.order')
    await dispose()
    await dispose()
    expect(events).toEqual(['action', 'notify', 'undo', 'notify'])
    expect(labels(S.ctx)).not.toContain('store.order')
  })

  it('with notify: false neither the registration nor its removal notifies', async () => {
    const { ctx } = await host()
    const onChange = vi.fn()
    const { store } = layers(onChange)
    const S = createScope(ctx, {})
    const dispose = store.effect(S.ctx, l => l.named.insert('a', 1), { label: 'quiet', notify: false })
    await dispose()
    expect(onChange).not.toHaveBeenCalled()
    store.effect(S.ctx, l => l.named.insert('a', 1), { label: 'loud' })
    expect(onChange).toHaveBeenCalledTimes(1)
  })

  it('disposing the scope undoes its registrations, reclaims the layer and notifies', async () => {
    const { ctx } = await host()
    const onChange = vi.fn()
    const { store } = layers(onChange)
    const key = {}
    const S = createScope(ctx, key)
    store.effect(S.ctx, l => l.named.insert('a', 1), { label: 'a' })
    store.effect(S.ctx, l => l.anon.append('b'), { label: 'b' })
    expect(onChange).toHaveBeenCalledTimes(2)
    await S.dispose()
    expect(store.peek(key)).toBeUndefined()
    expect([...store.merge(key, l => l.named)]).toEqual([])
    expect(onChange).toHaveBeenCalledTimes(4)
  })

  it('registering through a disposed scope throws INACTIVE_EFFECT without running the action or creating a layer', async () => {
    const { ctx } = await host()
    const onChange = vi.fn()
    const { store, created } = layers(onChange)
    const key = {}
    const S = createScope(ctx, key)
    await S.dispose()
    const action = vi.fn((l: Layer) => l.named.insert('a', 1))
    expect(() => store.effect(S.ctx, action, { label: 'late' })).toThrow(/cannot create effect on inactive context/)
    expect(action).not.toHaveBeenCalled()
    expect(onChange).not.toHaveBeenCalled()
    expect(store.peek(key)).toBeUndefined()
    expect(created).toEqual([undefined])
  })

  it("N18: effect returns the framework's exact disposer and defers the action to the effect runner", () => {
    const { store } = layers()
    const rawDispose = () => {}
    const fakeEffect = vi.fn((_body: unknown, _label: string) => rawDispose)
    const fake = { effect: fakeEffect } as unknown as Context
    const action = vi.fn(() => () => {})
    expect(store.effect(fake, action, { label: 'fake.label' })).toBe(rawDispose)
    expect(fakeEffect).toHaveBeenCalledTimes(1)
    expect(fakeEffect).toHaveBeenCalledWith(expect.any(Function), 'fake.label')
    expect(action).not.toHaveBeenCalled()
  })

  it('N19: a throwing layer factory propagates and stores no layer', async () => {
    const { ctx } = await host()
    const boom = new Error('factory failed')
    let fail = true
    const store = new ScopedLayers<Layer>(
      scope => {
        if (scope !== undefined && fail) throw boom
        return new Layer(scope)
      },
      () => {},
    )
    const key = {}
    const S = createScope(ctx, key)
    const action = vi.fn((l: Layer) => l.named.insert('a', 1))
    expect(() => store.effect(S.ctx, action, { label: 'factory' })).toThrow(boom)
    expect(action).not.toHaveBeenCalled()
    expect(store.peek(key)).toBeUndefined()
    expect(labels(S.ctx)).not.toContain('factory')
    fail = false
    store.effect(S.ctx, action, { label: 'factory' })
    expect(store.peek(key)!.named.get('a')).toBe(1)
  })

  it('N19: an action that throws on a freshly created layer propagates, does not notify and leaves no layer', async () => {
    const { ctx } = await host()
    const onChange = vi.fn()
    const { store } = layers(onChange)
    const key = {}
    const S = createScope(ctx, key)
    const boom = new Error('action failed')
    expect(() =>
      store.effect(
        S.ctx,
        () => {
          throw boom
        },
        { label: 'bad' },
      ),
    ).toThrow(boom)
    expect(store.peek(key)).toBeUndefined()
    expect(onChange).not.toHaveBeenCalled()
    expect(labels(S.ctx)).not.toContain('bad')
  })

  it('N19: an action that throws on an existing layer keeps that layer and its entries', async () => {
    const { ctx } = await host()
    const onChange = vi.fn()
    const { store } = layers(onChange)
    const key = {}
    const S = createScope(ctx, key)
    store.effect(S.ctx, l => l.named.insert('a', 1), { label: 'good' })
    const layer = store.peek(key)
    expect(() => store.effect(S.ctx, l => l.named.insert('a', 2), { label: 'dup' })).toThrow(DuplicateError)
    expect(store.peek(key)).toBe(layer)
    expect([...layer!.named.entries()]).toEqual([['a', 1]])
    expect(onChange).toHaveBeenCalledTimes(1)
    expect(labels(S.ctx)).not.toContain('dup')
  })

  it('N20: a throwing notification rolls back a scoped insertion: undo and a second notify run, the error propagates, the layer is reclaimed', async () => {
    const { ctx } = await host()
    const events: string[] = []
    const boom = new Error('listener failed')
    let calls = 0
    const { store } = layers(() => {
      events.push('notify')
      if (calls++ === 0) throw boom
    })
    const key = {}
    const S = createScope(ctx, key)
    expect(() =>
      store.effect(
        S.ctx,
        l => {
          const undo = l.named.insert('a', 1)
          return () => {
            events.push('undo')
            undo()
          }
        },
        { label: 'rolled.back' },
      ),
    ).toThrow(boom)
    expect(events).toEqual(['notify', 'undo', 'notify'])
    expect(store.peek(key)).toBeUndefined()
    expect(labels(S.ctx)).not.toContain('rolled.back')
    // Nothing leaked: the same name registers again.
    store.effect(S.ctx, l => l.named.insert('a', 2), { label: 'again' })
    expect(store.peek(key)!.named.get('a')).toBe(2)
  })
})
