// The launcher (src/launcher.ts): programs started from a small shell kept for it get
// their arguments and folder exactly, never read as shell code; their output, exit code
// and errors come back as a spawn's would; kill stops them; a launcher that dies loses
// no run silently; and launchers never keep the host alive when idle.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, readdir, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { launch, launcherCounts, quote } from '../src/launcher.ts'

const NODE = process.execPath
let dir: string

beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), 'loom-launcher-')))
})
afterEach(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** Runs a program through a launcher; its output, and how it ended. */
async function run(binary: string, args: string[], cwd = dir, started?: (launched: { kill(): void }, stdout: () => string) => void) {
  const out: Buffer[] = []
  const err: Buffer[] = []
  const launched = launch(binary, args, { cwd, onStdout: chunk => out.push(Buffer.from(chunk)), onStderr: chunk => err.push(Buffer.from(chunk)) })
  if (launched === undefined) throw new Error('no launcher on this platform')
  started?.(launched, () => Buffer.concat(out).toString())
  const code = await launched.closed
  return { code, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const until = async (test: () => boolean) => {
  for (let i = 0; i < 1000 && !test(); i++) await new Promise(resolve => setTimeout(resolve, 10))
  expect(test()).toBe(true)
}

describe.skipIf(process.platform === 'win32')('the launcher', () => {
  it('passes every argument and the folder exactly, never as shell code', async () => {
    const nasty = [
      "it's",
      '"double"',
      '$(touch PWNED1)',
      '`touch PWNED2`',
      '; touch PWNED3',
      '| touch PWNED4',
      'a\nb\n',
      '  spaced  ',
      '\\',
      '*',
      '~',
      '$HOME',
      "'",
      "''\\''",
      '-e',
      '',
      'ünïcödé ✓',
    ]
    const folder = join(dir, "we'ird $(touch PWNED5) dir")
    await mkdir(folder)
    const { code, stdout } = await run(NODE, ['-e', 'process.stdout.write(JSON.stringify([process.cwd(), ...process.argv.slice(1)]))', ...nasty], folder)
    expect(code).toBe(0)
    expect(JSON.parse(stdout.toString())).toEqual([folder, ...nasty])
    expect((await readdir(dir)).filter(name => name.startsWith('PWNED'))).toEqual([])
    expect((await readdir(folder)).filter(name => name.startsWith('PWNED'))).toEqual([])
    // What the shell reads back from a quoted word is the word.
    for (const word of nasty) expect(spawnSync('/bin/sh', ['-c', `printf %s ${quote(word)}`], { encoding: 'utf8' }).stdout).toBe(word)
  })

  it('gives stdout and stderr apart, byte for byte, and the exit code', async () => {
    // Every byte value, a few megabytes of them, in writes of every size: the end mark is found wherever the chunks break.
    const script = `
      const bytes = Buffer.alloc(3 << 20); for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) % 256
      let at = 0; for (let n = 1; at < bytes.length; n = n * 3 + 1) { process.stdout.write(bytes.subarray(at, at + n)); at += n }
      process.stderr.write('warning: ' + 'e'.repeat(10000))
      process.exitCode = 3`
    const { code, stdout, stderr } = await run(NODE, ['-e', script])
    expect(code).toBe(3)
    expect(stdout.length).toBe(3 << 20)
    expect(stdout.every((byte, i) => byte === (i * 7919) % 256)).toBe(true)
    expect(stderr).toBe(`warning: ${'e'.repeat(10000)}`)
  })

  it('kill stops the program, also before its pid is known; the launcher serves the next run', async () => {
    let pid = 0
    const stopped = await run(NODE, ['-e', 'console.log(process.pid); setInterval(() => {}, 1000)'], dir, (launched, stdout) => {
      const poll = setInterval(() => {
        pid = Number(stdout().trim())
        if (pid > 0) {
          clearInterval(poll)
          launched.kill()
        }
      }, 5)
    })
    expect(stopped.code).toBeNull()
    expect(alive(pid)).toBe(false)
    const early = await run(NODE, ['-e', 'setInterval(() => {}, 1000)'], dir, launched => launched.kill())
    expect(early.code).toBeNull()
    const started = launcherCounts.started
    expect((await run(NODE, ['-e', 'console.log("next")'])).stdout.toString()).toBe('next\n')
    expect(launcherCounts.started).toBe(started) // the same launcher, waiting
  })

  it('a program or folder that cannot be used rejects as a spawn would (ENOENT, EACCES)', async () => {
    await expect(run(join(dir, 'missing'), [])).rejects.toMatchObject({ code: 'ENOENT' })
    await expect(run(NODE, ['-e', '0'], join(dir, 'no such folder'))).rejects.toMatchObject({ code: 'ENOENT' })
    const notExecutable = join(dir, 'plain.txt')
    await writeFile(notExecutable, 'just text\n')
    await chmod(notExecutable, 0o644)
    await expect(run(notExecutable, [])).rejects.toMatchObject({ code: 'EACCES' })
    expect((await run(NODE, ['-e', 'console.log("still fine")'])).stdout.toString()).toBe('still fine\n')
  })

  it('a launcher that dies mid-run rejects the run (ECHILD) and stops its program; the next run works', async () => {
    let program = 0
    // The program prints its parent, the launcher's shell, which the test then kills.
    const lost = run(NODE, ['-e', 'console.log(process.pid, process.ppid); setInterval(() => {}, 1000)'], dir, (_launched, stdout) => {
      const poll = setInterval(() => {
        const [pid, shell] = stdout().trim().split(' ').map(Number)
        if (shell > 0) {
          clearInterval(poll)
          program = pid
          process.kill(shell, 'SIGKILL')
        }
      }, 5)
    })
    await expect(lost).rejects.toMatchObject({ code: 'ECHILD' })
    await until(() => !alive(program))
    // The dead launcher is not used again (a write to it would fail the run).
    expect((await run(NODE, ['-e', 'console.log("again")'])).stdout.toString()).toBe('again\n')
  })

  it('a launcher whose program left a process writing to its output is retired: the next run does not read that output', async () => {
    const [ready, wrote, go, done] = ['ready', 'wrote', 'go', 'done'].map(name => join(dir, name))
    const after = (file: string) => `while [ ! -e ${quote(file)} ]; do sleep 0.02; done`
    // The leftover writes once the run has ended (the launcher waits), then again once the next run has begun.
    const leftover = `${after(ready)}; echo stray 1; : > ${quote(wrote)}; ${after(go)}; echo stray 2; : > ${quote(done)}`
    const first = await run(NODE, [
      '-e',
      `require('child_process').spawn('/bin/sh', ['-c', ${JSON.stringify(leftover)}], { stdio: ['ignore', 'inherit', 'inherit'], detached: true }).unref()`,
    ])
    expect(first).toMatchObject({ code: 0, stderr: '' })
    expect(first.stdout.toString()).toBe('')
    await writeFile(ready, '')
    await until(() => existsSync(wrote))
    await new Promise(resolve => setTimeout(resolve, 50)) // the launcher reads "stray 1" while it waits
    const next = await run(NODE, [
      '-e',
      `const fs = require('fs'); fs.writeFileSync(${JSON.stringify(go)}, ''); const t = setInterval(() => { if (fs.existsSync(${JSON.stringify(done)})) { clearInterval(t); console.log('clean') } }, 20)`,
    ])
    expect(next.stdout.toString()).toBe('clean\n')
  })

  it('overlapping runs each get their own output', async () => {
    const runs = await Promise.all([1, 2, 3].map(n => run(NODE, ['-e', `setTimeout(() => { console.log('run ${n}'); console.error('err ${n}') }, ${n * 30})`])))
    expect(runs.map(r => [r.code, r.stdout.toString(), r.stderr])).toEqual([1, 2, 3].map(n => [0, `run ${n}\n`, `err ${n}\n`]))
  })

  it('a run keeps the host alive until it ends; waiting launchers do not', async () => {
    const script = join(dir, 'host.mts')
    const launcher = new URL('../src/launcher.ts', import.meta.url).pathname
    await writeFile(
      script,
      `import { launch } from ${JSON.stringify(launcher)}
let out = ''
launch(process.execPath, ['-e', 'setTimeout(() => console.log("late"), 300)'], { cwd: process.cwd(), onStdout: c => { out += c }, onStderr() {} })
  .closed.then(code => console.log(code, out.trim()))
`,
    )
    const host = spawnSync(NODE, [script], { encoding: 'utf8', timeout: 30_000 })
    expect(host.error).toBeUndefined() // not killed at the timeout: it exited on its own
    expect(host.stdout).toBe('0 late\n')
    expect(host.status).toBe(0)
  })
})
