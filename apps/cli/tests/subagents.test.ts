// @loom/subagents in a deployment: `loom run` delegates through the `task` tool,
// the child's session is stored beside its parent's, and `loom sessions` links them.
import { describe, expect, it } from 'vitest'
import { DELEGATING_MODEL, loom, project } from './helpers.ts'

describe('loom run with @loom/subagents', () => {
  it('stores the child session with its parent; sessions show and list link the two', async () => {
    const { cwd, home } = project({ 'loom.yml': DELEGATING_MODEL, 'README.md': '# Hello reader\n' })
    const at = { cwd, home }
    const run = await loom(['run', '--json', 'Delegate the README summary.'], at)
    expect(run.code, run.stderr).toBe(0)
    const parent = JSON.parse(run.stdout).sessionId as string

    const list = JSON.parse((await loom(['sessions', 'list', '--json'], at)).stdout) as { id: string; parentSession?: string; lastStatus: string }[]
    expect(list).toHaveLength(2)
    const child = list.find(session => session.id !== parent)!
    expect(child).toMatchObject({ parentSession: parent, lastStatus: 'completed' })
    expect(list.find(session => session.id === parent)).not.toHaveProperty('parentSession')
    const listed = (await loom(['sessions', 'list'], at)).stdout
    expect(listed).toContain(`(subagent of ${parent})`)

    const shownParent = await loom(['sessions', 'show', parent], at)
    expect(shownParent.code, shownParent.stderr).toBe(0)
    for (const piece of [
      '→ task: summarize the readme',
      '  ✓ task',
      `    ↳ subagent session ${child.id}`,
      '    │ The README greets the reader.',
      'assistant: The subagent reports that the README greets the reader.',
    ])
      expect(shownParent.stdout, piece).toContain(piece)
    expect(shownParent.stdout).not.toContain('  parent   ')

    const shownChild = await loom(['sessions', 'show', child.id], at)
    expect(shownChild.code, shownChild.stderr).toBe(0)
    for (const piece of [
      `session ${child.id}`,
      `  cwd      ${cwd}`,
      `  parent   ${parent} (subagent, depth 1)`,
      'user: What does README.md say?',
      'assistant: The README greets the reader.',
      'turn 1 ended: completed',
    ])
      expect(shownChild.stdout, piece).toContain(piece)
    // The child's tools are the parent's without `task`.
    expect(shownChild.stdout).toMatch(/\[request header, initial\] scripted\/scripted-1 · system \d+ chars · \d+ tools: /)
    expect(shownChild.stdout).not.toMatch(/tools: [^\n]*\btask\b/)
    expect(shownParent.stdout).toMatch(/tools: [^\n]*\btask\b/)
  })
})
