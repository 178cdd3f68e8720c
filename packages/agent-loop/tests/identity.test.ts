// A plugin's identity for drift: a published package by name and version, a
// plugin loaded by path or a workspace package by the hash of its source. The
// fibers here get the loader row the Cordis loader would give them (`fiber.entry`).
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { host } from './request-support.ts'

const sha = (text: string) => createHash('sha256').update(text).digest('hex')
const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function folder(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'loom-identity-'))
  folders.push(root)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

/** A host with plugin `name` mounted as the loader mounts the row `specifier` (resolved against `base`). */
async function mounted(name: string, specifier: string, base: string) {
  const { root, ctx } = await host()
  const fiber = await root.plugin({ name, apply() {} })
  Object.assign(fiber, { entry: { options: { name: specifier }, parent: { tree: { ctx: { baseUrl: pathToFileURL(base).href + '/' } } } } })
  return { ctx, fiber }
}

describe('plugin identity', () => {
  it('a plugin loaded by path: the hash of its module file, once per loaded plugin', async () => {
    const dir = folder({ 'greeter.ts': 'export const v = 1\n', 'package.json': '{ "name": "the-project", "version": "3.0.0" }' })
    const { ctx, fiber } = await mounted('greeter', './greeter.ts', dir)
    expect(ctx.agents.pluginIdentity('greeter')).toEqual({ sourceHash: sha('export const v = 1\n') })

    writeFileSync(join(dir, 'greeter.ts'), 'export const v = 2\n')
    // The same loaded plugin keeps the identity it was loaded with; a reload is a new fiber.
    expect(ctx.agents.pluginIdentity('greeter')).toEqual({ sourceHash: sha('export const v = 1\n') })
    await fiber.dispose()
    const again = await mounted('greeter', join(dir, 'greeter.ts'), dir)
    expect(again.ctx.agents.pluginIdentity('greeter')).toEqual({ sourceHash: sha('export const v = 2\n') })
  })

  it('a workspace package: its version and the hash of its sources, without dependencies, builds, tests and caches', async () => {
    const dir = folder({
      'package.json': '{ "name": "ws-plugin", "version": "0.1.0" }',
      'src/index.ts': 'export const v = 1\n',
      'node_modules/dep/index.js': 'one',
      '.git/HEAD': 'ref: main',
      'dist/index.js': 'built once',
      'tests/a.test.ts': 'test one',
      'tsconfig.build.tsbuildinfo': '{}',
    })
    const first = await mounted('ws-plugin', pathToFileURL(join(dir, 'src/index.ts')).href, dir)
    const identity = first.ctx.agents.pluginIdentity('ws-plugin')
    expect(identity).toEqual({ version: '0.1.0', sourceHash: expect.stringMatching(/^[0-9a-f]{64}$/) })

    writeFileSync(join(dir, 'node_modules/dep/index.js'), 'two')
    writeFileSync(join(dir, '.git/HEAD'), 'ref: other')
    // A build or a test run in the checkout is not an edit of the plugin.
    writeFileSync(join(dir, 'dist/index.js'), 'built again')
    writeFileSync(join(dir, 'tests/a.test.ts'), 'test two')
    writeFileSync(join(dir, 'tsconfig.build.tsbuildinfo'), '{"v":2}')
    const same = await mounted('ws-plugin', pathToFileURL(join(dir, 'src/index.ts')).href, dir)
    expect(same.ctx.agents.pluginIdentity('ws-plugin')).toEqual(identity)

    writeFileSync(join(dir, 'src/index.ts'), 'export const v = 2\n')
    const edited = await mounted('ws-plugin', pathToFileURL(join(dir, 'src/index.ts')).href, dir)
    const now = edited.ctx.agents.pluginIdentity('ws-plugin')
    expect(now.version).toBe('0.1.0')
    expect(now.sourceHash).not.toBe(identity.sourceHash)
  })

  it('a package installed from a registry: its version alone', async () => {
    const dir = folder({
      'node_modules/pub-plugin/package.json': '{ "name": "pub-plugin", "version": "2.0.0", "main": "index.js" }',
      'node_modules/pub-plugin/index.js': 'module.exports = {}',
    })
    const { ctx } = await mounted('pub-plugin', 'pub-plugin', dir)
    expect(ctx.agents.pluginIdentity('pub-plugin')).toEqual({ version: '2.0.0' })
  })

  it('a plugin no loader row mounted: its package version when found, else nothing', async () => {
    const { ctx } = await host()
    expect(ctx.agents.pluginIdentity('not-loaded')).toEqual({})
  })
})
