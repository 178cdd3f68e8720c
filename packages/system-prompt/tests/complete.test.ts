// Spec §2 group H: complete sections (§1.5 steps 6, 7 and 12).
import { describe, expect, it } from 'vitest'
import { renderPrompt, type AssembledSection } from '@loom/system-prompt'
import { names, root, schema, toolNames } from './helpers.ts'

const listenerSection = (name: string, text = name): AssembledSection => ({ name, text, order: 1000, stability: 'static', owner: 'listener' })

describe('H. complete sections', () => {
  it('H1 restores the complete section as the sole section from a pre-waterfall copy', async () => {
    const h = await root()
    h.sp.section({ name: 'complete', order: 10, text: 'Exact prompt.', complete: true })
    h.sp.section({ name: 'extra', order: 20, text: 'Extra.' })
    let seen: string[] = []
    h.ctx.on(
      'system-prompt/assemble',
      async (assembly, _context, next) => {
        seen = names(assembly)
        const target = assembly.sections.find(s => s.name === 'complete')!
        target.text = 'mutated'
        assembly.sections.push(listenerSection('late'))
        return next()
      },
      { prepend: true },
    )

    const a = await h.asm()
    expect(a.sections).toEqual([{ name: 'complete', text: 'Exact prompt.', order: 10, stability: 'static', owner: 'host' }])
    expect(seen).toEqual(['harness:identity', 'deployment:persona', 'complete', 'extra'])
  })

  it('H2 two effective complete sections reject, named in sorted order, before any section text runs', async () => {
    const h = await root()
    let textCalls = 0
    h.sp.section({
      name: 'second',
      order: 20,
      text: () => {
        textCalls++
        return 'second'
      },
      complete: true,
    })
    h.sp.section({
      name: 'first',
      order: 10,
      text: () => {
        textCalls++
        return 'first'
      },
      complete: true,
    })

    await expect(h.asm()).rejects.toThrow('multiple complete prompt sections are active: "first", "second"')
    expect(textCalls).toBe(0)
  })

  it('H3 completeness counts across layers', async () => {
    const h = await root()
    h.sp.section({ name: 'g', order: 10, text: 'global complete', complete: true })
    const s = h.mint()
    s.sp.section({ name: 's', order: 20, text: 'scoped complete', complete: true })

    await expect(h.asm(s.key)).rejects.toThrow('multiple complete prompt sections are active: "g", "s"')
    expect(names(await h.asm())).toEqual(['g'])
  })

  it('H4 shadowing a complete section with an ordinary one disables completeness in that scope', async () => {
    const h = await root()
    h.sp.section({ name: 'X', order: 10, text: 'global complete', complete: true })
    const s = h.mint()
    s.sp.section({ name: 'X', order: 10, text: 'scoped ordinary' })

    expect(names(await h.asm(s.key))).toEqual(['harness:identity', 'deployment:persona', 'X'])
    const global = await h.asm()
    expect(names(global)).toEqual(['X'])
    expect(global.sections[0].text).toBe('global complete')
  })

  it('H5 the complete section survives a short-circuiting listener', async () => {
    const h = await root()
    h.sp.section({ name: 'complete', order: 10, text: 'Exact prompt.', complete: true })
    h.ctx.on('system-prompt/assemble', async () => ({ sections: [], contexts: [], tools: [], variables: {}, variableInfo: {} }))

    const a = await h.asm()
    expect(a.sections).toEqual([{ name: 'complete', text: 'Exact prompt.', order: 10, stability: 'static', owner: 'host' }])
  })

  it('H6 a complete section does not stop tools, contexts, variables or listeners', async () => {
    const h = await root()
    const s = h.mint()
    s.sp.section({ name: 'deployment:persona', order: 0, text: 'Only me.', complete: true })
    h.sp.tools(() => ({ schemas: [schema('t')] }))
    h.sp.context({ name: 'c', order: 1, text: 'context c' })
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      assembly.variables.x = '1'
      return next()
    })

    const a = await h.asm(s.key)
    expect(names(a)).toEqual(['deployment:persona'])
    expect(toolNames(a)).toEqual(['t'])
    expect(a.contexts.map(c => c.name)).toEqual(['c'])
    expect(a.variables.x).toBe('1')
  })

  it('H7 complete text is evaluated once per assembly and the restored text is that evaluation', async () => {
    const h = await root()
    let k = 0
    h.sp.section({ name: 'complete', order: 10, text: () => `n${++k}`, complete: true })

    expect((await h.asm()).sections.map(s => s.text)).toEqual(['n1'])
    expect((await h.asm()).sections.map(s => s.text)).toEqual(['n2'])
    expect(k).toBe(2)
  })

  it('H8 an empty complete section makes the whole prompt empty', async () => {
    const h = await root({ persona: 'persona' })
    h.sp.section({ name: 'other', order: 10, text: 'other' })
    h.sp.section({ name: 'complete', order: 20, text: '', complete: true })

    expect(renderPrompt(await h.asm())).toBe('')
  })

  it('H9 complete text is still interpolated at render', async () => {
    const h = await root()
    h.sp.variable('model', () => 'm')
    h.sp.section({ name: 'complete', order: 10, text: 'Run {{model}}', complete: true })

    const a = await h.asm()
    expect(a.sections[0].text).toBe('Run {{model}}')
    expect(renderPrompt(a)).toBe('Run m')
  })

  it('H10 a scoped complete persona replaces everything in its scope only', async () => {
    const h = await root({ persona: 'deployment identity' })
    h.sp.section({ name: 'global:extra', order: 100, text: 'global extra' })
    const s = h.mint()
    s.sp.section({ name: 'deployment:persona', order: 0, text: 'Only this.', complete: true })
    s.ctx.on(
      'system-prompt/assemble',
      async (assembly, _context, next) => {
        assembly.sections.push(listenerSection('late:extra'))
        return next()
      },
      { prepend: true },
    )

    const a = await h.asm(s.key)
    expect(a.sections).toEqual([{ name: 'deployment:persona', text: 'Only this.', order: 0, stability: 'static', owner: 'host' }])
    expect(renderPrompt(a)).toBe('Only this.')
    expect(names(await h.asm())).toEqual(['harness:identity', 'deployment:persona', 'global:extra'])
  })

  it('H11 only complete === true makes a section complete', async () => {
    const h = await root()
    h.sp.section({ name: 'explicit-false', order: 10, text: 'a', complete: false })
    h.sp.section({ name: 'absent', order: 20, text: 'b' })
    expect(names(await h.asm())).toEqual(['harness:identity', 'deployment:persona', 'explicit-false', 'absent'])

    // Alongside one complete section they are ordinary: no "multiple complete" error.
    h.sp.section({ name: 'the-one', order: 30, text: 'c', complete: true })
    expect(names(await h.asm())).toEqual(['the-one'])
  })
})
