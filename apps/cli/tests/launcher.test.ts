// bin/loom.js runs the CLI on the workspace's pinned Node, whichever Node starts it.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { BIN, project, spawnRun } from './helpers.ts'

const pinned = 'v' + (JSON.parse(readFileSync(new URL('../../../node_modules/node/package.json', import.meta.url), 'utf8')) as { version: string }).version

/** Other Node binaries on PATH (the system's, say), if any. */
function otherNodes(): string[] {
  try {
    return execFileSync('which', ['-a', 'node'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .filter(path => {
        try {
          return execFileSync(path, ['--version'], { encoding: 'utf8' }).trim() !== pinned
        } catch {
          return false
        }
      })
  } catch {
    return []
  }
}

describe('bin/loom.js', () => {
  it('runs a command on the pinned Node', async () => {
    const { cwd, home } = project()
    const version = await spawnRun(process.execPath, [BIN, '--version'], { cwd, home })
    expect(version.code).toBe(0)
    expect(version.stdout).toBe(`loom 0.1.0 (node ${pinned})\n`)
    const run = await spawnRun(process.execPath, [BIN, '--bundle', 'minimal', 'run', 'hi'], { cwd, home })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('offline scripted model')
  })

  it('started by another Node, it re-runs itself on the pinned one and passes the exit code on', async () => {
    const others = otherNodes()
    if (!others.length) return // no other Node on this machine: nothing to switch from
    const { cwd, home } = project()
    const version = await spawnRun(others[0], [BIN, '--version'], { cwd, home })
    expect(version.stdout).toBe(`loom 0.1.0 (node ${pinned})\n`)
    const failed = await spawnRun(others[0], [BIN, 'frobnicate'], { cwd, home })
    expect(failed.code).toBe(2)
  })
})
