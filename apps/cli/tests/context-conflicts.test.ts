// Seed 003's conflict, end to end through a conversation: a memory says npm, the
// project (its lockfile and its AGENTS.md) says pnpm, and the user says "try npm".
// The request carries one [context-conflict] line naming every source, which to
// follow, and that the user's word in this conversation outranks them.
import { describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

const FILES = {
  'package.json': JSON.stringify({ name: 'demo', scripts: { test: 'node --test' } }),
  'pnpm-lock.yaml': "lockfileVersion: '9.0'\n",
  'AGENTS.md': '---\nasserts:\n  package-manager: pnpm\n---\n# Rules\n\nUse pnpm.\n',
  '.loom/memory/MEMORY.md': '- [Package manager](records/npm.md): install packages with npm\n',
  '.loom/memory/records/npm.md': '---\nasserts:\n  package-manager: npm\n---\nThe user installs packages with npm.\n',
  'loom.yml': `- insert:\n    - id: memory\n      name: '@loom/memory'\n${scriptedModel('- Noted.')}`,
}

const CONFLICT =
  '[context-conflict] "package-manager": ' +
  'AGENTS.md says "pnpm" (repository; section "instructions:project" (plugin "@loom/agent-instructions")); ' +
  'pnpm-lock.yaml says "pnpm" (workspace; context "runtime:workspace" (plugin "@loom/context-workspace")); ' +
  'memory record records/npm.md (written today) says "npm" (user-confirmed; context "memory:records" (plugin "@loom/memory")). ' +
  'Follow AGENTS.md: "pnpm" (repository, ranked first), unless the user says otherwise in this conversation: ' +
  "the user's word outranks all of these. Say which you follow before you act on it."

/** The text of every user-role message the session logged, in order (the user's own and the runtime-context snapshots). */
function userMessages(home: string): string[] {
  return events(sessionFiles(home)[0])
    .filter(event => event.type === 'user/message')
    .map(event => event.data.content.map((block: { text?: string }) => block.text ?? '').join(''))
}

describe('seed 003: old memory says npm, the project says pnpm, the user says try npm', () => {
  it('each request of the conversation names every source, follows the project, and puts the user above them', async () => {
    const { cwd, home } = project(FILES)
    const first = await loom(['run', '--json', 'which package manager does this project use?'], { cwd, home })
    expect(first.code, first.stderr).toBe(0)
    const id = JSON.parse(first.stdout).sessionId as string
    const resumed = await loom(['sessions', 'resume', id, 'try npm to install the packages'], { cwd, home })
    expect(resumed.code, resumed.stderr).toBe(0)

    const messages = userMessages(home)
    const asked = messages.indexOf('try npm to install the packages')
    expect(asked).toBeGreaterThan(0)
    // The snapshot of the second turn's request comes right after the user's words, and carries the line.
    const snapshot = messages[asked + 1]
    expect(snapshot).toContain('Package manager: pnpm (pnpm-lock.yaml)')
    expect(snapshot).toContain('<memory-record file="records/npm.md"')
    expect(snapshot.split('\n').filter(line => line.startsWith('[context-conflict]'))).toEqual([CONFLICT])
    // The first turn's request had it too: the conflict is the files', not the user's message's.
    expect(messages.slice(0, asked).join('\n')).toContain(CONFLICT)
  })

  it('without an AGENTS.md rule the lockfile is followed: the files as they are now outrank an old memory', async () => {
    const { cwd, home } = project({ ...FILES, 'AGENTS.md': '# Rules\n' })
    const run = await loom(['run', 'try npm to install the packages'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const lines = userMessages(home)
      .join('\n')
      .split('\n')
      .filter(line => line.startsWith('[context-conflict]'))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /^\[context-conflict\] "package-manager": pnpm-lock\.yaml says "pnpm" .* Follow pnpm-lock\.yaml: "pnpm" \(workspace, ranked first\), unless the user says otherwise/,
    )
  })
})
