// Registration, scopes, shadowing, disposal, duplicates, restrict, and the prompt assembly.
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import { host, OBJECT, simple, text } from './helpers.ts'

const names = (schemas: { name: string }[]) => schemas.map(schema => schema.name)

describe('registration', () => {
  it('a global tool is listed, assembled (owned by the plugin that registered it) and runs', async () => {
    const h = await host()
    h.ctx.tools.register(simple('bash', 'ran'))
    expect(h.tools.schemas()).toEqual([{ name: 'bash', description: 'the bash tool', parameters: OBJECT }])
    const assembly = await h.ctx.systemPrompt.assemble()
    expect(assembly.tools).toEqual([{ name: 'bash', description: 'the bash tool', parameters: OBJECT, owner: 'host' }])
    expect(text(await h.run('bash'))).toBe('ran')
  })

  it('schemas are sorted by name in code units', async () => {
    const h = await host()
    for (const name of ['b', 'B', '_x', 'a10', 'a9']) h.ctx.tools.register(simple(name))
    expect(names(h.tools.schemas())).toEqual(['B', '_x', 'a10', 'a9', 'b'])
    expect(await h.promptTools()).toEqual(['B', '_x', 'a10', 'a9', 'b'])
  })

  it('a hand-written definition is checked and compiled at registration', async () => {
    const h = await host()
    h.ctx.tools.register({ name: 'plain', description: 'plain', parameters: { type: 'object', required: ['a'] }, execute: () => 'ok' })
    expect(text(await h.run('plain', {}))).toBe('Error: invalid arguments for tool "plain": must have required property \'a\'')
    expect(() => h.ctx.tools.register({ name: 'bad name', description: 'x', parameters: { ...OBJECT }, execute: () => '' })).toThrow(/invalid tool name/)
    expect(names(h.tools.schemas())).toEqual(['plain'])
  })

  it('the disposer removes the tool, once', async () => {
    const h = await host()
    const changes: number[] = []
    h.ctx.on('tools/change', () => {
      changes.push(1)
    })
    const dispose = h.ctx.tools.register(simple('t'))
    expect(changes.length).toBe(1)
    dispose()
    dispose()
    expect(changes.length).toBe(2)
    expect(h.tools.schemas()).toEqual([])
    expect(await h.promptTools()).toEqual([])
    const result = await h.run('t')
    expect(result.isError && result.error.info).toEqual({ name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' })
  })

  it('tools live as long as the plugin that registered them', async () => {
    const h = await host()
    const fiber = await h.ctx.plugin({
      name: 'plugin-a',
      inject: ['tools'],
      apply: ctx => {
        ctx.tools.register(simple('a'))
      },
    })
    expect(names(h.tools.schemas())).toEqual(['a'])
    await fiber.dispose()
    expect(h.tools.schemas()).toEqual([])
    expect(() => fiber.ctx.tools.register(simple('late'))).toThrow(/inactive context/)
    expect(h.tools.schemas()).toEqual([])
  })

  it('a failed registration leaves nothing behind and emits no change', async () => {
    const h = await host()
    h.ctx.tools.register(simple('t'))
    let changes = 0
    h.ctx.on('tools/change', () => {
      changes++
    })
    expect(() => h.ctx.tools.register(simple('t'))).toThrow()
    expect(changes).toBe(0)
    expect(names(h.tools.schemas())).toEqual(['t'])
  })
})

describe('duplicate names', () => {
  it('in the global layer, the error names the tool and both plugins', async () => {
    const h = await host()
    const a = await h.plugin('plugin-a')
    const b = await h.plugin('plugin-b')
    a.tools.register(simple('bash'))
    expect(() => b.tools.register(simple('bash'))).toThrow(
      'tool "bash" is already registered globally by plugin "plugin-a"; plugin "plugin-b" cannot register it again (to override it for one agent, register through that agent\'s ctx)',
    )
  })

  it('in one scope', async () => {
    const h = await host()
    const s = h.mint()
    s.ctx.tools.register(simple('bash'))
    expect(() => s.ctx.tools.register(simple('bash'))).toThrow(
      'tool "bash" is already registered in this scope by plugin "host"; plugin "host" cannot register it again',
    )
  })

  it('across layers is shadowing, not a duplicate', async () => {
    const h = await host()
    const s = h.mint()
    h.ctx.tools.register(simple('bash', 'global'))
    expect(() => s.ctx.tools.register(simple('bash', 'scoped'))).not.toThrow()
  })

  it('after the first is disposed, the name is free again', async () => {
    const h = await host()
    const dispose = h.ctx.tools.register(simple('t', 'one'))
    dispose()
    h.ctx.tools.register(simple('t', 'two'))
    expect(text(await h.run('t'))).toBe('two')
  })
})

describe('scopes', () => {
  it('a scoped tool is visible in its scope only, and goes with the scope', async () => {
    const h = await host()
    const s = h.mint()
    s.ctx.tools.register(simple('scoped'))
    h.ctx.tools.register(simple('global'))
    expect(names(h.tools.schemas(s.key))).toEqual(['global', 'scoped'])
    expect(names(h.tools.schemas())).toEqual(['global'])
    expect(await h.promptTools(s.key)).toEqual(['global', 'scoped'])
    expect(await h.promptTools()).toEqual(['global'])
    expect(text(await h.run('scoped', {}, { scope: s.key }))).toBe('scoped')
    expect((await h.run('scoped')).isError).toBe(true)
    await s.dispose()
    expect(names(h.tools.schemas(s.key))).toEqual(['global'])
  })

  it('the nearest scope shadows by name, in schemas, assembly and execution', async () => {
    const h = await host()
    const parent = h.mint()
    const child = h.mint({}, { parent: parent.key })
    h.ctx.tools.register(simple('t', 'global', { description: 'global' }))
    parent.ctx.tools.register(simple('t', 'parent', { description: 'parent' }))
    const sibling = h.mint()
    expect(h.tools.schemas(child.key).map(s => s.description)).toEqual(['parent'])
    expect((await h.ctx.systemPrompt.assemble({ scope: child.key })).tools.map(t => t.description)).toEqual(['parent'])
    expect(text(await h.run('t', {}, { scope: child.key }))).toBe('parent')
    expect(text(await h.run('t', {}, { scope: sibling.key }))).toBe('global')

    const dispose = child.ctx.tools.register(simple('t', 'child', { description: 'child' }))
    expect(text(await h.run('t', {}, { scope: child.key }))).toBe('child')
    dispose()
    expect(text(await h.run('t', {}, { scope: child.key }))).toBe('parent')
    await parent.dispose()
    expect(text(await h.run('t', {}, { scope: child.key }))).toBe('global')
  })

  it('executionMode resolves through the scope', async () => {
    const h = await host()
    const s = h.mint()
    h.ctx.tools.register(simple('t'))
    s.ctx.tools.register(simple('t', 't', { isConcurrencySafe: true }))
    expect(h.tools.executionMode({ name: 't', arguments: {} })).toBe('exclusive')
    expect(h.tools.executionMode({ name: 't', arguments: {}, scope: s.key })).toBe('parallel')
  })
})

describe('executionMode', () => {
  it('parallel only for a classifier answering exactly true on valid arguments', async () => {
    const h = await host()
    const parameters = { type: 'object', properties: { path: { type: 'string' } } }
    h.ctx.tools.register(defineTool({ name: 'yes', description: 'd', parameters, execute: () => '', isConcurrencySafe: true }))
    h.ctx.tools.register(defineTool({ name: 'no', description: 'd', parameters, execute: () => '', isConcurrencySafe: false }))
    h.ctx.tools.register(defineTool({ name: 'none', description: 'd', parameters, execute: () => '' }))
    h.ctx.tools.register(defineTool({ name: 'truthy', description: 'd', parameters, execute: () => '', isConcurrencySafe: (() => 1) as never }))
    h.ctx.tools.register(
      defineTool({
        name: 'throws',
        description: 'd',
        parameters,
        execute: () => '',
        isConcurrencySafe: () => {
          throw new Error('x')
        },
      }),
    )
    h.ctx.tools.register(
      defineTool<{ path?: string }>({
        name: 'reads',
        description: 'd',
        parameters,
        execute: () => '',
        isConcurrencySafe: args => !args.path?.startsWith('/etc'),
      }),
    )
    const mode = (name: string, args: unknown = {}) => h.tools.executionMode({ name, arguments: args })
    expect(mode('yes')).toBe('parallel')
    expect(mode('yes', '{"path": "a"}')).toBe('parallel')
    expect(mode('yes', 'not json')).toBe('exclusive')
    expect(mode('yes', { path: 1 })).toBe('exclusive')
    expect(mode('no')).toBe('exclusive')
    expect(mode('none')).toBe('exclusive')
    expect(mode('truthy')).toBe('exclusive')
    expect(mode('throws')).toBe('exclusive')
    expect(mode('missing')).toBe('exclusive')
    expect(mode('reads', { path: 'src' })).toBe('parallel')
    expect(mode('reads', { path: '/etc/passwd' })).toBe('exclusive')
  })
})

describe('restrict', () => {
  it('removes tools from schemas, the assembly and execution in the scope and its descendants', async () => {
    const h = await host()
    const s = h.mint()
    const child = h.mint({}, { parent: s.key })
    h.ctx.tools.register(simple('read'))
    h.ctx.tools.register(simple('write'))
    const lift = s.ctx.tools.restrict(['read'])
    for (const scope of [s.key, child.key]) {
      expect(names(h.tools.schemas(scope))).toEqual(['read'])
      expect(await h.promptTools(scope)).toEqual(['read'])
      const result = await h.run('write', {}, { scope })
      expect(result).toMatchObject({
        isError: true,
        error: { message: 'unknown tool "write"; available tools: read', info: { name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' } },
      })
      expect(h.tools.executionMode({ name: 'write', arguments: {}, scope })).toBe('exclusive')
    }
    // Other scopes and the global view are untouched.
    expect(await h.promptTools()).toEqual(['read', 'write'])
    expect(text(await h.run('write'))).toBe('write')

    lift()
    expect(await h.promptTools(s.key)).toEqual(['read', 'write'])
    expect(text(await h.run('write', {}, { scope: child.key }))).toBe('write')
  })

  it('restrictions stack as an intersection; a predicate works like a list', async () => {
    const h = await host()
    const s = h.mint()
    for (const name of ['a', 'b', 'c']) h.ctx.tools.register(simple(name))
    h.ctx.tools.restrict(name => name !== 'c')
    expect(await h.promptTools()).toEqual(['a', 'b'])
    s.ctx.tools.restrict(['b', 'c'])
    expect(await h.promptTools(s.key)).toEqual(['b'])
    expect(text(await h.run('a', {}, { scope: s.key }))).toBe('Error: unknown tool "a"; available tools: b')
  })

  it('applies to scoped tools too, and to tools registered later', async () => {
    const h = await host()
    const s = h.mint()
    s.ctx.tools.restrict([])
    s.ctx.tools.register(simple('mine'))
    expect(h.tools.schemas(s.key)).toEqual([])
    expect(text(await h.run('mine', {}, { scope: s.key }))).toBe('Error: unknown tool "mine"; no tools are available')
  })

  it('restricted names stay known to toolOrder', async () => {
    const root = new Context()
    await root.plugin(SystemPrompt, { toolOrder: ['write', '<unlisted-tools>'] })
    await root.plugin(ToolRuntime)
    const fiber = await root.plugin({ name: 'host', inject: ['tools', 'systemPrompt'], apply() {} })
    const ctx = fiber.ctx
    ctx.tools.register(simple('read'))
    ctx.tools.register(simple('write'))
    expect((await ctx.systemPrompt.assemble()).tools.map(t => t.name)).toEqual(['write', 'read'])
    ctx.tools.restrict(['read'])
    expect((await ctx.systemPrompt.assemble()).tools.map(t => t.name)).toEqual(['read'])
  })

  it('emits tools/change on restriction and on its removal', async () => {
    const h = await host()
    let changes = 0
    h.ctx.on('tools/change', () => {
      changes++
    })
    const lift = h.ctx.tools.restrict(['x'])
    lift()
    expect(changes).toBe(2)
  })

  it('rejects anything but a list of names or a predicate', async () => {
    const h = await host()
    expect(() => h.ctx.tools.restrict('read' as never)).toThrow(TypeError)
    expect(() => h.ctx.tools.restrict([1] as never)).toThrow(TypeError)
  })
})

describe('the assembly', () => {
  it('two tool plugins registered in either order give the same assembly', async () => {
    const build = async (order: string[]) => {
      const h = await host()
      const plugins: Record<string, Context> = {}
      for (const name of order) plugins[name] = await h.plugin(name)
      for (const name of order) {
        plugins[name].tools.register(simple(name === 'plugin-a' ? 'zeta' : 'alpha'))
        plugins[name].tools.register(simple(name === 'plugin-a' ? 'beta' : 'omega'))
      }
      return h.ctx.systemPrompt.assemble()
    }
    const forward = await build(['plugin-a', 'plugin-b'])
    const backward = await build(['plugin-b', 'plugin-a'])
    expect(forward).toEqual(backward)
    expect(forward.tools.map(t => t.name)).toEqual(['alpha', 'beta', 'omega', 'zeta'])
    expect(forward.tools.map(t => [t.name, t.owner])).toEqual([
      ['alpha', 'plugin-b'],
      ['beta', 'plugin-a'],
      ['omega', 'plugin-b'],
      ['zeta', 'plugin-a'],
    ])
  })

  it('assembled parameters are frozen copies, shared by the assemblies (a defined tool cannot change them)', async () => {
    const h = await host()
    const tool = simple('t')
    h.ctx.tools.register(tool)
    const first = await h.ctx.systemPrompt.assemble()
    expect(first.tools[0].parameters).not.toBe(tool.parameters)
    expect(() => {
      ;(first.tools[0].parameters as Record<string, unknown>).mutated = true
    }).toThrow(TypeError)
    const next = await h.ctx.systemPrompt.assemble()
    expect(next.tools[0].parameters).toBe(first.tools[0].parameters)
    expect(next.tools[0].parameters).toEqual(OBJECT)
  })
})
