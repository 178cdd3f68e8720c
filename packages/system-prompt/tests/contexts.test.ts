// Group C: runtime contexts and suppression (spec §1.5 steps 2, 8, 12, §2 C).
import { describe, expect, it } from 'vitest'
import { renderContextSnapshot, renderPrompt, type AssembledContext, type PromptAssembly } from '@loom/system-prompt'
import { root, schema } from './helpers.ts'

const HEADER = 'Current runtime context. This snapshot supersedes earlier runtime-context snapshots.'
const GLOBAL_DUP = (name: string) =>
  `prompt context "${name}" is already registered (for a per-agent override, register through that agent's \`agent.ctx\` instead)`
const SCOPED_DUP = (name: string) => `prompt context "${name}" is already registered in this scope`
const ctxNames = (a: PromptAssembly) => a.contexts.map(c => c.name)
const ctxTexts = (a: PromptAssembly) => a.contexts.map(c => c.text)

describe('C. contexts and runtime-context suppression', () => {
  it('C1: contexts assemble in ascending order with exactly name, text, order, stability and owner', async () => {
    const h = await root({})
    const p = await h.plugin('plugin-x')
    h.sp.context({ name: 'later', order: 20, text: () => 'context 2' })
    p.systemPrompt.context({ name: 'earlier', order: 10, text: 'context 1', stability: 'session' })
    const a = await h.asm()
    expect(a.contexts).toEqual([
      { name: 'earlier', text: 'context 1', order: 10, stability: 'session', owner: 'plugin-x' },
      { name: 'later', text: 'context 2', order: 20, stability: 'step', owner: 'host' },
    ])
    for (const context of a.contexts) {
      expect(Object.keys(context).sort()).toEqual(['name', 'order', 'owner', 'stability', 'text'])
    }
    expect(renderContextSnapshot(a)).toBe(`${HEADER}\n\ncontext 1\n\ncontext 2`)
    // Contexts never reach the system text.
    expect(renderPrompt(a)).not.toContain('context 1')
  })

  it('C1: contexts with equal order sort by name whatever the registration order', async () => {
    for (const registration of [
      ['b', 'A', 'a'],
      ['a', 'b', 'A'],
      ['A', 'a', 'b'],
    ]) {
      const h = await root({})
      for (const name of registration) h.sp.context({ name, order: 3, text: name })
      h.sp.context({ name: 'first', order: 1, text: 'first' })
      expect(ctxNames(await h.asm())).toEqual(['first', 'A', 'a', 'b'])
    }
  })

  it('C2: an empty context stays in the assembly but is not rendered', async () => {
    const h = await root({})
    h.sp.context({ name: 'empty', order: 0, text: '' })
    const a = await h.asm()
    expect(renderContextSnapshot(a)).toBe('')
    expect(a.contexts).toMatchObject([{ name: 'empty', text: '' }])

    h.sp.variable('mode', () => 'read-only')
    h.sp.context({ name: 'policy', order: 1, text: 'Mode: {{mode}}.' })
    const b = await h.asm()
    expect(ctxTexts(b)).toEqual(['', 'Mode: {{mode}}.'])
    expect(renderContextSnapshot(b)).toBe(`${HEADER}\n\nMode: read-only.`)
  })

  it('C3: duplicate and non-finite contexts throw like sections and leak nothing', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'first' })
    expect(() => h.sp.context({ name: 'policy', order: 2, text: 'second' })).toThrow(GLOBAL_DUP('policy'))
    for (const order of [NaN, Infinity, -Infinity]) {
      let thrown: unknown
      try {
        h.sp.context({ name: 'bad', order, text: 'x' })
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(TypeError)
      expect((thrown as Error).message).toBe('prompt context "bad" order must be a finite number')
    }
    // Finiteness before the duplicate check.
    expect(() => h.sp.context({ name: 'policy', order: NaN, text: 'x' })).toThrow(new TypeError('prompt context "policy" order must be a finite number'))
    expect((await h.asm()).contexts).toMatchObject([{ name: 'policy', text: 'first' }])
    expect((await h.asm()).contexts).toHaveLength(1)
  })

  it('C3: section and context names are separate namespaces', async () => {
    const h = await root({})
    h.sp.section({ name: 'policy', order: 1, text: 'section' })
    expect(() => h.sp.context({ name: 'policy', order: 1, text: 'context' })).not.toThrow()
    expect(() => h.sp.context({ name: 'deployment:persona', order: 1, text: 'context' })).not.toThrow()
    expect(ctxNames(await h.asm())).toEqual(['deployment:persona', 'policy'])
  })

  it('C4: a scoped context shadows the global one, rejects a scoped duplicate, and falls back after scope disposal', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'global policy' })
    const s = h.mint()
    s.sp.context({ name: 'policy', order: 1, text: 'scoped policy' })
    expect(() => s.sp.context({ name: 'policy', order: 1, text: 'again' })).toThrow(SCOPED_DUP('policy'))
    expect(renderContextSnapshot(await h.asm(s.key))).toBe(`${HEADER}\n\nscoped policy`)
    expect(renderContextSnapshot(await h.asm())).toBe(`${HEADER}\n\nglobal policy`)
    await s.dispose()
    expect(renderContextSnapshot(await h.asm(s.key))).toBe(`${HEADER}\n\nglobal policy`)
  })

  it('C5: a shadowed global context text function is never called', async () => {
    const h = await root({})
    let globalCalls = 0
    h.sp.context({ name: 'policy', order: 1, text: () => `global ${++globalCalls}` })
    const s = h.mint()
    s.sp.context({ name: 'policy', order: 1, text: 'scoped' })
    expect(ctxTexts(await h.asm(s.key))).toEqual(['scoped'])
    expect(globalCalls).toBe(0)
    expect(ctxTexts(await h.asm())).toEqual(['global 1'])
  })

  it('C6: a scoped suppressor affects only its scope, and disposing it restores the contexts', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'global policy' })
    const s = h.mint()
    const d = s.sp.suppressRuntimeContext()
    expect((await h.asm(s.key)).contexts).toEqual([])
    expect(renderContextSnapshot(await h.asm())).toBe(`${HEADER}\n\nglobal policy`)
    d()
    expect(renderContextSnapshot(await h.asm(s.key))).toBe(`${HEADER}\n\nglobal policy`)
  })

  it('C6: a scoped suppressor also goes away with its scope', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'global policy' })
    const s = h.mint()
    s.sp.suppressRuntimeContext()
    expect((await h.asm(s.key)).contexts).toEqual([])
    await s.dispose()
    expect(ctxTexts(await h.asm(s.key))).toEqual(['global policy'])
  })

  it('C7: suppressors stack: contexts return only when the last one is disposed', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'global policy' })
    const s = h.mint()
    const d1 = s.sp.suppressRuntimeContext()
    const d2 = s.sp.suppressRuntimeContext()
    d1()
    expect((await h.asm(s.key)).contexts).toEqual([])
    d1() // idempotent: must not release the other suppressor
    expect((await h.asm(s.key)).contexts).toEqual([])
    d2()
    expect(ctxTexts(await h.asm(s.key))).toEqual(['global policy'])
  })

  it('C7: global suppressors stack as well', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'p' })
    const d1 = h.sp.suppressRuntimeContext()
    const d2 = h.sp.suppressRuntimeContext()
    d2()
    expect((await h.asm()).contexts).toEqual([])
    d1()
    expect(ctxTexts(await h.asm())).toEqual(['p'])
  })

  it('C8: suppression follows the scope chain downward only', async () => {
    const h = await root({})
    h.sp.context({ name: 'policy', order: 1, text: 'global policy' })
    const P = h.mint({ name: 'preset' })
    const A = h.mint({ name: 'agent A' }, { parent: P.key })
    const B = h.mint({ name: 'agent B' }, { parent: P.key })

    const dP = P.sp.suppressRuntimeContext()
    expect((await h.asm(A.key)).contexts).toEqual([])
    expect((await h.asm(B.key)).contexts).toEqual([])
    expect((await h.asm(P.key)).contexts).toEqual([])
    expect(ctxTexts(await h.asm())).toEqual(['global policy'])
    dP()

    const dA = A.sp.suppressRuntimeContext()
    expect((await h.asm(A.key)).contexts).toEqual([])
    expect(ctxTexts(await h.asm(P.key))).toEqual(['global policy'])
    expect(ctxTexts(await h.asm(B.key))).toEqual(['global policy'])
    expect(ctxTexts(await h.asm())).toEqual(['global policy'])
    dA()

    h.sp.suppressRuntimeContext()
    for (const key of [undefined, P.key, A.key, B.key]) {
      expect((await h.asm(key)).contexts).toEqual([])
    }
  })

  it('C8: an ancestor suppressor also hides the contexts a descendant registered itself', async () => {
    const h = await root({})
    const P = h.mint()
    const A = h.mint({}, { parent: P.key })
    A.sp.context({ name: 'own', order: 1, text: 'own' })
    expect(ctxTexts(await h.asm(A.key))).toEqual(['own'])
    P.sp.suppressRuntimeContext()
    expect((await h.asm(A.key)).contexts).toEqual([])
  })

  it('C9: suppression is total for contexts and leaves sections, tools and variables alone', async () => {
    const build = async (suppress: boolean) => {
      const h = await root({ persona: 'persona {{mode}}' })
      let contextCalls = 0
      h.sp.context({ name: 'policy', order: 1, text: () => `policy ${++contextCalls}` })
      h.sp.section({ name: 'rules', order: 1, text: 'rules' })
      h.sp.tools(() => ({ schemas: [schema('bash')] }))
      h.sp.variable('mode', () => 'ro')
      let seen: AssembledContext[] | undefined
      h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
        seen = [...assembly.contexts]
        assembly.contexts.push({ name: 'late', text: 'late context', order: 0, stability: 'step', owner: 'host' })
        return next()
      })
      if (suppress) h.sp.suppressRuntimeContext()
      const a = await h.asm()
      return { a, seen, contextCalls: () => contextCalls }
    }
    const open = await build(false)
    expect(ctxNames(open.a)).toEqual(['policy', 'late'])
    expect(open.contextCalls()).toBe(1)

    const shut = await build(true)
    expect(shut.contextCalls()).toBe(0)
    expect(shut.seen).toEqual([])
    expect(shut.a.contexts).toEqual([])
    expect(renderContextSnapshot(shut.a)).toBe('')
    expect(shut.a.sections).toEqual(open.a.sections)
    expect(shut.a.tools).toEqual(open.a.tools)
    expect(shut.a.variables).toEqual(open.a.variables)
    expect(shut.a.variableInfo).toEqual(open.a.variableInfo)
    expect(renderPrompt(shut.a)).toBe(renderPrompt(open.a))
  })

  it('C9: a listener that replaces the contexts array is stripped too, but its other fields survive', async () => {
    const h = await root({})
    h.sp.suppressRuntimeContext()
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      const result = await next()
      return { ...result, contexts: [{ name: 'x', text: 'x', order: 0, stability: 'step', owner: 'host' }], extra: 'kept' }
    })
    const a = await h.asm()
    expect(a.contexts).toEqual([])
    expect(a.extra).toBe('kept')
  })
})
