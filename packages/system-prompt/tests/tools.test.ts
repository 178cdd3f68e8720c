// Group E: tool providers and canonical order (spec §2 E, §4 items 4, 6, 7).
import { describe, expect, it } from 'vitest'
import { frozenJsonSnapshot } from '@loom/llm'
import { TOOL_ORDER_REST, type PromptAssembly, type ToolSchema } from '@loom/system-prompt'
import { root, schema, toolNames, type Host } from './helpers.ts'

const REST = TOOL_ORDER_REST
const RESERVED = `tool provider returned reserved tool name "<unlisted-tools>" (reserved for toolOrder's rest entry)`

/** Registers one global provider per list of names. */
function provide(h: Host, ...lists: string[][]) {
  for (const list of lists) h.sp.tools(() => ({ schemas: list.map(n => schema(n)) }))
}

const described = (a: PromptAssembly) => a.tools.map(t => `${t.name}:${t.description}`)

it('the literal rest entry is <unlisted-tools>', () => {
  expect(REST).toBe('<unlisted-tools>')
})

describe('canonical order without toolOrder', () => {
  it('sorts tools from all providers by name', async () => {
    const h = await root()
    provide(h, ['charlie', 'alpha'], ['bravo'])
    expect(toolNames(await h.asm())).toEqual(['alpha', 'bravo', 'charlie'])

    const h2 = await root()
    provide(h2, ['zulu'], ['alpha'], ['mike'])
    expect(toolNames(await h2.asm())).toEqual(['alpha', 'mike', 'zulu'])
  })

  it('the order does not depend on registration order', async () => {
    const forward = await root()
    provide(forward, ['alpha'], ['zulu'])
    const backward = await root()
    provide(backward, ['zulu'], ['alpha'])
    expect(toolNames(await forward.asm())).toEqual(['alpha', 'zulu'])
    expect(toolNames(await backward.asm())).toEqual(['alpha', 'zulu'])
  })

  it.each([
    [
      ['b', 'B', 'a', '_x', 'Z', 'a10', 'a9', 'Ä'],
      ['B', 'Z', '_x', 'a', 'a10', 'a9', 'b', 'Ä'],
    ],
    [
      ['\uFF61', '\u{1F600}'],
      ['\u{1F600}', '\uFF61'],
    ],
  ])('compares names by UTF-16 code units, not locale or numerically: %j', async (input, expected) => {
    const h = await root()
    provide(h, input)
    expect(toolNames(await h.asm())).toEqual(expected)
  })

  it('providers are additive across layers: a scope adds to the global tools', async () => {
    const h = await root()
    const s = h.mint()
    s.sp.tools(() => ({ schemas: [schema('scoped_tool')] }))
    h.sp.tools(() => ({ schemas: [schema('global_tool')] }))
    expect(toolNames(await h.asm(s.key))).toEqual(['global_tool', 'scoped_tool'])
    expect(toolNames(await h.asm())).toEqual(['global_tool'])
  })

  it('a scoped tool does not shadow a global tool of the same name: both are kept, global first', async () => {
    const h = await root()
    const s = h.mint()
    s.sp.tools(() => ({ schemas: [schema('x', 's')] }))
    h.sp.tools(() => ({ schemas: [schema('x', 'g')] }))
    const a = await h.asm(s.key)
    expect(described(a)).toEqual(['x:g', 'x:s'])
    expect(a.tools.map(t => t.owner)).toEqual(['host', 'host'])
  })

  it('tools of one owner sharing a name keep collection order', async () => {
    const h = await root()
    h.sp.tools(() => ({ schemas: [schema('dup', 'first'), schema('anchor'), schema('dup', 'second')] }))
    expect((await h.asm()).tools.map(t => t.description)).toEqual(['anchor', 'first', 'second'])
  })

  it('tools sharing a name from different plugins are ordered by owner whichever registers first', async () => {
    for (const registration of [
      ['plugin-a', 'plugin-b'],
      ['plugin-b', 'plugin-a'],
    ]) {
      const h = await root()
      const a = await h.plugin('plugin-a')
      const b = await h.plugin('plugin-b')
      const plugins: Record<string, typeof a> = { 'plugin-a': a, 'plugin-b': b }
      for (const owner of registration) {
        plugins[owner].systemPrompt.tools(() => ({ schemas: [schema('same', owner), schema(`only-${owner}`)] }))
      }
      const assembled = await h.asm()
      expect(assembled.tools.map(t => [t.name, t.owner])).toEqual([
        ['only-plugin-a', 'plugin-a'],
        ['only-plugin-b', 'plugin-b'],
        ['same', 'plugin-a'],
        ['same', 'plugin-b'],
      ])
      expect(assembled.tools.filter(t => t.name === 'same').map(t => t.description)).toEqual(['plugin-a', 'plugin-b'])
    }
  })
})

describe('assembled tool objects', () => {
  it('parameters are detached from the provider by a structured clone', async () => {
    const h = await root()
    const P: Record<string, unknown> & { properties: Record<string, unknown> } = { type: 'object', properties: {} }
    h.sp.tools(() => ({ schemas: [{ name: 't', description: 'tool', parameters: P }] }))
    const a = await h.asm()
    expect(a.tools[0].parameters).not.toBe(P)
    expect(a.tools[0].parameters).toEqual({ type: 'object', properties: {} })

    ;(a.tools[0].parameters.properties as Record<string, unknown>).leak = { type: 'string' }
    a.tools[0].description = 'mutated'
    expect((await h.asm()).tools).toEqual([{ name: 't', description: 'tool', parameters: { type: 'object', properties: {} }, owner: 'host' }])

    const before = await h.asm()
    P.properties.later = { type: 'number' }
    expect(before.tools[0].parameters).toEqual({ type: 'object', properties: {} })
  })

  it("deeply frozen parameters (a defined tool's) are copied once: every assembly shares that frozen copy, a JSON snapshot", async () => {
    const h = await root()
    const frozen = Object.freeze({ type: 'object', properties: Object.freeze({ a: Object.freeze({ type: 'string' }) }) })
    // Frozen only at the top: what is below can still change, so it is copied at every assembly.
    const shallow = Object.freeze({ type: 'object', properties: { a: { type: 'string' } } as Record<string, unknown> })
    h.sp.tools(() => ({
      schemas: [
        { name: 'frozen', description: 'tool', parameters: frozen },
        { name: 'shallow', description: 'tool', parameters: shallow },
      ],
    }))
    const [first, second] = [await h.asm(), await h.asm()]
    expect(first.tools[0].parameters).not.toBe(frozen)
    expect(second.tools[0].parameters).toBe(first.tools[0].parameters)
    expect(Object.isFrozen(first.tools[0].parameters.properties)).toBe(true)
    expect(first.tools[0].parameters).toEqual(frozen)
    // A JSON snapshot: a session logs it in a request header as it is.
    expect(frozenJsonSnapshot({ parameters: first.tools[0].parameters }).parameters).toBe(first.tools[0].parameters)

    expect(second.tools[1].parameters).not.toBe(first.tools[1].parameters)
    shallow.properties.b = { type: 'number' }
    expect(Object.keys((await h.asm()).tools[1].parameters.properties as object)).toEqual(['a', 'b'])
    expect(Object.keys(first.tools[1].parameters.properties as object)).toEqual(['a'])
  })

  it('the assembly can be deep-frozen while the registry objects stay unfrozen', async () => {
    const h = await root()
    const P = { type: 'object', properties: {} as Record<string, unknown> }
    h.sp.tools(() => ({ schemas: [{ name: 't', description: 'tool', parameters: P }] }))
    const a = await h.asm()
    const deepFreeze = (o: object): void => {
      Object.freeze(o)
      for (const v of Object.values(o)) if (v && typeof v === 'object') deepFreeze(v)
    }
    deepFreeze(a.tools)
    expect(Object.isFrozen(P)).toBe(false)
    expect(Object.isFrozen(P.properties)).toBe(false)
    P.properties.added = { type: 'string' }
    expect(a.tools[0].parameters).toEqual({ type: 'object', properties: {} })
    expect((await h.asm()).tools[0].parameters).toEqual({ type: 'object', properties: { added: { type: 'string' } } })
  })

  it('only name, description, parameters and owner are kept', async () => {
    const h = await root()
    const withExtra = { name: 't', description: 'd', parameters: {}, strict: true }
    const tool: ToolSchema = withExtra
    h.sp.tools(() => ({ schemas: [tool] }))
    const [assembled] = (await h.asm()).tools
    expect(Object.keys(assembled).sort()).toEqual(['description', 'name', 'owner', 'parameters'])
    expect(assembled).not.toHaveProperty('strict')
    expect(assembled).toEqual({ name: 't', description: 'd', parameters: {}, owner: 'host' })
  })

  it('the owner is the registering plugin', async () => {
    const h = await root()
    const p = await h.plugin('tool-plugin')
    p.systemPrompt.tools(() => ({ schemas: [schema('a')] }))
    h.sp.tools(() => ({ schemas: [schema('b')] }))
    expect((await h.asm()).tools.map(t => [t.name, t.owner])).toEqual([
      ['a', 'tool-plugin'],
      ['b', 'host'],
    ])
  })

  it('parameters of any depth are copied; a cycle rejects the assembly with DataCloneError', async () => {
    const h = await root()
    let deep: Record<string, unknown> = { type: 'string' }
    for (let i = 0; i < 200; i++) deep = { type: 'object', properties: { [`p${i}`]: deep }, required: [`p${i}`] }
    h.sp.tools(() => ({ schemas: [{ name: 'deep', description: 'd', parameters: deep }] }))
    const [tool] = (await h.asm()).tools
    expect(tool.parameters).toEqual(deep)
    expect(tool.parameters).not.toBe(deep)

    const other = await root()
    const cyclic: Record<string, unknown> = { type: 'object' }
    cyclic.properties = { self: cyclic }
    other.sp.tools(() => ({ schemas: [{ name: 'cyclic', description: 'd', parameters: cyclic }] }))
    await expect(other.asm()).rejects.toMatchObject({ name: 'DataCloneError', message: expect.stringContaining('tool "cyclic"') })
  })

  it('non-cloneable parameters reject the assembly with DataCloneError', async () => {
    const h = await root()
    expect(() => h.sp.tools(() => ({ schemas: [{ name: 't', description: 'd', parameters: { fn: () => 1 } }] }))).not.toThrow()
    await expect(h.asm()).rejects.toHaveProperty('name', 'DataCloneError')
  })
})

describe('provider calls', () => {
  it('provider membership is snapshotted per assembly', async () => {
    const h = await root()
    let first = true
    h.sp.tools(() => {
      if (first) {
        first = false
        h.sp.tools(() => ({ schemas: [schema('late')] }))
      }
      return { schemas: [schema('first')] }
    })
    expect(toolNames(await h.asm())).toEqual(['first'])
    expect(toolNames(await h.asm())).toEqual(['first', 'late'])
  })

  it('each visible provider is called once per assembly, global first, then farthest layer first', async () => {
    const h = await root()
    const calls: string[] = []
    const logging = (label: string) => () => {
      calls.push(label)
      return { schemas: [] }
    }
    const p = h.mint({ agentPreset: 'p' })
    const a = h.mint({ agent: 'a' }, { parent: p.key })
    a.sp.tools(logging('a'))
    p.sp.tools(logging('p'))
    h.sp.tools(logging('g1'))
    h.sp.tools(logging('g2'))
    await h.asm(a.key)
    expect(calls).toEqual(['g1', 'g2', 'p', 'a'])
    calls.length = 0
    await h.asm()
    expect(calls).toEqual(['g1', 'g2'])
  })

  it('providers receive the assemble context', async () => {
    const h = await root()
    const seen: unknown[] = []
    h.sp.tools(c => {
      seen.push(c)
      return { schemas: [] }
    })
    const context = { marker: 1 }
    await h.sp.assemble(context)
    expect(seen).toEqual([context])
    expect(seen[0]).toBe(context)
  })
})

describe('toolOrder', () => {
  it('places listed tools in list order and the rest, sorted, at the rest entry', async () => {
    const h = await root({ toolOrder: ['todo_write', REST, 'bash'] })
    provide(h, ['bash', 'echo_b', 'todo_write', 'echo_a'])
    expect(toolNames(await h.asm())).toEqual(['todo_write', 'echo_a', 'echo_b', 'bash'])
  })

  it('a leading rest entry puts the unlisted tools first', async () => {
    const h = await root({ toolOrder: [REST, 'alpha'] })
    provide(h, ['zulu'], ['alpha'], ['mike'])
    expect(toolNames(await h.asm())).toEqual(['mike', 'zulu', 'alpha'])
  })

  it('a rest entry alone gives plain code-unit order', async () => {
    const h = await root({ toolOrder: [REST] })
    provide(h, ['zulu', 'B'], ['alpha'], ['mike'])
    expect(toolNames(await h.asm())).toEqual(['B', 'alpha', 'mike', 'zulu'])
  })

  it('a listed name takes every schema with that name, in collection order', async () => {
    const h = await root({ toolOrder: ['dup', REST] })
    h.sp.tools(() => ({ schemas: [schema('dup', 'first'), schema('a'), schema('dup', 'second')] }))
    expect(described(await h.asm())).toEqual(['dup:first', 'dup:second', 'a:a'])
  })

  it('a known but absent listed name is simply absent', async () => {
    const h = await root({ toolOrder: ['bash', REST] })
    h.sp.tools(() => ({ schemas: [schema('read')], knownNames: ['read', 'bash'] }))
    expect(toolNames(await h.asm())).toEqual(['read'])
  })

  it.each([
    [['basj', REST], [['read', 'bash']], 'toolOrder lists unregistered tool "basj"; known tools: bash, read'],
    [['todo_write', 'ghost', REST, 'wraith'], [['bash', 'todo_write']], 'toolOrder lists unregistered tools "ghost", "wraith"; known tools: bash, todo_write'],
    [['ghost', REST], [], 'toolOrder lists unregistered tool "ghost"; known tools: (none)'],
    [['ghost', REST], [['b', 'B', '_x']], 'toolOrder lists unregistered tool "ghost"; known tools: B, _x, b'],
  ])('toolOrder %j with providers %j rejects with the unknown-name message', async (toolOrder, lists, message) => {
    const h = await root({ toolOrder })
    provide(h, ...lists)
    await expect(h.asm()).rejects.toThrow(new Error(message))
  })

  it('knownNames replaces the schema names instead of adding to them', async () => {
    const h = await root({ toolOrder: ['read', REST] })
    h.sp.tools(() => ({ schemas: [schema('read')], knownNames: ['bash'] }))
    await expect(h.asm()).rejects.toThrow(new Error('toolOrder lists unregistered tool "read"; known tools: bash'))
  })

  it('an empty knownNames contributes no known names', async () => {
    const h = await root({ toolOrder: ['read', REST] })
    h.sp.tools(() => ({ schemas: [schema('read')], knownNames: [] }))
    await expect(h.asm()).rejects.toThrow(new Error('toolOrder lists unregistered tool "read"; known tools: (none)'))
  })

  it('known names are the union over providers visible to this assembly only', async () => {
    const h = await root({ toolOrder: ['scoped_tool', REST] })
    const s = h.mint()
    s.sp.tools(() => ({ schemas: [schema('scoped_tool')] }))
    expect(toolNames(await h.asm(s.key))).toEqual(['scoped_tool'])
    await expect(h.asm()).rejects.toThrow(new Error('toolOrder lists unregistered tool "scoped_tool"; known tools: (none)'))
  })
})

describe('the reserved rest name', () => {
  it.each([
    ['without toolOrder', undefined],
    ['with toolOrder [REST]', [REST]],
    ['before the unknown-name check', ['ghost', REST]],
  ])('a provider returning it as a schema name rejects %s', async (_label, toolOrder) => {
    const h = await root(toolOrder ? { toolOrder } : {})
    h.sp.tools(() => ({ schemas: [schema('fine'), schema(REST)] }))
    await expect(h.asm()).rejects.toThrow(new Error(RESERVED))
  })

  it.each([
    ['without toolOrder', undefined],
    ['with toolOrder [REST]', [REST]],
  ])('the reserved name inside knownNames only is not an error (%s)', async (_label, toolOrder) => {
    const h = await root(toolOrder ? { toolOrder } : {})
    h.sp.tools(() => ({ schemas: [schema('fine')], knownNames: ['fine', REST] }))
    expect(toolNames(await h.asm())).toEqual(['fine'])
  })
})

it.each([
  ['a reserved name', {}, () => ({ schemas: [schema(REST)] })],
  ['an unknown toolOrder name', { toolOrder: ['ghost', REST] }, () => ({ schemas: [schema('a')] })],
  [
    'a throwing provider',
    {},
    (): never => {
      throw new Error('provider exploded')
    },
  ],
])('tool errors (%s) surface as rejections, never as synchronous throws', async (_label, config, provider) => {
  const h = await root(config)
  expect(() => h.sp.tools(provider)).not.toThrow()
  let pending: Promise<PromptAssembly> | undefined
  expect(() => {
    pending = h.sp.assemble()
  }).not.toThrow()
  expect(pending).toBeInstanceOf(Promise)
  await expect(pending).rejects.toThrow()
})

it('tools are canonicalised before the waterfall and listener edits are not re-sorted', async () => {
  const h = await root()
  provide(h, ['zulu', 'alpha'])
  let seen: string[] = []
  h.ctx.on('system-prompt/assemble', async (assembly, _context, next) => {
    seen = toolNames(assembly)
    assembly.tools.push({ ...schema('aardvark'), owner: 'listener' })
    return next()
  })
  const a = await h.asm()
  expect(seen).toEqual(['alpha', 'zulu'])
  expect(toolNames(a)).toEqual(['alpha', 'zulu', 'aardvark'])
})

describe('scoped provider lifecycle', () => {
  it('the direct disposer removes a scoped provider and a new one can be registered', async () => {
    const h = await root()
    const s = h.mint()
    const dispose = s.sp.tools(() => ({ schemas: [schema('scoped_tool')] }))
    expect(toolNames(await h.asm(s.key))).toEqual(['scoped_tool'])
    dispose()
    expect(toolNames(await h.asm(s.key))).toEqual([])
    s.sp.tools(() => ({ schemas: [schema('again')] }))
    expect(toolNames(await h.asm(s.key))).toEqual(['again'])
  })

  it('disposing the scope removes its providers', async () => {
    const h = await root()
    const s = h.mint()
    s.sp.tools(() => ({ schemas: [schema('scoped_tool')] }))
    h.sp.tools(() => ({ schemas: [schema('global_tool')] }))
    await s.dispose()
    expect(toolNames(await h.asm(s.key))).toEqual(['global_tool'])
  })

  it('disposing the registering plugin removes its providers', async () => {
    const h = await root()
    const p = await h.plugin('tool-plugin')
    p.systemPrompt.tools(() => ({ schemas: [schema('plugin_tool')] }))
    expect(toolNames(await h.asm())).toEqual(['plugin_tool'])
    await p.fiber.dispose()
    expect(toolNames(await h.asm())).toEqual([])
  })
})
