// Loom's own contracts beyond the reference (beyond.md items 1 and 5): canonical
// ties, load-order independence, ownership and enforced stability classes.
import { describe, expect, it } from 'vitest'
import { renderContextSnapshot, renderPrompt } from '@loom/system-prompt'
import { contrib, root, schema, type Host } from './helpers.ts'

describe('(a) canonical order ties', () => {
  it('sorts equal-order sections and contexts by name whatever the load order, warning once per pair', async () => {
    const load = async (h: Host, order: ('a' | 'b')[]) => {
      for (const which of order) {
        const ctx = await h.plugin(`plugin-${which}`)
        if (which === 'a') {
          ctx.systemPrompt.section({ name: 'alpha', order: 5, text: 'A' })
          ctx.systemPrompt.context({ name: 'ctx-alpha', order: 3, text: 'cA' })
        } else {
          ctx.systemPrompt.section({ name: 'zeta', order: 5, text: 'Z' })
          ctx.systemPrompt.context({ name: 'ctx-zeta', order: 3, text: 'cZ' })
        }
      }
    }
    const results = []
    for (const order of [
      ['a', 'b'],
      ['b', 'a'],
    ] as const) {
      const h = await root()
      await load(h, [...order])
      for (let i = 0; i < 5; i++) {
        const a = await h.asm()
        expect(contrib(a).map(s => s.name)).toEqual(['alpha', 'zeta'])
        expect(a.contexts.map(c => c.name)).toEqual(['ctx-alpha', 'ctx-zeta'])
      }
      results.push(h.warnings)
    }

    for (const warnings of results) {
      expect(warnings).toHaveLength(2)
      const sectionWarning = warnings.find(w => w.includes('"alpha"'))!
      const contextWarning = warnings.find(w => w.includes('"ctx-alpha"'))!
      for (const part of ['"alpha"', '"zeta"', 'plugin-a', 'plugin-b']) expect(sectionWarning).toContain(part)
      for (const part of ['"ctx-alpha"', '"ctx-zeta"', 'plugin-a', 'plugin-b']) expect(contextWarning).toContain(part)
      expect(sectionWarning).not.toContain('ctx-')
    }
    expect(results[0]).toEqual(results[1])
  })
})

describe('(b) load-order independence', () => {
  it('gives byte-identical assemblies and renders whichever of two plugins loads first', async () => {
    const plugins: Record<'a' | 'b', (h: Host) => Promise<void>> = {
      async a(h) {
        const sp = (await h.plugin('plugin-a')).systemPrompt
        sp.variable('a_var', () => 'A-value')
        sp.section({ name: 'a:rules', order: 50, text: 'A rules use {{a_var}}.' })
        sp.section({ name: 'a:tie', order: 60, text: 'A tie.' })
        sp.context({ name: 'a:ctx', order: 10, text: 'A context {{b_var}}.' })
        sp.tools(() => ({ schemas: [schema('shared', 'from a'), schema('alpha')] }))
      },
      async b(h) {
        const sp = (await h.plugin('plugin-b')).systemPrompt
        sp.variable('b_var', () => 'B-value')
        sp.section({ name: 'b:rules', order: 50, text: 'B rules use {{b_var}}.' })
        sp.section({ name: 'b:tie', order: 60, text: 'B tie.' })
        sp.context({ name: 'b:ctx', order: 10, text: 'B context {{a_var}}.' })
        sp.tools(() => ({ schemas: [schema('shared', 'from b'), schema('bravo')] }))
      },
    }
    const build = async (order: ('a' | 'b')[]) => {
      const h = await root({ persona: 'Persona with {{a_var}} and {{b_var}}.' })
      for (const name of order) await plugins[name](h)
      const a = await h.asm()
      return { prompt: renderPrompt(a), snapshot: renderContextSnapshot(a), json: JSON.stringify(a) }
    }

    const ab = await build(['a', 'b'])
    const ba = await build(['b', 'a'])
    expect(ba.prompt).toBe(ab.prompt)
    expect(ba.snapshot).toBe(ab.snapshot)
    expect(ba.json).toBe(ab.json)
  })
})

describe('(c) ownership', () => {
  it('names the owning plugin of every section, context, tool and variable, across scopes', async () => {
    const h = await root({ persona: 'P' })
    const global = await h.plugin('global-plugin')
    global.systemPrompt.section({ name: 'g:section', order: 10, text: 'g' })
    global.systemPrompt.context({ name: 'g:context', order: 10, text: 'g' })
    global.systemPrompt.tools(() => ({ schemas: [schema('g_tool')] }))
    global.systemPrompt.variable('g_var', () => 'g')

    const s = h.mint()
    const scoped = await h.plugin('scoped-plugin', s.ctx)
    scoped.systemPrompt.section({ name: 's:section', order: 20, text: 's' })
    scoped.systemPrompt.context({ name: 's:context', order: 20, text: 's' })
    scoped.systemPrompt.tools(() => ({ schemas: [schema('s_tool')] }))
    scoped.systemPrompt.variable('s_var', () => 's')
    s.sp.section({ name: 'host:section', order: 30, text: 'h' })

    const a = await h.asm(s.key)
    const owners = (items: { name: string; owner: string }[]) => Object.fromEntries(items.map(i => [i.name, i.owner]))
    expect(owners(a.sections)).toEqual({
      'harness:identity': '@loom/system-prompt',
      'deployment:persona': '@loom/system-prompt',
      'g:section': 'global-plugin',
      's:section': 'scoped-plugin',
      'host:section': 'host',
    })
    expect(owners(a.contexts)).toEqual({ 'g:context': 'global-plugin', 's:context': 'scoped-plugin' })
    expect(owners(a.tools)).toEqual({ g_tool: 'global-plugin', s_tool: 'scoped-plugin' })
    expect(Object.fromEntries(Object.entries(a.variableInfo).map(([k, v]) => [k, v.owner]))).toEqual({ g_var: 'global-plugin', s_var: 'scoped-plugin' })
  })
})

describe('(d) stability classes', () => {
  it('defaults sections to static, contexts to step and variables to session', async () => {
    const h = await root()
    h.sp.section({ name: 's', order: 10, text: 's' })
    h.sp.section({ name: 'declared', order: 11, text: 'd', stability: 'session' })
    h.sp.context({ name: 'c', order: 10, text: 'c' })
    h.sp.context({ name: 'declared-context', order: 11, text: 'd', stability: 'session' })
    h.sp.variable('v', () => 'v')
    h.sp.variable('w', () => 'w', { stability: 'step' })

    const a = await h.asm()
    expect(Object.fromEntries(a.sections.map(s => [s.name, s.stability]))).toEqual({
      'harness:identity': 'static',
      'deployment:persona': 'static',
      s: 'static',
      declared: 'session',
    })
    expect(a.contexts.map(c => [c.name, c.stability])).toEqual([
      ['c', 'step'],
      ['declared-context', 'session'],
    ])
    expect(a.variableInfo).toEqual({ v: { owner: 'host', stability: 'session' }, w: { owner: 'host', stability: 'step' } })
  })

  it('refuses a step-stable section at registration with a TypeError naming it', async () => {
    const h = await root()
    let error: unknown
    try {
      h.sp.section({ name: 'clock:now', order: 10, text: 'now', stability: 'step' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(TypeError)
    expect((error as TypeError).message).toContain('"clock:now"')
    expect(contrib(await h.asm())).toEqual([])
  })

  it('rejects assembly when the persona references a step variable, naming variable, section and both owners', async () => {
    const h = await root({ persona: 'Now: {{now}}' })
    const clock = await h.plugin('clock')
    clock.systemPrompt.variable('now', () => '12:00', { stability: 'step' })

    const error = await h.asm().then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error).toBeInstanceOf(Error)
    for (const part of ['{{now}}', '"deployment:persona"', '@loom/system-prompt', '"clock"']) expect(error!.message).toContain(part)
  })

  it('rejects assembly when any section references a step variable, naming variable, section and both owners', async () => {
    const h = await root()
    const clock = await h.plugin('clock')
    clock.systemPrompt.variable('now', () => '12:00', { stability: 'step' })
    const writer = await h.plugin('writer')
    writer.systemPrompt.section({ name: 'status', order: 10, text: () => 'Status at {{now}}', stability: 'session' })

    const error = await h.asm().then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error).toBeInstanceOf(Error)
    for (const part of ['{{now}}', '"status"', '"writer"', '"clock"']) expect(error!.message).toContain(part)
  })

  it('lets a runtime context use a step variable and renders it in the snapshot', async () => {
    const h = await root()
    const clock = await h.plugin('clock')
    clock.systemPrompt.variable('now', () => '12:00', { stability: 'step' })
    clock.systemPrompt.context({ name: 'clock', order: 10, text: 'Time: {{now}}.' })

    const a = await h.asm()
    expect(renderContextSnapshot(a)).toBe('Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nTime: 12:00.')
  })

  it('rejects a section added by a waterfall listener that references a step variable', async () => {
    const h = await root()
    const clock = await h.plugin('clock')
    clock.systemPrompt.variable('now', () => '12:00', { stability: 'step' })
    const sneaky = await h.plugin('sneaky')
    sneaky.on('system-prompt/assemble', async (_assembly, _context, next) => {
      const result = await next()
      result.sections.push({ name: 'late:time', text: 'It is {{now}}.', order: 500, stability: 'static', owner: 'sneaky' })
      return result
    })

    const error = await h.asm().then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error).toBeInstanceOf(Error)
    for (const part of ['{{now}}', '"late:time"', '"sneaky"', '"clock"']) expect(error!.message).toContain(part)
  })
})

describe('(e) literal text', () => {
  it('a literal section or context is rendered verbatim: braces from files never fail the prompt', async () => {
    const h = await root()
    h.sp.section({ name: 'file', order: 90, text: 'run: ${{ secrets.TOKEN }} and {{not_a_var}}', literal: true })
    h.sp.context({ name: 'path', order: 1, text: 'cwd: /work/{{odd}}', literal: true })
    h.sp.variable('now', () => 't', { stability: 'step' })
    h.sp.section({ name: 'mention', order: 91, text: 'literal {{now}} is not a reference', literal: true })
    const a = await h.asm()
    expect(a.sections.find(s => s.name === 'file')!.literal).toBe(true)
    expect(renderPrompt(a)).toContain('run: ${{ secrets.TOKEN }} and {{not_a_var}}')
    expect(renderPrompt(a)).toContain('literal {{now}} is not a reference')
    expect(renderContextSnapshot(a)).toContain('cwd: /work/{{odd}}')
  })

  it('without literal the same text is a strict template and fails naming the section', async () => {
    const h = await root()
    h.sp.section({ name: 'file', order: 90, text: 'run: ${{ secrets.TOKEN }}' })
    await expect(h.asm().then(renderPrompt)).rejects.toThrow(/malformed prompt variable reference "\{\{ secrets\.TOKEN \}\}" in section "file"/)
  })
})

describe('(f) tool owners from a provider that serves several plugins', () => {
  it('a schema that names its owner is attributed to it; others to the provider', async () => {
    const h = await root()
    h.sp.tools(() => ({ schemas: [{ ...schema('a'), owner: 'plugin-a' }, schema('b')] }))
    expect((await h.asm()).tools.map(t => [t.name, t.owner])).toEqual([
      ['a', 'plugin-a'],
      ['b', 'host'],
    ])
  })
})
