// `loom dev` as a developer uses it: a long-running host; edit a plugin file and
// the next assembly has the new contributions and none of the old; a broken edit
// keeps the last good version; a layer edit applies as a whole or not at all.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { BIN, SLOW_MODEL, cleanEnv, events, project, sessionFiles, writeTrusted } from './helpers.ts'

const plugin = (section: string, text: string) => `import type { Context } from '@deepseek-ai/cordis'
export const name = 'greeter'
export const inject = ['systemPrompt']
export function apply(ctx: Context) {
  ctx.systemPrompt.section({ name: '${section}', order: 200, text: '${text}' })
}
`
/** A plugin with a section and a tool; `midway` runs between the two registrations (a throw, say). */
const toolPlugin = (version: string, midway = '') => `import type { Context } from '@deepseek-ai/cordis'
export const name = 'greeter'
export const inject = ['systemPrompt']
export function apply(ctx: Context) {
  ctx.systemPrompt.section({ name: 'greeter:${version}', order: 200, text: 'Hello ${version}' })
${midway}  ctx.systemPrompt.tools(() => ({ schemas: [{ name: 'greet_${version}', description: 'Greets.', parameters: { type: 'object', properties: {} } }] }))
}
`

const rows = (...names: string[]) => `- insert:\n${names.map(name => `    - id: ${name.replace(/\W/g, '')}\n      name: ./${name}\n`).join('')}`

/** A running `loom dev` whose output can be awaited. */
class Dev {
  stdout = ''
  stderr = ''
  readonly child: ChildProcessWithoutNullStreams
  readonly exited: Promise<number | null>

  constructor(cwd: string, home: string, bundle = 'minimal') {
    // Started without --expose-internals: `loom dev` must restart itself with it.
    // In its own process group, as in a terminal: Ctrl-C reaches the whole group.
    this.child = spawn(process.execPath, [BIN, 'dev', '--bundle', bundle], { cwd, env: cleanEnv(home), detached: true })
    this.child.stdout.setEncoding('utf8').on('data', (data: string) => {
      this.stdout += data
    })
    this.child.stderr.setEncoding('utf8').on('data', (data: string) => {
      this.stderr += data
    })
    this.exited = new Promise(resolve => this.child.on('close', code => resolve(code)))
  }

  /** Ctrl-C in a terminal: SIGINT to the process group (the launcher and the restarted dev). */
  ctrlC() {
    process.kill(-this.child.pid!, 'SIGINT')
  }

  kill() {
    try {
      process.kill(-this.child.pid!, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }

  /** Resolves with the output once `pattern` appears after `from` (an offset into it). */
  async waitFor(stream: 'stdout' | 'stderr', pattern: RegExp, from = 0, timeoutMs = 20_000): Promise<string> {
    const start = Date.now()
    for (;;) {
      const text = this[stream].slice(from)
      if (pattern.test(text)) return text
      if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${pattern} in ${stream}:\n${this[stream]}\n--- stderr:\n${this.stderr}`)
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }

  send(line: string) {
    this.child.stdin.write(line + '\n')
  }

  /** The system text `/prompt` prints now. */
  async systemText(): Promise<string> {
    const from = this.stdout.length
    this.send('/prompt')
    return this.waitFor('stdout', /You are an AI agent powered by Loom\.[\s\S]*\n/, from)
  }

  /** The tools `/prompt` lists now, in request order. */
  async tools(): Promise<string[]> {
    const from = this.stdout.length
    this.send('/prompt')
    const text = await this.waitFor('stdout', /── tools[^\n]*\n[\s\S]*?── runtime-context/, from)
    const listed = text.slice(text.indexOf('── tools'), text.indexOf('── runtime-context'))
    return [...listed.matchAll(/^\d+\. (\S+) {2}← /gm)].map(match => match[1])
  }

  /** Answers the approval question about bash `command` (the default bundle asks before bash runs). */
  async approve(command: string, answer = 'y') {
    await this.waitFor('stdout', new RegExp(`\\? bash wants to run: ${command}`))
    this.send(answer)
  }
}

let running: Dev | undefined
afterEach(() => {
  running?.kill()
})

describe('loom dev', () => {
  it('hot-reloads a plugin, keeps the last good version on a broken edit, and applies layer edits as one transaction', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'greeter.ts': plugin('greeter:one', 'Hello v1'), 'loom.yml': rows('greeter.ts') })
    const dev = (running = new Dev(cwd, home))
    await dev.waitFor('stdout', /prompt: .*greeter:one ← greeter/)
    expect(await dev.systemText()).toContain('Hello v1')

    // An edit replaces the plugin: the new section is in the next assembly, the old one gone.
    let mark = dev.stdout.length
    writeFileSync(join(cwd, 'greeter.ts'), plugin('greeter:two', 'Hello v2'))
    const reloaded = await dev.waitFor('stdout', /reloaded greeter\.ts\nprompt: .*\n/, mark)
    expect(reloaded).toMatch(/greeter:two ← greeter/)
    expect(reloaded).not.toMatch(/greeter:one/)
    const v2 = await dev.systemText()
    expect(v2).toContain('Hello v2')
    expect(v2).not.toContain('Hello v1')

    // A broken edit: the error names the file and line, its code frame on a line of its own; the last good version still serves.
    mark = dev.stderr.length
    writeFileSync(join(cwd, 'greeter.ts'), plugin('greeter:three', 'Hello v3') + 'export const broken = (\n  1 +\n')
    await dev.waitFor('stderr', /greeter\.ts:8: SyntaxError [^\n]*: Expression expected\n {4}\s*1 \+\n/, mark)
    expect(await dev.systemText()).toContain('Hello v2')

    // A layer edit whose new row cannot start is not applied at all.
    mark = dev.stderr.length
    writeFileSync(join(cwd, 'farewell.ts'), plugin('farewell:one', 'Goodbye').replace("'greeter'", "'farewell'"))
    writeTrusted(home, join(cwd, 'loom.yml'), rows('greeter.ts', 'farewell.ts', 'missing.ts'))
    await dev.waitFor('stderr', /loom\.yml not applied: [\s\S]*missing\.ts[\s\S]*the running deployment is unchanged/, mark)
    const unchanged = await dev.systemText()
    expect(unchanged).toContain('Hello v2')
    expect(unchanged).not.toContain('Goodbye')

    // The same edit without the bad row applies whole.
    mark = dev.stdout.length
    writeTrusted(home, join(cwd, 'loom.yml'), rows('greeter.ts', 'farewell.ts'))
    await dev.waitFor('stdout', /applied loom\.yml\nprompt: .*farewell:one ← farewell/, mark)
    expect(await dev.systemText()).toContain('Goodbye')

    dev.send('/quit')
    expect(await dev.exited).toBe(0)
  })

  it('a static section that changes on its own is named when dev starts, and the turn that meets it ends with PROMPT_UNSTABLE', {
    timeout: 90_000,
  }, async () => {
    const clock = `import type { Context } from '@deepseek-ai/cordis'
let tick = 0
export const name = 'clock'
export const inject = ['systemPrompt']
export function apply(ctx: Context) {
  ctx.systemPrompt.section({ name: 'clock:now', order: 200, text: () => 'It is tick ' + ++tick })
}
`
    const { cwd, home } = project({ 'clock.ts': clock, 'loom.yml': rows('clock.ts') })
    const dev = (running = new Dev(cwd, home))
    await dev.waitFor('stderr', /loom: prompt section "clock:now" \(plugin "clock", static\) changed between two assemblies with no registration change/)
    // The agent's first assembly is its baseline; the next turn's differs.
    dev.send('first')
    await dev.waitFor('stdout', /offline scripted model/)
    dev.send('second')
    await dev.waitFor(
      'stderr',
      /loom: the turn ended: error: PROMPT_UNSTABLE: prompt section "clock:now" \(plugin "clock", static\) changed between two assemblies with no registration change: first difference at character 11: "It is tick \d+" became "It is tick \d+"/,
    )
    dev.send('/quit')
    expect(await dev.exited).toBe(0)
  })

  it('a plugin edit whose apply throws keeps the last good version (its section and tool) and names the file and line', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'greeter.ts': toolPlugin('v1'), 'loom.yml': rows('greeter.ts') })
    const dev = (running = new Dev(cwd, home))
    await dev.waitFor('stdout', /tools: greet_v1\n/)

    // v2 registers its section, then throws: the section goes with its failed fiber, v1 comes back.
    let mark = dev.stderr.length
    const broken = toolPlugin('v2', "  throw new Error('greeter v2 needs a fuse')\n")
    const line = broken.split('\n').findIndex(text => text.includes('throw')) + 1
    writeFileSync(join(cwd, 'greeter.ts'), broken)
    const error = await dev.waitFor('stderr', /the last good version runs again\n/, mark)
    expect(error).toMatch(
      new RegExp(`greeter\\.ts:${line}:\\d+: failed to start: greeter v2 needs a fuse; the edited plugin did not start, so the last good version runs again`),
    )
    expect(await dev.tools()).toEqual(['greet_v1'])
    const kept = await dev.systemText()
    expect(kept).toContain('Hello v1')
    expect(kept).not.toContain('Hello v2')

    // The next good edit replaces the restored version.
    mark = dev.stdout.length
    writeFileSync(join(cwd, 'greeter.ts'), toolPlugin('v3'))
    const reloaded = await dev.waitFor('stdout', /reloaded greeter\.ts\nprompt: .*\ntools: .*\n/, mark)
    expect(reloaded).toMatch(/greeter:v3 ← greeter/)
    expect(reloaded).toMatch(/tools: greet_v3\n/)
    const v3 = await dev.systemText()
    expect(v3).toContain('Hello v3')
    expect(v3).not.toContain('Hello v1')

    dev.send('/quit')
    expect(await dev.exited).toBe(0)
  })

  it('a loom.yml edit with an invalid config value applies nothing and says why; the running rows keep bash', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': '[]\n' })
    const dev = (running = new Dev(cwd, home, 'default'))
    await dev.waitFor('stdout', /tools: .*\bbash\b.*\n/)

    let mark = dev.stderr.length
    writeFileSync(join(cwd, 'loom.yml'), '- id: shell\n  config: { timeoutMs: soon }\n')
    const refused = await dev.waitFor('stderr', /the running deployment is unchanged\n/, mark)
    expect(refused).toContain('loom.yml not applied: row "shell" (@loom/tool-shell): invalid config: $.timeoutMs expected number but got soon')
    expect(dev.stdout).not.toContain('applied loom.yml')
    expect(await dev.tools()).toContain('bash')

    // A later edit that fails to start rolls back to the rows that ran: bash still there.
    mark = dev.stderr.length
    writeTrusted(home, join(cwd, 'loom.yml'), rows('missing.ts'))
    await dev.waitFor('stderr', /loom\.yml not applied: [\s\S]*missing\.ts[\s\S]*the running deployment is unchanged\n/, mark)
    expect(await dev.tools()).toContain('bash')

    // A valid edit applies.
    mark = dev.stdout.length
    writeFileSync(join(cwd, 'loom.yml'), '- id: search\n  disabled: true\n- id: shell\n  config: { timeoutMs: 5000 }\n')
    await dev.waitFor('stdout', /applied loom\.yml\n/, mark)
    const tools = await dev.tools()
    expect(tools).toContain('bash')
    expect(tools).not.toContain('grep')

    dev.send('/quit')
    expect(await dev.exited).toBe(0)
  })

  it('Ctrl-C cancels the running task (its turn closed in the log) and dev goes on; Ctrl-C when idle quits cleanly', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    const dev = (running = new Dev(cwd, home, 'default'))
    await dev.waitFor('stdout', /tools: .*\n/)
    dev.send('sleep please')
    await dev.approve('sleep 30')
    await dev.waitFor('stdout', /→ bash: sleep 30/)
    await new Promise(resolve => setTimeout(resolve, 200))

    // The terminal sends SIGINT to the launcher and to dev alike: one Ctrl-C, not two.
    dev.ctrlC()
    await dev.waitFor('stderr', /the turn ended: aborted \(user\)/)
    const log = events(sessionFiles(home)[0])
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted', reason: { kind: 'user' } } } })
    expect(await dev.tools()).toContain('bash')

    // Later than a duplicate delivery could arrive (see main.ts): a Ctrl-C of its own.
    await new Promise(resolve => setTimeout(resolve, 700))
    dev.ctrlC()
    expect(await dev.exited).toBe(0)
    expect(dev.stderr).not.toMatch(/internal error/)
  })

  it("SIGTERM to the process group closes the running task's turn, then dev exits 143", { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    const dev = (running = new Dev(cwd, home, 'default'))
    await dev.waitFor('stdout', /tools: .*\n/)
    dev.send('sleep please')
    await dev.approve('sleep 30')
    await dev.waitFor('stdout', /→ bash: sleep 30/)
    await new Promise(resolve => setTimeout(resolve, 200))
    process.kill(-dev.child.pid!, 'SIGTERM')
    expect(await dev.exited).toBe(143)
    const log = events(sessionFiles(home)[0])
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted' } } })
  })

  it('SIGKILL to the pid that was started (dev runs in the child it restarted): the child closes the running turn and exits', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'loom.yml': SLOW_MODEL })
    const dev = (running = new Dev(cwd, home, 'default'))
    await dev.waitFor('stdout', /tools: .*\n/)
    dev.send('sleep please')
    await dev.approve('sleep 30')
    await dev.waitFor('stdout', /→ bash: sleep 30/)
    await new Promise(resolve => setTimeout(resolve, 200))
    process.kill(dev.child.pid!, 'SIGKILL')
    // The output pipes close once the restarted dev, which holds them too, has exited.
    await dev.exited
    const log = events(sessionFiles(home)[0])
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: { kind: 'aborted', reason: { kind: 'user' } } } })
  })
})
