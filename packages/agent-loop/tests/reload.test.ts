// A plugin reloaded while one of its tool calls runs (what `loom dev` does on a
// save): the call finishes with its result, never left without one, and the
// next request carries the new version of the tool.
import { defineTool } from '@loom/tools'
import { userText } from '@loom/llm'
import { expect, it } from 'vitest'
import { harness, textResponse, toolCallResponse } from './harness.ts'

function slowTool(version: string, gate: Promise<void>, started: () => void) {
  return {
    name: 'slow-tool',
    inject: ['tools'],
    apply(ctx: any) {
      ctx.tools.register(
        defineTool({
          name: 'slow',
          description: `A slow tool, version ${version}.`,
          parameters: { type: 'object', properties: {} },
          execute: async () => {
            started()
            await gate
            return `done by ${version}`
          },
        }),
      )
    },
  }
}

it('a tool call in flight when its plugin reloads finishes with its result', async () => {
  const h = await harness({ script: [toolCallResponse('c1', 'slow', {}), textResponse('ok')] })
  let release!: () => void
  const gate = new Promise<void>(resolve => {
    release = resolve
  })
  let started!: () => void
  const running = new Promise<void>(resolve => {
    started = resolve
  })
  const v1 = await h.root.plugin(slowTool('v1', gate, started))

  h.agent.followup(userText('use the slow tool'))
  await running
  // The reload: the old fiber goes, the new version comes.
  await v1.dispose()
  await h.root.plugin(slowTool('v2', Promise.resolve(), () => {}))
  release()
  await h.settle()

  const events = h.events()
  const calls = events.filter(e => e.type === 'tool/call').map(e => (e.data as any).callId)
  const results = events.filter(e => e.type === 'tool/result')
  expect(calls).toEqual(['c1'])
  expect(results.map(e => (e.data as any).message.content[0])).toEqual([
    { type: 'tool-result', toolCallId: 'c1', isError: false, content: [{ type: 'text', text: 'done by v1' }] },
  ])
  expect((events.at(-1)!.data as any).reason).toEqual({ kind: 'completed' })
  expect(h.adapter.requests[1].tools!.map(t => t.description)).toEqual(['A slow tool, version v2.'])
})
