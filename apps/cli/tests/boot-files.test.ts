// A boot writes nothing into the CLI's install: its temporary root file lives in
// the OS temp folder, is removed when the deployment ends, and one left by a
// killed process is removed by the next boot. Row packages are found from the
// project first, then from the CLI; a package the CLI ships, from the CLI only.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { BOOT_PARENT, boot, type Deployment } from '../src/boot.ts'
import { CLI_ROOT } from '../src/compose.ts'
import { loom, project } from './helpers.ts'

const deployments: Deployment[] = []
afterEach(async () => {
  for (const deployment of deployments.splice(0)) await deployment.dispose()
})

describe('temporary boot files', () => {
  it('live in the OS temp folder while the deployment runs, and are gone after it', async () => {
    const { cwd } = project()
    const deployment = await boot({ cwd, bundles: ['minimal'], log: () => {} })
    expect(dirname(deployment.bootDir)).toBe(BOOT_PARENT)
    expect(basename(deployment.bootDir)).toMatch(new RegExp(`^boot-${process.pid}-`))
    expect(readdirSync(deployment.bootDir)).toEqual(['deployment.yml'])
    expect(existsSync(join(CLI_ROOT, '.boot'))).toBe(false)
    await deployment.dispose()
    expect(existsSync(deployment.bootDir)).toBe(false)
  })

  it('a folder left by a process that is gone is removed by the next boot; a running one is kept', async () => {
    const deadPid = Number(execFileSync(process.execPath, ['-p', 'process.pid'], { encoding: 'utf8' }))
    const left = join(BOOT_PARENT, `boot-${deadPid}-killed`)
    const running = join(BOOT_PARENT, `boot-${process.ppid}-running`)
    // Each is planted whole, by a rename: any boot may sweep the dead one at any moment (other tests boot
    // in parallel), and one caught half made fails this test, not the sweep.
    mkdirSync(BOOT_PARENT, { recursive: true })
    for (const dir of [left, running]) {
      const staged = mkdtempSync(join(tmpdir(), 'loom-test-boot-'))
      writeFileSync(join(staged, 'deployment.yml'), '[]\n')
      rmSync(dir, { recursive: true, force: true }) // an earlier run's
      renameSync(staged, dir)
    }
    const { cwd } = project()
    deployments.push(await boot({ cwd, bundles: ['minimal'], log: () => {} }))
    expect(existsSync(left)).toBe(false)
    expect(existsSync(running)).toBe(true)
  })
})

/** A package in the project's node_modules whose plugin adds a section saying `text`. */
function installedPlugin(name: string, text: string): Record<string, string> {
  return {
    [`node_modules/${name}/package.json`]: JSON.stringify({ name, version: '1.0.0', type: 'module', exports: { '.': './index.js' } }),
    [`node_modules/${name}/index.js`]: `export const name = '${name}'
export const inject = ['systemPrompt']
export function apply(ctx) {
  ctx.systemPrompt.section({ name: 'installed', order: 50, text: '${text}' })
}
`,
  }
}

describe('row packages', () => {
  it("are found in the project's node_modules", async () => {
    const { cwd, home } = project({
      'loom.yml': `- insert:\n    - id: greeter\n      name: greeter\n`,
      ...installedPlugin('greeter', 'Hello from the project.'),
    })
    const run = await loom(['--bundle', 'minimal', 'prompt'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('Hello from the project.')
  })

  it("of a bundled plugin come from the CLI, never from the project's node_modules; a path row runs the project's copy", async () => {
    const copy = installedPlugin('@loom/context-time', 'The project pinned its own clock.')
    const { cwd, home } = project(copy)
    const run = await loom(['prompt'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).not.toContain('The project pinned its own clock.')
    const pathRow = project({
      ...copy,
      'loom.yml': '- id: time\n  disabled: true\n- insert:\n    - id: my-time\n      name: ./node_modules/@loom/context-time/index.js\n',
    })
    const byPath = await loom(['prompt'], pathRow)
    expect(byPath.code, byPath.stderr).toBe(0)
    expect(byPath.stdout).toContain('The project pinned its own clock.')
  })

  it('a package found nowhere is named in the error', async () => {
    const { cwd, home } = project({ 'loom.yml': `- insert:\n    - id: missing\n      name: loom-plugin-that-is-not-installed\n` })
    const run = await loom(['--bundle', 'minimal', 'prompt'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('row "missing" (loom-plugin-that-is-not-installed): cannot load module "loom-plugin-that-is-not-installed": no such package')
  })
})
