// Plugin drift: how the plugins behind a resumed session's next request differ
// from those its last request recorded (added, removed, another version, edited source).
import { describe, expect, it } from 'vitest'
import { pluginDrift } from '@loom/agent-loop'

const plugin = (name: string, version?: string) => ({ name, ...(version !== undefined && { version }), digest: `${name}@${version}` })

describe('pluginDrift', () => {
  it('lists what was added, removed and upgraded, in the order of the lists', () => {
    const before = [plugin('@loom/mcp', '0.1.0'), plugin('@loom/tool-fs', '0.1.0'), plugin('greeter')]
    const after = [plugin('@loom/tool-fs', '0.2.0'), plugin('@loom/web-fetch', '0.1.0'), plugin('greeter', '1.0.0')]
    expect(pluginDrift(before, after)).toEqual({
      added: [plugin('@loom/web-fetch', '0.1.0')],
      removed: [plugin('@loom/mcp', '0.1.0')],
      upgraded: [
        { name: '@loom/tool-fs', from: '0.1.0', to: '0.2.0' },
        { name: 'greeter', to: '1.0.0' },
      ],
      changed: [],
    })
  })

  it('tells an edited plugin that has no version, or the same one, by its source hash; a side without a hash tells nothing', () => {
    const edited = (name: string, sourceHash: string | undefined, version?: string) => ({ ...plugin(name, version), ...(sourceHash && { sourceHash }) })
    const before = [
      edited('greeter', 'a'.repeat(64)),
      edited('@loom/tool-fs', 'c'.repeat(64), '0.1.0'),
      edited('old-log', undefined),
      edited('same', 'e'.repeat(64)),
    ]
    const after = [
      edited('greeter', 'b'.repeat(64)),
      edited('@loom/tool-fs', 'd'.repeat(64), '0.1.0'),
      edited('old-log', 'f'.repeat(64)),
      edited('same', 'e'.repeat(64)),
    ]
    expect(pluginDrift(before, after)).toEqual({
      added: [],
      removed: [],
      upgraded: [],
      changed: [
        { name: 'greeter', from: 'a'.repeat(64), to: 'b'.repeat(64) },
        { name: '@loom/tool-fs', version: '0.1.0', from: 'c'.repeat(64), to: 'd'.repeat(64) },
      ],
    })
    // An upgrade changes the code too: it is told once, as the upgrade.
    expect(pluginDrift([edited('p', 'a'.repeat(64), '1.0.0')], [edited('p', 'b'.repeat(64), '2.0.0')])).toMatchObject({
      upgraded: [{ name: 'p', from: '1.0.0', to: '2.0.0' }],
      changed: [],
    })
  })

  it('is undefined when the same plugins run at the same versions, whatever they contribute now', () => {
    expect(pluginDrift([plugin('a', '1.0.0')], [{ ...plugin('a', '1.0.0'), digest: 'other' }])).toBeUndefined()
  })
})
