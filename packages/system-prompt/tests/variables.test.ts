// Group D: variables (spec §2 D, §4 item 3).
import { describe, expect, it, vi } from 'vitest'
import { renderPrompt } from '@loom/system-prompt'
import { changeCounter, IDENTITY, root } from './helpers.ts'

const GLOBAL_DUPLICATE = (name: string) =>
  `prompt variable "${name}" is already registered (for a per-agent value, register through that agent's \`agent.ctx\` instead)`

describe('variable names', () => {
  it.each(['Not Valid', 'Model', '1a', '_a', 'a-b', ''])('rejects the name %j synchronously with the pattern message, leaking nothing', async name => {
    const h = await root()
    const changes = changeCounter(h.ctx)
    expect(() => h.sp.variable(name, () => 'v')).toThrow(new Error(`invalid prompt variable name "${name}" (must match /^[a-z][a-z0-9_]*$/)`))
    expect(changes.count).toBe(0)
    const a = await h.asm()
    expect(Object.hasOwn(a.variables, name)).toBe(false)
    expect(a.variables).toEqual({})
  })

  it.each(['a', 'tool_1', 'constructor'])('accepts the name %j', async name => {
    const h = await root()
    h.sp.variable(name, () => 'v')
    const a = await h.asm()
    expect(Object.hasOwn(a.variables, name)).toBe(true)
    expect(a.variables[name]).toBe('v')
  })

  it('rejects an invalid name in a scope too, without an event', async () => {
    const h = await root()
    const s = h.mint()
    const changes = changeCounter(h.ctx)
    expect(() => s.sp.variable('Bad', () => 'v')).toThrow('invalid prompt variable name "Bad"')
    expect(changes.count).toBe(0)
    expect((await h.asm(s.key)).variables).toEqual({})
  })
})

describe('duplicates', () => {
  it('a second global registration of a name throws the global message and keeps the first', async () => {
    const h = await root()
    h.sp.variable('model', () => 'm1')
    const changes = changeCounter(h.ctx)
    expect(() => h.sp.variable('model', () => 'm2')).toThrow(new Error(GLOBAL_DUPLICATE('model')))
    expect(changes.count).toBe(0)
    expect((await h.asm()).variables).toEqual({ model: 'm1' })
  })

  it('a second registration in the same scope throws the scoped message', async () => {
    const h = await root()
    const s = h.mint()
    s.sp.variable('model', () => 'm1')
    const changes = changeCounter(h.ctx)
    expect(() => s.sp.variable('model', () => 'm2')).toThrow(new Error('prompt variable "model" is already registered in this scope'))
    expect(changes.count).toBe(0)
    expect((await h.asm(s.key)).variables).toEqual({ model: 'm1' })
  })

  it('duplicates are per layer: the global layer and two scopes may each register the same name', async () => {
    const h = await root()
    const s1 = h.mint()
    const s2 = h.mint()
    h.sp.variable('model', () => 'g')
    expect(() => s1.sp.variable('model', () => 's1')).not.toThrow()
    expect(() => s2.sp.variable('model', () => 's2')).not.toThrow()
    expect((await h.asm()).variables).toEqual({ model: 'g' })
    expect((await h.asm(s1.key)).variables).toEqual({ model: 's1' })
    expect((await h.asm(s2.key)).variables).toEqual({ model: 's2' })
  })

  it('the name pattern is checked before the duplicate check', async () => {
    const h = await root()
    h.sp.variable('model', () => 'm')
    // An invalid name never reaches the table, so it reports the pattern, not a duplicate.
    expect(() => h.sp.variable('Model', () => 'm')).toThrow(/^invalid prompt variable name "Model"/)
  })
})

describe('values', () => {
  it('values are resolved per assembly against the assemble context', async () => {
    const h = await root()
    h.sp.variable('who', c => c.who as string | undefined)
    expect((await h.asm(undefined, { who: 'alice' })).variables).toEqual({ who: 'alice' })
    expect((await h.asm(undefined, { who: 'bob' })).variables).toEqual({ who: 'bob' })
  })

  it('an undefined value is stored as an own key', async () => {
    const h = await root()
    h.sp.variable('who', c => c.who as string | undefined)
    const a = await h.asm()
    expect(Object.hasOwn(a.variables, 'who')).toBe(true)
    expect(a.variables.who).toBeUndefined()
    expect(Object.keys(a.variables)).toEqual(['who'])
  })

  it('after the disposer runs the variable is gone from the assembly', async () => {
    const h = await root()
    const dispose = h.sp.variable('who', c => c.who as string | undefined)
    dispose()
    const a = await h.asm(undefined, { who: 'alice' })
    expect(a.variables).toEqual({})
    expect(Object.hasOwn(a.variables, 'who')).toBe(false)
  })

  it('every provider runs on every assembly, referenced or not', async () => {
    const h = await root()
    let count = 0
    h.sp.variable('unused', () => {
      count++
      return 'x'
    })
    await h.asm()
    await h.asm()
    expect(count).toBe(2)
  })

  it('a variable provider that throws rejects assemble()', async () => {
    const h = await root()
    h.sp.variable('boom', () => {
      throw new Error('variable exploded')
    })
    let pending: Promise<unknown> | undefined
    expect(() => {
      pending = h.sp.assemble()
    }).not.toThrow()
    await expect(pending).rejects.toThrow('variable exploded')
  })

  it('variableInfo reports the registering plugin and the stability of each variable', async () => {
    const h = await root()
    const p = await h.plugin('plugin-v')
    p.systemPrompt.variable('model', () => 'm')
    h.sp.variable('clock', () => 't', { stability: 'step' })
    const s = h.mint()
    s.sp.variable('model', () => 'scoped')
    expect((await h.asm()).variableInfo).toEqual({
      model: { owner: 'plugin-v', stability: 'session' },
      clock: { owner: 'host', stability: 'step' },
    })
    // The nearer layer's registration describes the shadowing value.
    expect((await h.asm(s.key)).variableInfo.model).toEqual({ owner: 'host', stability: 'session' })
  })
})

describe('scoped variables', () => {
  it('a scoped value shadows the global one in that scope only', async () => {
    const h = await root({ persona: 'Mode: {{mode}}.' })
    h.sp.variable('mode', () => 'normal')
    const s = h.mint()
    s.sp.variable('mode', () => 'strict')
    expect(renderPrompt(await h.asm(s.key))).toContain('Mode: strict.')
    expect(renderPrompt(await h.asm())).toContain('Mode: normal.')
  })

  it('shadowed providers still run, global first; variables are keyed in name order, not load order', async () => {
    const h = await root({ persona: 'Mode: {{mode}}.' })
    const calls: string[] = []
    const global = vi.fn(() => {
      calls.push('global')
      return 'normal'
    })
    const scoped = vi.fn(() => {
      calls.push('scoped')
      return 'strict'
    })
    h.sp.variable('zed', () => 'z')
    h.sp.variable('mode', global)
    const s = h.mint()
    s.sp.variable('mode', scoped)
    s.sp.variable('alpha', () => 'a')
    const a = await h.asm(s.key)
    expect(global).toHaveBeenCalledTimes(1)
    expect(scoped).toHaveBeenCalledTimes(1)
    expect(calls).toEqual(['global', 'scoped'])
    expect(Object.keys(a.variables)).toEqual(['alpha', 'mode', 'zed'])
    expect(Object.keys(a.variableInfo)).toEqual(['alpha', 'mode', 'zed'])
    expect(a.variables.mode).toBe('strict')
  })

  it('the nearest layer wins across a three-level chain', async () => {
    const h = await root()
    h.sp.variable('v', () => 'g')
    const p = h.mint({ agentPreset: 'p' })
    p.sp.variable('v', () => 'p')
    const a = h.mint({ agent: 'a' }, { parent: p.key })
    a.sp.variable('v', () => 'a')
    const b = h.mint({ agent: 'b' }, { parent: p.key })
    expect((await h.asm(a.key)).variables.v).toBe('a')
    expect((await h.asm(b.key)).variables.v).toBe('p')
    expect((await h.asm(p.key)).variables.v).toBe('p')
    expect((await h.asm()).variables.v).toBe('g')
  })
})

describe('generation semantics', () => {
  it('a variable registered by a provider during an assembly is resolved in that same assembly', async () => {
    const h = await root()
    let first = true
    h.sp.variable('first', () => {
      if (first) {
        first = false
        h.sp.variable('late', () => 'second value')
      }
      return 'first value'
    })
    const a = await h.asm()
    expect(a.variables).toEqual({ first: 'first value', late: 'second value' })
  })

  it('replacing the last provider of a drained table takes effect from the next assembly', async () => {
    const h = await root({ persona: 'Mode: {{mode}}.' })
    const s = h.mint()
    s.sp.section({ name: 'scope:sibling', order: 1, text: 'Scoped.' })
    const calls: string[] = []
    const dispose = s.sp.variable('mode', () => {
      calls.push('first')
      dispose()
      s.sp.variable('mode', () => {
        calls.push('replacement')
        return 'replacement'
      })
      return 'first'
    })
    expect(renderPrompt(await h.asm(s.key))).toContain('Mode: first.')
    expect(calls).toEqual(['first'])
    expect(renderPrompt(await h.asm(s.key))).toContain('Mode: replacement.')
    expect(calls).toEqual(['first', 'replacement'])
  })
})

describe('rendering with variables', () => {
  it('a waterfall listener may add a variable before rendering', async () => {
    const h = await root()
    h.sp.section({ name: 's', order: 1, text: '{{extra}}' })
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      assembly.variables.extra = 'from-waterfall'
      return next()
    })
    const a = await h.asm()
    expect(renderPrompt(a)).toBe(`${IDENTITY}\n\nfrom-waterfall`)
  })

  it('a waterfall listener may override a registered variable before rendering', async () => {
    const h = await root()
    h.sp.variable('extra', () => 'registered')
    h.sp.section({ name: 's', order: 1, text: '{{extra}}' })
    h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
      assembly.variables.extra = 'overridden'
      return next()
    })
    expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\noverridden`)
  })

  it('a variable named like a prototype property renders once registered', async () => {
    const h = await root()
    h.sp.section({ name: 's', order: 1, text: '{{constructor}}' })
    const before = await h.asm()
    expect(() => renderPrompt(before)).toThrow(new Error('unknown prompt variable "{{constructor}}" in section "s"; registered variables: (none)'))
    h.sp.variable('constructor', () => 'own-value')
    expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\nown-value`)
  })
})
