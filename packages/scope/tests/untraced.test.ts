// Hot-path lookups: a service read once and again only after it changed.
import { describe, expect, it, vi } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import { serviceLookup } from '@loom/scope'

declare module '@deepseek-ai/cordis' {
  interface Context {
    greeter: { hello: string }
  }
}

/** A plugin providing `greeter` with this greeting; its fiber disposes it. */
const greeter = (hello: string) => ({
  name: `greeter-${hello}`,
  apply(ctx: Context) {
    ctx.provide('greeter')
    ctx.set('greeter', { hello })
  },
})

describe('serviceLookup', () => {
  it('follows a service that comes, is replaced and goes, while looking it up only after a change', async () => {
    const root = new Context()
    const user = (await root.plugin({ name: 'user', apply() {} })).ctx
    const lookups = vi.spyOn(root.reflect, 'get')
    const read = serviceLookup(user, 'greeter')
    expect(read()).toBeUndefined()
    const first = await root.plugin(greeter('one'))
    expect(read()?.hello).toBe('one')
    const before = lookups.mock.calls.length
    for (let i = 0; i < 5; i++) expect(read()?.hello).toBe('one')
    expect(lookups.mock.calls.length).toBe(before)
    await first.dispose()
    expect(read()).toBeUndefined()
    await root.plugin(greeter('two'))
    expect(read()?.hello).toBe('two')
  })
})
