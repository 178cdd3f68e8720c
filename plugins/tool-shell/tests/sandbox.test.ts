// Confinement through bubblewrap: what a command may write and reach, and what
// Loom says when it runs unconfined. The bwrap tests skip, with the probe's reason,
// where bubblewrap does not work. A host directory outside the workspace is made
// under the home directory: /tmp is the sandbox's own.
import { execFile } from 'node:child_process'
import { chmodSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { homedir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as shell from '../src/index.ts'
import { findExecutable } from '../src/sandbox.ts'
import { tempDir, textOf, uniqueSleep } from './helpers.ts'

const bwrap = shell.probeBwrap()
const bwrapWithNetwork = shell.probeBwrap(true)

let host: Host
let work: ReturnType<typeof tempDir>
let outside: string

beforeEach(async () => {
  work = tempDir()
  outside = realpathSync(mkdtempSync(join(homedir(), '.loom-tool-shell-')))
  host = await createHost({ cwd: work.dir, approve: () => ({ kind: 'allow' }) })
})

afterEach(async () => {
  await host.dispose()
  work.remove()
  rmSync(outside, { recursive: true, force: true })
})

const bash = (command: string) => host.callTool('bash', { command }).then(textOf)
const unique = () => `loom-tool-shell-${uniqueSleep()}`
const unconfinedWarnings = () => host.logs.filter(log => log.type === 'warn' && log.text.includes('commands run unconfined'))

/** A TCP server on the host's loopback; counts the connections it accepts. */
async function loopbackServer(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let connections = 0
  const server: Server = createServer(socket => {
    connections++
    socket.end()
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return { port, connections: () => connections, close: () => new Promise(resolve => server.close(() => resolve())) }
}

describe.skipIf(!bwrap.ok)('with bubblewrap', () => {
  it('a write inside the workspace succeeds, and the host sees it', async () => {
    await host.mount(shell, { sandbox: 'bwrap' })
    expect(await bash('mkdir -p sub && echo hi > sub/a.txt && cat sub/a.txt')).toBe('hi\n[exit code: 0]')
    expect(readFileSync(join(work.dir, 'sub', 'a.txt'), 'utf8')).toBe('hi\n')
  })

  it('a write outside the workspace fails read-only: another directory, $HOME', async () => {
    await host.mount(shell, { sandbox: 'bwrap' })
    const file = join(outside, 'x.txt')
    const inHome = join(homedir(), unique())
    const text = await bash(`echo x > ${file}; echo y > ~/${basename(inHome)}`)
    rmSync(inHome, { force: true })
    expect(text).toContain(`${file}: Read-only file system`)
    expect(text).toContain(`${inHome}: Read-only file system`)
    expect(text.endsWith('[exit code: 1]')).toBe(true)
    expect(existsSync(file)).toBe(false)
  })

  it.skipIf(process.getuid?.() !== 0)('as root, a command cannot remount the filesystem writable', async () => {
    await host.mount(shell, { sandbox: 'bwrap' })
    const file = join(outside, 'x.txt')
    const text = await bash(`mount -o remount,rw,bind / 2>/dev/null; echo x > ${file}`)
    expect(text).toContain(`${file}: Read-only file system`)
    expect(existsSync(file)).toBe(false)
  })

  it('/tmp is private: the host files are not there, and what the command writes there is gone after the call', async () => {
    await host.mount(shell, { sandbox: 'bwrap' })
    const fromHost = `/tmp/${unique()}`
    const fromCommand = `/tmp/${unique()}`
    writeFileSync(fromHost, 'host\n')
    try {
      expect(await bash(`test -e ${fromHost} && echo host-file-visible; echo "TMPDIR=$TMPDIR"; echo inside > ${fromCommand} && cat ${fromCommand}`)).toBe(
        'TMPDIR=/tmp\ninside\n[exit code: 0]',
      )
      expect(existsSync(fromCommand)).toBe(false)
    } finally {
      rmSync(fromHost, { force: true })
      rmSync(fromCommand, { force: true })
    }
  })

  // It starts a Node server inside the sandbox: slow on a loaded machine. Node's
  // folder is made visible, as a checkout under /tmp is hidden by the private /tmp.
  it('there is no network by default, only a loopback of its own where a server the command starts works', { timeout: 30_000 }, async () => {
    await host.mount(shell, { sandbox: 'bwrap', writable: [dirname(process.execPath)] })
    const server = await loopbackServer()
    try {
      const text = await bash(`exec 3<>/dev/tcp/127.0.0.1/${server.port} && echo connected`)
      expect(text).toMatch(/Connection refused/)
      expect(text.endsWith('[exit code: 1]')).toBe(true)
      expect(server.connections()).toBe(0)
    } finally {
      await server.close()
    }
    const serve = `require('node:net').createServer(s => s.end('pong\\n')).listen(0, '127.0.0.1', function () { require('node:fs').writeFileSync('port', String(this.address().port)) })`
    expect(
      await bash(
        `"${process.execPath}" -e "${serve}" & for i in $(seq 400); do [ -s port ] && break; sleep 0.05; done; exec 3<>/dev/tcp/127.0.0.1/$(cat port); cat <&3`,
      ),
    ).toBe('pong\n[exit code: 0]')
  })

  it.skipIf(!bwrapWithNetwork.ok)('network: true keeps the host network', async () => {
    await host.mount(shell, { sandbox: 'bwrap', network: true })
    const server = await loopbackServer()
    try {
      expect(await bash(`exec 3<>/dev/tcp/127.0.0.1/${server.port} && echo connected`)).toBe('connected\n[exit code: 0]')
      expect(server.connections()).toBe(1)
    } finally {
      await server.close()
    }
  })

  it('writable paths (absolute or ~/...) are writable, their neighbours are not', async () => {
    const sibling = realpathSync(mkdtempSync(join(homedir(), '.loom-tool-shell-')))
    try {
      await host.mount(shell, { sandbox: 'bwrap', writable: [`~/${basename(outside)}`] })
      const text = await bash(`echo w > ${outside}/w.txt && cat ${outside}/w.txt; echo s > ${sibling}/s.txt`)
      expect(text).toMatch(new RegExp(`^w\\n\\[stderr\\]\\n.*${sibling}/s.txt: Read-only file system\\n\\[exit code: 1\\]$`))
      expect(readFileSync(join(outside, 'w.txt'), 'utf8')).toBe('w\n')
      expect(existsSync(join(sibling, 's.txt'))).toBe(false)
    } finally {
      rmSync(sibling, { recursive: true, force: true })
    }
  })

  it('says nothing about running unconfined', async () => {
    await host.mount(shell, { sandbox: 'bwrap' })
    await bash('true')
    expect(unconfinedWarnings()).toEqual([])
    expect(host.approvals).toEqual([])
  })
})
if (!bwrap.ok) it.skip(`bubblewrap does not work here: ${bwrap.reason}`, () => {})

describe('unconfined', () => {
  it("sandbox 'none' warns once, asks about every command whatever the rules say, and a yes writes anywhere", async () => {
    await host.mount(shell, { sandbox: 'none' })
    // A rule that allows everything does not decide an unconfined command.
    host.ctx.on('tools/pre-execute', () => ({ kind: 'allow' }))
    const file = join(outside, 'x.txt')
    expect(await bash(`echo x > ${file}`)).toBe('(no output)\n[exit code: 0]')
    expect(await bash('true')).toBe('(no output)\n[exit code: 0]')
    expect(unconfinedWarnings().map(log => log.text)).toEqual([
      "config sandbox is 'none': commands run unconfined, each asked about first, refused where nobody can answer",
    ])
    expect(existsSync(file)).toBe(true)
    expect(host.approvals.map(request => [request.rule, request.unattended, request.effects])).toEqual([
      [shell.UNCONFINED_RULE, 'deny', ['execute']],
      [shell.UNCONFINED_RULE, 'deny', ['execute']],
    ])
    expect(host.approvals[0].reason).toBe(
      "config sandbox is 'none', so the command would run without a sandbox, as you: able to read and change every file you can, and to reach the network",
    )
  })

  it('a no keeps the command from running; unattended: allow is the answer for nobody to ask', async () => {
    const denying = await createHost({ cwd: work.dir, approve: () => ({ kind: 'deny', note: 'not unconfined' }) })
    try {
      await denying.mount(shell, { sandbox: 'none', unattended: 'allow' })
      const file = join(outside, 'y.txt')
      const result = await denying.callTool('bash', { command: `echo y > ${file}` })
      expect(result.isError).toBe(true)
      expect(textOf(result)).toContain('not unconfined')
      expect(existsSync(file)).toBe(false)
      expect(denying.approvals[0]).toMatchObject({ rule: shell.UNCONFINED_RULE, unattended: 'allow' })
    } finally {
      await denying.dispose()
    }
  })
})

describe('config', () => {
  it('writable paths must be absolute and exist, naming the path', async () => {
    await expect(host.mount(shell, { writable: ['rel/dir'] })).rejects.toThrow(/config writable path "rel\/dir" is not absolute/)
    const missing = join(outside, 'missing')
    await expect(host.mount(shell, { writable: [missing] })).rejects.toThrow(new RegExp(`config writable path "${missing}" cannot be made writable: ENOENT`))
  })

  it('the guidance says what is confined, as the sandbox came to here', () => {
    const guidance = (config: Partial<shell.Config>) =>
      shell
        .guidance(shell.Config(config as shell.Config), config.sandbox === 'none' ? 'none' : 'bwrap')
        .split('\n')
        .at(-1)
    expect(guidance({ sandbox: 'bwrap' })).toBe(
      'Commands run in a sandbox: credential stores (`~/.ssh`, `~/.aws` and the like) are hidden and every other file is readable, but only the workspace root and `/tmp` (private to the call, emptied after it) are writable, a write elsewhere fails with `Read-only file system`; there is no network (downloads, package installs and `git fetch` fail; a server the command starts on localhost works).',
    )
    expect(guidance({ sandbox: 'auto', network: true, writable: ['~/.cache'] })).toBe(
      'Commands run in a sandbox: credential stores (`~/.ssh`, `~/.aws` and the like) are hidden and every other file is readable, but only the workspace root, `~/.cache` and `/tmp` (private to the call, emptied after it) are writable, a write elsewhere fails with `Read-only file system`.',
    )
    expect(guidance({ sandbox: 'none' })).toBe(
      'Commands are not sandboxed: each one is approved by the user first, and runs with their rights (files anywhere, the network), so keep changes inside the workspace root.',
    )
  })
})

// Where bubblewrap works but network namespaces are not allowed: a `bwrap` first in
// PATH refuses `--unshare-net`. The probe is once per process, so each case runs
// in a host process of its own.
describe.skipIf(!bwrap.ok)('a bubblewrap without network namespaces', () => {
  const fixture = fileURLToPath(new URL('./fixtures/fallback.ts', import.meta.url))
  const refusal = 'bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted'
  let fake: ReturnType<typeof tempDir>

  beforeEach(() => {
    fake = tempDir('loom-tool-shell-bwrap-')
    const script = `#!/bin/sh\nfor arg; do [ "$arg" = --unshare-net ] && { echo '${refusal}' >&2; exit 1; }; done\nexec "${findExecutable('bwrap', '/')}" "$@"\n`
    writeFileSync(join(fake.dir, 'bwrap'), script)
    chmodSync(join(fake.dir, 'bwrap'), 0o755)
  })

  afterEach(() => fake.remove())

  const start = async (config: Partial<shell.Config>) => {
    const env = { ...process.env, PATH: `${fake.dir}:${process.env.PATH}` }
    const { stdout } = await promisify(execFile)(process.execPath, [fixture, JSON.stringify(config)], { env, cwd: work.dir })
    return JSON.parse(stdout) as { text?: string; error?: string; warnings: string[] }
  }

  it("sandbox 'auto' falls back to unconfined, saying why", { timeout: 20_000 }, async () => {
    const { text, warnings } = await start({ sandbox: 'auto' })
    expect(text).toMatch(/^\d+\n\[exit code: 0\]$/)
    expect(text).not.toBe('2\n[exit code: 0]')
    expect(warnings).toEqual([
      `bubblewrap does not work here (exit 1: ${refusal}): commands run unconfined, each asked about first, refused where nobody can answer`,
    ])
  })

  it("sandbox 'auto' with network: true still confines", { timeout: 20_000 }, async () => {
    expect(await start({ sandbox: 'auto', network: true })).toEqual({ text: '2\n[exit code: 0]', warnings: [] })
  })

  it("sandbox 'bwrap' fails the start, naming the reason", { timeout: 20_000 }, async () => {
    const { error } = await start({ sandbox: 'bwrap' })
    expect(error).toContain(`config sandbox is 'bwrap' but bubblewrap does not work here (exit 1: ${refusal})`)
  })
})
