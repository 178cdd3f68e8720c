// Order per seed 003: the static product guidance comes first, then what is
// stable for a session (MCP servers, the skills catalogue, AGENTS.md), so an edit
// of the project's instructions leaves the longest prefix cached.
import { describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

/** The first step rewrites AGENTS.md: the project instructions change in the middle of the session. */
const RULES = '# Rules\n\nUse pnpm, never npm.\n'
const NEW_RULES = '# Rules\n\nUse pnpm, never npm. Run `pnpm test` before you say you are done.\n'
const EDITS_RULES = scriptedModel(`
- text: Adding the test rule.
  toolCalls:
    - { id: c1, name: write, arguments: { path: AGENTS.md, content: ${JSON.stringify(NEW_RULES)} } }
- Done.
`)

interface Row {
  kind: string
  name: string
  stability: string | null
  chars: number
}

describe('the order of the system text', () => {
  it('the default bundle puts every static section before the session-stable ones', async () => {
    const { cwd, home } = project({
      'AGENTS.md': RULES,
      '.loom/skills/review/SKILL.md': '---\nname: review\ndescription: Review a diff.\n---\nRead the diff.\n',
    })
    const run = await loom(['prompt', '--json'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const sections = (JSON.parse(run.stdout).manifest.rows as Row[]).filter(row => row.kind === 'section' && row.chars > 0)
    const stabilities = sections.map(row => row.stability)
    expect(stabilities.lastIndexOf('static')).toBeLessThan(stabilities.indexOf('session'))
    expect(sections.filter(row => row.stability === 'session').map(row => row.name)).toEqual(['skills:catalog', 'instructions:project'])
  })

  it('an AGENTS.md edit mid-session: the request after it keeps at least 90% of the one before as its cached prefix', async () => {
    const { cwd, home } = project({ 'loom.yml': EDITS_RULES, 'AGENTS.md': RULES })
    const run = await loom(['run', '--json', 'add a rule about the tests'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const id = JSON.parse(run.stdout).sessionId as string
    // The edit reached the next request's system text.
    const headers = events(sessionFiles(home)[0]).filter(event => event.type === 'request/header')
    expect(headers.map(header => header.data.reason)).toEqual(['initial', 'change'])
    expect(headers[1].data.header.system).toContain('Run `pnpm test` before you say you are done.')

    const stats = JSON.parse((await loom(['sessions', 'stats', id, '--json'], { cwd, home })).stdout)
    expect(stats.requests).toHaveLength(2)
    expect(stats.requests[1].reuse).toBeGreaterThanOrEqual(0.9)
  })
})
