// The runner's agent, set from loom.yml: its name (`agentName`, default `main`),
// which a per-agent plugin such as @loom/persona selects it by (its id is a new
// session id every run), and `pinPrompt`.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

const PERSONAS = `
- insert:
    - id: main-persona
      name: '@loom/persona'
      config:
        persona: You are the main agent in {{cwd}}.
        agents: [main]
    - id: reviewer-persona
      name: '@loom/persona'
      config:
        persona: You review code.
        agents: [reviewer]
`

/** The first step writes a rule into AGENTS.md: the project-instructions section changes mid-turn. */
const RULE = '# Rules\n\nAlways answer in French.\n'
const WRITES_RULES = scriptedModel(`
- text: Writing the rules.
  toolCalls:
    - { name: write, arguments: { path: AGENTS.md, content: ${JSON.stringify(RULE)} } }
- Done.
`)

const runner = (config: string) => `\n- id: runner\n  config: { ${config} }\n`

describe("the runner's agent name", () => {
  it("loom prompt: the persona of `agents: [main]` is the CLI agent's; `agentName` renames it", async () => {
    const { cwd, home } = project({ 'loom.yml': PERSONAS })
    const main = await loom(['prompt', '--json'], { cwd, home })
    expect(main.code, main.stderr).toBe(0)
    const { system, sections } = JSON.parse(main.stdout)
    expect(system.startsWith(`You are an AI agent powered by Loom.\n\nYou are the main agent in ${cwd}.\n\n`)).toBe(true)
    expect(system).not.toContain('You review code.')
    expect(sections.find((section: { name: string }) => section.name === 'deployment:persona')).toMatchObject({ owner: '@loom/persona' })

    const renamed = project({ 'loom.yml': PERSONAS + runner('agentName: reviewer') })
    const reviewer = await loom(['prompt', '--json'], renamed)
    expect(reviewer.code, reviewer.stderr).toBe(0)
    const renamedSystem = JSON.parse(reviewer.stdout).system
    expect(renamedSystem.startsWith('You are an AI agent powered by Loom.\n\nYou review code.\n\n')).toBe(true)
    expect(renamedSystem).not.toContain('You are the main agent')
  })

  it('loom run and sessions resume: the persona is in the logged system text', async () => {
    const { cwd, home } = project({ 'loom.yml': PERSONAS + scriptedModel('- Hello.') })
    const run = await loom(['run', '--json', 'hi'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const resume = await loom(['sessions', 'resume', JSON.parse(run.stdout).sessionId, 'again'], { cwd, home })
    expect(resume.code, resume.stderr).toBe(0)
    const headers = events(sessionFiles(home)[0]).filter(event => event.type === 'request/header')
    expect(headers.map(header => header.data.reason)).toEqual(['initial', 'resume'])
    for (const header of headers) expect(header.data.header.system).toContain(`You are the main agent in ${cwd}.`)
  })
})

describe("the runner's pinPrompt", () => {
  /** The request headers logged by one `loom run` whose first step writes AGENTS.md. */
  async function headersOfRun(layer: string) {
    const { cwd, home } = project({ 'loom.yml': WRITES_RULES + layer })
    const run = await loom(['run', 'note the rules'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(existsSync(join(cwd, 'AGENTS.md'))).toBe(true)
    const log = events(sessionFiles(home)[0])
    expect(log.filter(event => event.type === 'assistant/message')).toHaveLength(2)
    return log.filter(event => event.type === 'request/header').map(event => ({ reason: event.data.reason, system: event.data.header.system as string }))
  }

  it("off (the default): a section that changes mid-turn changes the next step's system text", async () => {
    const headers = await headersOfRun('')
    expect(headers.map(header => header.reason)).toEqual(['initial', 'change'])
    expect(headers[0].system).not.toContain('Always answer in French.')
    expect(headers[1].system).toContain('Always answer in French.')
  })

  it('on: the system text of the first step stays for every step of the session', async () => {
    const headers = await headersOfRun(runner('pinPrompt: true'))
    expect(headers.map(header => header.reason)).toEqual(['initial'])
    expect(headers[0].system).not.toContain('Always answer in French.')
  })
})
