// Spec §2 group F: scope and layer visibility and lifecycle (§1.3).
import { describe, expect, it } from 'vitest'
import { bindScopeParent, createScope } from '@loom/scope'
import { renderPrompt, type AssembleContext, type PromptAssembly } from '@loom/system-prompt'
import { changeCounter, contrib, IDENTITY, names, root, schema, toolNames } from './helpers.ts'

const persona = (a: PromptAssembly) => a.sections.find(s => s.name === 'deployment:persona')?.text

describe('F. scope and layer visibility and lifecycle', () => {
  it("F1 registers into the caller's scope while the view follows context.scope only", async () => {
    const h = await root()
    const s = h.mint()
    s.sp.section({ name: 'child:extra', order: 50, text: 'Extra guidance.' })

    expect(renderPrompt(await h.asm(s.key))).toContain('Extra guidance.')
    expect(renderPrompt(await h.asm())).not.toContain('Extra guidance.')
    // Assembling through S's own context without `scope` sees only the global layer.
    expect(renderPrompt(await s.sp.assemble())).not.toContain('Extra guidance.')
    expect(names(await s.sp.assemble())).toEqual(['harness:identity', 'deployment:persona'])
  })

  it('F2 a scoped persona shadows the deployment persona in that scope only', async () => {
    const h = await root({ persona: 'You are the deployment.' })
    const s = h.mint()
    s.sp.section({ name: 'deployment:persona', order: 0, text: 'You run tests.' })

    const scoped = renderPrompt(await h.asm(s.key))
    expect(scoped).toBe(`${IDENTITY}\n\nYou run tests.`)
    expect(scoped).not.toContain('You are the deployment.')

    const global = renderPrompt(await h.asm())
    expect(global).toBe(`${IDENTITY}\n\nYou are the deployment.`)
    expect(global).not.toContain('You run tests.')
  })

  it('F3 an empty scoped section eats the global one without falling back', async () => {
    const h = await root({ persona: 'deployment identity' })
    const s = h.mint()
    s.sp.section({ name: 'deployment:persona', order: 0, text: '' })

    const scoped = await h.asm(s.key)
    expect(names(scoped)).toEqual(['harness:identity', 'deployment:persona'])
    expect(persona(scoped)).toBe('')
    expect(renderPrompt(scoped)).toBe(IDENTITY)
    expect(renderPrompt(scoped)).not.toContain('deployment identity')

    expect(persona(await h.asm())).toBe('deployment identity')
  })

  it('F4 shadowing happens before text evaluation: the shadowed text function never runs', async () => {
    const h = await root()
    let globalCalls = 0
    let scopedCalls = 0
    h.sp.section({
      name: 'shared',
      order: 1,
      text: () => {
        globalCalls++
        return 'global text'
      },
    })
    const s = h.mint()
    s.sp.section({
      name: 'shared',
      order: 1,
      text: () => {
        scopedCalls++
        return 'scoped text'
      },
    })

    const a = await h.asm(s.key)
    expect(a.sections.find(x => x.name === 'shared')?.text).toBe('scoped text')
    expect(globalCalls).toBe(0)
    expect(scopedCalls).toBe(1)
  })

  it('F5 nesting contexts does not link scopes; only an explicit parent does', async () => {
    const h = await root()
    const outerKey = { name: 'outer' }
    const outer = h.mint(outerKey)
    outer.sp.section({ name: 'o', order: 5, text: 'outer' })

    const innerKey = { name: 'inner' }
    const inner = createScope(outer.ctx, innerKey)
    inner.ctx.systemPrompt.section({ name: 'i', order: 5, text: 'inner' })
    expect(contrib(await h.asm(innerKey)).map(s => s.name)).toEqual(['i'])

    const linkedKey = { name: 'linked' }
    const linked = createScope(outer.ctx, linkedKey, { parent: outerKey })
    linked.ctx.systemPrompt.section({ name: 'i', order: 5, text: 'inner' })
    // Loom: equal orders sort by name (code units), so 'i' precedes 'o'.
    expect(contrib(await h.asm(linkedKey)).map(s => s.name)).toEqual(['i', 'o'])
  })

  it('F6 contexts derived from a scope inherit its tag and their own lifetime', async () => {
    const h = await root()
    const s = h.mint()
    const plugin = await h.plugin('x', s.ctx)
    plugin.systemPrompt.section({ name: 'from-plugin', order: 10, text: 'P' })
    s.ctx.extend({}).systemPrompt.section({ name: 'from-extend', order: 11, text: 'E' })
    s.sp.section({ name: 'direct', order: 12, text: 'D' })

    expect(contrib(await h.asm(s.key)).map(x => x.name)).toEqual(['from-plugin', 'from-extend', 'direct'])
    expect(contrib(await h.asm())).toEqual([])

    await plugin.fiber.dispose()
    expect(contrib(await h.asm(s.key)).map(x => x.name)).toEqual(['from-extend', 'direct'])

    await s.dispose()
    expect(contrib(await h.asm(s.key))).toEqual([])
  })

  it('F7 disposing a scope removes all its registrations, one change event each', async () => {
    const h = await root({ persona: 'P' })
    h.sp.section({ name: 'global', order: 10, text: 'G' })
    const s = h.mint()
    s.sp.section({ name: 'deployment:persona', order: 0, text: 'scoped persona' })
    s.sp.context({ name: 'policy', order: 1, text: 'scoped policy' })
    s.sp.tools(() => ({ schemas: [schema('scoped_tool')] }))
    s.sp.variable('mode', () => 'strict')
    s.sp.suppressRuntimeContext()
    expect(await h.asm(s.key)).not.toEqual(await h.asm())

    const counter = changeCounter(h.ctx)
    await s.dispose()
    expect(counter.count).toBe(5)
    expect(await h.asm(s.key)).toEqual(await h.asm())
  })

  it('F8 assembling an unused scope sees the global view and changes nothing', async () => {
    const h = await root({ persona: 'P' })
    h.sp.section({ name: 'g', order: 10, text: 'G' })
    const counter = changeCounter(h.ctx)

    const neverUsed = {}
    expect(names(await h.asm(neverUsed))).toEqual(names(await h.asm()))
    expect(await h.asm(neverUsed)).toEqual(await h.asm())
    expect(counter.count).toBe(0)
  })

  it('F9 sections resolve nearest-wins along a three-level chain', async () => {
    const h = await root({ persona: 'G' })
    const p = h.mint()
    const a = h.mint({}, { parent: p.key })
    const b = h.mint({}, { parent: p.key })
    p.sp.section({ name: 'deployment:persona', order: 0, text: 'P' })
    const disposeA = a.sp.section({ name: 'deployment:persona', order: 0, text: 'A' })

    expect(persona(await h.asm(a.key))).toBe('A')
    expect(persona(await h.asm(b.key))).toBe('P')
    expect(persona(await h.asm(p.key))).toBe('P')
    expect(persona(await h.asm())).toBe('G')

    disposeA()
    expect(persona(await h.asm(a.key))).toBe('P')
  })

  it('F10 tool providers add up along a three-level chain', async () => {
    const h = await root()
    const p = h.mint()
    const a = h.mint({}, { parent: p.key })
    const b = h.mint({}, { parent: p.key })
    h.sp.tools(() => ({ schemas: [schema('g')] }))
    p.sp.tools(() => ({ schemas: [schema('p')] }))
    a.sp.tools(() => ({ schemas: [schema('a')] }))

    expect(toolNames(await h.asm(a.key))).toEqual(['a', 'g', 'p'])
    expect(toolNames(await h.asm(b.key))).toEqual(['g', 'p'])
    expect(toolNames(await h.asm(p.key))).toEqual(['g', 'p'])
    expect(toolNames(await h.asm())).toEqual(['g'])
  })

  it("F11 rebinding a scope's parent changes the very next assembly", async () => {
    const h = await root({ persona: 'G' })
    const p1 = h.mint()
    const p2 = h.mint()
    p1.sp.section({ name: 'deployment:persona', order: 0, text: 'one' })
    p2.sp.section({ name: 'deployment:persona', order: 0, text: 'two' })
    const aKey = {}
    const binding = bindScopeParent(aKey, p1.key)

    expect(persona(await h.asm(aKey))).toBe('one')
    binding.rebind(p2.key)
    expect(persona(await h.asm(aKey))).toBe('two')
  })

  it("F12 a scoped listener shapes only its own scope's assemblies", async () => {
    const h = await root()
    const s = h.mint()
    const seen: AssembleContext[] = []
    s.ctx.on('system-prompt/assemble', async (_assembly, context, next) => {
      seen.push(context)
      const result = await next()
      result.sections.push({ name: 'listener:extra', text: 'extra', order: 999, stability: 'static', owner: 'listener' })
      return result
    })

    expect(names(await h.asm(s.key))).toContain('listener:extra')
    expect(names(await h.asm())).not.toContain('listener:extra')
    expect(seen).toHaveLength(1)
    expect(seen[0].scope).toBe(s.key)
  })

  it('F13 listener routing goes up the chain, never down or sideways; global listeners hear all', async () => {
    const h = await root()
    const p = h.mint()
    const a = h.mint({}, { parent: p.key })
    const b = h.mint({}, { parent: p.key })
    const other = h.mint()
    let log: string[] = []
    const listen = (label: string, ctx: typeof h.ctx, options?: { global: boolean }) =>
      ctx.on(
        'system-prompt/assemble',
        async (_assembly, _context, next) => {
          log.push(label)
          return next()
        },
        options,
      )
    listen('untagged', h.ctx)
    listen('P', p.ctx)
    listen('A', a.ctx)
    listen('B', b.ctx)
    listen('global', other.ctx, { global: true })

    const heard = async (key?: object) => {
      log = []
      await h.asm(key)
      return [...log].sort()
    }
    expect(await heard(a.key)).toEqual(['A', 'P', 'global', 'untagged'])
    expect(await heard(b.key)).toEqual(['B', 'P', 'global', 'untagged'])
    expect(await heard(p.key)).toEqual(['P', 'global', 'untagged'])
    expect(await heard()).toEqual(['global', 'untagged'])
    expect(await heard(other.key)).toEqual(['global', 'untagged'])
  })

  it('F14 registering through a disposed scope throws and registers nothing', async () => {
    const h = await root()
    const s = h.mint()
    const sp = s.sp
    await s.dispose()
    const counter = changeCounter(h.ctx)

    expect(() => sp.section({ name: 'late', order: 1, text: 'late' })).toThrow(/inactive context/)
    expect(names(await h.asm(s.key))).not.toContain('late')
    expect(counter.count).toBe(0)
  })
})
