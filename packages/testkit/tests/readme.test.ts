// The README example, kept honest: a plugin module mounted as plugin tests mount it.
import { afterEach, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as hello from './hello-plugin.ts'

let host: Host
afterEach(() => host.dispose())

it('adds one section and one tool', async () => {
  host = await createHost()
  const mounted = await host.mount(hello, { greeting: 'Hi' })
  const delta = await mounted.delta({ cwd: '/srv/project' })
  expect(delta.sections).toEqual([
    {
      name: 'tool:hello',
      order: 200,
      stability: 'static',
      text: 'Use `hello` to greet people in {{cwd}}.',
      rendered: 'Use `hello` to greet people in /srv/project.',
    },
  ])
  expect(delta.tools.map(tool => tool.name)).toEqual(['hello'])
  expect(delta.contexts).toEqual([])
  expect(delta.variables).toEqual([])
})

it('runs its tool, alone and in a turn', async () => {
  host = await createHost()
  await host.mount(hello, { greeting: 'Hi' })
  expect(await host.callTool('hello', { who: 'Ada' })).toEqual({ isError: false, content: [{ type: 'text', text: 'Hi, Ada!' }] })

  host.scriptedModel([{ toolCalls: [{ name: 'hello', arguments: { who: 'Ada' } }] }, 'I greeted Ada.'])
  const run = await host.run('greet Ada', { cwd: '/srv/project' })
  expect(run.text).toBe('I greeted Ada.')
  expect(run.requests).toHaveLength(2)
  await expect(host.snapshot(run.requests[1])).toMatchFileSnapshot('__snapshots__/greet.json')
})

it('rejects a bad config', async () => {
  host = await createHost()
  await expect(host.mount(hello, { greeting: 42 })).rejects.toThrow(/plugin "@loom\/tool-hello" failed to start: invalid config[\s\S]*greeting/)
})

it('leaves nothing behind', async () => {
  host = await createHost()
  const mounted = await host.mount(hello)
  await host.callTool('hello', { who: 'Ada' })
  await mounted.dispose()
  await host.assertZeroResidue(mounted)
})
