// A project's packages as tarballs in .loom/packs and a package-lock.json that
// locks them there (src/offline-install.ts), checked against npm itself: the
// packages are installed folders of a small tree as npm lays one out (two
// versions of one package, a peer, a bin, a long path), and npm installs the
// project with the registry unreachable and an empty cache.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Manifest, NPMRC, packageSources, versionFound, writeOfflineInstall } from '../src/offline-install.ts'
import { packFolder, readTarballManifest } from '../src/tarball.ts'
import { NPM_MS, offlineEnv, run, writePackage } from './npm-offline.ts'

const base = mkdtempSync(join(tmpdir(), 'loom-offline-install-'))
afterAll(() => rmSync(base, { recursive: true, force: true }))

const LONG = `lib/${'deeply-nested-folder/'.repeat(6)}index.js`

/**
 * An installed tree as npm lays it out, in `dir`/node_modules: `app` needs `lib`
 * 1 and `tool` (a dev dependency with a bin) needs `lib` 2, nested under it;
 * `plugin` has `app` as a peer; `lib` 1 has a file with a path longer than
 * ustar's 100 bytes.
 */
function installedTree(dir: string) {
  const modules = join(dir, 'node_modules')
  writePackage(
    join(modules, 'app'),
    { name: 'app', version: '1.0.0', license: 'MIT', dependencies: { lib: '^1.0.0' } },
    { 'index.js': 'module.exports = "app"\n' },
  )
  writePackage(
    join(modules, 'lib'),
    { name: 'lib', version: '1.2.0', dependencies: {} },
    { 'index.js': 'module.exports = 1\n', [LONG]: 'module.exports = "deep"\n' },
  )
  writePackage(join(modules, 'plugin'), { name: 'plugin', version: '0.3.0', peerDependencies: { app: '^1.0.0' } }, { 'index.js': '' })
  writePackage(
    join(modules, 'tool'),
    { name: 'tool', version: '2.0.0', bin: './bin/tool.js', dependencies: { lib: '^2.0.0' }, engines: { node: '>=18' } },
    { 'bin/tool.js': '#!/usr/bin/env node\nconsole.log(require("lib"))\n' },
  )
  writePackage(join(modules, 'tool/node_modules/lib'), { name: 'lib', version: '2.0.1' }, { 'index.js': 'module.exports = 2\n' })
  return modules
}

const project = (name: string, manifest: Partial<Manifest>): { dir: string; manifest: Manifest } => {
  const dir = join(base, name)
  const full = { name, version: '1.0.0', ...manifest }
  writePackage(dir, full)
  return { dir, manifest: full }
}

const lockOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8'))
const versionIn = (dir: string, from: string, name: string) => createRequire(join(dir, from, 'x.js'))(`${name}/package.json`).version

describe('a project locked to the tarballs of its packages', () => {
  let from: string
  let dir: string
  let written: { lock: unknown; result: ReturnType<typeof writeOfflineInstall> }

  beforeAll(() => {
    installedTree(join(base, 'cli'))
    from = join(base, 'cli')
    const made = project('locked', { dependencies: { app: '^1.0.0', plugin: '^0.3.0' }, devDependencies: { tool: '^2.0.0' } })
    dir = made.dir
    const result = writeOfflineInstall(dir, made.manifest, packageSources(from))
    written = { lock: lockOf(dir), result }
  })

  it('writes a tarball per package and a lockfile that points at each, with its integrity', () => {
    expect(written.result).toEqual({ locked: 5, fromRegistry: [], missing: [] })
    expect(readdirSync(join(dir, '.loom/packs')).sort()).toEqual(['app-1.0.0.tgz', 'lib-1.2.0.tgz', 'lib-2.0.1.tgz', 'plugin-0.3.0.tgz', 'tool-2.0.0.tgz'])
    const lock = written.lock as { packages: Record<string, { resolved?: string; integrity?: string; dev?: boolean; peer?: boolean }> }
    expect(Object.keys(lock.packages)).toEqual([
      '',
      'node_modules/app',
      'node_modules/lib',
      'node_modules/plugin',
      'node_modules/tool',
      'node_modules/tool/node_modules/lib',
    ])
    expect(lock.packages['']).toEqual({
      name: 'locked',
      version: '1.0.0',
      dependencies: { app: '^1.0.0', plugin: '^0.3.0' },
      devDependencies: { tool: '^2.0.0' },
    })
    for (const [path, entry] of Object.entries(lock.packages).slice(1)) {
      const file = join(dir, entry.resolved!.replace(/^file:/, ''))
      expect(entry.resolved, path).toMatch(/^file:\.loom\/packs\/[a-z]+-[\d.]+\.tgz$/)
      expect(entry.integrity, path).toBe(`sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`)
    }
    // Only the dev dependency's own tree is dev; nothing is reached only through a peer.
    expect(lock.packages['node_modules/tool'].dev).toBe(true)
    expect(lock.packages['node_modules/tool/node_modules/lib'].dev).toBe(true)
    expect(lock.packages['node_modules/lib'].dev).toBeUndefined()
    expect(readFileSync(join(dir, '.npmrc'), 'utf8')).toBe(NPMRC)
  })

  it('npm installs it with no registry, as the lockfile lays it out, and leaves the lockfile as it was', { timeout: 2 * NPM_MS }, async () => {
    const env = offlineEnv()
    await run(['install'], dir, env)
    expect(versionIn(dir, '', 'lib')).toBe('1.2.0')
    expect(versionIn(dir, 'node_modules/app', 'lib')).toBe('1.2.0')
    expect(versionIn(dir, 'node_modules/tool', 'lib')).toBe('2.0.1')
    expect(readFileSync(join(dir, 'node_modules/lib', LONG), 'utf8')).toBe('module.exports = "deep"\n')
    // The bin is linked and runs, executable as it was packed.
    expect((await run(['exec', '--', 'tool'], dir, env)).trim()).toBe('2')
    // npm agrees with every entry (it rewrites the file in its own key order).
    expect(lockOf(dir)).toEqual(written.lock)

    rmSync(join(dir, 'node_modules'), { recursive: true })
    await run(['ci'], dir, offlineEnv())
    expect(versionIn(dir, 'node_modules/tool', 'lib')).toBe('2.0.1')
  })
})

describe('where the packages come from', () => {
  it('a tarball of --packs wins over the installed copy', () => {
    const from = join(base, 'cli-packs')
    installedTree(from)
    const packs = join(base, 'packs')
    mkdirSync(packs)
    writePackage(join(base, 'app-next'), { name: 'app', version: '1.1.0', dependencies: { lib: '^1.0.0' } }, { 'index.js': '' })
    writeFileSync(join(packs, 'app-1.1.0.tgz'), packFolder(join(base, 'app-next')))
    const sources = packageSources(from, packs)
    expect(versionFound('app', sources)).toBe('1.1.0')
    expect(versionFound('lib', sources)).toBe('1.2.0')
    expect(versionFound('missing', sources)).toBeUndefined()

    const { dir, manifest } = project('packed', { dependencies: { app: '^1.0.0' } })
    expect(writeOfflineInstall(dir, manifest, sources).locked).toBe(2)
    const lock = lockOf(dir)
    expect(lock.packages['node_modules/app']).toMatchObject({ version: '1.1.0', resolved: 'file:.loom/packs/app-1.1.0.tgz' })
    expect(readFileSync(join(dir, '.loom/packs/app-1.1.0.tgz'))).toEqual(readFileSync(join(packs, 'app-1.1.0.tgz')))
    expect(lock.packages['node_modules/lib']).toMatchObject({ version: '1.2.0' })
  })

  it('leaves to the registry what was not found, and what needs it, naming why', () => {
    const from = join(base, 'cli-partial')
    const modules = installedTree(from)
    // `plugin` needs `gone`, which is not installed; `ws` links to a workspace's source folder.
    writePackage(join(modules, 'plugin'), { name: 'plugin', version: '0.3.0', dependencies: { gone: '^1.0.0' } })
    writePackage(join(base, 'workspace/ws'), { name: 'ws', version: '0.1.0' })
    symlinkSync(join(base, 'workspace/ws'), join(modules, 'ws'), 'dir')
    const { dir, manifest } = project('partial', { dependencies: { app: '^1.0.0', plugin: '^0.3.0', ws: '^0.1.0', absent: '^1.0.0' } })
    const result = writeOfflineInstall(dir, manifest, packageSources(from))
    expect(result.fromRegistry).toEqual(['plugin', 'ws', 'absent'])
    expect(result.missing).toEqual([
      `ws (for partial): ${join(base, 'workspace/ws')} is a workspace package, not an installed one (pack it: --packs DIR)`,
      'absent (for partial): not found next to the CLI',
      'gone (for plugin@0.3.0): not found next to the CLI',
    ])
    expect(Object.keys(lockOf(dir).packages)).toEqual(['', 'node_modules/app', 'node_modules/lib'])
  })

  it('refuses a --packs folder that is missing, empty or holds two of one package, naming it', () => {
    expect(() => packageSources(base, join(base, 'nowhere'))).toThrow(`--packs ${join(base, 'nowhere')}: no such folder`)
    mkdirSync(join(base, 'empty'))
    expect(() => packageSources(base, join(base, 'empty'))).toThrow(/no package tarballs \(\*\.tgz\) in it/)
    const twice = join(base, 'twice')
    mkdirSync(twice)
    writePackage(join(base, 'one'), { name: 'one', version: '1.0.0' })
    writeFileSync(join(twice, 'one-1.0.0.tgz'), packFolder(join(base, 'one')))
    writeFileSync(join(twice, 'one-copy.tgz'), packFolder(join(base, 'one')))
    expect(() => packageSources(base, twice)).toThrow(/two tarballs of one: one-1\.0\.0\.tgz and one-copy\.tgz; keep one/)
    writeFileSync(join(twice, 'one-copy.tgz'), 'not gzip')
    expect(() => packageSources(base, twice)).toThrow(/one-copy\.tgz is not a gzipped package tarball/)
  })
})

describe('package tarballs', () => {
  it('hold the files under package/, with a pax header for a long path, and give the same bytes for the same content', () => {
    const dir = join(base, 'tarball')
    writePackage(
      dir,
      { name: '@scope/long', version: '1.0.0', bundleDependencies: ['inner'] },
      { [LONG]: 'x', 'node_modules/inner/index.js': 'bundled', 'node_modules/other/index.js': 'not' },
    )
    const packed = packFolder(dir, ['inner'])
    expect(readTarballManifest(writeTemp(packed))).toMatchObject({ name: '@scope/long', version: '1.0.0' })
    expect(packFolder(dir, ['inner'])).toEqual(packed)
    const listing = listTar(packed)
    expect(listing).toEqual([`package/${LONG}`, 'package/node_modules/inner/index.js', 'package/package.json'])
  })
})

function writeTemp(content: Buffer): string {
  const file = join(mkdtempSync(join(base, 'tgz-')), 'x.tgz')
  writeFileSync(file, content)
  return file
}

/** The entry paths of a tarball, as the system's tar reads them. */
const listTar = (packed: Buffer): string[] =>
  execFileSync('tar', ['-tzf', writeTemp(packed)], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .sort()
