import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { renderPrompt } from '@loom/system-prompt'
import { createHost, type Host } from '@loom/testkit'
import * as plugin from '../src/index.ts'
import { HEADER } from '../src/index.ts'

const hosts: Host[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory with these files (content `null` makes a directory). */
function tree(files: Record<string, string | Buffer | null>): string {
  const base = mkdtempSync(join(tmpdir(), 'loom-instructions-'))
  dirs.push(base)
  for (const [path, content] of Object.entries(files)) {
    const full = join(base, path)
    if (content === null) {
      mkdirSync(full, { recursive: true })
      continue
    }
    mkdirSync(dirname(full), { recursive: true })
    writeFileSync(full, content)
  }
  return base
}

async function host(cwd: string) {
  const created = await createHost({ cwd })
  hosts.push(created)
  return created
}

const block = (label: string, body: string) => `<instructions file="${label}">\n${body}\n</instructions>`
const section = (...blocks: string[]) => [HEADER, ...blocks].join('\n\n')

async function instructions(mounted: { delta(options?: { cwd?: string }): Promise<{ sections: { name: string; rendered: string }[] }> }, cwd?: string) {
  const delta = await mounted.delta(cwd === undefined ? {} : { cwd })
  expect(delta.sections.map(s => s.name)).toEqual(['instructions:project'])
  return delta.sections[0].rendered
}

describe('the prompt delta', () => {
  test('one AGENTS.md: a session-stable section at order 320, no variables', async () => {
    const root = tree({ '.git': null, 'AGENTS.md': '# Acme\n\nUse pnpm, never npm.\n' })
    const h = await host(root)
    const mounted = await h.mount(plugin)
    expect(await mounted.delta()).toEqual({
      sections: [
        {
          name: 'instructions:project',
          order: 320,
          stability: 'session',
          text: section(block('AGENTS.md', '# Acme\n\nUse pnpm, never npm.')),
          rendered: section(block('AGENTS.md', '# Acme\n\nUse pnpm, never npm.')),
          literal: true,
        },
      ],
      contexts: [],
      tools: [],
      variables: [],
    })
    expect(HEADER).toBe(
      'Project instructions: the AGENTS.md and CLAUDE.md files from the project root down to the working directory, outermost first. A deeper file is more specific and wins where they disagree.',
    )
  })

  test('no instruction file: the section is empty, so the system prompt has nothing of it', async () => {
    const root = tree({ '.git': null, 'README.md': '# not instructions' })
    const h = await host(root)
    const mounted = await h.mount(plugin)
    expect((await mounted.delta()).sections).toEqual([
      { name: 'instructions:project', order: 320, stability: 'session', literal: true, text: '', rendered: '' },
    ])
    h.scriptedModel(['ok'])
    const run = await h.run('hi')
    expect(run.requests[0].system).toBe('You are an AI agent powered by Loom.')
  })

  test('`{{` in a file reaches the model exactly as written: the section is literal, never interpolated', async () => {
    const text = 'CI uses ${{ secrets.TOKEN }} and {{not_a_var}} and {{cwd}} and {{{raw}}} and {{'
    const root = tree({ '.git': null, 'AGENTS.md': text })
    const h = await host(root)
    await h.mount(plugin)
    // Assembled for an agent, as the loop does (the kit's delta interpolates every entry, literal or not).
    const agent = h.agent()
    const assembly = await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    const entry = assembly.sections.find(s => s.name === 'instructions:project')
    expect(entry).toMatchObject({ literal: true, stability: 'session', text: section(block('AGENTS.md', text)) })
    expect(Object.keys(assembly.variableInfo).filter(name => assembly.variableInfo[name].owner === '@loom/agent-instructions')).toEqual([])
    expect(renderPrompt(assembly)).toBe(`You are an AI agent powered by Loom.\n\n${section(block('AGENTS.md', text))}`)
    h.scriptedModel(['ok'])
    const run = await h.run('hi')
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(run.requests[0].system).toBe(`You are an AI agent powered by Loom.\n\n${section(block('AGENTS.md', text))}`)
  })
})

describe('which files, in which order', () => {
  test('AGENTS.md then CLAUDE.md of every directory from the git root down to the cwd, outermost first, labelled relative to the root', async () => {
    const base = tree({
      'AGENTS.md': 'above the repository: never read',
      'repo/.git': null,
      'repo/AGENTS.md': 'root agents',
      'repo/CLAUDE.md': 'root claude',
      'repo/pkg/AGENTS.md': 'pkg agents',
      'repo/pkg/app/CLAUDE.md': 'app claude',
      'repo/pkg/app/src/README.md': 'no instructions here',
      'repo/other/AGENTS.md': 'a sibling: never read',
    })
    const h = await host(join(base, 'repo'))
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted, join(base, 'repo/pkg/app/src'))).toBe(
      section(
        block('AGENTS.md', 'root agents'),
        block('CLAUDE.md', 'root claude'),
        block('pkg/AGENTS.md', 'pkg agents'),
        block('pkg/app/CLAUDE.md', 'app claude'),
      ),
    )
    // Evaluated per assembly from the agent's cwd: another cwd, another chain.
    expect(await instructions(mounted, join(base, 'repo/other'))).toBe(
      section(block('AGENTS.md', 'root agents'), block('CLAUDE.md', 'root claude'), block('other/AGENTS.md', 'a sibling: never read')),
    )
  })

  test('a `.git` file (a worktree or submodule) marks the root too', async () => {
    const base = tree({ 'AGENTS.md': 'outer', 'wt/.git': 'gitdir: elsewhere', 'wt/AGENTS.md': 'worktree', 'wt/a/AGENTS.md': 'inner' })
    const h = await host(base)
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted, join(base, 'wt/a'))).toBe(section(block('AGENTS.md', 'worktree'), block('a/AGENTS.md', 'inner')))
  })

  test('without a git root, only the cwd is read', async () => {
    const base = tree({ 'AGENTS.md': 'parent', 'x/AGENTS.md': 'cwd' })
    const h = await host(base)
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted, join(base, 'x'))).toBe(section(block('AGENTS.md', 'cwd')))
  })

  test('config `root` replaces the git root; a cwd outside it reads the root only', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': 'git root', 'a/AGENTS.md': 'a', 'a/b/AGENTS.md': 'b', 'c/AGENTS.md': 'c' })
    const h = await host(base)
    const mounted = await h.mount(plugin, { root: join(base, 'a') })
    expect(await instructions(mounted, join(base, 'a/b'))).toBe(section(block('AGENTS.md', 'a'), block('b/AGENTS.md', 'b')))
    expect(await instructions(mounted, join(base, 'c'))).toBe(section(block('AGENTS.md', 'a')))
  })

  test('a CLAUDE.md identical to the AGENTS.md (a copy or a link) is said once', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': 'same rules' })
    symlinkSync('AGENTS.md', join(base, 'CLAUDE.md'))
    const h = await host(base)
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', 'same rules')))
  })

  test('config `files` chooses the names and their order', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': 'agents', 'CLAUDE.md': 'claude', 'AGENTS.local.md': 'local' })
    const h = await host(base)
    const mounted = await h.mount(plugin, { files: ['CLAUDE.md', 'AGENTS.local.md'] })
    expect(await instructions(mounted)).toBe(section(block('CLAUDE.md', 'claude'), block('AGENTS.local.md', 'local')))
  })
})

describe('the byte budget keeps rule sections', () => {
  const setup = `## Setup\n\n${'Install the toolchain and run the bootstrap script. '.repeat(40).trim()}`
  const architecture = `## Architecture\n\n${'The service is split into ingest, ledger and export modules. '.repeat(40).trim()}\n\n\`\`\`md\n## Rules inside a fence are not a heading\n\`\`\``
  const parts = {
    first: '# Acme\n\nAcme is a billing service.',
    setup,
    rules: '## Rules\n\n- Use pnpm, never npm.',
    architecture,
    never: '### Never touch generated code\n\nFiles under gen/ are generated.',
    security: '## Security',
    secrets: '### Secrets\n\nNever print tokens.',
    glossary: '## Glossary\n\nLedger: the book of record.',
  }
  const file = Object.values(parts).join('\n\n') + '\n'
  const bytes = (...texts: string[]) => texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0)

  test('within budget the file is whole', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': file })
    const h = await host(base)
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', file.trimEnd())))
  })

  test('over budget: the first section and every rule section stay, the others go whole, with a notice naming them and the full path', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': file })
    const h = await host(base)
    const mounted = await h.mount(plugin, { maxBytes: 2000 })
    const notice = `[Trimmed to stay within the 2000-byte budget for project instructions: left out 3 of 8 sections (${bytes(setup, architecture, parts.glossary)} bytes): "Setup", "Architecture", "Glossary". The full file is ${join(base, 'AGENTS.md')}: read it when those sections matter.]`
    const text = await instructions(mounted)
    expect(text).toBe(section(block('AGENTS.md', [parts.first, parts.rules, parts.never, parts.security, parts.secrets, notice].join('\n\n'))))
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(2000)
  })

  test('keepHeadings is configurable (case-insensitive whole words)', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': file })
    const h = await host(base)
    const mounted = await h.mount(plugin, { maxBytes: 2000, keepHeadings: ['glossary'] })
    const left = [setup, parts.rules, architecture, parts.never, parts.security, parts.secrets]
    const notice = `[Trimmed to stay within the 2000-byte budget for project instructions: left out 6 of 8 sections (${bytes(...left)} bytes): "Setup", "Rules", "Architecture", "Never touch generated code", "Security", "Secrets". The full file is ${join(base, 'AGENTS.md')}: read it when those sections matter.]`
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', [parts.first, parts.glossary, notice].join('\n\n'))))
  })

  test('an invalid keepHeadings pattern fails the plugin, naming the key', async () => {
    const h = await host(tree({}))
    await expect(h.mount(plugin, { keepHeadings: ['rules', '(unclosed'] })).rejects.toThrow(/keepHeadings\[1\] "\(unclosed" is not a valid regular expression/)
  })

  test('across files the outermost is trimmed first; the more specific file stays whole', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': file, 'pkg/AGENTS.md': '# Package\n\n## Notes\n\nKeep this.' })
    const h = await host(base)
    const mounted = await h.mount(plugin, { maxBytes: 2200 })
    const notice = `[Trimmed to stay within the 2200-byte budget for project instructions: left out 3 of 8 sections (${bytes(setup, architecture, parts.glossary)} bytes): "Setup", "Architecture", "Glossary". The full file is ${join(base, 'AGENTS.md')}: read it when those sections matter.]`
    expect(await instructions(mounted, join(base, 'pkg'))).toBe(
      section(
        block('AGENTS.md', [parts.first, parts.rules, parts.never, parts.security, parts.secrets, notice].join('\n\n')),
        block('pkg/AGENTS.md', '# Package\n\n## Notes\n\nKeep this.'),
      ),
    )
  })

  test('when the rule sections alone are over, they go last first; a file that cannot fit at all is left out with its path', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': file })
    const h = await host(base)
    const path = join(base, 'AGENTS.md')
    const trimmed = (budget: number, left: string[], titles: string) =>
      `[Trimmed to stay within the ${budget}-byte budget for project instructions: left out ${left.length} of 8 sections (${bytes(...left)} bytes): ${titles}. The full file is ${path}: read it when those sections matter.]`
    // The size of the text once the non-rule sections are gone; one byte less forces rules out.
    const rulesOnly = (budget: number) =>
      section(
        block(
          'AGENTS.md',
          [
            parts.first,
            parts.rules,
            parts.never,
            parts.security,
            parts.secrets,
            trimmed(budget, [setup, architecture, parts.glossary], '"Setup", "Architecture", "Glossary"'),
          ].join('\n\n'),
        ),
      )
    const budget = Buffer.byteLength(rulesOnly(100)) - 1 // a three-digit budget, like 100
    const tight = await h.mount(plugin, { maxBytes: budget })
    const text = await instructions(tight)
    expect(text).toBe(
      section(
        block(
          'AGENTS.md',
          [
            parts.first,
            parts.rules,
            parts.never,
            parts.security,
            trimmed(budget, [setup, architecture, parts.secrets, parts.glossary], '"Setup", "Architecture", "Secrets", "Glossary"'),
          ].join('\n\n'),
        ),
      ),
    )
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(budget)
    await tight.dispose()

    const tiny = await h.mount(plugin, { maxBytes: 100 })
    expect(await instructions(tiny)).toBe(
      section(
        block(
          'AGENTS.md',
          `[Left out entirely (${bytes(...Object.values(parts))} bytes) to stay within the 100-byte budget for project instructions. The full file is ${path}: read it before relying on this project's conventions.]`,
        ),
      ),
    )
  })
})

describe('reading files', () => {
  test('files are cached by path and mtime: an unchanged mtime is not re-read, a change is picked up at the next assembly', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': 'version one' })
    const path = join(base, 'AGENTS.md')
    const atime = new Date(2030, 0, 1)
    const mtime = new Date(2030, 0, 1)
    utimesSync(path, atime, mtime)
    const h = await host(base)
    const mounted = await h.mount(plugin)
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', 'version one')))

    // Same size, same mtime: the cached text is used (proof that it is not re-read).
    writeFileSync(path, 'version two')
    utimesSync(path, atime, mtime)
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', 'version one')))

    // A new mtime: read again.
    utimesSync(path, atime, new Date(mtime.getTime() + 5000))
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', 'version two')))

    // Another size is a change too; a removed file disappears.
    writeFileSync(path, 'version three, longer')
    utimesSync(path, atime, new Date(mtime.getTime() + 5000))
    expect(await instructions(mounted)).toBe(section(block('AGENTS.md', 'version three, longer')))
    rmSync(path)
    expect(await instructions(mounted)).toBe('')
  })

  test('binary, oversized and unreadable files never crash: a clear line says what and where', async () => {
    const base = tree({
      '.git': null,
      'AGENTS.md': Buffer.from([0x23, 0x20, 0x00, 0x01, 0x02]),
      'CLAUDE.md': Buffer.from([0xff, 0xfe, 0x41]),
      'a/AGENTS.md': 'x'.repeat(5000),
      'a/b/AGENTS.md': null, // a directory named AGENTS.md: not a file, omitted
    })
    symlinkSync('CLAUDE.md', join(base, 'a/b/CLAUDE.md')) // a link to itself: ELOOP
    const h = await host(base)
    const mounted = await h.mount(plugin, { maxFileBytes: 4096 })
    expect(await instructions(mounted, join(base, 'a/b'))).toBe(
      section(
        block('AGENTS.md', `[Not included: this file is not UTF-8 text (binary content). The full file is ${join(base, 'AGENTS.md')}.]`),
        block('CLAUDE.md', `[Not included: this file is not UTF-8 text (binary content). The full file is ${join(base, 'CLAUDE.md')}.]`),
        block(
          'a/AGENTS.md',
          `[Not included: this file is 5000 bytes, more than the 4096-byte limit for instruction files. The full file is ${join(base, 'a/AGENTS.md')}.]`,
        ),
        block('a/b/CLAUDE.md', `[Not included: this file could not be read (ELOOP). The full file is ${join(base, 'a/b/CLAUDE.md')}.]`),
      ),
    )
  })

  test('a huge file is trimmed by structure, not cut', async () => {
    const big = `# Big\n\nIntro.\n\n## Rules\n\nAlways run the tests.\n\n${Array.from({ length: 200 }, (_, i) => `## Topic ${i}\n\n${'words '.repeat(100)}`).join('\n\n')}`
    const base = tree({ '.git': null, 'AGENTS.md': big })
    const h = await host(base)
    const mounted = await h.mount(plugin)
    const text = await instructions(mounted)
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(32768)
    expect(text).toContain(
      '# Big\n\nIntro.\n\n## Rules\n\nAlways run the tests.\n\n[Trimmed to stay within the 32768-byte budget for project instructions: left out 200 of 202 sections',
    )
    expect(text).toContain('"Topic 0", "Topic 1"')
    expect(text).toContain('"Topic 11" and 188 more.')
  })
})

describe('lifecycle', () => {
  test('a file changed during a turn changes the system prompt from the next step on (the prefix cache breaks there)', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': 'Rule one.' })
    const h = await host(base)
    await h.mount(plugin)
    h.scriptedModel([
      () => {
        writeFileSync(join(base, 'AGENTS.md'), 'Rule one. Rule two.')
        return { toolCalls: [{ name: 'missing_tool', arguments: {} }] } // any tool call: the model is owed another step
      },
      'done',
    ])
    const run = await h.run('go')
    expect(run.requests.map(request => request.system)).toEqual([
      `You are an AI agent powered by Loom.\n\n${section(block('AGENTS.md', 'Rule one.'))}`,
      `You are an AI agent powered by Loom.\n\n${section(block('AGENTS.md', 'Rule one. Rule two.'))}`,
    ])
    expect(run.events.filter(event => event.type === 'request/header').map(event => (event.data as { reason: string }).reason)).toEqual(['initial', 'change'])
  })

  test('an agent run sees the section in its system prompt; nothing remains after dispose', async () => {
    const base = tree({ '.git': null, 'AGENTS.md': '# Rules\n\nBe brief.' })
    const h = await host(base)
    const mounted = await h.mount(plugin)
    h.scriptedModel(['ok', 'ok'])
    const run = await h.run('hi')
    expect(run.requests[0].system).toBe(`You are an AI agent powered by Loom.\n\n${section(block('AGENTS.md', '# Rules\n\nBe brief.'))}`)
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    const after = await h.run('hi')
    expect(after.requests[0].system).toBe('You are an AI agent powered by Loom.')
  })
})

describe('provenance', () => {
  test('the section is the repository’s instructions, with the files read, one hash over them and the newest change', async () => {
    const cwd = tree({ '.git': null, 'AGENTS.md': 'Use tabs.\n', 'pkg/AGENTS.md': 'Run make.\n' })
    utimesSync(join(cwd, 'AGENTS.md'), 1_000, 1_000)
    utimesSync(join(cwd, 'pkg/AGENTS.md'), 2_000, 2_000)
    const h = await host(join(cwd, 'pkg'))
    await h.mount(plugin)
    const agent = h.agent(join(cwd, 'pkg'))
    const assembly = await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    const hash = createHash('sha256').update('AGENTS.md\0Use tabs.\n\0pkg/AGENTS.md\0Run make.\n\0').digest('hex')
    expect(assembly.attribution?.sections['instructions:project']).toEqual({
      trust: 'repository',
      category: 'instructions',
      source: { path: 'AGENTS.md, pkg/AGENTS.md', sha256: hash, modifiedAt: 2_000_000 },
    })
  })
})

describe('asserts', () => {
  test('the front matter of an AGENTS.md asserts rules, a deeper file winning; a memory saying otherwise gets a [context-conflict] line that follows the file', async () => {
    const cwd = tree({
      '.git': null,
      'AGENTS.md': '---\nasserts:\n  package-manager: pnpm\n  indentation: tabs\n---\n# Acme\n',
      'pkg/AGENTS.md': '---\nasserts:\n  indentation: spaces\n---\n# The package\n',
    })
    const h = await host(join(cwd, 'pkg'))
    await h.mount(plugin)
    await h.mount({
      name: 'old-memory',
      inject: ['systemPrompt'],
      apply: ctx =>
        ctx.systemPrompt.context({
          name: 'memory',
          order: 31,
          text: 'npm, tabs',
          trust: 'user-confirmed',
          asserts: { 'package-manager': 'npm', indentation: 'tabs' },
        }),
    })
    const agent = h.agent(join(cwd, 'pkg'))
    const assembly = await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.conflicts?.map(conflict => [conflict.rule, conflict.follow?.value, conflict.follow?.from])).toEqual([
      ['indentation', 'spaces', 'pkg/AGENTS.md'],
      ['package-manager', 'pnpm', 'AGENTS.md'],
    ])
    expect(assembly.contexts.find(context => context.name === 'context:conflicts')?.text.split('\n')[1]).toBe(
      '[context-conflict] "package-manager": AGENTS.md says "pnpm" (repository; section "instructions:project" (plugin "@loom/agent-instructions")); context "memory" (plugin "old-memory") says "npm" (user-confirmed). Follow AGENTS.md: "pnpm" (repository, ranked first), unless the user says otherwise in this conversation: the user\'s word outranks all of these. Say which you follow before you act on it.',
    )
    // The file reaches the model as written, front matter and all.
    expect(assembly.sections.find(s => s.name === 'instructions:project')?.text).toContain(
      '<instructions file="AGENTS.md">\n---\nasserts:\n  package-manager: pnpm',
    )
  })

  test('a front matter it cannot read is named in one warning, with the file', async () => {
    const cwd = tree({ '.git': null, 'AGENTS.md': '---\nasserts:\n  pnpm\n---\n# Acme\n' })
    const h = await host(cwd)
    await h.mount(plugin)
    const agent = h.agent()
    await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(h.logs.filter(log => log.type === 'warn').map(log => log.text)).toEqual([
      'AGENTS.md: line 3: "pnpm" is not "rule: value" (its asserts are read from front matter, see the @loom/agent-instructions README)',
    ])
  })
})
