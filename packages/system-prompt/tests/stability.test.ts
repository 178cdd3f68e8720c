// Stability by default: a section or variable whose text changes between two
// assemblies of one scope with no registration change in between is caught,
// named with its plugin and the first differing characters.
import { describe, expect, it } from 'vitest'
import { difference, findInstabilities, PromptUnstableError } from '@loom/system-prompt'
import { root } from './helpers.ts'

/** A text that changes at every call, as a clock would. */
function ticking(prefix: string) {
  let tick = 0
  return () => `${prefix} ${++tick}`
}

describe('stability check', () => {
  it('error: a static section whose text changes on its own fails the second assembly, naming it, its plugin and the difference', async () => {
    const h = await root({ stabilityCheck: 'error' })
    const plugin = await h.plugin('clock')
    plugin.systemPrompt.section({ name: 'clock:now', order: 10, text: ticking('It is tick') })
    const scope = h.mint()
    await h.asm(scope.key)
    await expect(h.asm(scope.key)).rejects.toThrow(
      'prompt section "clock:now" (plugin "clock", static) changed between two assemblies with no registration change: first difference at character 11: "It is tick 1" became "It is tick 2". A static section must render the same text every time',
    )
  })

  it('the failure is a PromptUnstableError with code PROMPT_UNSTABLE, carrying the contribution and its plugin', async () => {
    const h = await root({ stabilityCheck: 'error' })
    const plugin = await h.plugin('clock')
    plugin.systemPrompt.section({ name: 'clock:now', order: 10, text: ticking('It is tick') })
    const scope = h.mint()
    await h.asm(scope.key)
    const error = await h.asm(scope.key).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(PromptUnstableError)
    expect(error).toMatchObject({ code: 'PROMPT_UNSTABLE', instability: { kind: 'section', name: 'clock:now', owner: 'clock', severe: true } })
  })

  it('findInstabilities compares two assemblies in the same words, without a mode or a baseline', async () => {
    const h = await root({ stabilityCheck: 'off' })
    const plugin = await h.plugin('clock')
    plugin.systemPrompt.section({ name: 'clock:now', order: 10, text: ticking('It is tick') })
    plugin.systemPrompt.section({ name: 'rules:file', order: 20, stability: 'session', text: ticking('rule') })
    plugin.systemPrompt.variable('nanos', ticking('n'))
    const scope = h.mint()
    const found = findInstabilities(await h.asm(scope.key), await h.asm(scope.key))
    expect(found.map(({ kind, name, owner, severe }) => ({ kind, name, owner, severe }))).toEqual([
      { kind: 'section', name: 'clock:now', owner: 'clock', severe: true },
      { kind: 'section', name: 'rules:file', owner: 'clock', severe: false },
      { kind: 'variable', name: 'nanos', owner: 'clock', severe: true },
    ])
    expect(found[0].message).toBe(
      'prompt section "clock:now" (plugin "clock", static) changed between two assemblies with no registration change: first difference at character 11: "It is tick 1" became "It is tick 2". A static section must render the same text every time: move what changes into a runtime context (ctx.systemPrompt.context), or declare stability "session" if it follows outside content.',
    )
  })

  it('an undeclared variable that changes is caught the same way; a step variable may change', async () => {
    const h = await root({ stabilityCheck: 'error' })
    const plugin = await h.plugin('clock')
    const scope = h.mint()
    const step = plugin.systemPrompt.variable('tick', ticking('t'), { stability: 'step' })
    await h.asm(scope.key)
    await h.asm(scope.key)
    step()
    plugin.systemPrompt.variable('nanos', ticking('n'))
    await h.asm(scope.key)
    await expect(h.asm(scope.key)).rejects.toThrow(
      `prompt variable "{{nanos}}" (plugin "clock", session-stable) changed between two assemblies with no registration change: first difference at character 2: "n 1" became "n 2". A value that changes between steps must be registered with { stability: 'step' }`,
    )
  })

  it('a registration change between two assemblies starts a new baseline: the change is the registry’s, not the section’s', async () => {
    const h = await root({ stabilityCheck: 'error' })
    const plugin = await h.plugin('greeter')
    const scope = h.mint()
    const first = plugin.systemPrompt.section({ name: 'greeter:hello', order: 10, text: 'Hello v1' })
    await h.asm(scope.key)
    first()
    plugin.systemPrompt.section({ name: 'greeter:hello', order: 10, text: 'Hello v2' })
    expect((await h.asm(scope.key)).sections.map(section => section.text)).toContain('Hello v2')
    await h.asm(scope.key)
  })

  it('each scope has its own baseline; a session section that follows outside content only warns, once', async () => {
    const h = await root({ stabilityCheck: 'error' })
    const plugin = await h.plugin('instructions')
    plugin.systemPrompt.section({ name: 'instructions:file', order: 10, stability: 'session', text: ticking('rule') })
    const [a, b] = [h.mint(), h.mint()]
    await h.asm(a.key)
    await h.asm(b.key)
    await h.asm(a.key)
    await h.asm(a.key)
    expect(h.warnings.filter(text => text.includes('"instructions:file"'))).toEqual([
      expect.stringContaining(
        'prompt section "instructions:file" (plugin "instructions", session-stable) changed between two assemblies with no registration change: first difference at character 5: "rule 1" became "rule 3". Each change moves the cached system prefix',
      ),
    ])
  })

  it('warn (the default) logs once per contribution; off says nothing', async () => {
    for (const [mode, expected] of [
      [undefined, 1],
      ['off', 0],
    ] as const) {
      const h = await root(mode ? { stabilityCheck: mode } : {})
      const plugin = await h.plugin('clock')
      plugin.systemPrompt.section({ name: 'clock:now', order: 10, text: ticking('tick') })
      const scope = h.mint()
      for (let i = 0; i < 4; i++) await h.asm(scope.key)
      expect(h.warnings.filter(text => text.includes('"clock:now"'))).toHaveLength(expected)
    }
  })

  it('enforceStability sets the mode while its caller lives, then the configured one is back', async () => {
    const h = await root()
    const plugin = await h.plugin('clock')
    plugin.systemPrompt.section({ name: 'clock:now', order: 10, text: ticking('tick') })
    const dev = await h.plugin('dev')
    dev.systemPrompt.enforceStability('error')
    const scope = h.mint()
    await h.asm(scope.key)
    await expect(h.asm(scope.key)).rejects.toThrow('"clock:now"')
    await dev.fiber.dispose()
    // The check is the configured warning again (dev's unload was a registry change: a new baseline first).
    await h.asm(scope.key)
    await h.asm(scope.key)
    expect(h.warnings.some(text => text.includes('"clock:now"'))).toBe(true)
  })

  it('difference quotes a little before and after the first differing character', () => {
    expect(difference('same', 'same!')).toBe('first difference at character 4: "same" became "same!"')
    expect(difference('The time is 10:01:02 on Monday, 1 December 2026', 'The time is 10:01:03 on Monday, 1 December 2026')).toBe(
      'first difference at character 19: "…e is 10:01:02 on Monday, 1 December …" became "…e is 10:01:03 on Monday, 1 December …"',
    )
  })
})
