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
