import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { buildManifest, diffManifests, type ManifestRow, requestManifest, RUNTIME_CONTEXT_OWNER } from '@loom/agent-loop'
import { createAssistantMessage, createToolResultMessage, createUserMessage, userText } from '@loom/llm'
import { reconstructRequests } from '@loom/session'
import { renderContextSnapshot, type PromptAssembly } from '@loom/system-prompt'
import { harness, textResponse } from './harness.ts'
import { turn } from './request-support.ts'

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
      {
        name: 'harness:identity',
        owner: '@loom/system-prompt',
        sha256: 'h1',
        order: -100,
        stability: 'static' as const,
        chars: 13,
        tokens: 4,
        trust: 'product',
        category: 'instructions',
      },
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
      // Its trust and category were not recorded: unknown, not guessed from the owner.
      ['section', 'old', 'old-plugin', 2, null, 'unknown', 'unknown', null, null, 0],
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
    // Two rows swapped: one of them moved relative to the other.
    expect(diff.moved.map(({ row, from, to }) => [row.name, from, to])).toEqual([['harness:identity', 0, 1]])
    expect(diff.changed.map(({ after, hashOnly }) => [after.name, hashOnly])).toEqual([
      ['notes', true],
      ['harness:identity', false],
    ])
  })
})

describe('diff by identity', () => {
  const rows = (...names: string[]) => ({ ...sourcesOf(names), plugins: [] })
  const sourcesOf = (names: string[]) => ({ sections: names.map(name => ({ name, owner: 'p', sha256: name, chars: 1, tokens: 1 })), tools: [] })
  const manifest = (...names: string[]) => requestManifest({ header: undefined, sources: rows(...names), messages: [], at: 0 })

  it('a row that only shifted because another came or went has not moved', () => {
    const diff = diffManifests(manifest('a', 'b', 'c'), manifest('x', 'a', 'b', 'c'))
    expect(diff.added.map(row => row.name)).toEqual(['x'])
    expect(diff.moved).toEqual([])
    expect(diffManifests(manifest('a', 'b', 'c'), manifest('b', 'c')).moved).toEqual([])
  })

  it('moved is the fewest rows whose order relative to the others changed', () => {
    const diff = diffManifests(manifest('a', 'b', 'c', 'd'), manifest('b', 'c', 'd', 'a'))
    expect(diff.moved.map(({ row, from, to }) => [row.name, from, to])).toEqual([['a', 0, 3]])
  })
})

describe("a stored request's manifest, as the deployment's", () => {
  const DAY = 86_400_000

  async function session() {
    const h = await harness({ script: [textResponse('ok')] })
    const sent = Date.now()
    h.ctx.systemPrompt.section({ name: 'house:rules', order: 90, stability: 'session', text: 'Use tabs.', trust: 'repository' })
    h.ctx.systemPrompt.section({ name: 'house:empty', order: 91, text: '' })
    h.ctx.systemPrompt.context({
      name: 'memory:records',
      order: 20,
      text: 'The project uses npm.',
      trust: 'user-confirmed',
      category: 'memory',
      source: { path: 'memory.md', sha256: 'm'.repeat(64), modifiedAt: sent - 12 * DAY },
    })
    h.ctx.systemPrompt.context({ name: 'runtime:git', order: 30, text: 'Branch: main', trust: 'workspace' })
    h.ctx.systemPrompt.context({ name: 'runtime:nothing', order: 40, text: '' })
    await turn(h.agent, 'hi')
    const [request] = reconstructRequests(h.events())
    const stored = requestManifest({ header: request.header, sources: request.sources, messages: request.messages, at: request.time })
    return { h, request, stored }
  }

  it('has one row per runtime context with its owner, trust, category, age and source hash', async () => {
    const { request, stored } = await session()
    const contexts = stored.rows.filter(row => row.kind === 'context')
    expect(contexts.map(row => [row.name, row.owner, row.order, row.stability, row.trust, row.category, row.sourceHash, row.counted])).toEqual([
      ['memory:records', 'test-host', 20, 'step', 'user-confirmed', 'memory', 'm'.repeat(64), false],
      ['runtime:git', 'test-host', 30, 'step', 'workspace', 'runtime', null, false],
    ])
    expect(contexts[0].age).toBeGreaterThanOrEqual(12 * DAY)
    expect(contexts[0]).toMatchObject({ chars: 'The project uses npm.'.length, sha256: sha('The project uses npm.') })
    // The snapshot message counts them, as trusted as the least trusted context it carries.
    const snapshot = stored.rows.find(row => row.name.startsWith('runtime-context#'))!
    expect(snapshot).toMatchObject({ owner: RUNTIME_CONTEXT_OWNER, trust: 'workspace', category: 'runtime', counted: true })
    expect(request.messages).toHaveLength(2)
  })

  it('compared with the same deployment, nothing differs: empty sections and contexts are on neither side', async () => {
    const { h, request, stored } = await session()
    const deployment = buildManifest({ assembly: await h.ctx.systemPrompt.assemble({ agent: h.agent, scope: h.agent }), now: request.time })
    expect(deployment.rows.map(row => row.name)).not.toContain('house:empty')
    expect(deployment.rows.map(row => row.name)).not.toContain('runtime:nothing')
    const diff = diffManifests(stored, deployment)
    expect(diff).toMatchObject({ added: [], removed: [], moved: [], changed: [] })
    // Row for row the same, but for the history the stored request carries.
    const shown = (row: ManifestRow) => [
      row.kind,
      row.name,
      row.owner,
      row.order,
      row.stability,
      row.trust,
      row.category,
      row.sourceHash,
      row.chars,
      row.sha256,
    ]
    expect(stored.rows.filter(row => row.kind !== 'message').map(shown)).toEqual(deployment.rows.map(shown))
  })

  it('a log written before contexts were recorded still shows them, with what it does not know as unknown', () => {
    const old = createUserMessage({
      content: [{ type: 'text', text: 'Current runtime context.\n\nThe project uses npm.' }],
      source: { kind: 'plugin', plugin: RUNTIME_CONTEXT_OWNER, form: 'snapshot', sections: [{ name: 'memory:records', text: 'The project uses npm.' }] },
    })
    const rows = requestManifest({ header: undefined, sources: undefined, messages: [old], at: 0 }).rows
    expect(rows.map(row => [row.kind, row.name, row.owner, row.trust, row.category, row.age])).toEqual([
      ['context', 'memory:records', 'unknown', 'unknown', 'unknown', null],
      ['message', 'runtime-context#0', RUNTIME_CONTEXT_OWNER, 'unknown', 'runtime', null],
    ])
  })
})
