// The real `loom` command, a subprocess per command: the other test files call
// main() in-process; these go through src/main.ts with real pipes, the exit
// code of the process, and its own environment.
import { describe, expect, it } from 'vitest'
import { DEMO_LABEL } from '../src/demo-model.ts'
import { ESC, loomProcess, project } from './helpers.ts'

describe('loom as a process', () => {
  const at = project({ 'README.md': '# Smoke sample\n\nA folder the real command lists and reads.\n' })

  it('run streams a turn and exits 0; sessions list, show, verify, stats and compact read it back', async () => {
    const run = await loomProcess(['run', 'what is in this directory?'], at)
    expect(run.code, run.stderr).toBe(0)
    for (const piece of ['→ bash: ls -la', '→ read: README.md', DEMO_LABEL]) expect(run.stdout).toContain(piece)
    expect(run.stdout + run.stderr).not.toContain(ESC)
    const id = /^session (\S+) · scripted\/loom-demo · /m.exec(run.stderr)?.[1]
    expect(id, run.stderr).toBeDefined()

    const [list, show, verify, stats] = await Promise.all(
      [['list'], ['show', id!], ['verify', id!], ['stats', id!]].map(args => loomProcess(['sessions', ...args], at)),
    )
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s.*\\s1\\s+completed\\s`, 'm'))
    expect(show.stdout).toContain('turn 1 ended: completed')
    expect(verify.code).toBe(0)
    expect(verify.stdout).toContain(`session ${id}: clean`)
    expect(stats.code).toBe(0)
    expect(stats.stdout).toContain('prefix reuse: mean 100.0%, min 100.0%')
    const compact = await loomProcess(['sessions', 'compact', id!], at)
    expect(compact.code, compact.stderr).toBe(0)
    expect(compact.stdout).toMatch(new RegExp(`^compacted session ${id}: \\d+ messages summarized`))
  })

  it('prompt and config print, and a usage error exits 2', async () => {
    const [prompt, config, usage] = await Promise.all([loomProcess(['prompt'], at), loomProcess(['config'], at), loomProcess(['sessions', 'frobnicate'], at)])
    expect(prompt.code).toBe(0)
    expect(prompt.stdout).toContain('── route: scripted/loom-demo')
    expect(prompt.stdout).toMatch(/── manifest \(\d+ rows/)
    expect(config.code).toBe(0)
    expect(config.stdout).toMatch(/^# The deployment as it boots/)
    expect(usage.code).toBe(2)
    expect(usage.stderr).toContain('unknown sessions command "frobnicate"')
  })
})
