// Read rules (`tools.denyRead` / `tools.allowRead`): the credential stores under the home folder are
// denied from the start, the tools row's config adds and lets through paths, the nearest rule
// decides, and a rule goes with its plugin.
import { Context } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { CREDENTIAL_STORES, type ToolRuntimeConfig } from '@loom/tools'
import { allowedBelow, readDenial, rulesFor, type ReadRules } from '@loom/tools/workspace'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { host } from './helpers.ts'

let base: string
let home: string
const savedHome = process.env.HOME

beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'loom-read-rules-')))
  home = join(base, 'home')
  mkdirSync(home)
  // The runtime reads the home folder when it starts.
  process.env.HOME = home
})

afterEach(() => {
  process.env.HOME = savedHome
  rmSync(base, { recursive: true, force: true })
})

/** A runtime booted with this tools-row config, in a project folder `base/project`. */
async function runtime(config: Partial<ToolRuntimeConfig>) {
  const root = new Context()
  root.baseUrl = pathToFileURL(join(base, 'project') + '/').href
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime, ToolRuntime.Config(config as ToolRuntimeConfig))
  return root.get('tools') as ToolRuntime
}

describe('tools.readRules', () => {
  it('denies the credential stores under the home folder from the start, each with what it holds', async () => {
    const { tools } = await host()
    const denied = (path: string) => tools.readDenial(join(home, path))
    expect(denied('.ssh/id_ed25519')).toMatchObject({ path: join(home, '.ssh'), reason: 'a credential store: SSH keys', owner: '@loom/tools' })
    expect(denied('.docker/config.json')?.reason).toBe('a credential store: Docker registry logins')
    for (const path of ['.aws/credentials', '.gnupg/private-keys-v1.d/x.key', '.config/gh/hosts.yml', '.kube/config', '.netrc', '.npmrc', '.pgpass']) {
      expect(denied(path), path).toBeDefined()
    }
    // Beside them: readable.
    for (const path of ['.docker/daemon.json', '.sshrc', '.config/git/config', '.bashrc', 'project/.npmrc']) expect(denied(path), path).toBeUndefined()
    expect(tools.readRules().deny.map(rule => rule.path)).toEqual(CREDENTIAL_STORES.map(([path]) => join(home, path)))
  })

  it('the nearest rule decides; at the same path, allow wins; a rule ends with its plugin', async () => {
    const h = await host()
    const owner = await h.plugin('deployment')
    owner.tools.allowRead(join(home, '.ssh', 'known_hosts'), 'ssh checks hosts')
    owner.tools.denyRead(join(base, 'vault'), 'our secrets')
    owner.tools.allowRead(join(base, 'vault', 'public'), 'published')
    owner.tools.denyRead(join(base, 'vault', 'public', 'draft'), 'not yet')
    expect(h.tools.readDenial(join(home, '.ssh', 'known_hosts'))).toBeUndefined()
    expect(h.tools.readDenial(join(home, '.ssh', 'id_rsa'))?.reason).toBe('a credential store: SSH keys')
    expect(h.tools.readDenial(join(base, 'vault', 'db.key'))).toMatchObject({ reason: 'our secrets', owner: 'deployment' })
    expect(h.tools.readDenial(join(base, 'vault', 'public', 'a.txt'))).toBeUndefined()
    expect(h.tools.readDenial(join(base, 'vault', 'public', 'draft', 'b.txt'))?.reason).toBe('not yet')
    // A prefix that is not a folder above it covers nothing.
    expect(h.tools.readDenial(join(base, 'vaults', 'x'))).toBeUndefined()
    owner.tools.allowRead(join(base, 'vault'), 'after all')
    expect(h.tools.readDenial(join(base, 'vault', 'db.key'))).toBeUndefined()
    const snapshot = h.tools.readRules()
    expect(h.tools.readRules()).toBe(snapshot)
    await (owner as Context).fiber.dispose()
    expect(h.tools.readRules()).not.toBe(snapshot)
    expect(h.tools.readDenial(join(home, '.ssh', 'known_hosts'))).toBeDefined()
    expect(h.tools.readDenial(join(base, 'vault', 'db.key'))).toBeUndefined()
  })

  it('resolves a rule through symlinks, and refuses a relative path', async () => {
    const h = await host()
    mkdirSync(join(base, 'real'))
    symlinkSync(join(base, 'real'), join(base, 'link'))
    h.ctx.tools.denyRead(join(base, 'link'), 'behind a link')
    expect(h.tools.readDenial(join(base, 'real', 'x'))?.reason).toBe('behind a link')
    expect(() => h.ctx.tools.denyRead('secrets', 'x')).toThrow('tools.denyRead() takes an absolute path, got "secrets"')
    expect(() => h.ctx.tools.allowRead('~/.ssh', 'x')).toThrow('tools.allowRead() takes an absolute path, got "~/.ssh"')
  })

  it('config: denyRead and allowRead of the tools row, relative to the project folder or ~/', async () => {
    const tools = await runtime({ denyRead: ['deploy/keys', '~/.config/acme'], allowRead: ['~/.ssh/known_hosts', '~/.config/gh'] })
    expect(tools.readDenial(join(base, 'project', 'deploy', 'keys', 'prod.pem'))?.reason).toBe('the deployment lists it under denyRead (@loom/tools)')
    expect(tools.readDenial(join(home, '.config', 'acme', 'token'))).toBeDefined()
    expect(tools.readDenial(join(home, '.ssh', 'known_hosts'))).toBeUndefined()
    expect(tools.readDenial(join(home, '.config', 'gh', 'hosts.yml'))).toBeUndefined()
    expect(tools.readDenial(join(home, '.ssh', 'id_ed25519'))).toBeDefined()
  })
})

describe('the rules as data (what a search worker checks)', () => {
  const rule = (path: string) => ({ path, reason: 'r', owner: 'o' })
  const rules: ReadRules = { deny: [rule('/h/.ssh'), rule('/h/.aws'), rule('/srv/keys')], allow: [rule('/h/.ssh/known_hosts')] }

  it('allowedBelow: a denied folder a walk must enter', () => {
    expect(allowedBelow(rules, '/h/.ssh')).toBe(true)
    expect(allowedBelow(rules, '/h/.aws')).toBe(false)
    expect(allowedBelow(rules, '/h/.ssh/known_hosts')).toBe(false)
  })

  it('rulesFor: only the rules at, above or below a folder', () => {
    expect(rulesFor(rules, '/h')).toEqual({ deny: [rule('/h/.ssh'), rule('/h/.aws')], allow: [rule('/h/.ssh/known_hosts')] })
    expect(rulesFor(rules, '/h/.aws/sub')).toEqual({ deny: [rule('/h/.aws')], allow: [] })
    expect(rulesFor(rules, '/work')).toEqual({ deny: [], allow: [] })
    expect(readDenial(rules, '/')).toBeUndefined()
    expect(readDenial({ deny: [rule('/')], allow: [] }, '/etc/passwd')).toBeDefined()
  })
})
