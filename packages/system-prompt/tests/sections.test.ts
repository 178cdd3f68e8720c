// Group B: sections (spec §1.2, §1.5 steps 4, 6, 7, §2 B). Loom sorts equal orders by name.
import { describe, expect, it } from 'vitest'
import { createScope } from '@loom/scope'
import { renderPrompt, type AssembleContext } from '@loom/system-prompt'
import { BUILT_INS, changeCounter, contrib, IDENTITY, names, root, texts } from './helpers.ts'

const GLOBAL_DUP = (name: string) =>
  `prompt section "${name}" is already registered (for a per-agent override, register through that agent's \`agent.ctx\` instead)`
const SCOPED_DUP = (name: string) => `prompt section "${name}" is already registered in this scope`
const NOT_FINITE = (name: string) => `prompt section "${name}" order must be a finite number`

describe('B. sections', () => {
  it('B1: sections assemble in ascending order and render joined by blank lines', async () => {
    const h = await root({ persona: 'You are Loom.' })
    h.sp.section({ name: 'cwd', order: 20, text: () => 'cwd: /tmp' })
    h.sp.section({ name: 'rules', order: 10, text: 'Be precise.' })
    const a = await h.asm()
    expect(names(a)).toEqual([...BUILT_INS, 'rules', 'cwd'])
    expect(renderPrompt(a)).toBe(`${IDENTITY}\n\nYou are Loom.\n\nBe precise.\n\ncwd: /tmp`)
  })

  it('B1: an assembled section has exactly name, text, order, stability and owner', async () => {
    const h = await root({})
    const p = await h.plugin('plugin-x')
    h.sp.section({ name: 'cwd', order: 20, text: () => 'cwd: /tmp' })
    p.systemPrompt.section({ name: 'rules', order: 10, text: 'Be precise.', stability: 'session', complete: false })
    const a = await h.asm()
    for (const section of a.sections) {
      expect(Object.keys(section).sort()).toEqual(['name', 'order', 'owner', 'stability', 'text'])
    }
    expect(contrib(a)).toEqual([
      { name: 'rules', text: 'Be precise.', order: 10, stability: 'session', owner: 'plugin-x' },
      { name: 'cwd', text: 'cwd: /tmp', order: 20, stability: 'static', owner: 'host' },
    ])
  })

  it('B1: a scoped registration is owned by the plugin that minted the scope', async () => {
    const h = await root({})
    const p = await h.plugin('plugin-x')
    const s = h.mint()
    s.sp.section({ name: 'mine', order: 1, text: 'm' })
    const tKey = {}
    createScope(p, tKey).ctx.systemPrompt.section({ name: 'theirs', order: 1, text: 't' })
    expect(contrib(await h.asm(s.key))).toMatchObject([{ name: 'mine', owner: 'host' }])
    expect(contrib(await h.asm(tKey))).toMatchObject([{ name: 'theirs', owner: 'plugin-x' }])
  })

  it('B2: negative and fractional orders interleave with the built-ins', async () => {
    const h = await root({})
    h.sp.section({ name: 'src', order: -99, text: 'src' })
    h.sp.section({ name: 'pre', order: -101, text: 'pre' })
    h.sp.section({ name: 'half', order: 0.5, text: 'half' })
    h.sp.section({ name: 'one', order: 1, text: 'one' })
    expect(names(await h.asm())).toEqual(['pre', 'harness:identity', 'src', 'deployment:persona', 'half', 'one'])
  })

  it('B3: equal orders sort by name (code units) whatever the registration order', async () => {
    const ordered = ['A', 'B', 'Z', 'a', 'b']
    for (const registration of [
      ['A', 'B', 'Z', 'a', 'b'],
      ['b', 'a', 'Z', 'B', 'A'],
      ['a', 'Z', 'b', 'A', 'B'],
    ]) {
      const h = await root({})
      for (const name of registration) h.sp.section({ name, order: 5, text: name })
      expect(contrib(await h.asm()).map(s => s.name)).toEqual(ordered)
    }
  })

  it('B3: a section tied with a built-in sorts by name against it', async () => {
    const h = await root({})
    h.sp.section({ name: 'zzz', order: 0, text: 'z' })
    h.sp.section({ name: 'aaa', order: 0, text: 'a' })
    h.sp.section({ name: 'harness:zzz', order: -100, text: 'hz' })
    h.sp.section({ name: 'harness:aaa', order: -100, text: 'ha' })
    expect(names(await h.asm())).toEqual(['harness:aaa', 'harness:identity', 'harness:zzz', 'aaa', 'deployment:persona', 'zzz'])
  })

  it('B4: a tie with shadowing sorts by name; the shadow supplies the text', async () => {
    const h = await root({})
    h.sp.section({ name: 'B', order: 5, text: 'gB' })
    h.sp.section({ name: 'A', order: 5, text: 'gA' })
    const s = h.mint()
    s.sp.section({ name: 'C', order: 5, text: 'sC' })
    s.sp.section({ name: 'A', order: 5, text: 'sA' })
    const a = contrib(await h.asm(s.key))
    expect(a.map(x => x.name)).toEqual(['A', 'B', 'C'])
    expect(a.map(x => x.text)).toEqual(['sA', 'gB', 'sC'])
    expect(texts(await h.asm())).toEqual([IDENTITY, '', 'gA', 'gB'])
  })

  it('B5: a shadow uses its own order', async () => {
    const h = await root({})
    h.sp.section({ name: 'X', order: 10, text: 'g' })
    const s = h.mint()
    s.sp.section({ name: 'X', order: -5, text: 's' })
    const scoped = await h.asm(s.key)
    expect(names(scoped)).toEqual(['harness:identity', 'X', 'deployment:persona'])
    expect(scoped.sections[1]).toMatchObject({ text: 's', order: -5 })
    const global = await h.asm()
    expect(names(global)).toEqual(['harness:identity', 'deployment:persona', 'X'])
    expect(global.sections[2]).toMatchObject({ text: 'g', order: 10 })
  })

  it('B6: disposing and re-registering an entry does not move it among ties', async () => {
    const h = await root({})
    const dA = h.sp.section({ name: 'A', order: 5, text: 'A1' })
    h.sp.section({ name: 'B', order: 5, text: 'B' })
    dA()
    expect(contrib(await h.asm()).map(s => s.name)).toEqual(['B'])
    h.sp.section({ name: 'A', order: 5, text: 'A2' })
    const a = contrib(await h.asm())
    expect(a.map(s => s.name)).toEqual(['A', 'B'])
    expect(a.map(s => s.text)).toEqual(['A2', 'B'])
  })

  it('B7: a function text is evaluated on every assembly with the exact context object', async () => {
    const h = await root({})
    let calls = 0
    const received: AssembleContext[] = []
    h.sp.section({
      name: 'dyn',
      order: 1,
      text: context => {
        received.push(context)
        return `call ${++calls} for ${(context.who as string | undefined) ?? 'nobody'}`
      },
    })
    const withWho: AssembleContext = { who: 'alice' }
    expect(texts(await h.sp.assemble(withWho)).at(-1)).toBe('call 1 for alice')
    expect(texts(await h.sp.assemble()).at(-1)).toBe('call 2 for nobody')
    expect(calls).toBe(2)
    expect(received[0]).toBe(withWho)
    expect(received[1]).toEqual({})
    expect(received[1]).not.toBe(withWho)
  })

  it('B8: static text is used verbatim, whitespace included', async () => {
    const h = await root({})
    h.sp.section({ name: 'pad', order: 1, text: '  padded  ' })
    const a = await h.asm()
    expect(contrib(a)[0].text).toBe('  padded  ')
    expect(renderPrompt(a)).toBe(`${IDENTITY}\n\n  padded  `)
  })

  it('B9: a duplicate in the same layer throws and leaks nothing', async () => {
    const h = await root({})
    h.sp.section({ name: 'dup', order: 0, text: 'first' })
    expect(() => h.sp.section({ name: 'dup', order: 1, text: 'second' })).toThrow('prompt section "dup" is already registered')
    expect(contrib(await h.asm()).map(s => s.text)).toEqual(['first'])
  })

  it('B10: the duplicate message depends on the layer', async () => {
    const h = await root({})
    h.sp.section({ name: 'dup', order: 0, text: 'g' })
    let global: unknown
    try {
      h.sp.section({ name: 'dup', order: 0, text: 'g2' })
    } catch (error) {
      global = error
    }
    expect(global).toBeInstanceOf(Error)
    expect((global as Error).message).toBe(GLOBAL_DUP('dup'))
    expect((global as Error).message).toMatch(/agent\.ctx/)

    const s = h.mint()
    s.sp.section({ name: 'dup', order: 0, text: 's' })
    let scoped: unknown
    try {
      s.sp.section({ name: 'dup', order: 0, text: 's2' })
    } catch (error) {
      scoped = error
    }
    expect((scoped as Error).message).toBe(SCOPED_DUP('dup'))
    expect((scoped as Error).message).not.toMatch(/agent\.ctx/)
    expect(contrib(await h.asm(s.key)).map(x => x.text)).toEqual(['s'])
  })

  it('B11: the same name may be registered in different layers; each assembly sees its own', async () => {
    const h = await root({})
    const s = h.mint()
    const t = h.mint()
    h.sp.section({ name: 'x', order: 1, text: 'g' })
    expect(() => s.sp.section({ name: 'x', order: 1, text: 's' })).not.toThrow()
    expect(() => t.sp.section({ name: 'x', order: 1, text: 't' })).not.toThrow()
    expect(contrib(await h.asm()).map(x => x.text)).toEqual(['g'])
    expect(contrib(await h.asm(s.key)).map(x => x.text)).toEqual(['s'])
    expect(contrib(await h.asm(t.key)).map(x => x.text)).toEqual(['t'])
  })

  it('B12: non-finite orders throw a TypeError, register nothing and emit no change', async () => {
    const h = await root({})
    const changes = changeCounter(h.ctx)
    for (const order of [NaN, Infinity, -Infinity]) {
      let thrown: unknown
      try {
        h.sp.section({ name: 'bad-order', order, text: 'x' })
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(TypeError)
      expect((thrown as Error).message).toBe(NOT_FINITE('bad-order'))
    }
    expect(contrib(await h.asm())).toEqual([])
    expect(changes.count).toBe(0)
    // The name was never taken.
    expect(() => h.sp.section({ name: 'bad-order', order: 1, text: 'ok' })).not.toThrow()
  })

  it('B12: the finiteness check precedes the duplicate check', async () => {
    const h = await root({})
    h.sp.section({ name: 'dup', order: 0, text: 'first' })
    let thrown: unknown
    try {
      h.sp.section({ name: 'dup', order: NaN, text: 'x' })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TypeError)
    expect((thrown as Error).message).toBe(NOT_FINITE('dup'))
    const s = h.mint()
    s.sp.section({ name: 'dup', order: 0, text: 's' })
    expect(() => s.sp.section({ name: 'dup', order: Infinity, text: 'x' })).toThrow(TypeError)
  })

  it('B13: the disposer removes the section directly and is idempotent', async () => {
    const h = await root({})
    const changes = changeCounter(h.ctx)
    const d = h.sp.section({ name: 'direct', order: 1, text: 'd' })
    expect(contrib(await h.asm())).toHaveLength(1)
    expect(changes.count).toBe(1)
    d()
    expect(contrib(await h.asm())).toHaveLength(0)
    expect(changes.count).toBe(2)
    d()
    expect(changes.count).toBe(2)
    // An old disposer never removes a newer registration of the same name.
    h.sp.section({ name: 'direct', order: 1, text: 'again' })
    d()
    expect(contrib(await h.asm()).map(s => s.text)).toEqual(['again'])
    expect(changes.count).toBe(3)
  })

  it('B13: a scoped disposer is direct too, and scope disposal after it changes nothing more', async () => {
    const h = await root({})
    const s = h.mint()
    const changes = changeCounter(h.ctx)
    const d = s.sp.section({ name: 'direct', order: 1, text: 'd' })
    expect(contrib(await h.asm(s.key))).toHaveLength(1)
    d()
    expect(contrib(await h.asm(s.key))).toHaveLength(0)
    await s.dispose()
    expect(changes.count).toBe(2)
  })

  it('B14: registration accepts two complete sections and an empty name; the conflict surfaces at assembly', async () => {
    const h = await root({})
    expect(() => h.sp.section({ name: 'c2', order: 2, text: 'two', complete: true })).not.toThrow()
    expect(() => h.sp.section({ name: 'c1', order: 1, text: 'one', complete: true })).not.toThrow()
    await expect(h.asm()).rejects.toThrow('multiple complete prompt sections are active: "c1", "c2"')

    const e = await root({})
    expect(() => e.sp.section({ name: '', order: 1, text: 'anonymous' })).not.toThrow()
    expect(contrib(await e.asm())).toMatchObject([{ name: '', text: 'anonymous' }])
  })
})

describe('attribution', () => {
  it('keeps declared trust, category and source apart from the shapes; defaults by owner and kind', async () => {
    const h = await root()
    const repo = await h.plugin('repo-notes')
    repo.systemPrompt.section({
      name: 'notes',
      order: 10,
      text: 'Notes.',
      trust: 'repository',
      category: 'files',
      source: () => ({ path: 'NOTES.md', sha256: 'abc', modifiedAt: 5 }),
    })
    repo.systemPrompt.context({ name: 'now', order: 10, text: 'now' })
    const assembly = await h.asm()
    expect(assembly.sections.find(section => section.name === 'notes')).toEqual({
      name: 'notes',
      text: 'Notes.',
      order: 10,
      stability: 'static',
      owner: 'repo-notes',
    })
    expect(assembly.attribution).toEqual({
      sections: {
        'harness:identity': { trust: 'product', category: 'instructions' },
        'deployment:persona': { trust: 'deployment', category: 'instructions' },
        notes: { trust: 'repository', category: 'files', source: { path: 'NOTES.md', sha256: 'abc', modifiedAt: 5 } },
      },
      contexts: { now: { trust: 'deployment', category: 'runtime' } },
    })
  })
})
