// Conflicts and expiry: rules asserted with different values are named to the
// model with the one to follow; an entry past its expiresAt is left out, with a warning.
import { describe, expect, it } from 'vitest'
import { CONFLICT_NOTICE, frontMatterAsserts } from '@loom/system-prompt'
import { root } from './helpers.ts'

describe('[context-conflict]', () => {
  it('different values from sources of different trust: both named, the more trusted one to follow', async () => {
    const h = await root()
    const repo = await h.plugin('repo-rules')
    const ops = await h.plugin('ops-rules')
    repo.systemPrompt.section({ name: 'repo:style', order: 90, text: 'Indent with tabs.', trust: 'repository', asserts: { indentation: 'tabs' } })
    ops.systemPrompt.section({ name: 'ops:style', order: 80, text: 'Indent with spaces.', asserts: () => ({ indentation: 'spaces', deploys: 'fridays' }) })
    repo.systemPrompt.context({ name: 'repo:deploys', order: 40, text: 'Deploys on Fridays.', trust: 'repository', asserts: { deploys: 'fridays' } })
    const assembly = await h.asm()
    expect(assembly.conflicts?.map(conflict => [conflict.rule, conflict.follow?.value])).toEqual([['indentation', 'spaces']])
    expect(assembly.contexts.find(context => context.name === CONFLICT_NOTICE)?.text).toBe(
      '[context-conflict] "indentation": section "ops:style" (plugin "ops-rules") says "spaces" (deployment); section "repo:style" (plugin "repo-rules") says "tabs" (repository). Follow section "ops:style" (plugin "ops-rules"): "spaces" (deployment, ranked first); a request of the user does not change a deployment rule.',
    )
  })

  it("seed 003: the lockfile outranks an old memory, each named by where it was read, and the user's word outranks both", async () => {
    const h = await root()
    const workspace = await h.plugin('workspace')
    const memory = await h.plugin('memory')
    workspace.systemPrompt.context({
      name: 'workspace',
      order: 20,
      text: 'Package manager: pnpm',
      trust: 'workspace',
      asserts: { 'package-manager': { value: 'pnpm', from: 'pnpm-lock.yaml' } },
    })
    memory.systemPrompt.context({
      name: 'memory',
      order: 31,
      text: 'We use npm.',
      trust: 'user-confirmed',
      asserts: () => ({ 'package-manager': { value: 'npm', from: 'memory record records/npm.md (12 days old)' } }),
    })
    const assembly = await h.asm()
    expect(assembly.conflicts?.map(conflict => [conflict.rule, conflict.follow?.from])).toEqual([['package-manager', 'pnpm-lock.yaml']])
    expect(assembly.contexts.find(context => context.name === CONFLICT_NOTICE)?.text).toBe(
      '[context-conflict] "package-manager": pnpm-lock.yaml says "pnpm" (workspace; context "workspace" (plugin "workspace")); memory record records/npm.md (12 days old) says "npm" (user-confirmed; context "memory" (plugin "memory")). Follow pnpm-lock.yaml: "pnpm" (workspace, ranked first), unless the user says otherwise in this conversation: the user\'s word outranks all of these. Say which you follow before you act on it.',
    )
  })

  it('equally trusted sources that disagree: the model is told to ask; agreement is no conflict', async () => {
    const h = await root()
    const a = await h.plugin('a')
    const b = await h.plugin('b')
    a.systemPrompt.section({ name: 'a:tests', order: 90, text: 'Run vitest.', asserts: { tests: 'vitest' } })
    b.systemPrompt.section({ name: 'b:tests', order: 91, text: 'Run jest.', asserts: { tests: 'jest' } })
    const notice = (await h.asm()).contexts.find(context => context.name === CONFLICT_NOTICE)!.text
    expect(notice).toMatch(/"tests": .* They are equally trusted: do what the user says in this conversation, else ask the user which holds\.$/)

    const calm = await root()
    ;(await calm.plugin('c')).systemPrompt.section({ name: 'c', order: 1, text: 'x', asserts: { tests: 'vitest' } })
    ;(await calm.plugin('d')).systemPrompt.section({ name: 'd', order: 2, text: 'y', asserts: { tests: 'vitest' } })
    const agreed = await calm.asm()
    expect(agreed.conflicts).toBeUndefined()
    expect(agreed.contexts.map(context => context.name)).not.toContain(CONFLICT_NOTICE)
  })
})

describe('expiresAt', () => {
  it('an entry past it is left out with one warning; one before it stays', async () => {
    const h = await root()
    const plugin = await h.plugin('notes')
    plugin.systemPrompt.section({ name: 'notes:freeze', order: 10, text: 'Code freeze this week.', expiresAt: Date.now() - 1000 })
    plugin.systemPrompt.context({ name: 'notes:soon', order: 10, text: 'Release tomorrow.', expiresAt: Date.now() + 60_000 })
    const first = await h.asm()
    await h.asm()
    expect(first.sections.map(section => section.name)).not.toContain('notes:freeze')
    expect(first.contexts.map(context => context.name)).toContain('notes:soon')
    expect(h.warnings.filter(text => text.includes('"notes:freeze"'))).toEqual([
      expect.stringMatching(/^prompt section "notes:freeze" \(plugin "notes"\) expired at \d{4}-\d\d-\d\dT.*: it is left out$/),
    ])
  })
})

describe('frontMatterAsserts', () => {
  it('reads the rules under `asserts:` of the front matter, and nothing without one', () => {
    const text = "---\ntitle: Tooling\nasserts:\n  # what the project runs\n  package-manager: pnpm\n  Test-Command: 'pnpm test'\nowner: ops\n---\n# Rules\n"
    expect(frontMatterAsserts(text)).toEqual({ asserts: { 'package-manager': 'pnpm', 'test-command': 'pnpm test' }, problems: [] })
    expect(frontMatterAsserts('# Rules\n\nasserts:\n  package-manager: npm\n')).toEqual({ asserts: {}, problems: [] })
  })

  it('names the lines it cannot read', () => {
    expect(frontMatterAsserts('---\nasserts: { package-manager: pnpm }\n---\n').problems).toEqual([
      'line 2: write each rule of "asserts:" on its own indented line ("  rule: value")',
    ])
    expect(frontMatterAsserts('---\nasserts:\n  pnpm\n  package-manager:\n---\n').problems).toEqual([
      'line 3: "pnpm" is not "rule: value"',
      'line 4: "package-manager:" is not "rule: value"',
    ])
    expect(frontMatterAsserts('---\nasserts:\n  package-manager: pnpm\n').problems).toEqual(['line 1: the front matter has no closing "---" line'])
  })
})
