// Credential stores are out of the file tools' reach: `read` refuses a path the read rules deny
// (the defaults under the home folder, here a fake one), also through a symlink in the workspace
// and when the workspace is the home folder; `edit` and `write` refuse it too. The model reads why,
// and that the user can let it through.
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import * as toolFs from '../src/index.ts'
import { makeDirs, textOf } from './helpers.ts'

const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n'

let host: Awaited<ReturnType<typeof createHost>>
let ws: string
let home: string
let cleanup: () => Promise<void>
const savedHome = process.env.HOME

beforeEach(async () => {
  let outside: string
  ;({ ws, outside, cleanup } = await makeDirs())
  home = outside
  await mkdir(join(home, '.ssh'))
  await writeFile(join(home, '.ssh', 'id_ed25519'), KEY)
  await writeFile(join(home, '.ssh', 'known_hosts'), 'example.org ssh-ed25519 AAAA\n')
  await mkdir(join(home, '.docker'))
  await writeFile(join(home, '.docker', 'config.json'), '{"auths":{"r":{"auth":"dXNlcjpodW50ZXIy"}}}\n')
  await writeFile(join(home, 'notes.txt'), 'plain\n')
  // The tools runtime reads the home folder when it starts.
  process.env.HOME = home
  host = await createHost()
  await host.mount(toolFs)
})

afterEach(async () => {
  await host.dispose()
  process.env.HOME = savedHome
  await cleanup()
})

async function call(name: string, args: Record<string, unknown>, cwd: string) {
  const result = await host.callTool(name, args, { cwd })
  return { ...result, text: textOf(result) }
}

describe('credential stores', () => {
  it('read refuses a key in the home folder, naming why and how the user allows it', async () => {
    const r = await call('read', { path: '.ssh/id_ed25519' }, home)
    expect(r.isError).toBe(true)
    expect(r.text).toBe(
      `Error: ".ssh/id_ed25519" is out of reach: tools may not read or change "${join(home, '.ssh')}" (a credential store: SSH keys). Do not try to reach it another way; if the task needs it, ask the user, who can let it through with allowRead on the @loom/tools row of loom.yml.`,
    )
    expect((await call('read', { path: '~/.docker/config.json' }, home)).text).toContain('(a credential store: Docker registry logins)')
    // The rest of the home folder reads as usual.
    expect((await call('read', { path: 'notes.txt' }, home)).text).toContain('plain')
  })

  it('a symlink in the workspace pointing at the key is refused like the key', async () => {
    // The workspace holds the home folder's parent: the link's target is inside it, so only the read rules stop it.
    await symlink(join(home, '.ssh', 'id_ed25519'), join(ws, 'innocent.txt'))
    await symlink(join(home, '.ssh'), join(ws, 'keys'))
    const root = join(ws, '..')
    for (const path of ['ws/innocent.txt', 'ws/keys/id_ed25519']) {
      const r = await call('read', { path }, root)
      expect(r.isError, path).toBe(true)
      expect(r.text).toContain('is out of reach')
      expect(r.text).not.toContain('PRIVATE KEY')
    }
  })

  it('edit and write refuse it too (an edit is an oracle of the content, a write could plant a key), and the files stay as they were', async () => {
    const edit = await call('edit', { path: '.ssh/id_ed25519', old_string: 'OPENSSH', new_string: 'X' }, home)
    expect(edit.isError).toBe(true)
    expect(edit.text).toContain('is out of reach')
    const write = await call('write', { path: '.ssh/authorized_keys', content: 'ssh-ed25519 AAAA attacker\n' }, home)
    expect(write.isError).toBe(true)
    expect(await readFile(join(home, '.ssh', 'id_ed25519'), 'utf8')).toBe(KEY)
    await expect(readFile(join(home, '.ssh', 'authorized_keys'))).rejects.toThrow('ENOENT')
  })

  it('a path allowed on purpose reads as usual', async () => {
    await host.root.plugin({
      name: 'deployment',
      inject: ['tools'],
      apply: ctx => void ctx.tools.allowRead(join(home, '.ssh', 'known_hosts'), 'ssh checks hosts'),
    })
    expect((await call('read', { path: '.ssh/known_hosts' }, home)).text).toContain('example.org')
    expect((await call('read', { path: '.ssh/id_ed25519' }, home)).isError).toBe(true)
  })
})
