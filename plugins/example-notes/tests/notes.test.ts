import { afterEach, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as notes from '../src/index.ts'

let host: Host
afterEach(() => host.dispose())

it('adds one guidance section, one runtime context and one tool', async () => {
  host = await createHost()
  const mounted = await host.mount(notes)
  const delta = await mounted.delta()
  expect(delta.sections.map(s => [s.name, s.order, s.stability])).toEqual([['notes:guidance', 200, 'static']])
  expect(delta.contexts.map(c => [c.name, c.order, c.stability])).toEqual([['notes:open', 50, 'step']])
  expect(delta.tools.map(t => t.name)).toEqual(['note'])
})

it('shows notes back to the model in the runtime context, not in the system text', async () => {
  host = await createHost()
  await host.mount(notes)
  host.scriptedModel([{ toolCalls: [{ name: 'note', arguments: { text: 'the tests use {{fixtures}}' } }] }, 'Noted it.'])
  const run = await host.run('remember where the fixtures are')
  expect(run.reason).toEqual({ kind: 'completed' })
  const [first, second] = run.requests
  expect(second.system).toBe(first.system)
  const snapshot = second.messages.at(-1)!.content[0]
  expect(snapshot).toEqual({ type: 'text', text: expect.stringContaining('Open notes:\n- the tests use {{fixtures}}') })
})

it('keeps at most maxNotes per agent and says what it dropped', async () => {
  host = await createHost()
  await host.mount(notes, { maxNotes: 1 })
  expect(await host.callTool('note', { text: 'one' })).toMatchObject({ isError: false, content: [{ type: 'text', text: 'Noted.' }] })
  expect(await host.callTool('note', { text: 'two' })).toMatchObject({ content: [{ type: 'text', text: 'Noted. (1 oldest note dropped: at most 1.)' }] })
})

it('gives the model a readable error for bad arguments', async () => {
  host = await createHost()
  await host.mount(notes)
  const result = await host.callTool('note', { text: '' })
  expect(result.isError).toBe(true)
  expect(result.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/invalid arguments for tool "note"/) })
})

it('rejects a bad config, naming the key', async () => {
  host = await createHost()
  await expect(host.mount(notes, { maxNotes: 0 })).rejects.toThrow(/maxNotes/)
})

it('leaves nothing behind when unloaded', async () => {
  host = await createHost()
  const mounted = await host.mount(notes)
  await host.callTool('note', { text: 'x' })
  await mounted.dispose()
  await host.assertZeroResidue(mounted)
})
