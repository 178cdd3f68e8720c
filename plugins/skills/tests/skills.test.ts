import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { renderPrompt } from '@loom/system-prompt'
import { createHost, type Host } from '@loom/testkit'
import * as plugin from '../src/index.ts'
import { CATALOG_INTRO } from '../src/index.ts'

const hosts: Host[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tree(files: Record<string, string | Buffer>): string {
  const base = mkdtempSync(join(tmpdir(), 'loom-skills-'))
  dirs.push(base)
  write(base, files)
  return base
}

function write(base: string, files: Record<string, string | Buffer>) {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(base, path)), { recursive: true })
    writeFileSync(join(base, path), content)
  }
}

async function host(cwd: string) {
  const created = await createHost({ cwd })
  hosts.push(created)
  return created
}

const skill = (name: string, description: string, body: string) => `---\nname: ${name}\ndescription: ${description}\n---\n\n${body}\n`
const catalog = (...lines: string[]) => `${CATALOG_INTRO}\n\n${lines.join('\n')}`
const warnings = (h: Host) => h.logs.filter(log => log.type === 'warn' && log.name === 'skills').map(log => log.text)

const REVIEW = skill('review-diff', 'Review uncommitted changes before a commit.', '# Review\n\n1. Run `git diff`.\n2. Check each hunk.')
const RELEASE = skill('release', 'Cut a release (bump, tag, publish).', 'Run `pnpm release`.')

describe('the catalog', () => {
  test('one session-stable section at order 120 lists name and description; the tool load_skill is registered', async () => {
    const root = tree({ '.loom/skills/review/SKILL.md': REVIEW, '.loom/skills/release/SKILL.md': RELEASE, '.loom/skills/notes.txt': 'not a skill' })
    const h = await host(root)
    const mounted = await h.mount(plugin)
    const text = catalog('- release: Cut a release (bump, tag, publish).', '- review-diff: Review uncommitted changes before a commit.')
    expect(await mounted.delta()).toEqual({
      sections: [{ name: 'skills:catalog', order: 310, stability: 'session', literal: true, text, rendered: text }],
      contexts: [],
      tools: [
        {
          name: 'load_skill',
          description:
            "Loads the full instructions of a skill from the skills catalog in the system prompt. Call it when a task matches a skill's description, then follow the instructions.",
          parameters: {
            type: 'object',
            properties: { name: { type: 'string', description: 'The skill name, exactly as listed in the catalog.' } },
            required: ['name'],
            additionalProperties: false,
          },
        },
      ],
      variables: [],
    })
    expect(CATALOG_INTRO).toBe(
      "Skills: instructions for specific tasks, loaded on demand. Only each skill's name and description are listed here. When a task matches a skill, call `load_skill` with its name before you start, then follow the instructions it returns.",
    )
    expect(text).not.toContain('git diff') // bodies stay out of the system prompt
  })

  test('no skills: an empty section (nothing in the system prompt)', async () => {
    const h = await host(tree({}))
    const mounted = await h.mount(plugin)
    expect((await mounted.delta()).sections).toEqual([{ name: 'skills:catalog', order: 310, stability: 'session', literal: true, text: '', rendered: '' }])
  })

  test('a multi-line YAML description is one line; `{{` in it reaches the model as written (the section is literal)', async () => {
    const root = tree({
      '.loom/skills/x/SKILL.md': '---\nname: ci\ndescription: >\n  Edit workflows that use\n  ${{ secrets.TOKEN }} and {{not_a_var}}.\n---\nBody.\n',
    })
    const h = await host(root)
    await h.mount(plugin)
    const text = catalog('- ci: Edit workflows that use ${{ secrets.TOKEN }} and {{not_a_var}}.')
    // Assembled for an agent, as the loop does (the kit's delta interpolates every entry, literal or not).
    const agent = h.agent()
    const assembly = await h.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.sections.find(s => s.name === 'skills:catalog')).toMatchObject({ literal: true, text })
    expect(renderPrompt(assembly)).toBe(`You are an AI agent powered by Loom.\n\n${text}`)
    h.scriptedModel(['ok'])
    const run = await h.run('hi')
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(run.requests[0].system).toBe(`You are an AI agent powered by Loom.\n\n${text}`)
  })

  test('skills directories: relative to the workspace root or absolute; on a name clash the earlier wins, with a warning', async () => {
    const shared = tree({ 'release/SKILL.md': skill('release', 'Shared release steps.', 'shared'), 'lint/SKILL.md': skill('lint', 'Run the linters.', 'lint') })
    const root = tree({ 'skills/release/SKILL.md': RELEASE })
    const h = await host(root)
    const mounted = await h.mount(plugin, { skillsDir: ['skills', shared] })
    expect((await mounted.delta()).sections[0].rendered).toBe(catalog('- lint: Run the linters.', '- release: Cut a release (bump, tag, publish).'))
    expect(warnings(h)).toEqual([
      `skill file ${join(shared, 'release/SKILL.md')} skipped: it has the skill name "release" already used by ${join(root, 'skills/release/SKILL.md')}`,
    ])
  })

  test('the catalog follows the files: a new or changed SKILL.md shows at the next assembly', async () => {
    const root = tree({ '.loom/skills/review/SKILL.md': REVIEW })
    const h = await host(root)
    const mounted = await h.mount(plugin)
    expect((await mounted.delta()).sections[0].rendered).toBe(catalog('- review-diff: Review uncommitted changes before a commit.'))
    write(root, { '.loom/skills/release/SKILL.md': RELEASE })
    const path = join(root, '.loom/skills/review/SKILL.md')
    writeFileSync(path, skill('review-diff', 'Review staged changes.', 'new body'))
    utimesSync(path, new Date(), new Date(Date.now() + 10_000))
    expect((await mounted.delta()).sections[0].rendered).toBe(
      catalog('- release: Cut a release (bump, tag, publish).', '- review-diff: Review staged changes.'),
    )
  })
})

describe('malformed skills are skipped with a warning naming the file', () => {
  test('missing front matter, invalid YAML, missing fields, binary and oversized files', async () => {
    const root = tree({
      '.loom/skills/good/SKILL.md': REVIEW,
      '.loom/skills/plain/SKILL.md': '# No front matter\n',
      '.loom/skills/yaml/SKILL.md': '---\nname: [unclosed\ndescription: x\n---\nbody\n',
      '.loom/skills/colon/SKILL.md': '---\nname: colon\ndescription: Deploy: staging first\n---\nbody\n',
      '.loom/skills/nodesc/SKILL.md': '---\nname: nodesc\n---\nbody\n',
      '.loom/skills/list/SKILL.md': '---\n- name\n- description\n---\nbody\n',
      '.loom/skills/number/SKILL.md': '---\nname: 42\ndescription: numbers are not names\n---\nbody\n',
      '.loom/skills/binary/SKILL.md': Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0x00, 0xff]),
      '.loom/skills/huge/SKILL.md': skill('huge', 'Too big.', 'x'.repeat(3000)),
    })
    const h = await host(root)
    const mounted = await h.mount(plugin, { maxSkillBytes: 2048 })
    expect((await mounted.delta()).sections[0].rendered).toBe(catalog('- review-diff: Review uncommitted changes before a commit.'))
    const file = (name: string) => join(root, '.loom/skills', name, 'SKILL.md')
    const got = warnings(h)
    expect(got).toEqual([
      `skill file ${file('binary')} skipped: it is not UTF-8 text (binary content)`,
      `skill file ${file('colon')} skipped: it has front matter that is not valid YAML: Nested mappings are not allowed in compact mappings at line 3 of the file, column 14 (quote a value that contains ": ")`,
      `skill file ${file('huge')} skipped: it is ${Buffer.byteLength(skill('huge', 'Too big.', 'x'.repeat(3000)))} bytes, more than the 2048-byte limit for skill files`,
      `skill file ${file('list')} skipped: it has front matter that is not a mapping of \`name\` and \`description\``,
      `skill file ${file('nodesc')} skipped: it has no \`description\` (a non-empty string) in its front matter`,
      `skill file ${file('number')} skipped: it has no \`name\` (a non-empty string) in its front matter`,
      `skill file ${file('plain')} skipped: it has no front matter (a leading "---" block with \`name\` and \`description\`)`,
      expect.stringMatching(
        new RegExp(`^skill file ${file('yaml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} skipped: it has front matter that is not valid YAML: .+`),
      ),
    ])
    // Warned once per version of a file, not at every assembly.
    await mounted.delta()
    expect(warnings(h)).toHaveLength(got.length)
    // A skipped skill cannot be loaded either.
    const result = await h.callTool('load_skill', { name: 'nodesc' }, { cwd: root })
    expect(result.isError && result.error.message).toBe('unknown skill "nodesc"; available skills: review-diff')
  })

  test('an alias bomb in a front matter is a skipped skill, not a process out of memory', async () => {
    const levels = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']
    const repeated = (i: number) =>
      Array(9)
        .fill(i ? `*${levels[i - 1]}` : 'lol')
        .join(', ')
    const bomb = levels.map((level, i) => `${level}: &${level} [${repeated(i)}]`).join('\n')
    const root = tree({ '.loom/skills/bomb/SKILL.md': `---\nname: bomb\ndescription: Nine levels of aliases.\n${bomb}\n---\nbody\n` })
    const h = await host(root)
    const mounted = await h.mount(plugin)
    await mounted.delta()
    expect(warnings(h)).toEqual([
      `skill file ${join(root, '.loom/skills/bomb/SKILL.md')} skipped: it has front matter that is not valid YAML: Excessive alias count indicates a resource exhaustion attack`,
    ])
  })
})

describe('load_skill', () => {
  test('returns the body without its front matter, with where it lives', async () => {
    const root = tree({ '.loom/skills/review/SKILL.md': REVIEW, '.loom/skills/release/SKILL.md': RELEASE })
    const h = await host(root)
    await h.mount(plugin)
    const result = await h.callTool('load_skill', { name: 'review-diff' }, { cwd: root })
    expect(result).toMatchObject({
      isError: false,
      content: [
        {
          type: 'text',
          text: 'Skill "review-diff" (.loom/skills/review/SKILL.md). Paths it mentions are relative to .loom/skills/review.\n\n# Review\n\n1. Run `git diff`.\n2. Check each hunk.',
        },
      ],
      meta: { skill: 'review-diff', file: join(root, '.loom/skills/review/SKILL.md') },
    })
  })

  test('an unknown name is an error result listing the available skills', async () => {
    const root = tree({ '.loom/skills/review/SKILL.md': REVIEW, '.loom/skills/release/SKILL.md': RELEASE })
    const h = await host(root)
    await h.mount(plugin)
    const result = await h.callTool('load_skill', { name: 'deploy' }, { cwd: root })
    expect(result.isError).toBe(true)
    expect(result.content).toEqual([{ type: 'text', text: 'Error: unknown skill "deploy"; available skills: release, review-diff' }])
  })

  test('with no skills at all the error says where it looked; missing arguments are a schema error', async () => {
    const root = tree({})
    const h = await host(root)
    await h.mount(plugin)
    const none = await h.callTool('load_skill', { name: 'x' }, { cwd: root })
    expect(none.isError && none.error.message).toBe('unknown skill "x"; no skills are available (looked in .loom/skills)')
    const bad = await h.callTool('load_skill', {}, { cwd: root })
    expect(bad.isError && bad.error.message).toBe('invalid arguments for tool "load_skill": must have required property \'name\'')
  })

  test('in a run: the catalog is in the system prompt, the body enters the history only as the tool result', async () => {
    const root = tree({ '.loom/skills/review/SKILL.md': REVIEW })
    const h = await host(root)
    await h.mount(plugin)
    h.scriptedModel([{ toolCalls: [{ name: 'load_skill', arguments: { name: 'review-diff' } }] }, 'Reviewed.'])
    const run = await h.run('review my changes')
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(run.requests).toHaveLength(2)
    const [first, second] = run.requests
    expect(first.system).toBe(`You are an AI agent powered by Loom.\n\n${catalog('- review-diff: Review uncommitted changes before a commit.')}`)
    expect(second.system).toBe(first.system)
    expect(JSON.stringify(first.messages)).not.toContain('Check each hunk')
    const last = second.messages[second.messages.length - 1]
    expect(last.content).toMatchObject([{ type: 'tool-result', content: [{ type: 'text', text: expect.stringContaining('2. Check each hunk.') }] }])
  })
})

test('zero residue after dispose', async () => {
  const root = tree({ '.loom/skills/review/SKILL.md': REVIEW })
  const h = await host(root)
  const mounted = await h.mount(plugin)
  await h.callTool('load_skill', { name: 'review-diff' }, { cwd: root })
  await mounted.dispose()
  await h.assertZeroResidue(mounted)
  const after = await h.callTool('load_skill', { name: 'review-diff' }, { cwd: root })
  expect(after.isError && after.error.info?.code).toBe('UNKNOWN_TOOL')
})
