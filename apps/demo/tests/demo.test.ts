// Runs the demo as a user does: a subprocess that boots a YAML deployment
// through the Cordis loader and prints the request a model would receive.
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url))
const plugin = (file: string) => fileURLToPath(new URL(`../src/plugins/${file}`, import.meta.url))

interface Run { code: number; stdout: string; stderr: string }

function demo(...args: string[]): Promise<Run> {
  return new Promise(resolve => {
    execFile(process.execPath, ['--import', 'tsx', main, ...args], { timeout: 25_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code as number) ?? 1 : 0, stdout, stderr })
    })
  })
}

function deployment(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'loom-demo-'))
  const file = join(dir, 'loom.yml')
  writeFileSync(file, yaml)
  return file
}

const rows = {
  prompt: (persona = 'You work in {{cwd}}.') => `- name: '@loom/system-prompt'\n  config:\n    persona: '${persona}'\n`,
  files: (config = '') => `- name: ${plugin('file-tools.ts')}\n${config}`,
  shell: () => `- name: ${plugin('shell-tool.ts')}\n`,
  workspace: () => `- name: ${plugin('workspace-facts.ts')}\n  config:\n    cwd: /srv/project\n    timeZone: UTC\n`,
}

describe('demo', () => {
  it('prints the shipped deployment: system text, tools in canonical order, runtime-context snapshot', async () => {
    const run = await demo('--json')
    expect(run.code).toBe(0)
    const request = JSON.parse(run.stdout)
    expect(request.tools.map((t: { name: string }) => t.name)).toEqual(['bash', 'edit', 'read'])
    expect(request.tools[0].owner).toBe('demo-shell-tool')
    expect(request.system.startsWith('You are an AI agent powered by Loom.\n\nYou are a careful software engineer working in ')).toBe(true)
    expect(request.sections.map((s: { name: string }) => s.name))
      .toEqual(['harness:identity', 'deployment:persona', 'tool:read', 'tool:edit', 'tool:bash'])
    expect(request.runtimeContext).toMatch(/^Current runtime context\. This snapshot supersedes earlier runtime-context snapshots\.\n\nWorking directory: .+\n\nCurrent time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(.+\)$/)
    // The clock is a step fact: it is in the snapshot, never in the system text.
    expect(request.system).not.toMatch(/\d\d:\d\d:\d\d/)
  })

  it('prints a readable request without --json', async () => {
    const run = await demo(deployment(rows.prompt() + rows.shell() + rows.workspace()))
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('── system')
    expect(run.stdout).toContain('You work in /srv/project.')
    expect(run.stdout).toContain('1. bash  ← demo-shell-tool')
    expect(run.stdout).toContain('Working directory: /srv/project')
  })

  it('a row removed from the YAML takes its sections and tools with it', async () => {
    const run = await demo(deployment(rows.prompt() + rows.files() + rows.workspace()), '--json')
    expect(run.code).toBe(0)
    const request = JSON.parse(run.stdout)
    expect(request.tools.map((t: { name: string }) => t.name)).toEqual(['edit', 'read'])
    expect(request.system).not.toContain('bash')
  })

  it('the same rows in another order give the same request', async () => {
    const a = JSON.parse((await demo(deployment(rows.prompt() + rows.files() + rows.shell() + rows.workspace()), '--json')).stdout)
    const b = JSON.parse((await demo(deployment(rows.workspace() + rows.shell() + rows.files() + rows.prompt()), '--json')).stdout)
    // The clock moves between the two runs: compare the contexts by name and owner.
    for (const request of [a, b]) {
      delete request.runtimeContext
      request.contexts = request.contexts.map(({ name, owner }: { name: string; owner: string }) => ({ name, owner }))
    }
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
  })

  it('an unknown variable fails before any model call, naming the variable and the section', async () => {
    const run = await demo(deployment(rows.prompt('Model: {{modle}}') + rows.workspace()))
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('unknown prompt variable "{{modle}}" in section "deployment:persona"; registered variables: cwd, now')
    expect(run.stdout).toBe('')
  })

  it('a step variable in the persona is refused, naming both plugins', async () => {
    const run = await demo(deployment(rows.prompt('It is {{now}}') + rows.workspace()))
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/section "deployment:persona" \(plugin "@loom\/system-prompt"\) references step-stable variable "\{\{now\}\}" \(plugin "demo-workspace-facts"\)/)
  })

  it('an invalid config value fails the boot, naming the plugin and the key', async () => {
    const run = await demo(deployment(rows.prompt() + rows.files('  config:\n    maxLines: -3\n')))
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/failed to boot:\n {2}demo-file-tools: .*\$\.maxLines expected number >= 0 but got -3/)
  })

  it('a missing plugin module fails the boot', async () => {
    const run = await demo(deployment(rows.prompt() + '- name: ./no-such-plugin.ts\n'))
    expect(run.code).toBe(1)
    expect(run.stderr).toMatch(/failed to boot:[\s\S]*no-such-plugin\.ts/)
  })
})
