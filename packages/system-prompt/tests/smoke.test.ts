import { expect, it } from 'vitest'
import { renderPrompt } from '@loom/system-prompt'
import { IDENTITY, root } from './helpers.ts'

it('a scoped section shadows the global one of the same name', async () => {
  const h = await root({ persona: 'Hi {{model}}' })
  h.sp.variable('model', () => 'M')
  h.sp.section({ name: 'x', order: 5, text: 'X' })
  const s = h.mint()
  s.sp.section({ name: 'x', order: 5, text: 'SX' })
  expect(renderPrompt(await h.asm(s.key))).toBe(`${IDENTITY}\n\nHi M\n\nSX`)
  expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\nHi M\n\nX`)
})

it('equal orders sort by name and warn once naming both plugins', async () => {
  const h = await root()
  const a = await h.plugin('plugin-a')
  const b = await h.plugin('plugin-b')
  b.systemPrompt.section({ name: 'zeta', order: 5, text: 'Z' })
  a.systemPrompt.section({ name: 'alpha', order: 5, text: 'A' })
  expect((await h.asm()).sections.map(s => s.name)).toEqual(['harness:identity', 'deployment:persona', 'alpha', 'zeta'])
  await h.asm()
  expect(h.warnings).toEqual([expect.stringMatching(/"alpha" \(plugin "plugin-a"\) and "zeta" \(plugin "plugin-b"\) share order 5/)])
})
