// Spec §2 group G: the assemble() pipeline (§1.5), waterfall and identity.
import { describe, expect, it } from 'vitest'
import type { AssembleContext, AssembledSection, PromptAssembly } from '@loom/system-prompt'
import { IDENTITY, names, root, schema, type Host } from './helpers.ts'

const section = (name: string, text = name): AssembledSection => ({ name, text, order: 1000, stability: 'static', owner: 'listener' })

/** Calls `assemble` and reports whether the call itself threw synchronously. */
function assembleAsync(h: Host): { threw: boolean; result?: Promise<PromptAssembly> } {
  try {
    return { threw: false, result: h.sp.assemble() }
  } catch {
    return { threw: true }
  }
}

describe('G. the assemble() pipeline, waterfall and identity', () => {
  it('G1 runs providers in the order variables, tools, sections, contexts, listeners', async () => {
    const h = await root()
    const log: string[] = []
    h.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      log.push('listener')
      return next()
    })
    h.sp.context({
      name: 'c2',
      order: 2,
      text: () => {
        log.push('context:2')
        return 'c2'
      },
    })
    h.sp.context({
      name: 'c1',
      order: 1,
      text: () => {
        log.push('context:1')
        return 'c1'
      },
    })
    h.sp.section({
      name: 's2',
      order: 20,
      text: () => {
        log.push('section:20')
        return 's2'
      },
    })
    h.sp.section({
      name: 's1',
      order: 10,
      text: () => {
        log.push('section:10')
        return 's1'
      },
    })
    h.sp.tools(() => {
      log.push('tool')
      return { schemas: [schema('t')] }
    })
    h.sp.variable('v', () => {
      log.push('variable')
      return 'v'
    })

    await h.asm()
    expect(log).toEqual(['variable', 'tool', 'section:10', 'section:20', 'context:1', 'context:2', 'listener'])
  })

  it("G2 listeners compose in registration order and receive the caller's context object", async () => {
    const h = await root()
    h.sp.section({ name: 'base', order: 10, text: 'base' })
    let contextOfA: AssembleContext | undefined
    let seenByB: string[] = []
    h.ctx.on('system-prompt/assemble', async (assembly, context, next) => {
      contextOfA = context
      assembly.sections.push(section('from-a', 'a'))
      return next()
    })
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      seenByB = names(assembly)
      return next()
    })

    const passed: AssembleContext = {}
    const a = await h.sp.assemble(passed)
    expect(seenByB).toEqual(['harness:identity', 'deployment:persona', 'base', 'from-a'])
    expect(names(a)).toEqual(['harness:identity', 'deployment:persona', 'base', 'from-a'])
    expect(contextOfA).toBe(passed)
  })

  it('G3 a later prepended listener runs outermost', async () => {
    const h = await root()
    const log: string[] = []
    h.ctx.on('system-prompt/assemble', async (_a, _c, next) => {
      log.push('first')
      return next()
    })
    h.ctx.on('system-prompt/assemble', async (_a, _c, next) => {
      log.push('second')
      return next()
    })
    h.ctx.on(
      'system-prompt/assemble',
      async (_a, _c, next) => {
        log.push('prepended')
        return next()
      },
      { prepend: true },
    )
    h.ctx.on(
      'system-prompt/assemble',
      async (_a, _c, next) => {
        log.push('prepended-later')
        return next()
      },
      { prepend: true },
    )

    await h.asm()
    expect(log).toEqual(['prepended-later', 'prepended', 'first', 'second'])
  })

  it('G4 a listener that does not call next() short-circuits the inner chain', async () => {
    const h = await root()
    h.sp.section({ name: 'real', order: 10, text: 'real' })
    let innerRan = false
    h.ctx.on('system-prompt/assemble', async () => ({ sections: [], contexts: [], tools: [], variables: {}, variableInfo: {} }))
    h.ctx.on('system-prompt/assemble', async (_a, _c, next) => {
      innerRan = true
      return next()
    })

    const a = await h.asm()
    expect(a.sections).toEqual([])
    expect(innerRan).toBe(false)
  })

  it("G5 returns the waterfall's own object when nothing is enforced, a shallow copy otherwise", async () => {
    const custom = (): PromptAssembly => ({
      sections: [section('custom')],
      contexts: [{ name: 'ctx', text: 'x', order: 1, stability: 'step', owner: 'listener' }],
      tools: [],
      variables: {},
      variableInfo: {},
      extra: 1,
    })

    const plain = await root()
    const x = custom()
    plain.ctx.on('system-prompt/assemble', async () => x)
    expect(await plain.asm()).toBe(x)

    const suppressed = await root({ includeRuntimeContext: false })
    const y = custom()
    suppressed.ctx.on('system-prompt/assemble', async () => y)
    const result = await suppressed.asm()
    expect(result).not.toBe(y)
    expect(result).toEqual({ ...y, contexts: [] })
    expect(result.extra).toBe(1)
  })

  it('G6 every assembly is a fresh snapshot that earlier mutations cannot reach', async () => {
    const h = await root()
    h.sp.section({ name: 'base', order: 10, text: 'base' })
    h.sp.variable('v', () => 'value')
    h.sp.tools(() => ({ schemas: [{ name: 't', description: 'tool', parameters: { type: 'object', properties: {} } }] }))

    const first = await h.asm()
    first.sections[0].name = 'renamed'
    first.sections[0].text = 'retexted'
    first.sections.push(section('pushed'))
    first.contexts.push({ name: 'leaked', text: 'leaked', order: 0, stability: 'step', owner: 'test' })
    first.tools[0].description = 'mutated'
    ;(first.tools[0].parameters.properties as Record<string, unknown>).leak = { type: 'string' }
    first.variables.v = 'changed'

    const second = await h.asm()
    expect(names(second)).toEqual(['harness:identity', 'deployment:persona', 'base'])
    expect(second.sections[0].text).toBe(IDENTITY)
    expect(second.contexts).toEqual([])
    expect(second.tools).toEqual([{ name: 't', description: 'tool', parameters: { type: 'object', properties: {} }, owner: 'host' }])
    expect(second.variables).toEqual({ v: 'value' })
  })

  it('G7 every assembly failure is a rejection, never a synchronous throw', async () => {
    const cases: Record<string, (h: Host) => void> = {
      'throwing listener': h => {
        h.ctx.on('system-prompt/assemble', async () => {
          throw new Error('listener boom')
        })
      },
      'throwing section text': h => {
        h.sp.section({
          name: 's',
          order: 1,
          text: () => {
            throw new Error('text boom')
          },
        })
      },
      'throwing variable provider': h => {
        h.sp.variable('v', () => {
          throw new Error('variable boom')
        })
      },
      'multiple complete sections': h => {
        h.sp.section({ name: 'a', order: 1, text: 'a', complete: true })
        h.sp.section({ name: 'b', order: 2, text: 'b', complete: true })
      },
      'reserved tool name': h => {
        h.sp.tools(() => ({ schemas: [schema('<unlisted-tools>')] }))
      },
    }
    const outcomes: Record<string, string> = {}
    for (const [label, arrange] of Object.entries(cases)) {
      const h = await root()
      arrange(h)
      const call = assembleAsync(h)
      outcomes[label] = call.threw
        ? 'sync throw'
        : await call.result!.then(
            () => 'resolved',
            () => 'rejected',
          )
    }
    const ordered = await root({ toolOrder: ['ghost', '<unlisted-tools>'] })
    const call = assembleAsync(ordered)
    outcomes['toolOrder names an unknown tool'] = call.threw
      ? 'sync throw'
      : await call.result!.then(
          () => 'resolved',
          () => 'rejected',
        )

    expect(outcomes).toEqual({
      'throwing listener': 'rejected',
      'throwing section text': 'rejected',
      'throwing variable provider': 'rejected',
      'multiple complete sections': 'rejected',
      'reserved tool name': 'rejected',
      'toolOrder names an unknown tool': 'rejected',
    })
  })

  it('G8 a bare assemble() passes a fresh empty context on every call', async () => {
    const h = await root()
    const seen: AssembleContext[] = []
    h.ctx.on('system-prompt/assemble', async (_a, context, next) => {
      seen.push(context)
      return next()
    })

    await h.sp.assemble()
    await h.sp.assemble()
    expect(seen).toHaveLength(2)
    expect(seen[0]).not.toBe(seen[1])
    expect(seen[0].scope).toBeUndefined()
    expect(seen[1].scope).toBeUndefined()
  })

  it('G9 inner listeners receive the original assembly object; in-place edits flow inward', async () => {
    // An outer listener cannot hand a different object inward: next() ignores its arguments.
    const h = await root()
    let outerArg: PromptAssembly | undefined
    let innerArg: PromptAssembly | undefined
    const replacement: PromptAssembly = { sections: [], contexts: [], tools: [], variables: {}, variableInfo: {} }
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      outerArg = assembly
      const passOn = next as unknown as (value: PromptAssembly) => Promise<PromptAssembly>
      const inner = await passOn(replacement)
      return { ...inner, sections: [...inner.sections, section('outer:after')] }
    })
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      innerArg = assembly
      return next()
    })

    const result = await h.asm()
    expect(innerArg).toBe(outerArg)
    expect(innerArg).not.toBe(replacement)
    expect(names(innerArg!)).not.toContain('outer:after')
    expect(names(result)).toEqual(['harness:identity', 'deployment:persona', 'outer:after'])

    // In-place mutation before next() is seen by inner listeners and by the fallback result.
    const m = await root()
    let mutated: PromptAssembly | undefined
    let seenInside: string[] = []
    m.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      mutated = assembly
      assembly.sections.push(section('outer:before'))
      assembly.variables.extra = 'x'
      return next()
    })
    m.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      seenInside = names(assembly)
      return next()
    })

    const final = await m.asm()
    expect(seenInside).toContain('outer:before')
    expect(final).toBe(mutated)
    expect(names(final)).toContain('outer:before')
    expect(final.variables.extra).toBe('x')
  })
})
