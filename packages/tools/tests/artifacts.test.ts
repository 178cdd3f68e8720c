// Long tool output kept as artifacts (`@loom/tools/artifacts`): the excerpt the model reads,
// the bounds, the references, and the runtime's store (`ctx.tools.artifacts`).
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import ToolRuntime from '@loom/tools'
import { artifactName, Artifacts, excerpt, MemoryArtifactStorage, type ArtifactStorage } from '@loom/tools/artifacts'
import SystemPrompt from '@loom/system-prompt'

const numbered = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `line ${i + from}`).join('\n')
const call = (sessionId: string, callId = 'call_1') => ({ callId, agent: { id: `agent-${sessionId}`, sessionId } })
const limits = { maxBytes: 1000, sessionMaxBytes: 2500 }
const memoryArtifacts = () => {
  const storage = new MemoryArtifactStorage()
  return new Artifacts(() => storage, limits)
}

describe('excerpt', () => {
  it('returns text that fits as it is', () => {
    expect(excerpt('short\ntext\n', { maxChars: 100 })).toEqual({ text: 'short\ntext\n' })
    expect(excerpt('a\nb\nc\n', { maxLines: 3 })).toEqual({ text: 'a\nb\nc\n' })
  })

  it('shows whole lines of the head and tail, and names the lines left out and how to read them', () => {
    const text = numbered(100)
    const { text: shown, omitted } = excerpt(text, { maxChars: 80 }, { reference: 'artifact://call_1' })
    const lines = shown.split('\n')
    const notice = lines.find(line => line.startsWith('[…'))!
    expect(lines[0]).toBe('line 1')
    expect(lines.at(-1)).toBe('line 100')
    expect(omitted).toMatchObject({ fromLine: 6, toLine: 96, lines: 91 })
    expect(notice).toBe(
      `[… lines 6-96 not shown (${omitted!.size} characters). The whole output is kept as artifact://call_1: read it with \`read\` (path "artifact://call_1", offset 6).]`,
    )
    expect(lines.slice(0, 5)).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5'])
    expect(omitted!.size).toBe(text.length - lines.filter(line => line !== notice).join('\n').length + 1)
  })

  it('counts lines from where the text starts in its artifact', () => {
    const { omitted, text } = excerpt(numbered(10), { maxLines: 4 }, { reference: 'artifact://x', firstLine: 21 })
    expect(omitted).toMatchObject({ fromLine: 23, toLine: 28 })
    expect(text).toContain('offset 23')
    expect(text.split('\n')).toEqual(['line 1', 'line 2', expect.stringMatching(/^\[… lines 23-28 not shown/), 'line 9', 'line 10'])
  })

  it('cuts one overlong line at both ends, never in a surrogate pair or a UTF-8 character', () => {
    const line = `${'😀'.repeat(50)}${'x'.repeat(1000)}${'é'.repeat(50)}`
    const chars = excerpt(line, { maxChars: 21 }).text.split('\n')
    expect(chars[0]).toBe('😀'.repeat(5))
    expect(chars[1]).toMatch(/^\[… part of line 1 not shown \(\d+ characters\)\. The whole output was not kept/)
    expect(chars[2]).toBe('é'.repeat(10))
    const bytes = excerpt(line, { maxBytes: 21 }).text.split('\n')
    expect(bytes[0]).toBe('😀'.repeat(2))
    expect(bytes[2]).toBe('é'.repeat(5))
    expect(bytes.join('')).not.toContain('\uFFFD')
  })

  it('keeps the first half of maxLines at the head and the rest at the tail', () => {
    const { text } = excerpt(numbered(1000), { maxLines: 5 })
    expect(text.split('\n')).toEqual(['line 1', 'line 2', 'line 3', expect.stringMatching(/^\[… lines 4-998 not shown/), 'line 999', 'line 1000'])
  })
})

describe('Artifacts', () => {
  it('keeps nothing for a call without a session, and writes nothing for output that fits', async () => {
    const storage = new MemoryArtifactStorage()
    const artifacts = new Artifacts(() => storage, limits)
    expect(await artifacts.keep({ callId: 'c' }, 'x'.repeat(10))).toBeUndefined()
    const short = await artifacts.shorten(call('s1'), 'fits', { maxChars: 10 })
    expect(short).toEqual({ text: 'fits' })
    expect(await storage.list('s1')).toEqual([])
  })

  it('stores the whole output under the call id, and reads it back only in the same session', async () => {
    const kept = memoryArtifacts()
    const shown = await kept.shorten(call('s1', 'toolu_01/AB'), numbered(100), { maxChars: 60 })
    expect(shown.reference).toBe('artifact://toolu_01_AB')
    expect(shown.text).toContain('artifact://toolu_01_AB')
    expect(await kept.read(call('s1'), 'artifact://toolu_01_AB')).toBe(numbered(100))
    await expect(kept.read(call('s2'), 'artifact://toolu_01_AB')).rejects.toThrow(
      /^artifact:\/\/toolu_01_AB is not an artifact of this session: .*another session's artifacts cannot be read/,
    )
    await expect(kept.read({ callId: 'c' }, 'artifact://toolu_01_AB')).rejects.toThrow(/this call has none/)
  })

  it('gives a repeated call id a name of its own', async () => {
    const artifacts = memoryArtifacts()
    expect(await artifacts.keep(call('s1', 'c'), 'one')).toBe('artifact://c')
    expect(await artifacts.keep(call('s1', 'c'), 'two')).toBe('artifact://c-2')
    expect(await artifacts.read(call('s1'), 'artifact://c')).toBe('one')
    expect(await artifacts.read(call('s1'), 'artifact://c-2')).toBe('two')
  })

  it('refuses references that are not one safe name', async () => {
    const artifacts = memoryArtifacts()
    for (const bad of ['artifact://', 'artifact://../s2/c', 'artifact://a/b', 'artifact://.hidden', 'artifact://..', 'file:///etc/passwd']) {
      await expect(artifacts.read(call('s1'), bad)).rejects.toThrow(`"${bad}" is not an artifact reference: one reads artifact://<name>`)
    }
    expect(artifactName('artifact://call_1-2.x')).toBe('call_1-2.x')
  })

  it('bounds one artifact to its head and tail, and the session by evicting the oldest first', async () => {
    const storage = new MemoryArtifactStorage()
    const artifacts = new Artifacts(() => storage, limits)
    await artifacts.keep(call('s1', 'big'), `${'a'.repeat(3000)}${'z'.repeat(3000)}`)
    const big = await artifacts.read(call('s1'), 'artifact://big')
    expect(Buffer.byteLength(big)).toBeLessThanOrEqual(1000)
    expect(big).toMatch(/^a+\n\[… \d+ bytes not kept here: the output is over the artifact limit of 1000 bytes\]\nz+$/)

    // 800 bytes each: the second goes in once the first artifact is gone, the fourth once c1 is.
    for (const id of ['c1', 'c2', 'c3', 'c4']) {
      await artifacts.keep(call('s1', id), 'x'.repeat(800))
      // Distinct store times: eviction goes by age.
      await new Promise(resolve => setImmediate(resolve))
    }
    const names = (await storage.list('s1')).map(entry => entry.name).sort()
    expect(names).toEqual(['c2', 'c3', 'c4'])
    await expect(artifacts.read(call('s1'), 'artifact://big')).rejects.toThrow(/keeps at most 2500 bytes of artifacts and removes the oldest first/)
    const total = (await storage.list('s1')).reduce((sum, entry) => sum + entry.bytes, 0)
    expect(total).toBeLessThanOrEqual(2500)
  })

  it('serializes the stores of one session, so parallel calls never overrun the bound', async () => {
    const storage = new MemoryArtifactStorage()
    const artifacts = new Artifacts(() => storage, limits)
    await Promise.all(Array.from({ length: 8 }, (_, i) => artifacts.keep(call('s1', `p${i}`), 'y'.repeat(900))))
    const entries = await storage.list('s1')
    expect(entries.reduce((sum, entry) => sum + entry.bytes, 0)).toBeLessThanOrEqual(2500)
    expect(new Set(entries.map(entry => entry.name)).size).toBe(entries.length)
  })

  it('redacts what it keeps like a tool result', async () => {
    const artifacts = memoryArtifacts()
    const token = `ghp_${'A1b2C3d4'.repeat(5)}`
    const shown = await artifacts.shorten(call('s1'), `${numbered(50)}\nGH_TOKEN=${token}\n${numbered(50, 52)}`, { maxChars: 100 })
    const whole = await artifacts.read(call('s1'), shown.reference!)
    expect(whole).not.toContain(token)
    expect(whole).toContain('GH_TOKEN=[REDACTED]')
  })

  it('refuses an artifact limit above the session limit, naming both keys', () => {
    expect(() => new Artifacts(() => new MemoryArtifactStorage(), { maxBytes: 10, sessionMaxBytes: 5 })).toThrow(
      'artifacts.maxBytes (10) exceeds artifacts.sessionMaxBytes (5) (@loom/tools config)',
    )
  })
})

describe('ctx.tools.artifacts', () => {
  async function runtime(persistence?: { artifacts: ArtifactStorage }) {
    const root = new Context()
    await root.plugin(SystemPrompt)
    if (persistence) root.provide('sessionPersistence', persistence)
    const fiber = await root.plugin(ToolRuntime, { protect: [], denyRead: [], allowRead: [], artifacts: { maxBytes: 500, sessionMaxBytes: 1000 } })
    return Object.assign(root, { dispose: () => fiber.dispose() })
  }

  it("uses the session store's artifacts when it has them", async () => {
    const storage = new MemoryArtifactStorage()
    const root = await runtime({ artifacts: storage })
    expect(root.tools.artifacts.limits).toEqual({ maxBytes: 500, sessionMaxBytes: 1000 })
    await root.tools.artifacts.keep(call('s1', 'c'), 'kept')
    expect(await storage.get('s1', 'c')).toBe('kept')
    await root.dispose()
  })

  it('keeps them in memory without a session store, until the session is disposed', async () => {
    const root = await runtime()
    await root.tools.artifacts.keep(call('s1', 'c'), 'kept')
    expect(await root.tools.artifacts.read(call('s1'), 'artifact://c')).toBe('kept')
    // The event of @loom/session, which this package does not depend on.
    ;(root.emit as (name: string, session: { id: string }) => void)('session/disposed', { id: 's1' })
    await expect(root.tools.artifacts.read(call('s1'), 'artifact://c')).rejects.toThrow(/not an artifact of this session/)
    await root.dispose()
  })
})
