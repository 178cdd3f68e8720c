// `loom prompt`: the request the deployment would send next for an agent in
// the working directory, without calling a model.
import { describe, expect, it } from 'vitest'
import { ESC, loom, project, sessionFiles } from './helpers.ts'

describe('loom prompt', () => {
  it('--json: system text, tools in canonical order with schemas, the runtime-context snapshot', async () => {
    const { cwd, home } = project({ 'AGENTS.md': '# Rules\n\nAlways run the tests before you say you are done.\n' })
    const run = await loom(['prompt', '--json'], { cwd, home })
    expect(run.code).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report).toMatchObject({ cwd, provider: 'scripted', model: 'loom-demo' })
    expect(report.system.startsWith('You are an AI agent powered by Loom.\n\nYou are a coding agent working in ' + cwd + '.')).toBe(true)
    // Guidance of the first-party tools, and the project's instructions.
    expect(report.system).toContain('Use `read` to look at a file')
    expect(report.system).toContain('Always run the tests before you say you are done.')
    const names = report.tools.map((tool: { name: string }) => tool.name)
    for (const name of ['bash', 'edit', 'glob', 'grep', 'read', 'write']) expect(names).toContain(name)
    expect([...names].sort((a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(names)
    for (const tool of report.tools) {
      expect(tool.description.length).toBeGreaterThan(10)
      expect(tool.parameters.type).toBe('object')
    }
    expect(report.runtimeContext.startsWith('Current runtime context. This snapshot supersedes earlier runtime-context snapshots.')).toBe(true)
    expect(report.runtimeContext).toContain(`Working directory: ${cwd}`)
    expect(report.runtimeContext).toMatch(/Current time: \d{4}-\d\d-\d\d/)
    // The clock is a step fact: in the snapshot, never in the system text.
    expect(report.system).not.toMatch(/\d\d:\d\d:\d\d/)
    // Nothing was sent, nothing was stored.
    expect(sessionFiles(home)).toEqual([])
  })

  it('text: the route, the system text, numbered tools with owners, the snapshot; no escape codes off a TTY', async () => {
    const { cwd, home } = project()
    const run = await loom(['prompt'], { cwd, home })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('── route: scripted/loom-demo')
    expect(run.stdout).toContain('── system ')
    expect(run.stdout).toMatch(/── tools, in request order \(\d+\) /)
    expect(run.stdout).toMatch(/\n1\. bash {2}← @loom\/tool-shell\n {3}Runs a shell command/)
    expect(run.stdout).toContain(`Working directory: ${cwd}`)
    expect(run.stdout).not.toContain(ESC)
  })

  it('a section that changes between two assemblies on its own: named with its plugin on stderr and in --json; exit 1 when static', async () => {
    const clock = (stability: string) => `let tick = 0
export const name = 'clock'
export const inject = ['systemPrompt']
export function apply(ctx) {
  ctx.systemPrompt.section({ name: 'clock:now', order: 200, ${stability}text: () => 'It is tick ' + ++tick })
}
`
    const row = '- insert:\n    - id: clock\n      name: ./clock.mjs\n'
    const message =
      'prompt section "clock:now" (plugin "clock", static) changed between two assemblies with no registration change: first difference at character 11: "It is tick 1" became "It is tick 2". A static section must render the same text every time'
    const unstable = project({ 'loom.yml': row, 'clock.mjs': clock('') })
    const json = await loom(['--bundle', 'minimal', 'prompt', '--json'], unstable)
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout).unstable).toEqual([
      {
        subject: 'prompt section "clock:now" (plugin "clock", static)',
        kind: 'section',
        name: 'clock:now',
        owner: 'clock',
        severe: true,
        message: expect.stringContaining(message),
      },
    ])
    expect(json.stderr).toContain(`loom: error: ${message}`)
    // The text form prints the prompt as well (a second run in this process: the module counts on).
    const text = await loom(['--bundle', 'minimal', 'prompt'], unstable)
    expect(text.code).toBe(1)
    expect(text.stdout).toMatch(/\nIt is tick \d+\n/)
    expect(text.stderr).toMatch(/^loom: error: prompt section "clock:now" \(plugin "clock", static\) changed between two assemblies/)

    // Declared to follow outside content: a warning, exit 0.
    const following = await loom(['--bundle', 'minimal', 'prompt', '--json'], project({ 'loom.yml': row, 'clock.mjs': clock("stability: 'session', ") }))
    expect(following.code).toBe(0)
    expect(JSON.parse(following.stdout).unstable).toMatchObject([{ name: 'clock:now', owner: 'clock', severe: false }])
    expect(following.stderr).toContain('loom: warning: prompt section "clock:now" (plugin "clock", session-stable) changed between two assemblies')

    // A stable deployment says nothing.
    const stable = await loom(['--bundle', 'minimal', 'prompt', '--json'], project())
    expect(stable.code).toBe(0)
    expect(JSON.parse(stable.stdout).unstable).toEqual([])
    expect(stable.stderr).toBe('')
  })

  it('the minimal bundle: no tools, no runtime context', async () => {
    const { cwd, home } = project()
    const report = JSON.parse((await loom(['--bundle', 'minimal', 'prompt', '--json'], { cwd, home })).stdout)
    expect(report).toMatchObject({ provider: 'scripted', model: 'scripted-1', system: 'You are an AI agent powered by Loom.', tools: [], runtimeContext: '' })
  })
})
