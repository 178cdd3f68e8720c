// Group A: config and built-ins (spec §1.2, §2 A).
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import SystemPrompt, { renderPrompt, TOOL_ORDER_REST as REST, type AssembledContext } from '@loom/system-prompt'
import { BUILT_INS, IDENTITY, names, root, schema, texts } from './helpers.ts'

const PERSONA_DUPLICATE =
  'prompt section "deployment:persona" is already registered (for a per-agent override, register through that agent\'s `agent.ctx` instead)'
const IDENTITY_DUPLICATE =
  'prompt section "harness:identity" is already registered (for a per-agent override, register through that agent\'s `agent.ctx` instead)'

describe('A. config and built-ins', () => {
  it('A1: by default only the identity and an empty persona are registered, and the empty persona is not rendered', async () => {
    const h = await root({})
    const a = await h.asm()
    expect(names(a)).toEqual(BUILT_INS)
    expect(texts(a)).toEqual([IDENTITY, ''])
    expect(renderPrompt(a)).toBe(IDENTITY)
  })

  it('A1: the built-ins are owned by the package, static, at orders -100 and 0', async () => {
    const h = await root({ persona: 'p' })
    expect((await h.asm()).sections).toEqual([
      { name: 'harness:identity', text: IDENTITY, order: -100, stability: 'static', owner: '@loom/system-prompt' },
      { name: 'deployment:persona', text: 'p', order: 0, stability: 'static', owner: '@loom/system-prompt' },
    ])
  })

  it('A2: the persona config follows the identity', async () => {
    const h = await root({ persona: 'You are Loom.' })
    expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\nYou are Loom.`)
  })

  it('A3: includeHarnessIdentity:false omits the identity section', async () => {
    const h = await root({ includeHarnessIdentity: false, persona: 'You are a helpful software engineer assistant.' })
    const a = await h.asm()
    expect(names(a)).toEqual(['deployment:persona'])
    expect(renderPrompt(a)).toBe('You are a helpful software engineer assistant.')

    const empty = await root({ includeHarnessIdentity: false })
    expect(renderPrompt(await empty.asm())).toBe('')
  })

  it('identity config replaces the identity text at order -100, and is ignored when the identity is off', async () => {
    const h = await root({ identity: 'You are Weaver.', persona: 'Be brief.' })
    h.sp.section({ name: 'early', order: -101, text: 'early' })
    h.sp.section({ name: 'after', order: -99, text: 'after' })
    const a = await h.asm()
    expect(names(a)).toEqual(['early', 'harness:identity', 'after', 'deployment:persona'])
    expect(a.sections[1]).toMatchObject({ text: 'You are Weaver.', order: -100 })
    expect(renderPrompt(a)).toBe('early\n\nYou are Weaver.\n\nafter\n\nBe brief.')
    expect(renderPrompt(a)).not.toContain(IDENTITY)

    const off = await root({ identity: 'You are Weaver.', includeHarnessIdentity: false })
    const b = await off.asm()
    expect(names(b)).toEqual(['deployment:persona'])
    expect(renderPrompt(b)).toBe('')
  })

  it('A4: the persona name is taken in the global layer even when the persona is empty', async () => {
    for (const persona of ['x', '']) {
      const h = await root({ persona })
      expect(() => h.sp.section({ name: 'deployment:persona', order: 0, text: 'imposter' })).toThrow(PERSONA_DUPLICATE)
      expect(texts(await h.asm())).toEqual([IDENTITY, persona])
    }
  })

  it('A4: the identity name is taken while the identity is on and free when it is off', async () => {
    const on = await root({})
    expect(() => on.sp.section({ name: 'harness:identity', order: -100, text: 'imposter' })).toThrow(IDENTITY_DUPLICATE)
    expect(texts(await on.asm())).toEqual([IDENTITY, ''])

    const off = await root({ includeHarnessIdentity: false })
    expect(() => off.sp.section({ name: 'harness:identity', order: -100, text: 'mine' })).not.toThrow()
    const a = await off.asm()
    expect(names(a)).toEqual(BUILT_INS)
    expect(a.sections[0]).toMatchObject({ text: 'mine', owner: 'host' })
  })

  it('A5: disposing a plugin fiber removes its section, context, tools and variable; the built-ins stay', async () => {
    const h = await root({})
    const p = await h.plugin('plugin-a')
    p.systemPrompt.section({ name: 's', order: 1, text: 'S' })
    p.systemPrompt.context({ name: 'c', order: 1, text: 'C' })
    p.systemPrompt.tools(() => ({ schemas: [schema('bash')] }))
    p.systemPrompt.variable('v', () => 'V')
    const before = await h.asm()
    expect(names(before)).toEqual([...BUILT_INS, 's'])
    expect(before.contexts.map(c => c.name)).toEqual(['c'])
    expect(before.tools.map(t => t.name)).toEqual(['bash'])
    expect(before.variables).toEqual({ v: 'V' })

    await p.fiber.dispose()
    const a = await h.asm()
    expect(names(a)).toEqual(BUILT_INS)
    expect(a.contexts).toEqual([])
    expect(a.tools).toEqual([])
    expect(a.variables).toEqual({})
  })

  it('A5: the built-ins belong to the service, not to a plugin that used it', async () => {
    const h = await root({ persona: 'p' })
    const p = await h.plugin('plugin-a')
    p.systemPrompt.section({ name: 's', order: 1, text: 'S' })
    await h.ctx.fiber.dispose() // the host fiber, parent of plugin-a
    const a = await h.sp.assemble()
    expect(names(a)).toEqual(BUILT_INS)
    expect(texts(a)).toEqual([IDENTITY, 'p'])
  })

  it('A6: includeRuntimeContext:false suppresses every context: no provider runs and listener-added contexts are dropped', async () => {
    const h = await root({ includeRuntimeContext: false })
    let calls = 0
    h.sp.context({ name: 'policy', order: 0, text: () => `policy ${++calls}` })
    let seen: AssembledContext[] | undefined
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      seen = [...assembly.contexts]
      assembly.contexts.push({ name: 'late', text: 'late context', order: 0, stability: 'step', owner: 'host' })
      return next()
    })
    const a = await h.asm()
    expect(a.contexts).toEqual([])
    expect(seen).toEqual([])
    expect(calls).toBe(0)

    const s = h.mint()
    s.sp.context({ name: 'scoped', order: 0, text: () => `scoped ${++calls}` })
    expect((await h.asm(s.key)).contexts).toEqual([])
    expect(calls).toBe(0)
  })

  it('A6: includeRuntimeContext defaults to true: contexts are assembled', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 0, text: 'P' })
    expect((await h.asm()).contexts.map(c => c.text)).toEqual(['P'])
  })

  it('A7: a toolOrder without the rest entry rejects at load', async () => {
    for (const toolOrder of [[], ['bash', 'todo_write']]) {
      await expect(new Context().plugin(SystemPrompt, { toolOrder })).rejects.toThrow(`toolOrder must contain the "${REST}" rest entry`)
    }
  })

  it('A7: a toolOrder listing a name twice rejects at load, checked before the rest entry', async () => {
    await expect(new Context().plugin(SystemPrompt, { toolOrder: ['bash', 'bash', REST] })).rejects.toThrow('more than once')
    await expect(new Context().plugin(SystemPrompt, { toolOrder: [REST, 'bash', REST] })).rejects.toThrow(`toolOrder lists "${REST}" more than once`)
    await expect(new Context().plugin(SystemPrompt, { toolOrder: ['bash', 'bash'] })).rejects.toThrow('toolOrder lists "bash" more than once')
  })

  it('A7: a failed load provides no service', async () => {
    const host = new Context()
    await expect(host.plugin(SystemPrompt, { toolOrder: [] })).rejects.toThrow('rest entry')
    expect(host.get('systemPrompt')).toBeUndefined()
  })

  it('A7: a valid toolOrder loads, and an absent toolOrder stays absent through the schema', async () => {
    const valid = await root({ toolOrder: ['bash', REST] })
    expect(valid.sp.config.toolOrder).toEqual(['bash', REST])
    valid.sp.tools(() => ({ schemas: [schema('a'), schema('bash')] }))
    expect((await valid.asm()).tools.map(t => t.name)).toEqual(['bash', 'a'])

    const absent = await root({})
    expect(absent.sp.config.toolOrder).toBeUndefined()
    expect(absent.sp.config).toMatchObject({ identity: IDENTITY, includeHarnessIdentity: true, includeRuntimeContext: true, persona: '' })
  })

  it('A8: direct construction without the schema falls back to the same defaults', async () => {
    const service = new SystemPrompt(new Context(), {})
    const a = await service.assemble()
    expect(names(a)).toEqual(BUILT_INS)
    expect(renderPrompt(a)).toBe(IDENTITY)
    expect(service.config.toolOrder).toBeUndefined()
  })

  it('A8: direct construction validates toolOrder synchronously', () => {
    expect(() => new SystemPrompt(new Context(), { toolOrder: ['bash'] })).toThrow('rest entry')
    expect(() => new SystemPrompt(new Context(), { toolOrder: ['x', 'x', REST] })).toThrow('toolOrder lists "x" more than once')
  })

  it('A9: the persona is a strict {{var}} template', async () => {
    const h = await root({ persona: 'You run on {{model}} in {{cwd}}.' })
    h.sp.variable('model', () => 'deepseek-v4')
    h.sp.variable('cwd', () => '/work')
    expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\nYou run on deepseek-v4 in /work.`)
  })

  it('A9: without its variables the persona assembles uninterpolated and fails to render', async () => {
    const h = await root({ persona: 'You run on {{model}} in {{cwd}}.' })
    const a = await h.asm()
    expect(texts(a)).toEqual([IDENTITY, 'You run on {{model}} in {{cwd}}.'])
    expect(() => renderPrompt(a)).toThrow('unknown prompt variable "{{model}}" in section "deployment:persona"; registered variables: (none)')
  })
})
