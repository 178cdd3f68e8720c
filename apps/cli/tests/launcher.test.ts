// bin/loom.js runs the CLI on the workspace's pinned Node, whichever Node starts
// it; installed, on the Node that starts it, after checking that it is recent
// enough (the package's engines.node) before the CLI is loaded.
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { BIN, project, spawnRun } from './helpers.ts'

const pinned = 'v' + (JSON.parse(readFileSync(new URL('../../../node_modules/node/package.json', import.meta.url), 'utf8')) as { version: string }).version

const PACKAGE = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines: { node: string } }
const MINIMUM = PACKAGE.engines.node.replace(/^>=/, '')

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

/** A Node on PATH older than the package's engines.node (the system's Node 20 here), if any. */
function olderNode(): { path: string; version: string } | undefined {
  const [major, minor] = MINIMUM.split('.').map(Number)
  for (const path of otherNodes()) {
    const version = execFileSync(path, ['--version'], { encoding: 'utf8' }).trim()
    const [have, haveMinor] = version.slice(1).split('.').map(Number)
    if (have < major || (have === major && haveMinor < minor)) return { path, version }
  }
  return undefined
}

/**
 * The launcher as npm installs it (node_modules/@loom/cli/bin/loom.js), with the
 * package's package.json (engines changed by `engines`) and a stand-in for the
 * compiled CLI that says which Node started it.
 */
function installedLauncher(engines = PACKAGE.engines.node): string {
  const { cwd } = project()
  const root = join(cwd, 'node_modules', '@loom', 'cli')
  mkdirSync(join(root, 'bin'), { recursive: true })
  mkdirSync(join(root, 'dist'))
  copyFileSync(BIN, join(root, 'bin', 'loom.js'))
  writeFileSync(join(root, 'package.json'), JSON.stringify({ ...PACKAGE, engines: { node: engines } }))
  writeFileSync(join(root, 'dist', 'main.js'), "process.stdout.write('the CLI runs on ' + process.version + '\\n')\n")
  return join(root, 'bin', 'loom.js')
}

describe('bin/loom.js checks the Node version first', () => {
  const older = olderNode()

  it.skipIf(!older)(`on an older Node (${older?.version ?? 'none on PATH'}) installed: one line naming the version it needs, exit 1`, async () => {
    const { cwd, home } = project()
    const run = await spawnRun(older!.path, [installedLauncher(), '--version'], { cwd, home })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^loom: needs Node\\.js >= ${MINIMUM} \\(this is ${older!.version}\\); install .*https://nodejs\\.org`)),
    ])
  })

  it.skipIf(!older)('in the workspace with no pinned Node, the same line for the Node that would run the sources', async () => {
    const { cwd, home } = project()
    // A workspace-shaped copy outside any node_modules, with no node_modules/node above it.
    const copy = join(cwd, 'cli')
    mkdirSync(join(copy, 'bin'), { recursive: true })
    mkdirSync(join(copy, 'src'))
    copyFileSync(BIN, join(copy, 'bin', 'loom.js'))
    writeFileSync(join(copy, 'package.json'), JSON.stringify(PACKAGE))
    writeFileSync(join(copy, 'src', 'main.ts'), "process.stdout.write('the sources ran\\n')\n")
    const run = await spawnRun(older!.path, [join(copy, 'bin', 'loom.js'), '--version'], { cwd, home })
    expect([run.code, run.stdout]).toEqual([1, ''])
    expect(run.stderr).toMatch(new RegExp(`^loom: needs Node\\.js >= ${MINIMUM} \\(this is ${older!.version}\\); [^\\n]*\\n$`))
  })

  it('compares against engines.node: a newer minimum refuses this Node, the real one lets it run the CLI', async () => {
    const { cwd, home } = project()
    const refused = await spawnRun(process.execPath, [installedLauncher('>=99.1'), '--version'], { cwd, home })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(new RegExp(`^loom: needs Node\\.js >= 99\\.1 \\(this is ${process.version.replace(/\./g, '\\.')}\\); `))
    const same = await spawnRun(process.execPath, [installedLauncher(`>=${process.versions.node}`), '--version'], { cwd, home })
    expect([same.code, same.stderr, same.stdout]).toEqual([0, '', `the CLI runs on ${process.version}\n`])
    const real = await spawnRun(process.execPath, [installedLauncher(), '--version'], { cwd, home })
    expect([real.code, real.stdout]).toEqual([0, `the CLI runs on ${process.version}\n`])
  })
})
