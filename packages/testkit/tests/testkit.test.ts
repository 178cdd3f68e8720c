import type { Context } from '@deepseek-ai/cordis'
import { afterEach, describe, expect, it } from 'vitest'
import { createHost, type Host, manifestOutline } from '@loom/testkit'
import { defineTool } from '@loom/tools'
import { Greeter, leaky, victim } from './fixtures.ts'

const CWD = '/srv/project'
let host: Host | undefined

async function start(options?: Parameters<typeof createHost>[0]) {
  host = await createHost({ cwd: CWD, ...options })
  return host
}

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error & { residue?: string[] }> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(Error)
    return error as Error
  }
  throw new Error('expected a rejection')
}

afterEach(async () => {
  await host?.dispose()
  host = undefined
})

describe('mount and delta', () => {
  it('gives exactly what the plugin adds, rendered for the agent cwd', async () => {
    const host = await start({ prompt: { persona: 'You are careful.' } })
    const greeter = await host.mount(Greeter, { greeting: 'Ahoy' })
    expect(greeter.name).toBe('greeter')
    expect(greeter.config).toEqual({ greeting: 'Ahoy', mood: 'calm' })

    const delta = await greeter.delta({ cwd: '/srv/other' })
    expect(delta.sections).toEqual([
      { name: 'greeter:rules', order: 200, stability: 'static', text: 'Ahoy! You work in {{cwd}}.', rendered: 'Ahoy! You work in /srv/other.' },
    ])
    expect(delta.contexts).toEqual([{ name: 'greeter:mood', order: 30, stability: 'step', text: 'Mood: {{greeter_mood}}', rendered: 'Mood: calm' }])
    expect(delta.tools).toEqual([
      {
        name: 'greet',
        description: 'Greets someone.',
        parameters: {
          type: 'object',
          properties: { who: { type: 'string', description: 'Who to greet.' } },
          required: ['who'],
          additionalProperties: false,
        },
      },
    ])
    expect(delta.variables).toEqual([{ name: 'greeter_mood', value: 'calm', stability: 'step' }])

    // The host's cwd by default.
    expect((await greeter.delta()).sections[0].rendered).toBe(`Ahoy! You work in ${CWD}.`)
  })

  it('keeps two plugins apart', async () => {
    const host = await start()
    const { plugin } = victim()
    const other = await host.mount({
      ...plugin,
      apply: (ctx: any) => {
        ctx.systemPrompt.section({ name: 'victim:rules', order: 210, text: 'Other.' })
      },
    })
    const greeter = await host.mount(Greeter)
    expect((await greeter.delta()).sections.map(s => s.name)).toEqual(['greeter:rules'])
    expect(await other.delta()).toEqual({
      sections: [{ name: 'victim:rules', order: 210, stability: 'static', text: 'Other.', rendered: 'Other.' }],
      contexts: [],
      tools: [],
      variables: [],
    })
  })

  it('counts what the plugin registers per agent', async () => {
    const host = await start()
    const perAgent = await host.mount({
      name: 'per-agent',
      inject: ['agents'],
      apply(ctx: Context) {
        ctx.on('agent/created', ({ agent }) => {
          agent.ctx.systemPrompt.section({ name: 'per-agent:note', order: 220, text: 'Agent {{model}}.' })
        })
      },
    })
    expect((await perAgent.delta()).sections.map(s => [s.name, s.rendered])).toEqual([['per-agent:note', 'Agent scripted.']])
  })

  it('counts a per-agent override of a built-in only where it applies, and it leaves no residue', async () => {
    const host = await start({ prompt: { persona: 'Default persona.' } })
    const override = await host.mount({
      name: 'override',
      inject: ['agents'],
      apply(ctx: Context) {
        ctx.on('agent/created', ({ agent }) => {
          if (agent.cwd !== '/srv/special') return
          // Registered in the agent's scope, undone with this plugin.
          ctx.effect(() => agent.ctx.systemPrompt.section({ name: 'deployment:persona', order: 0, text: 'Special in {{cwd}}.' }), 'override')
        })
      },
    })
    expect((await override.delta({ cwd: '/srv/special' })).sections.map(s => s.rendered)).toEqual(['Special in /srv/special.'])
    expect((await override.delta()).sections).toEqual([])
    host.agent('/srv/special')
    await override.dispose()
    await host.assertZeroResidue(override)
  })

  it('rejects a bad config, naming the plugin and the key', async () => {
    const host = await start()
    const error = await rejection(host.mount(Greeter, { mood: 'grumpy' }))
    expect(error.message).toContain('plugin "greeter" failed to start')
    expect(error.message).toContain('mood')
    // Nothing of the failed plugin stays loaded.
    expect(host.root.registry.has(Greeter)).toBe(false)
  })

  it('rejects a throwing apply and a missing service', async () => {
    const host = await start()
    await expect(
      host.mount({
        name: 'broken',
        apply() {
          throw new Error('boom')
        },
      }),
    ).rejects.toThrow('plugin "broken" failed to start: boom')
    await expect(host.mount({ name: 'needy', inject: ['nowhere'], apply() {} })).rejects.toThrow(/plugin "needy" did not start: .*nowhere/)
  })
})

describe('zero residue', () => {
  it('passes for a plugin that cleans up', async () => {
    const host = await start()
    const greeter = await host.mount(Greeter)
    await host.callTool('greet', { who: 'Ada' })
    await greeter.delta()
    await greeter.dispose()
    expect(await host.residue(greeter)).toEqual([])
    await host.assertZeroResidue(greeter)
  })

  it('lists everything a leaky plugin leaves behind', async () => {
    const host = await start()
    const { plugin: victimPlugin, box } = victim()
    await host.mount(victimPlugin)
    const leak = leaky(() => box.ctx!)
    try {
      const mounted = await host.mount(leak.plugin)
      // The delta names what it added, through whichever context.
      const delta = await mounted.delta()
      expect(delta.sections.map(s => s.name)).toEqual(['leaky:note'])
      expect(delta.tools.map(t => t.name)).toEqual(['sneaky'])
      await mounted.dispose()

      const error = await rejection(host.assertZeroResidue(mounted))
      expect(error.message).toMatch(/^plugin "leaky" left residue after dispose:\n {2}- /)
      const found = error.residue!.join('\n')
      expect(found).toContain('a listener of "tools/change" registered on the root context')
      expect(found).toContain('prompt section "leaky:note" is still registered (owner "victim")')
      expect(found).toContain('tool "sneaky" is still registered (through plugin "victim")')
      expect(found).toContain('a timer it created is still scheduled: setInterval every 60000 ms')
      expect(found).toContain("setTimeout of 60000 ms (unref'd)")
      expect(found).toContain('agent "orphan" (created while the plugin was mounted) is still alive')
      expect(found).not.toContain('agent/created') // its own listener went away with it
    } finally {
      leak.clear()
    }
  })

  it('reports a plugin that is still loaded', async () => {
    const host = await start()
    const greeter = await host.mount(Greeter)
    const findings = await host.residue(greeter)
    expect(findings[0]).toBe('the plugin is still loaded (call mounted.dispose() first)')
    expect(findings).toContain('tool "greet" is still registered (through plugin "greeter")')
  })

  it('finds timers started later, by its tools and its listeners', async () => {
    const host = await start({ script: ['ok'] })
    const handles: NodeJS.Timeout[] = []
    try {
      const mounted = await host.mount({
        name: 'ticker',
        inject: ['tools'],
        apply(ctx: any) {
          ctx.tools.register(
            defineTool({
              name: 'tick',
              description: 'Starts a timer it never stops.',
              parameters: { type: 'object', properties: {} },
              execute() {
                handles.push(setInterval(() => {}, 1_000))
                return 'ticking'
              },
            }),
          )
          ctx.on('agent/created', () => {
            handles.push(setTimeout(() => {}, 60_000))
          })
        },
      })
      await host.callTool('tick')
      await host.run('hello')
      await mounted.dispose()
      const findings = await host.residue(mounted)
      expect(findings).toContain('a timer it created is still scheduled: setInterval every 1000 ms')
      // Started by a listener: not attributable, but counted.
      expect(findings).toContainEqual(expect.stringMatching(/^[1-9]\d* more active timer handle\(s\) \(Timeout\) than before the plugin was mounted$/))
    } finally {
      handles.forEach(handle => clearTimeout(handle))
    }
  })

  it('finds registrations left in an agent scope', async () => {
    const host = await start()
    const agent = host.agent()
    const mounted = await host.mount({
      name: 'scoper',
      apply() {
        ;(agent.ctx as any).systemPrompt.section({ name: 'scoper:note', order: 230, text: 'Per agent.' })
      },
    })
    await mounted.dispose()
    await expect(host.assertZeroResidue(mounted)).rejects.toThrow(`prompt section "scoper:note" in the scope of agent "${agent.id}"`)
  })
})

describe('assertStablePrompt', () => {
  it('passes for a plugin whose prompt holds still, and names the section of one that reads a clock', async () => {
    const h = await start()
    await h.mount({
      name: 'steady',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => ctx.systemPrompt.section({ name: 'steady:rules', order: 10, text: 'Be brief.' }),
    })
    await h.assertStablePrompt()
    await h.mount({
      name: 'clocked',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => ctx.systemPrompt.section({ name: 'clocked:now', order: 20, text: () => `Now: ${process.hrtime.bigint()}` }),
    })
    await expect(h.assertStablePrompt()).rejects.toThrow(
      /^prompt section "clocked:now" \(plugin "clocked", static\) changed between two assemblies with no registration change: first difference at character \d+/,
    )
  })

  it('a plugin test fails when its prompt changes on its own: the kit checks strictly unless told otherwise', async () => {
    const h = await start()
    await h.mount({
      name: 'ticker',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => ctx.systemPrompt.variable('now', () => String(process.hrtime.bigint())),
    })
    const agent = h.agent()
    await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    await expect(h.ctx.systemPrompt.assemble({ agent, scope: agent })).rejects.toThrow('prompt variable "{{now}}" (plugin "ticker", session-stable) changed')
  })
})

describe('manifest', () => {
  it('outlines the rows a plugin contributes: ids, order, stability, trust, category, without sizes or digests', async () => {
    const h = await start()
    await h.mount({
      name: 'house-rules',
      inject: ['systemPrompt'],
      apply: (ctx: Context) => {
        ctx.systemPrompt.section({ name: 'house:rules', order: 60, text: 'Never push to main.', trust: 'repository' })
        ctx.systemPrompt.context({ name: 'house:now', order: 30, text: 'now', category: 'runtime' })
      },
    })
    const manifest = await h.manifest()
    expect(manifestOutline(manifest, 'house-rules')).toEqual([
      { kind: 'section', name: 'house:rules', owner: 'house-rules', order: 60, stability: 'static', trust: 'repository', category: 'instructions' },
      { kind: 'context', name: 'house:now', owner: 'house-rules', order: 30, stability: 'step', trust: 'deployment', category: 'runtime' },
    ])
    expect(manifest.rows.find(row => row.name === 'house:rules')).toMatchObject({
      chars: 'Never push to main.'.length,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    })
  })
})

describe('callTool', () => {
  it('runs one call for an agent with that cwd', async () => {
    const host = await start()
    await host.mount(Greeter, { greeting: 'Hi' })
    const result = await host.callTool('greet', { who: 'Ada' }, { cwd: '/srv/other' })
    expect(result).toEqual({ isError: false, content: [{ type: 'text', text: 'Hi, Ada (from /srv/other)' }] })
    expect(await host.callTool('greet', { who: 'Bo' })).toMatchObject({ content: [{ text: `Hi, Bo (from ${CWD})` }] })
    // One agent per cwd.
    expect(host.agent('/srv/other')).toBe(host.agent('/srv/other'))

    const bad = await host.callTool('greet', {})
    expect(bad.isError).toBe(true)
    expect(bad.content[0]).toMatchObject({ text: expect.stringContaining('invalid arguments for tool "greet"') })
  })
})

describe('run', () => {
  it('answers with the scripted text', async () => {
    const host = await start({ script: ['Hello there.'] })
    const run = await host.run('hi')
    expect(run.text).toBe('Hello there.')
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(run.requests).toHaveLength(1)
    expect(run.events.map(e => e.type)).toContain('assistant/message')
  })

  it('runs scripted tool calls through the plugin', async () => {
    const host = await start()
    await host.mount(Greeter)
    const model = host.scriptedModel([{ toolCalls: [{ name: 'greet', arguments: { who: 'Ada' } }] }, 'Greeted.'])
    const run = await host.run('greet Ada', { cwd: '/srv/other' })
    expect(run.text).toBe('Greeted.')
    expect(run.requests).toHaveLength(2)
    expect(model.requests).toHaveLength(2)
    expect(run.requests[0].system).toContain('Hello! You work in /srv/other.')
    expect(run.requests[0].tools?.map(t => t.name)).toEqual(['greet'])
    const results = run.events.filter(e => e.type === 'tool/result')
    expect(JSON.stringify(results)).toContain('Hello, Ada (from /srv/other)')
  })
})

describe('snapshot', () => {
  it('is stable across runs', async () => {
    const host = await start()
    await host.mount(Greeter)
    const script = [{ toolCalls: [{ name: 'greet', arguments: { who: 'Ada' } }] }, 'Greeted.']
    host.scriptedModel(script)
    const first = await host.run('greet Ada')
    host.scriptedModel(script)
    const second = await host.run('greet Ada')

    const a = first.requests.map(host.snapshot)
    const b = second.requests.map(host.snapshot)
    expect(a).toEqual(b)
    expect(a[1]).not.toContain('"signal"')
    expect(a[1]).toContain('"id": "<id:0>"')
    expect(a[1]).toContain('"sessionId": "<session>"')
    expect(a[1]).toContain('"<call:0>"')
    expect(JSON.parse(a[1]).messages).toHaveLength(JSON.parse(a[0]).messages.length + 2)
    expect(a[0].split('\n')[1]).toMatch(/^ {2}"/) // two-space indent
  })
})

it('renders literal entries verbatim in the delta', async () => {
  const host = await createHost()
  const literalPlugin = {
    name: 'literal-plugin',
    inject: ['systemPrompt'],
    apply(ctx: any) {
      ctx.systemPrompt.section({ name: 'file', order: 200, text: 'uses ${{ secrets.X }}', literal: true })
    },
  }
  const mounted = await host.mount(literalPlugin)
  const delta = await mounted.delta()
  expect(delta.sections).toEqual([
    { name: 'file', order: 200, stability: 'static', text: 'uses ${{ secrets.X }}', rendered: 'uses ${{ secrets.X }}', literal: true },
  ])
  await host.dispose()
})
