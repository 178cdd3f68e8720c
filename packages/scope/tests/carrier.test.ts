// Scope-filtered dispatch through the carrier built by scopeTarget (spec §1.3 item 6, §1.4 H6; N5–N8, N11).
import { describe, expect, it } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import { bindScopeParent, carrierKeyOf, createScope, isScopeCarrier, scopeTarget, type Scoped, type ScopeKey } from '@loom/scope'

declare module '@deepseek-ai/cordis' {
  interface Events {
    'scope-test/ping'(this: Scoped<object>, label: string): void
    'scope-test/wrap'(this: Scoped<object>, label: string, next: () => string[]): string[]
  }
}

async function host() {
  const root = new Context()
  const fiber = await root.plugin({ name: 'host', apply() {} })
  return { root, ctx: fiber.ctx }
}

/** Registers a `scope-test/ping` listener through `ctx` that records `${name}:${label}`. */
function listen(ctx: Context, name: string, heard: string[], options?: { global?: boolean }) {
  ctx.on(
    'scope-test/ping',
    label => {
      heard.push(`${name}:${label}`)
    },
    options,
  )
}

const ping = (ctx: Context, key: ScopeKey | undefined, label: string, base: object = {}) => ctx.emit(scopeTarget(base, key), 'scope-test/ping', label)

describe('scopeTarget routing', () => {
  it("N5: a dispatch keyed to a scope reaches untagged listeners and that scope's listeners; an undefined key reaches only untagged ones", async () => {
    const { ctx } = await host()
    const keyA = { name: 'A' }
    const keyB = { name: 'B' }
    const A = createScope(ctx, keyA)
    const B = createScope(ctx, keyB)
    const heard: string[] = []
    listen(ctx, 'global', heard)
    listen(A.ctx, 'A', heard)
    listen(B.ctx, 'B', heard)
    ping(ctx, keyA, 'a')
    ping(ctx, keyB, 'b')
    ping(ctx, undefined, 'none')
    expect(heard).toEqual(['global:a', 'A:a', 'global:b', 'B:b', 'global:none'])
  })

  it('a dispatch with an undefined key admits only untagged listeners, whatever context emits it', async () => {
    const { ctx } = await host()
    const key = {}
    const S = createScope(ctx, key)
    const child = await S.ctx.plugin({ name: 'child', apply() {} })
    const heard: string[] = []
    listen(ctx, 'untagged', heard)
    listen(ctx.extend({}), 'untagged-extended', heard)
    listen(S.ctx, 'scoped', heard)
    listen(S.ctx.extend({}), 'scoped-extended', heard)
    listen(child.ctx, 'scoped-child', heard)
    ping(S.ctx, undefined, 'x')
    expect(heard).toEqual(['untagged:x', 'untagged-extended:x'])
  })

  it('listeners registered through contexts derived from a scope (extend, child plugin) are filtered as that scope', async () => {
    const { ctx } = await host()
    const key = {}
    const other = {}
    const S = createScope(ctx, key)
    const child = await S.ctx.plugin({ name: 'child', apply() {} })
    const heard: string[] = []
    listen(S.ctx.extend({ agent: {} }), 'extended', heard)
    listen(child.ctx, 'child', heard)
    ping(ctx, other, 'other')
    expect(heard).toEqual([])
    ping(ctx, key, 'own')
    expect(heard).toEqual(['extended:own', 'child:own'])
  })

  it("N6: the base object's own filter runs first with this === base and can veto every listener", async () => {
    const { ctx } = await host()
    const key = {}
    const S = createScope(ctx, key)
    const heard: string[] = []
    listen(ctx, 'untagged', heard)
    listen(S.ctx, 'scoped', heard)
    const calls: { self: unknown; ctx: Context }[] = []
    const base = {
      [Context.filter](this: unknown, listenerCtx: Context) {
        calls.push({ self: this, ctx: listenerCtx })
        return false
      },
    }
    ping(ctx, key, 'vetoed', base)
    ping(ctx, undefined, 'vetoed', base)
    expect(heard).toEqual([])
    expect(calls.length).toBeGreaterThan(0)
    for (const call of calls) expect(call.self).toBe(base)
    expect(calls.map(c => c.ctx)).toContain(S.ctx)
  })

  it('N6: a base filter that admits a listener does not override the scope filter', async () => {
    const { ctx } = await host()
    const keyA = {}
    const keyB = {}
    const A = createScope(ctx, keyA)
    const B = createScope(ctx, keyB)
    const heard: string[] = []
    listen(ctx, 'untagged', heard)
    listen(A.ctx, 'A', heard)
    listen(B.ctx, 'B', heard)
    // Admits everything except listeners registered through B.
    const base = { [Context.filter]: (listenerCtx: Context) => listenerCtx !== B.ctx }
    ping(ctx, keyA, 'a', base)
    ping(ctx, keyB, 'b', base)
    expect(heard).toEqual(['untagged:a', 'A:a', 'untagged:b'])
  })

  it('N7: a { global: true } listener hears dispatches keyed to a foreign scope, with no key, and despite a vetoing base filter', async () => {
    const { ctx } = await host()
    const keyA = {}
    const keyB = {}
    createScope(ctx, keyA)
    const B = createScope(ctx, keyB)
    const heard: string[] = []
    listen(B.ctx, 'B-global', heard, { global: true })
    listen(B.ctx, 'B', heard)
    ping(ctx, keyA, 'foreign')
    ping(ctx, undefined, 'none')
    ping(ctx, keyA, 'vetoed', { [Context.filter]: () => false })
    expect(heard).toEqual(['B-global:foreign', 'B-global:none', 'B-global:vetoed'])
  })

  it("N8: the carrier is opaque: recognisable, keyed, and exposing none of the base object's properties", () => {
    const key = { name: 'k' }
    const subject = { value: 1 }
    const carrier = scopeTarget(subject, key)
    expect(isScopeCarrier(carrier)).toBe(true)
    expect(carrierKeyOf(carrier)).toBe(key)
    expect(isScopeCarrier(subject)).toBe(false)
    expect(carrierKeyOf(subject)).toBeUndefined()
    expect('value' in carrier).toBe(false)
    expect(Object.keys(carrier)).toEqual([])
    expect(Object.isFrozen(carrier)).toBe(true)

    const unkeyed = scopeTarget(subject, undefined)
    expect(isScopeCarrier(unkeyed)).toBe(true)
    expect(carrierKeyOf(unkeyed)).toBeUndefined()
    for (const value of [null, undefined, 0, 'carrier', () => {}]) {
      expect(isScopeCarrier(value)).toBe(false)
      expect(carrierKeyOf(value)).toBeUndefined()
    }
  })

  it('listeners run with the carrier as this, in emit and in waterfall', async () => {
    const { ctx } = await host()
    const key = {}
    const S = createScope(ctx, key)
    const carrier = scopeTarget({}, key)
    const thisSeen: unknown[] = []
    S.ctx.on('scope-test/ping', function () {
      thisSeen.push(this)
    })
    S.ctx.on('scope-test/wrap', function (label, next) {
      thisSeen.push(this)
      return [`S:${label}`, ...next()]
    })
    ctx.emit(carrier, 'scope-test/ping', 'x')
    const result = ctx.waterfall(carrier, 'scope-test/wrap', 'y', () => ['fallback'])
    expect(result).toEqual(['S:y', 'fallback'])
    expect(thisSeen).toEqual([carrier, carrier])
    // The waterfall applies the same filter: a foreign key skips S's wrapper.
    expect(ctx.waterfall(scopeTarget({}, {}), 'scope-test/wrap', 'z', () => ['fallback'])).toEqual(['fallback'])
  })
})

describe('ancestor admission', () => {
  it('N11: a dispatch at a key is heard by that key, its ancestors and untagged listeners, never by a descendant', async () => {
    const { ctx } = await host()
    const preset = { name: 'preset' }
    const agent = { name: 'agent' }
    const child = { name: 'child' }
    const P = createScope(ctx, preset)
    const A = createScope(ctx, agent, { parent: preset })
    const C = createScope(ctx, child, { parent: agent })
    const heard: string[] = []
    listen(ctx, 'untagged', heard)
    listen(P.ctx, 'preset', heard)
    listen(A.ctx, 'agent', heard)
    listen(C.ctx, 'child', heard)

    ping(ctx, child, 'c')
    expect(heard.splice(0)).toEqual(['untagged:c', 'preset:c', 'agent:c', 'child:c'])
    ping(ctx, agent, 'a')
    expect(heard.splice(0)).toEqual(['untagged:a', 'preset:a', 'agent:a'])
    ping(ctx, preset, 'p')
    expect(heard.splice(0)).toEqual(['untagged:p', 'preset:p'])
  })

  it('N11: sibling scopes and unrelated roots are never admitted, in either direction', async () => {
    const { ctx } = await host()
    const preset = {}
    const agent = {}
    const sibling = {}
    const stranger = {}
    createScope(ctx, preset)
    const A = createScope(ctx, agent, { parent: preset })
    const S = createScope(ctx, sibling, { parent: preset })
    const X = createScope(ctx, stranger)
    const heard: string[] = []
    listen(A.ctx, 'agent', heard)
    listen(S.ctx, 'sibling', heard)
    listen(X.ctx, 'stranger', heard)
    ping(ctx, agent, 'a')
    ping(ctx, sibling, 's')
    ping(ctx, stranger, 'x')
    ping(ctx, preset, 'p')
    expect(heard).toEqual(['agent:a', 'sibling:s', 'stranger:x'])
  })

  it('admission reads the parent chain at dispatch time, so binds and rebinds apply to the next dispatch', async () => {
    const { ctx } = await host()
    const presetA = {}
    const presetB = {}
    const agent = {}
    const PA = createScope(ctx, presetA)
    const PB = createScope(ctx, presetB)
    createScope(ctx, agent)
    const heard: string[] = []
    listen(PA.ctx, 'A', heard)
    listen(PB.ctx, 'B', heard)
    ping(ctx, agent, 'unbound')
    const binding = bindScopeParent(agent, presetA)
    ping(ctx, agent, 'bound')
    binding.rebind(presetB)
    ping(ctx, agent, 'rebound')
    expect(heard).toEqual(['A:bound', 'B:rebound'])
  })
})
