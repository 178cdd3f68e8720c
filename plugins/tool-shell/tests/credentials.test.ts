// Credential stores inside bubblewrap: what the read rules deny (`ctx.tools.readRules()`, the
// defaults under the home folder among them) is hidden from commands, a folder as an empty
// read-only one, a file as an unreadable one; an allowed path comes back. HOME is a fake home with
// fake keys, made under /var/tmp: the sandbox's /tmp is its own, and the real home stays untouched.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as shell from '../src/index.ts'
import { tempDir, textOf } from './helpers.ts'

const bwrap = shell.probeBwrap()
const VAR_TMP = '/var/tmp'

const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n'
const DOCKER = '{"auths":{"registry.example":{"auth":"dXNlcjpodW50ZXIy"}}}\n'

let host: Host
let work: ReturnType<typeof tempDir>
let base: string
let home: string
const savedHome = process.env.HOME

/** Writes files under `root`, creating folders. */
function files(root: string, spec: Record<string, string>) {
  for (const [path, text] of Object.entries(spec)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
}

beforeEach(() => {
  work = tempDir()
  base = realpathSync(mkdtempSync(join(VAR_TMP, 'loom-tool-shell-home-')))
  home = join(base, 'home')
  files(home, {
    '.ssh/id_ed25519': KEY,
    '.ssh/known_hosts': 'example.org ssh-ed25519 AAAA\n',
    '.docker/config.json': DOCKER,
    '.aws/credentials': '[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG\n',
    '.profile': 'export EDITOR=vi\n',
  })
  // Read by the tools runtime when it starts: its default rules are under this home.
  process.env.HOME = home
})

afterEach(async () => {
  await host?.dispose()
  process.env.HOME = savedHome
  work.remove()
  rmSync(base, { recursive: true, force: true })
})

const bash = (command: string, cwd = work.dir) => host.callTool('bash', { command }, { cwd }).then(textOf)

describe.skipIf(!bwrap.ok)('credential stores under bubblewrap', () => {
  it('are hidden: ~/.ssh is an empty folder, ~/.docker/config.json unreadable; other files are readable and nothing changes on disk', async () => {
    host = await createHost({ cwd: work.dir })
    await host.mount(shell, { sandbox: 'bwrap' })
    const key = await bash('cat ~/.ssh/id_ed25519')
    expect(key).not.toContain('PRIVATE KEY')
    expect(key).toContain('No such file or directory')
    expect(await bash('ls -A ~/.ssh')).toBe('(no output)\n[exit code: 0]')
    const docker = await bash('cat ~/.docker/config.json')
    expect(docker).not.toContain('auth')
    expect(docker).toContain('Permission denied')
    expect(await bash('cat ~/.aws/credentials')).toContain('No such file or directory')
    // Hidden, and read-only: nothing can be planted there to vanish or to be found later.
    expect(await bash('touch ~/.ssh/authorized_keys')).toContain('Read-only file system')
    expect(await bash('cat ~/.profile')).toBe('export EDITOR=vi\n[exit code: 0]')
    expect(readFileSync(join(home, '.ssh', 'id_ed25519'), 'utf8')).toBe(KEY)
    expect(readFileSync(join(home, '.docker', 'config.json'), 'utf8')).toBe(DOCKER)
  })

  it('stay hidden when the workspace is the home folder, whose writable bind would expose them again', async () => {
    host = await createHost({ cwd: home })
    await host.mount(shell, { sandbox: 'bwrap' })
    expect(await bash('cat .ssh/id_ed25519 .docker/config.json .aws/credentials 2>&1; ls -A .ssh', home)).not.toMatch(/PRIVATE KEY|auth|aws_secret/)
    // The rest of the home folder is the workspace: writable.
    expect(await bash('echo note > notes.txt && cat notes.txt', home)).toBe('note\n[exit code: 0]')
    expect(readFileSync(join(home, 'notes.txt'), 'utf8')).toBe('note\n')
  })

  it('a path allowed on purpose comes back from its hidden folder; a store created after the start is hidden too', async () => {
    host = await createHost({ cwd: work.dir })
    await host.mount(shell, { sandbox: 'bwrap' })
    await host.root.plugin({ name: 'deployment', inject: ['tools'], apply: ctx => void ctx.tools.allowRead(join(home, '.ssh', 'known_hosts'), 'ssh needs it') })
    expect(await bash('ls -A ~/.ssh; cat ~/.ssh/known_hosts')).toBe('known_hosts\nexample.org ssh-ed25519 AAAA\n[exit code: 0]')
    expect(await bash('cat ~/.ssh/id_ed25519')).toContain('No such file or directory')
    files(home, { '.config/gh/hosts.yml': 'github.com:\n  oauth_token: gho_0123456789abcdef\n' })
    expect(await bash('cat ~/.config/gh/hosts.yml')).toContain('No such file or directory')
  })
})
if (!bwrap.ok) it.skip(`bubblewrap does not work here: ${bwrap.reason}`, () => {})

describe('readMounts', () => {
  it('hides the denied paths that exist, and reveals an allowed one only inside a denied folder', async () => {
    host = await createHost({ cwd: work.dir })
    const tools = host.ctx.tools
    const deployment = await host.root.plugin({
      name: 'deployment',
      inject: ['tools'],
      apply: ctx => {
        ctx.tools.allowRead(join(home, '.ssh', 'known_hosts'), 'ssh needs it')
        ctx.tools.allowRead(join(home, '.profile'), 'not denied anyway')
      },
    })
    const mounts = shell.readMounts(tools.readRules())
    expect(mounts).toEqual(
      expect.arrayContaining([
        { path: join(home, '.ssh'), kind: 'dir' },
        { path: join(home, '.aws'), kind: 'dir' },
        { path: join(home, '.docker', 'config.json'), kind: 'file' },
        { path: join(home, '.ssh', 'known_hosts'), kind: 'reveal' },
      ]),
    )
    expect(mounts).toHaveLength(4)
    await deployment.dispose()
    expect(shell.readMounts(tools.readRules()).some(mount => mount.kind === 'reveal')).toBe(false)
    expect(existsSync(join(home, '.gnupg'))).toBe(false)
  })

  it('bwrapArgs: every mount below another comes after it, and a hidden store under the private /tmp outside the workspace is left alone', () => {
    const args = shell.bwrapArgs({
      network: false,
      writable: ['/srv/home'],
      readOnly: ['/srv/home/.loom'],
      hidden: [
        { path: '/srv/home/.ssh/known_hosts', kind: 'reveal' },
        { path: '/srv/home/.ssh', kind: 'dir' },
        { path: '/srv/home/.docker/config.json', kind: 'file' },
        { path: '/tmp/elsewhere/.aws', kind: 'dir' },
      ],
    })
    const mounts = args.slice(args.indexOf('--bind'), args.indexOf('--unshare-net'))
    expect(mounts).toEqual([
      '--bind',
      '/srv/home',
      '/srv/home',
      '--tmpfs',
      '/srv/home/.ssh',
      '--ro-bind-try',
      '/srv/home/.loom',
      '/srv/home/.loom',
      '--ro-bind',
      '/srv/home/.ssh/known_hosts',
      '/srv/home/.ssh/known_hosts',
      '--ro-bind',
      '/dev/null',
      '/srv/home/.docker/config.json',
      '--remount-ro',
      '/srv/home/.ssh',
    ])
  })

  it('bwrapArgs: a protected path inside another needs no mount of its own, unless a writable place lies between', () => {
    const args = shell.bwrapArgs({
      network: false,
      writable: ['/srv/ws', '/srv/ws/vendor/scratch'],
      readOnly: ['/srv/ws/node_modules/a', '/srv/ws/node_modules/a/node_modules/b', '/srv/ws/vendor', '/srv/ws/vendor/scratch/c'],
    })
    const readOnly = args.flatMap((arg, i) => (arg === '--ro-bind-try' ? [args[i + 1]] : []))
    expect(readOnly).toEqual(['/srv/ws/vendor', '/srv/ws/node_modules/a', '/srv/ws/vendor/scratch/c'])
  })
})
