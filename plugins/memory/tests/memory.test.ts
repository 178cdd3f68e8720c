import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { CLEARED_RUNTIME_CONTEXT } from '@loom/agent-loop'
import { userText } from '@loom/llm'
import { Session } from '@loom/session'
import { CONTEXT_SNAPSHOT_HEADER } from '@loom/system-prompt'
import { createHost, type Host } from '@loom/testkit'
import * as plugin from '../src/index.ts'
import { matchEntries, parseIndex, wordsOf } from '../src/index.ts'

const hosts: Host[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tree(files: Record<string, string | Buffer>): string {
  const base = mkdtempSync(join(tmpdir(), 'loom-memory-'))
  dirs.push(base)
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(base, path)), { recursive: true })
    writeFileSync(join(base, path), content)
  }
  return base
}

async function host(cwd: string) {
  const created = await createHost({ cwd })
  hosts.push(created)
  return created
}

const INTRO =
  "Memory index (.loom/memory/MEMORY.md): notes kept from earlier sessions, one line per record; record paths are relative to .loom/memory. Read a record when its summary bears on the task. Memories can be out of date: the current files and the user's words come first."
const RECORDS_INTRO = 'Memory records relevant to the latest user message (their index line shares a word with it):'
const INDEX = [
  '# Memory',
  '',
  '- [Package manager](records/pnpm.md): the project builds with pnpm, never npm',
  '- [Deploys](records/deploy.md): staging first, then production on Fridays',
  '- [Style](records/style.md): short answers, code first',
].join('\n')
const FILES = {
  '.loom/memory/MEMORY.md': `${INDEX}\n`,
  '.loom/memory/records/pnpm.md': 'Always `pnpm install`; npm breaks the lockfile.\n',
  '.loom/memory/records/deploy.md': 'Deploy with `make deploy ENV=staging`.\n',
  '.loom/memory/records/style.md': 'The user likes terse replies.\n',
}
const record = (file: string, title: string, matched: string, body: string, age = '0d') =>
  `<memory-record file="${file}" title="${title}" matched="${matched}" age="${age}">\n${body}\n</memory-record>`

/** The latest runtime-context snapshot in the history a request carries. */
function snapshotOf(request: { messages: readonly { role: string; content: readonly { type: string; text?: string }[] }[] }): string | undefined {
  for (const message of [...request.messages].reverse()) {
    const text = message.content.map(block => block.text ?? '').join('')
    if (message.role === 'user' && text.startsWith(CONTEXT_SNAPSHOT_HEADER)) return text
  }
  return undefined
}

describe('the memory index', () => {
  test('a session-stable runtime context at order 30; the record context is empty while there is no user message', async () => {
    const root = tree(FILES)
    const h = await host(root)
    const mounted = await h.mount(plugin)
    expect(await mounted.delta()).toEqual({
      sections: [],
      contexts: [
        { name: 'memory:index', order: 30, stability: 'session', literal: true, text: `${INTRO}\n\n${INDEX}`, rendered: `${INTRO}\n\n${INDEX}` },
        { name: 'memory:records', order: 31, stability: 'step', literal: true, text: '', rendered: '' },
      ],
      tools: [expect.objectContaining({ name: 'memory_ignore' })],
      variables: [],
    })
  })

  test('a missing (or empty) index file gives no context at all', async () => {
    const h = await host(tree({ '.loom/memory/records/x.md': 'orphan' }))
    const mounted = await h.mount(plugin)
    expect((await mounted.delta()).contexts.map(c => c.rendered)).toEqual(['', ''])
    h.scriptedModel(['ok'])
    const run = await h.run('hello pnpm')
    expect(snapshotOf(run.requests[0])).toBeUndefined()
  })

  test('a binary or unreadable index is one clear line, never a crash', async () => {
    const h = await host(tree({ '.loom/memory/MEMORY.md': Buffer.from([0x2d, 0x00, 0xff]) }))
    const mounted = await h.mount(plugin)
    expect((await mounted.delta()).contexts.map(c => c.rendered)).toEqual([
      'Memory index (.loom/memory/MEMORY.md): not included; the file is not UTF-8 text (binary content).',
      '',
    ])
    const dir = await host(tree({ '.loom/memory/MEMORY.md/x': 'a directory, not a file' }))
    const other = await dir.mount(plugin)
    expect((await other.delta()).contexts[0].rendered).toBe('Memory index (.loom/memory/MEMORY.md): not included; the file is not a regular file.')
  })

  test('an index over maxIndexBytes keeps whole lines and says what was left out and where the full index is', async () => {
    const lines = Array.from({ length: 10 }, (_, i) => `- [Note ${i}](records/n${i}.md): summary number ${i}`)
    const root = tree({ '.loom/memory/MEMORY.md': lines.join('\n') })
    const h = await host(root)
    const mounted = await h.mount(plugin, { maxIndexBytes: 200 })
    const kept = lines.slice(0, 4).join('\n')
    expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(200)
    expect((await mounted.delta()).contexts[0].rendered).toBe(
      `${INTRO}\n\n${kept}\n\n[Index trimmed to stay within 200 bytes: left out the last 6 lines (${Buffer.byteLength(lines.slice(4).join('\n'))} bytes). The full index is ${join(root, '.loom/memory/MEMORY.md')}.]`,
    )
  })

  test('config `file` moves the index; `{{` in the index and in a record reaches the model as written (both contexts are literal)', async () => {
    const line = '- [CI](ci.md): workflow uses ${{ secrets.TOKEN }} and {{not_a_var}}'
    const body = 'Set `${{ secrets.TOKEN }}`; {{not_a_var}} is a Handlebars slot.'
    const root = tree({ 'notes/MEM.md': line, 'notes/ci.md': body })
    const h = await host(root)
    await h.mount(plugin, { file: 'notes/MEM.md' })
    const index = `Memory index (notes/MEM.md): notes kept from earlier sessions, one line per record; record paths are relative to notes. Read a record when its summary bears on the task. Memories can be out of date: the current files and the user's words come first.\n\n${line}`
    // Assembled for an agent, as the loop does (the kit's delta interpolates every entry, literal or not).
    const agent = h.agent()
    const assembly = await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.contexts.filter(c => c.owner === '@loom/memory').map(({ name, literal, text }) => ({ name, literal, text }))).toEqual([
      { name: 'memory:index', literal: true, text: index },
      { name: 'memory:records', literal: true, text: '' },
    ])
    h.scriptedModel(['ok'])
    const run = await h.run('fix the workflow')
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(snapshotOf(run.requests[0])).toBe([CONTEXT_SNAPSHOT_HEADER, index, RECORDS_INTRO, record('ci.md', 'CI', 'workflow', body)].join('\n\n'))
  })
})

describe('relevant records', () => {
  test('the records whose index line shares a word with the latest user message enter the same step', async () => {
    const root = tree(FILES)
    const h = await host(root)
    await h.mount(plugin)
    h.scriptedModel(['ok'])
    const run = await h.run('Why does npm fail here?')
    expect(snapshotOf(run.requests[0])).toBe(
      [
        CONTEXT_SNAPSHOT_HEADER,
        `${INTRO}\n\n${INDEX}`,
        RECORDS_INTRO,
        record('records/pnpm.md', 'Package manager', 'npm', 'Always `pnpm install`; npm breaks the lockfile.'),
      ].join('\n\n'),
    )
  })

  test('each new user message selects again (the first step of a turn already sees it); with no match the records go away', async () => {
    const root = tree(FILES)
    const h = await host(root)
    await h.mount(plugin)
    h.scriptedModel(['one', 'two', 'three'])
    const run = await h.run('how do we deploy to staging?')
    expect(snapshotOf(run.requests[0])).toContain(record('records/deploy.md', 'Deploys', 'deploy staging', 'Deploy with `make deploy ENV=staging`.'))
    expect(snapshotOf(run.requests[0])).not.toContain('records/pnpm.md"')

    run.agent.followup(userText('keep answers short, and use pnpm'))
    await run.agent.idle()
    const second = h.adapter.requests[1]
    // Two shared words rank before one.
    expect(snapshotOf(second)).toContain(
      `${RECORDS_INTRO}\n\n${record('records/style.md', 'Style', 'short answer', 'The user likes terse replies.')}\n\n${record('records/pnpm.md', 'Package manager', 'pnpm', 'Always `pnpm install`; npm breaks the lockfile.')}`,
    )
    expect(snapshotOf(second)).not.toContain('records/deploy.md"')

    run.agent.followup(userText('thanks!'))
    await run.agent.idle()
    // The records context became empty; the index is unchanged: the snapshot says only what changed.
    expect(snapshotOf(h.adapter.requests[2])).toBe(`${CONTEXT_SNAPSHOT_HEADER}\n\n${INTRO}\n\n${INDEX}`)
  })

  test('without a claimed message the latest user message of the history is used', async () => {
    const root = tree(FILES)
    const h = await host(root)
    h.scriptedModel(['ok'])
    const run = await h.run('remind me about deploy')
    await h.mount(plugin) // mounted after the turn: it never saw the message claimed
    const assembly = await h.ctx.systemPrompt.assemble({ agent: run.agent, scope: run.agent })
    expect(assembly.contexts.find(c => c.name === 'memory:records')?.text).toBe(
      `${RECORDS_INTRO}\n\n${record('records/deploy.md', 'Deploys', 'deploy', 'Deploy with `make deploy ENV=staging`.')}`,
    )
  })

  test('bodies within maxRecordBytes, whole records only; what did not fit or could not be used is listed', async () => {
    const a = 'a'.repeat(3000)
    const b = 'b'.repeat(6000)
    const c = 'c'.repeat(100)
    const root = tree({
      '.loom/memory/MEMORY.md': [
        '- [Build A](records/a.md): build notes',
        '- [Build B](records/b.md): build notes',
        '- [Build C](records/c.md): build notes',
        '- [Build huge](records/huge.md): build notes',
        '- [Build gone](records/gone.md): build notes',
        '- [Build outside](../../secret.md): build notes',
        '- [Build binary](records/bin.md): build notes',
        '- [Build link](https://example.com/build): not a file',
        '- [Other](records/other.md): unrelated',
      ].join('\n'),
      '.loom/memory/records/a.md': a,
      '.loom/memory/records/b.md': b,
      '.loom/memory/records/c.md': c,
      '.loom/memory/records/huge.md': 'h'.repeat(9000),
      '.loom/memory/records/bin.md': Buffer.from([0, 1, 2]),
      '.loom/memory/records/other.md': 'never',
      'secret.md': 'outside the memory directory',
    })
    const h = await host(root)
    await h.mount(plugin)
    h.scriptedModel(['ok'])
    const run = await h.run('the build is broken')
    const snapshot = snapshotOf(run.requests[0])!
    const records = snapshot.slice(snapshot.indexOf(RECORDS_INTRO), snapshot.indexOf('\n\nSome context was left out'))
    expect(records).toBe(
      [
        RECORDS_INTRO,
        record('records/a.md', 'Build A', 'build', a),
        record('records/c.md', 'Build C', 'build', c),
        '[Not included, could not be used: records/gone.md (missing), ../../secret.md (outside the memory directory), records/bin.md (is not UTF-8 text (binary content)).]',
      ].join('\n\n'),
    )
    // What the budget left out is named in the one budget notice, with the rest of the step's omissions.
    expect(snapshot).toContain('- memory: 2 left out over the memory record budget of 8192 bytes: records/b.md, records/huge.md (15,000 characters)')
  })

  test('records that share more words come first', async () => {
    const root = tree({
      '.loom/memory/MEMORY.md': '- [Tests](records/t.md): flaky tests\n- [Login tests](records/l.md): login tests use fixtures',
      '.loom/memory/records/t.md': 'T',
      '.loom/memory/records/l.md': 'L',
    })
    const h = await host(root)
    await h.mount(plugin, { maxRecordBytes: 1 })
    h.scriptedModel(['ok'])
    const run = await h.run('the login tests fail')
    const snapshot = snapshotOf(run.requests[0])!
    expect(snapshot).toContain(record('records/l.md', 'Login tests', 'login test', 'L'))
    expect(snapshot).toContain('- memory: 1 left out over the memory record budget of 1 bytes: records/t.md (1 characters)')
  })
})

describe('matching', () => {
  test('words: lowercase, three characters or more, no function words; CJK runs give two-character pieces', () => {
    expect([...wordsOf('What is THE plan for the Builds? pnpm-lock, class')]).toEqual(['plan', 'build', 'pnpm', 'lock', 'class'])
    expect([...wordsOf('帮我修登录失败')]).toEqual(['帮我', '我修', '修登', '登录', '录失', '失败'])
  })

  test('index lines: `- [title](path): summary`, other lines ignored', () => {
    expect(parseIndex('# Memory\n- [A](records/a.md): first\n* [B](b.md) — second\nplain text\n  - [C](c.md)\r\n')).toEqual([
      { title: 'A', target: 'records/a.md', summary: 'first', line: '- [A](records/a.md): first' },
      { title: 'B', target: 'b.md', summary: 'second', line: '* [B](b.md) — second' },
      { title: 'C', target: 'c.md', summary: '', line: '- [C](c.md)' },
    ])
    const entries = parseIndex('- [登录](records/login.md): 登录失败的排查步骤\n- [Build](records/build.md): build')
    expect(matchEntries(entries, '帮我修登录失败').map(m => m.entry.target)).toEqual(['records/login.md'])
  })
})

test('zero residue after dispose; the contexts are gone', async () => {
  const root = tree(FILES)
  const h = await host(root)
  const mounted = await h.mount(plugin)
  h.scriptedModel(['ok', 'ok'])
  await h.run('pnpm please')
  await mounted.dispose()
  await h.assertZeroResidue(mounted)
  const run = await h.run('pnpm please')
  expect(snapshotOf(run.requests[0])).toBeUndefined()
})

describe('what records assert', () => {
  const NPM = '---\nasserts:\n  package-manager: npm\n---\nThe user installs with npm.'

  test("a record's front matter asserts rules while it is in the step; the newest record wins; a project file saying otherwise is a [context-conflict]", async () => {
    const root = tree({
      '.loom/memory/MEMORY.md': '- [Package manager](records/npm.md): install with npm\n- [Old package manager](records/yarn.md): install with yarn\n',
      '.loom/memory/records/npm.md': `${NPM}\n`,
      '.loom/memory/records/yarn.md': '---\nasserts:\n  package-manager: yarn\n---\nWe used yarn.\n',
    })
    const old = (Date.now() - 12 * 86_400_000) / 1000
    utimesSync(join(root, '.loom/memory/records/yarn.md'), old, old)
    const h = await host(root)
    await h.mount(plugin)
    await h.mount({
      name: 'lockfile',
      inject: ['systemPrompt'],
      apply: ctx =>
        ctx.systemPrompt.context({
          name: 'lockfile',
          order: 20,
          text: 'pnpm',
          trust: 'workspace',
          asserts: { 'package-manager': { value: 'pnpm', from: 'pnpm-lock.yaml' } },
        }),
    })
    h.scriptedModel(['ok', 'ok'])
    const run = await h.run('install the packages')
    const snapshot = snapshotOf(run.requests[0])!
    // The record is shown as written, front matter and all.
    expect(snapshot).toContain(record('records/npm.md', 'Package manager', 'package install', NPM))
    expect(snapshot).toContain(
      '[context-conflict] "package-manager": pnpm-lock.yaml says "pnpm" (workspace; context "lockfile" (plugin "lockfile")); memory record records/npm.md (written today) says "npm" (user-confirmed; context "memory:records" (plugin "@loom/memory")). Follow pnpm-lock.yaml: "pnpm"',
    )
    expect(snapshot).not.toContain('says "yarn"')

    // A message that selects no record asserts nothing: no conflict.
    run.agent.followup(userText('thanks!'))
    await run.agent.idle()
    expect(snapshotOf(h.adapter.requests[1])).not.toContain('[context-conflict]')
  })

  test('a front matter it cannot read is named in one warning, with the record', async () => {
    const root = tree({
      '.loom/memory/MEMORY.md': '- [Package manager](records/npm.md): install with npm\n',
      '.loom/memory/records/npm.md': '---\nasserts: npm\n---\nWe use npm.\n',
    })
    const h = await host(root)
    await h.mount(plugin)
    h.scriptedModel(['ok'])
    await h.run('install the packages')
    expect(h.logs.filter(log => log.type === 'warn').map(log => log.text)).toEqual([
      'memory record records/npm.md: line 2: write each rule of "asserts:" on its own indented line ("  rule: value") (its asserts are read from front matter, see the @loom/memory README)',
    ])
  })
})

describe('age and ignoring memory', () => {
  test('records older than maxAgeDays are left out and named; the others say their age', async () => {
    const root = tree(FILES)
    const old = (Date.now() - 40 * 86_400_000) / 1000
    utimesSync(join(root, '.loom/memory/records/deploy.md'), old, old)
    const h = await host(root)
    await h.mount(plugin, { maxAgeDays: 30 })
    h.scriptedModel(['ok'])
    const run = await h.run('deploy with pnpm')
    const snapshot = snapshotOf(run.requests[0])!
    expect(snapshot).toContain(record('records/pnpm.md', 'Package manager', 'pnpm', 'Always `pnpm install`; npm breaks the lockfile.'))
    expect(snapshot).not.toContain('make deploy')
    expect(snapshot).toContain('- memory: 1 left out older than 30 days (40 days): records/deploy.md (')
  })

  test('after the model calls memory_ignore (the user asked), the rest of the session has no memory', async () => {
    const h = await host(tree(FILES))
    await h.mount(plugin)
    h.scriptedModel([{ toolCalls: [{ name: 'memory_ignore' }] }, 'Working without memory.'])
    // Each step reads only the calls and results appended since the last one, never a copy of the whole log.
    const wholeLog = vi.spyOn(Session.prototype, 'events', 'get')
    const run = await h.run('forget what you know about pnpm')
    expect(wholeLog).toHaveBeenCalledTimes(1) // the test kit's own, for `run.events`
    wholeLog.mockRestore()
    const [first, second] = run.requests
    expect(snapshotOf(first)).toContain('Memory index')
    // Memory was the only runtime context here: the second step clears the snapshot.
    const latest = second.messages.at(-1)!
    expect(latest.content.map(block => (block.type === 'text' ? block.text : '')).join('')).toBe(CLEARED_RUNTIME_CONTEXT)
  })
})
