import { describe, expect, test } from 'vitest'
import { compileRules, firstMatch, globToRegExp, type CallFacts, type Rule } from '../src/rules.ts'

/** The index (1-based) of the deciding rule, or `default`. */
function decide(rules: Rule[], call: CallFacts): number | 'default' {
  const match = firstMatch(compileRules(rules), call)
  return match ? match.index + 1 : 'default'
}

const bash = (command: string): CallFacts => ({ tool: 'bash', command })

describe('bash command prefixes', () => {
  const allow: Rule[] = [{ tool: 'bash', action: 'allow', commands: ['git status', 'npm test'] }]

  test('a prefix matches whole words, whatever the spacing', () => {
    expect(decide(allow, bash('git status'))).toBe(1)
    expect(decide(allow, bash('git status --short'))).toBe(1)
    expect(decide(allow, bash('  npm   test -- --watch=false'))).toBe(1)
    expect(decide(allow, bash('git statuses'))).toBe('default')
    expect(decide(allow, bash('git'))).toBe('default')
    expect(decide(allow, bash('npx npm test'))).toBe('default')
  })

  test('an allow rule does not match a command line that chains, substitutes or redirects', () => {
    for (const command of [
      'git status; rm -rf .',
      'git status && rm x',
      'git status | sh',
      'git status $(rm x)',
      'git status `rm x`',
      'git status > f',
      'git status\nrm x',
    ]) {
      expect(decide(allow, bash(command)), command).toBe('default')
    }
  })

  test('an ask or deny rule matches any part of a command line', () => {
    const deny: Rule[] = [{ tool: 'bash', action: 'deny', commands: ['rm'] }]
    expect(decide(deny, bash('ls && rm -rf .'))).toBe(1)
    expect(decide(deny, bash('echo $(rm x)'))).toBe(1)
    expect(decide(deny, bash('ls | rm'))).toBe(1)
    expect(decide(deny, bash('ls -rm'))).toBe('default')
    expect(decide([{ tool: 'bash', action: 'ask', commands: ['git push'] }], bash('git add . ; git push --force'))).toBe(1)
  })

  test('a rule with commands never matches a call without a command', () => {
    expect(decide(allow, { tool: 'bash' })).toBe('default')
  })
})

describe('path globs', () => {
  test('* stays in one directory, ** crosses them, ? is one character, the rest is literal', () => {
    expect(globToRegExp('*.md').test('README.md')).toBe(true)
    expect(globToRegExp('*.md').test('docs/a.md')).toBe(false)
    expect(globToRegExp('src/**').test('src/a/b.ts')).toBe(true)
    expect(globToRegExp('src/**').test('srcx/a.ts')).toBe(false)
    expect(globToRegExp('**/*.ts').test('a.ts')).toBe(true)
    expect(globToRegExp('**/*.ts').test('x/y/a.ts')).toBe(true)
    expect(globToRegExp('**/*.ts').test('x/y/a.tsx')).toBe(false)
    expect(globToRegExp('src/**/test.ts').test('src/test.ts')).toBe(true)
    expect(globToRegExp('a?.txt').test('ab.txt')).toBe(true)
    expect(globToRegExp('a?.txt').test('a/.txt')).toBe(false)
    expect(globToRegExp('a.b').test('axb')).toBe(false)
    expect(globToRegExp('./docs/*').test('docs/x')).toBe(true)
  })

  test('a rule with paths matches the workspace-relative path, never a call without one', () => {
    const rules: Rule[] = [{ tool: 'write', action: 'allow', paths: ['src/**', 'docs/*.md'] }]
    expect(decide(rules, { tool: 'write', path: 'src/lib/a.ts' })).toBe(1)
    expect(decide(rules, { tool: 'write', path: 'docs/guide.md' })).toBe(1)
    expect(decide(rules, { tool: 'write', path: 'package.json' })).toBe('default')
    expect(decide(rules, { tool: 'write' })).toBe('default')
  })
})

describe('rule order and tools', () => {
  test('the first matching rule wins', () => {
    const rules: Rule[] = [
      { tool: 'bash', action: 'allow', commands: ['git status'] },
      { tool: 'bash', action: 'ask', commands: ['git'] },
      { tool: '*', action: 'deny' },
    ]
    expect(decide(rules, bash('git status'))).toBe(1)
    expect(decide(rules, bash('git push'))).toBe(2)
    expect(decide(rules, bash('ls'))).toBe(3)
    expect(decide(rules, { tool: 'read', path: 'a' })).toBe(3)
  })

  test('empty pattern lists are no patterns (the config schema fills absent lists with [])', () => {
    expect(decide([{ tool: 'bash', action: 'allow', commands: [], paths: [] }], { tool: 'bash' })).toBe(1)
  })

  test('a rule names one tool or *; no rule is the default', () => {
    expect(decide([{ tool: 'read', action: 'allow' }], { tool: 'read' })).toBe(1)
    expect(decide([{ tool: 'read', action: 'allow' }], { tool: 'write' })).toBe('default')
    expect(decide([], { tool: 'read' })).toBe('default')
  })

  test('a mistaken rule is an error naming it', () => {
    expect(() =>
      compileRules([
        { tool: 'read', action: 'allow' },
        { tool: 'bash', action: 'allow', commands: ['  '] },
      ]),
    ).toThrow('rule 2 (tool "bash"): the command prefix "  " is blank')
    expect(() => compileRules([{ tool: 'write', action: 'allow', paths: ['/etc/*'] }])).toThrow('the path glob "/etc/*" is absolute')
    expect(() => compileRules([{ tool: 'write', action: 'allow', paths: ['../x/**'] }])).toThrow('the path glob "../x/**" leaves the workspace')
  })
})

describe('effects', () => {
  const call = (tool: string, effects?: CallFacts['effects']): CallFacts => ({ tool, ...(effects && { effects }) })

  test('an allow rule covers a call only when it lists every effect the call declares', () => {
    const rules: Rule[] = [{ effects: ['read', 'network'], action: 'allow' }]
    expect(decide(rules, call('grep', ['read']))).toBe(1)
    expect(decide(rules, call('web_fetch', ['network']))).toBe(1)
    expect(decide(rules, call('fetch_and_save', ['network', 'write']))).toBe('default')
  })

  test('an ask or deny rule catches a call with any of its effects; a tool that declares nothing matches no effect rule', () => {
    const rules: Rule[] = [
      { effects: ['outside'], action: 'ask' },
      { effects: ['write', 'execute'], action: 'deny' },
    ]
    expect(decide(rules, call('mcp__fs__write_file', ['outside']))).toBe(1)
    expect(decide(rules, call('deploy', ['execute', 'outside']))).toBe(1)
    expect(decide(rules, call('edit', ['write']))).toBe(2)
    expect(decide(rules, call('legacy'))).toBe('default')
    expect(decide([{ effects: ['read'], action: 'allow' }], call('legacy'))).toBe('default')
  })

  test('tool and effects together must both match; a rule without tool is any tool', () => {
    const rules: Rule[] = [{ tool: 'bash', effects: ['outside'], action: 'ask' }, { action: 'deny' }]
    expect(decide(rules, call('bash', ['execute', 'outside']))).toBe(1)
    expect(decide(rules, call('bash', ['execute']))).toBe(2)
    expect(decide(rules, call('other', ['outside']))).toBe(2)
  })
})
