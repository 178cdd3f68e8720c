// `loom dev` as a developer uses it: a long-running host; edit a plugin file and
// the next assembly has the new contributions and none of the old; a broken edit
// keeps the last good version; a layer edit applies as a whole or not at all.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { BIN, cleanEnv, project } from './helpers.ts'

const plugin = (section: string, text: string) => `import type { Context } from '@deepseek-ai/cordis'
export const name = 'greeter'
export const inject = ['systemPrompt']
export function apply(ctx: Context) {
  ctx.systemPrompt.section({ name: '${section}', order: 200, text: '${text}' })
}
`
const rows = (...names: string[]) => `- insert:\n${names.map(name => `    - id: ${name.replace(/\W/g, '')}\n      name: ./${name}\n`).join('')}`

/** A running `loom dev` whose output can be awaited. */
class Dev {
  stdout = ''
  stderr = ''
  readonly child: ChildProcessWithoutNullStreams
  readonly exited: Promise<number | null>

  constructor(cwd: string, home: string) {
    // Started without --expose-internals: `loom dev` must restart itself with it.
    this.child = spawn(process.execPath, [BIN, 'dev', '--bundle', 'minimal'], { cwd, env: cleanEnv(home) })
    this.child.stdout.setEncoding('utf8').on('data', (data: string) => { this.stdout += data })
    this.child.stderr.setEncoding('utf8').on('data', (data: string) => { this.stderr += data })
    this.exited = new Promise(resolve => this.child.on('close', code => resolve(code)))
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
}

let running: Dev | undefined
afterEach(() => { running?.child.kill('SIGKILL') })

describe('loom dev', () => {
  it('hot-reloads a plugin, keeps the last good version on a broken edit, and applies layer edits as one transaction', { timeout: 90_000 }, async () => {
    const { cwd, home } = project({ 'greeter.ts': plugin('greeter:one', 'Hello v1'), 'loom.yml': rows('greeter.ts') })
    const dev = running = new Dev(cwd, home)
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

    // A broken edit: the error names the file and line; the last good version still serves.
    mark = dev.stderr.length
    writeFileSync(join(cwd, 'greeter.ts'), plugin('greeter:three', 'Hello v3') + 'export const broken = (\n')
    await dev.waitFor('stderr', /greeter\.ts:\d+:\d+: ERROR/, mark)
    expect(await dev.systemText()).toContain('Hello v2')

    // A layer edit whose new row cannot start is not applied at all.
    mark = dev.stderr.length
    writeFileSync(join(cwd, 'farewell.ts'), plugin('farewell:one', 'Goodbye').replace("'greeter'", "'farewell'"))
    writeFileSync(join(cwd, 'loom.yml'), rows('greeter.ts', 'farewell.ts', 'missing.ts'))
    await dev.waitFor('stderr', /loom\.yml was not applied; the running deployment is unchanged[\s\S]*missing\.ts/, mark)
    const unchanged = await dev.systemText()
    expect(unchanged).toContain('Hello v2')
    expect(unchanged).not.toContain('Goodbye')

    // The same edit without the bad row applies whole.
    mark = dev.stdout.length
    writeFileSync(join(cwd, 'loom.yml'), rows('greeter.ts', 'farewell.ts'))
    await dev.waitFor('stdout', /applied loom\.yml\nprompt: .*farewell:one ← farewell/, mark)
    expect(await dev.systemText()).toContain('Goodbye')

    dev.send('/quit')
    expect(await dev.exited).toBe(0)
  })
})
