// Plugin drift: how the plugins behind a resumed session's next request differ
// from those its last request recorded (added, removed, another version).
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
    })
  })

  it('is undefined when the same plugins run at the same versions, whatever they contribute now', () => {
    expect(pluginDrift([plugin('a', '1.0.0')], [{ ...plugin('a', '1.0.0'), digest: 'other' }])).toBeUndefined()
  })
})
