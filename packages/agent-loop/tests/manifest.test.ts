import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { buildManifest, diffManifests, requestManifest, RUNTIME_CONTEXT_OWNER } from '@loom/agent-loop'
import { createAssistantMessage, createToolResultMessage, createUserMessage, userText } from '@loom/llm'
import { renderContextSnapshot, type PromptAssembly } from '@loom/system-prompt'

const sha = (text: string) => createHash('sha256').update(text).digest('hex')

function assembly(): PromptAssembly {
  return {
    sections: [
      { name: 'harness:identity', text: 'You are Loom.', order: -100, stability: 'static', owner: '@loom/system-prompt' },
      { name: 'deployment:persona', text: 'Work in {{cwd}}.', order: 0, stability: 'static', owner: '@loom/system-prompt' },
      { name: 'notes', text: 'Keep {{cwd}} literal.', order: 200, stability: 'session', owner: 'notes-plugin', literal: true },
    ],
    contexts: [{ name: 'runtime:time', text: 'Current time: 12:00', order: 10, stability: 'step', owner: '@loom/context-time' }],
    tools: [{ name: 'read', description: 'Read a file.', parameters: { type: 'object' }, owner: '@loom/tool-fs' }],
    variables: { cwd: '/srv/app' },
    variableInfo: { cwd: { owner: '@loom/agent-loop', stability: 'session' } },
  }
}

describe('buildManifest', () => {
  it('has one row per section, context and tool with owner, size, tokens and digest', () => {
    const manifest = buildManifest({ assembly: assembly() })
    expect(manifest.rows.map(row => [row.kind, row.name, row.owner, row.order, row.stability])).toEqual([
      ['section', 'harness:identity', '@loom/system-prompt', -100, 'static'],
      ['section', 'deployment:persona', '@loom/system-prompt', 0, 'static'],
      ['section', 'notes', 'notes-plugin', 200, 'session'],
      ['context', 'runtime:time', '@loom/context-time', 10, 'step'],
      ['tool', 'read', '@loom/tool-fs', 0, null],
    ])
    const persona = manifest.rows[1]
    expect(persona).toMatchObject({ chars: 'Work in /srv/app.'.length, tokens: 5, sha256: sha('Work in /srv/app.'), counted: true })
    expect(manifest.rows[2]).toMatchObject({ chars: 'Keep {{cwd}} literal.'.length, sha256: sha('Keep {{cwd}} literal.') })
    const json = JSON.stringify({ name: 'read', description: 'Read a file.', parameters: { type: 'object' } })
    expect(manifest.rows[4]).toMatchObject({ chars: json.length, tokens: Math.ceil(json.length / 4), sha256: sha(json) })
  })

  it('carries trust, category, age and source hash: declared ones, else the defaults by owner and kind', () => {
    const declared = {
      ...assembly(),
      attribution: {
        sections: {
          'harness:identity': { trust: 'product' as const, category: 'instructions' as const },
          notes: { trust: 'repository' as const, category: 'files' as const, source: { path: 'NOTES.md', sha256: 'abc', modifiedAt: 1_000 } },
        },
        contexts: { 'runtime:time': { trust: 'product' as const, category: 'runtime' as const } },
      },
    }
    const messages = [
      createUserMessage({ content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }),
      createToolResultMessage({ callId: 'c1', content: [{ type: 'text', text: '42' }] }),
    ]
    const rows = buildManifest({ assembly: declared, messages, now: 61_000 }).rows
    expect(rows.map(row => [row.name, row.trust, row.category, row.age, row.sourceHash])).toEqual([
      ['harness:identity', 'product', 'instructions', null, null],
      // Not in the attribution (as a listener's section): the defaults.
      ['deployment:persona', 'product', 'instructions', null, null],
      ['notes', 'repository', 'files', 60_000, 'abc'],
      ['runtime:time', 'product', 'runtime', null, null],
      ['read', 'product', 'tools', null, null],
      ['user#0', null, null, null, null],
      ['tool-result#1', 'tool-output', 'tool-results', null, null],
    ])
  })

  it('totals by owner, most tokens first', () => {
    const manifest = buildManifest({ assembly: assembly() })
    const sum = manifest.rows.reduce((total, row) => total + row.tokens, 0)
    expect(manifest.totals.tokens).toBe(sum)
    expect(manifest.totals.byOwner.reduce((total, row) => total + row.tokens, 0)).toBe(sum)
    const system = manifest.totals.byOwner.find(total => total.owner === '@loom/system-prompt')!
    expect(system).toMatchObject({ rows: 2, chars: 'You are Loom.'.length + 'Work in /srv/app.'.length })
    const tokens = manifest.totals.byOwner.map(total => total.tokens)
    expect(tokens).toEqual([...tokens].sort((a, b) => b - a))
  })

  it('names and attributes history messages by their source', () => {
    const call = createAssistantMessage({
      content: [
        { type: 'text', text: 'abcd' },
        { type: 'tool-call', id: 'call-1', name: 'read', arguments: '{}' },
      ],
      source: { provider: 'deepseek', model: 'deepseek-chat' },
    })
    const result = createToolResultMessage({ callId: 'call-1', content: [{ type: 'text', text: 'file body' }] })
    const note = createUserMessage({ content: [{ type: 'text', text: 'n' }], source: { kind: 'plugin', plugin: 'memory' } })
    const messages = [userText('abcd'), call, result, note]
    const rows = buildManifest({ assembly: assembly(), messages }).rows.filter(row => row.kind === 'message')
    expect(rows.map(row => [row.name, row.owner, row.order])).toEqual([
      ['user#0', 'user', 0],
      ['assistant#1', 'model:deepseek', 1],
      ['tool-result#2', 'tool:call-1', 2],
      ['user#3', 'memory', 3],
    ])
    expect(rows[0]).toMatchObject({ chars: 4, tokens: 9, sha256: sha(JSON.stringify(messages[0])) })
    expect(rows[1]).toMatchObject({ chars: 4 + 4 + 2, tokens: 1 + 4 + (1 + 1 + 4) + 4 })
    expect(rows[2]).toMatchObject({ chars: 9, tokens: 3 + 4 + 4 + 4 })
  })

  it('does not count contexts twice when the history already carries their snapshot', () => {
    const a = assembly()
    const snapshot = createUserMessage({
      content: [{ type: 'text', text: renderContextSnapshot(a) }],
      source: { kind: 'plugin', plugin: RUNTIME_CONTEXT_OWNER },
    })
    const carried = buildManifest({ assembly: a, messages: [snapshot] })
    expect(carried.rows.find(row => row.kind === 'context')!.counted).toBe(false)
    expect(carried.rows.at(-1)).toMatchObject({ name: 'runtime-context#0', owner: RUNTIME_CONTEXT_OWNER, counted: true })
    expect(carried.totals.tokens).toBe(carried.rows.filter(row => row.counted).reduce((total, row) => total + row.tokens, 0))

    const stale = createUserMessage({ content: [{ type: 'text', text: 'old snapshot' }], source: { kind: 'plugin', plugin: RUNTIME_CONTEXT_OWNER } })
    expect(buildManifest({ assembly: a, messages: [stale] }).rows.find(row => row.kind === 'context')!.counted).toBe(true)
  })

  it('fails like rendering on an unknown variable', () => {
    const a = assembly()
    a.sections[1].text = 'Work in {{nowhere}}.'
    expect(() => buildManifest({ assembly: a })).toThrow(/unknown prompt variable "\{\{nowhere\}\}"/)
  })
})

describe('requestManifest and diffManifests', () => {
  const sources = {
    sections: [
      { name: 'harness:identity', owner: '@loom/system-prompt', sha256: 'h1', order: -100, stability: 'static' as const, chars: 13, tokens: 4 },
      {
        name: 'notes',
        owner: 'notes-plugin',
        sha256: 'n1',
        order: 200,
        chars: 20,
        tokens: 5,
        trust: 'repository',
        category: 'files',
        sourceHash: 's1',
        modifiedAt: 1_000,
      },
      // Logged before sizes were recorded: the row has none.
      { name: 'old', owner: 'old-plugin', sha256: 'o1' },
    ],
    tools: [{ name: 'read', owner: '@loom/tool-fs', sha256: 't1' }],
    plugins: [],
  }
  const header = { config: { provider: 'p', model: 'm' }, system: 'x', tools: [{ name: 'read', description: 'Read a file.', parameters: { type: 'object' } }] }

  it('rebuilds a logged request: the sections its header recorded, its tools with owners, its history', () => {
    const messages = [createUserMessage({ content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } })]
    const manifest = requestManifest({ header, sources, messages, at: 11_000 })
    expect(
      manifest.rows.map(row => [row.kind, row.name, row.owner, row.order, row.stability, row.trust, row.category, row.age, row.sourceHash, row.tokens]),
    ).toEqual([
      ['section', 'harness:identity', '@loom/system-prompt', -100, 'static', 'product', 'instructions', null, null, 4],
      ['section', 'notes', 'notes-plugin', 200, null, 'repository', 'files', 10_000, 's1', 5],
      ['section', 'old', 'old-plugin', 2, null, 'deployment', 'instructions', null, null, 0],
      ['tool', 'read', '@loom/tool-fs', 0, null, 'product', 'tools', null, null, expect.any(Number)],
      ['message', 'user#0', 'user', 0, null, null, null, null, null, expect.any(Number)],
    ])
  })

  it('tells rows added, removed, moved and changed, and which changed only in hash', () => {
    const before = requestManifest({ header, sources, messages: [], at: 0 })
    const after = requestManifest({
      header: { ...header, tools: [] },
      sources: {
        ...sources,
        sections: [
          { ...sources.sections[1], sha256: 'n2' },
          { ...sources.sections[0], sha256: 'h2', chars: 14 },
          { name: 'new', owner: 'new-plugin', sha256: 'w1', chars: 3, tokens: 1 },
        ],
      },
      messages: [],
      at: 0,
    })
    const diff = diffManifests(before, after)
    expect(diff.added.map(row => row.name)).toEqual(['new'])
    expect(diff.removed.map(row => row.name)).toEqual(['old', 'read'])
    expect(diff.moved.map(({ row, from, to }) => [row.name, from, to])).toEqual([
      ['notes', 1, 0],
      ['harness:identity', 0, 1],
    ])
    expect(diff.changed.map(({ after, hashOnly }) => [after.name, hashOnly])).toEqual([
      ['notes', true],
      ['harness:identity', false],
    ])
  })
})
