// Spec §2 group M (M1–M4) and §1.7: the system-prompt invariant companion, as adapted by Loom.
import { describe, expect, it } from 'vitest'
import { scopeTarget } from '@loom/scope'
import * as invariant from '@loom/system-prompt/invariant'
import { InvariantError } from '@loom/system-prompt/invariant'
import type { AssembledSection, PromptAssembly } from '@loom/system-prompt'
import { root, schema, toolNames, type Host } from './helpers.ts'

const PREFIX = 'invariant violated by "@loom/system-prompt": '

const valid = (): PromptAssembly => ({
  sections: [{ name: 'identity', text: 'prompt', order: 0, stability: 'static', owner: 'plugin-a' }],
  contexts: [{ name: 'policy', text: 'current policy', order: 0, stability: 'step', owner: 'plugin-a' }],
  tools: [{ name: 'echo', description: 'Echo', parameters: {}, owner: 'plugin-a' }],
  variables: { cwd: '/repo', optional: undefined },
  variableInfo: { cwd: { owner: 'plugin-a', stability: 'session' } },
})

async function guarded(): Promise<Host> {
  const h = await root()
  await h.root.plugin(invariant)
  return h
}

/** Dispatches the waterfall directly, with a fallback returning `value`. */
function dispatch(h: Host, value: PromptAssembly) {
  return h.ctx.waterfall(scopeTarget(h.sp, undefined), 'system-prompt/assemble', value, {}, async () => value)
}

const listenerSection = (name: string): AssembledSection => ({ name, text: name, order: 1000, stability: 'static', owner: 'listener' })

type Mutation = (a: PromptAssembly) => void
const cases: [string, Mutation, string][] = [
  [
    'empty section name',
    a => {
      a.sections[0].name = ''
    },
    'assembled section names must be non-empty',
  ],
  [
    'duplicate section name',
    a => {
      a.sections = [
        { ...a.sections[0], name: 'x' },
        { ...a.sections[0], name: 'x' },
      ]
    },
    'assembled section name "x" is duplicated',
  ],
  [
    'non-string section text',
    a => {
      ;(a.sections[0] as { text: unknown }).text = 1
    },
    'assembled section "identity" text must be a string',
  ],
  [
    'section without owner',
    a => {
      ;(a.sections[0] as { owner: unknown }).owner = undefined
    },
    'assembled section "identity" names no owner plugin',
  ],
  [
    'section with empty owner',
    a => {
      a.sections[0].owner = ''
    },
    'assembled section "identity" names no owner plugin',
  ],
  [
    'empty context name',
    a => {
      a.contexts[0].name = ''
    },
    'assembled context names must be non-empty',
  ],
  [
    'duplicate context name',
    a => {
      a.contexts = [
        { ...a.contexts[0], name: 'x' },
        { ...a.contexts[0], name: 'x' },
      ]
    },
    'assembled context name "x" is duplicated',
  ],
  [
    'non-string context text',
    a => {
      ;(a.contexts[0] as { text: unknown }).text = 1
    },
    'assembled context "policy" text must be a string',
  ],
  [
    'context without owner',
    a => {
      ;(a.contexts[0] as { owner: unknown }).owner = undefined
    },
    'assembled context "policy" names no owner plugin',
  ],
  [
    'context with empty owner',
    a => {
      a.contexts[0].owner = ''
    },
    'assembled context "policy" names no owner plugin',
  ],
  [
    'empty tool name',
    a => {
      a.tools[0].name = ''
    },
    'assembled tool names must be non-empty',
  ],
  [
    'tool without owner',
    a => {
      ;(a.tools[0] as { owner: unknown }).owner = undefined
    },
    'assembled tool "echo" names no owner plugin',
  ],
  [
    'tool with empty owner',
    a => {
      a.tools[0].owner = ''
    },
    'assembled tool "echo" names no owner plugin',
  ],
  [
    'invalid variable name',
    a => {
      a.variables.Bad = 'x'
    },
    'assembled variable name "Bad" is invalid',
  ],
  [
    'non-string variable value',
    a => {
      ;(a.variables as Record<string, unknown>).cwd = 1
    },
    'assembled variable "cwd" must be a string or undefined',
  ],
]

describe('M. invariant companion', () => {
  it('M1 passes a well-formed assembly through unchanged', async () => {
    const h = await guarded()
    await expect(dispatch(h, valid())).resolves.toEqual(valid())

    // A real assembly through the registry passes too.
    h.sp.section({ name: 's', order: 1, text: 'S' })
    h.sp.context({ name: 'c', order: 1, text: 'C' })
    h.sp.tools(() => ({ schemas: [schema('t')] }))
    h.sp.variable('v', () => 'V')
    await expect(h.asm()).resolves.toMatchObject({ variables: { v: 'V' } })
  })

  it.each(cases)('M2 rejects a malformed assembly: %s', async (_label, mutate, detail) => {
    const h = await guarded()
    const bad = valid()
    mutate(bad)
    const error = await dispatch(h, bad).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(InvariantError)
    expect(error).toMatchObject({ code: 'INVARIANT', packageName: '@loom/system-prompt', message: PREFIX + detail })
  })

  it('M2 rejects a listener-added section without an owner through assemble()', async () => {
    const h = await guarded()
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      assembly.sections.push({ name: 'ownerless', text: 't', order: 5, stability: 'static' } as AssembledSection)
      return next()
    })
    await expect(h.asm()).rejects.toThrow(PREFIX + 'assembled section "ownerless" names no owner plugin')
  })

  it('M3 validates the outermost post-listener value of every scope, before enforcement', async () => {
    const h = await guarded()
    const s = h.mint()
    s.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      const result = await next()
      result.sections.push(listenerSection('dup'), listenerSection('dup'))
      return result
    })
    await expect(h.asm(s.key)).rejects.toThrow(PREFIX + 'assembled section name "dup" is duplicated')
    await expect(h.asm()).resolves.toBeDefined()

    // Complete-section and suppression enforcement would discard the bad entries, but run after the check.
    const c = await root({ includeRuntimeContext: false })
    await c.root.plugin(invariant)
    c.sp.section({ name: 'only', order: 1, text: 'only', complete: true })
    const t = c.mint()
    t.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      const result = await next()
      result.sections.push(listenerSection('only'))
      return result
    })
    const u = c.mint()
    u.ctx.on('system-prompt/assemble', async (_assembly, _context, next) => {
      const result = await next()
      result.contexts.push({ name: '', text: 'x', order: 0, stability: 'step', owner: 'listener' })
      return result
    })
    await expect(c.asm(t.key)).rejects.toThrow(PREFIX + 'assembled section name "only" is duplicated')
    await expect(c.asm(u.key)).rejects.toThrow(PREFIX + 'assembled context names must be non-empty')
    await expect(c.asm()).resolves.toMatchObject({ sections: [{ name: 'only' }], contexts: [] })
  })

  it('M4 allows duplicate tool names and undefined variable values', async () => {
    const h = await guarded()
    h.sp.tools(() => ({ schemas: [schema('dup', 'first')] }))
    h.sp.tools(() => ({ schemas: [schema('dup', 'second')] }))
    h.sp.variable('empty', () => undefined)
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      assembly.variables.added = undefined
      return next()
    })

    const a = await h.asm()
    expect(toolNames(a)).toEqual(['dup', 'dup'])
    expect(Object.hasOwn(a.variables, 'empty')).toBe(true)
    expect(a.variables.empty).toBeUndefined()
    expect(Object.hasOwn(a.variables, 'added')).toBe(true)
  })
})
