// What identifies a plugin for drift: a published package by its name and
// version; a plugin loaded by path, or a workspace package, by the sha256 of its
// source (a version says nothing about an edit of a file nobody publishes).
import type { Context } from '@deepseek-ai/cordis'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, isAbsolute, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { packageVersion } from './provenance.ts'

export interface PluginIdentity {
  /** Its package version, when it has one. */
  version?: string
  /** sha256 of its source, for a plugin loaded by path (its module file) or from a workspace package (its folder). */
  sourceHash?: string
}

/** A fiber as the loader leaves it (the loader declares `entry` on Fiber): the row it mounted, and the folder the row's name resolves against. */
interface Mounted {
  readonly name: string
  readonly entry?: { readonly options: { readonly name: string }; readonly parent?: { readonly tree?: { readonly ctx?: { readonly baseUrl?: string } } } }
}

// Per fiber: computed once per boot, and again for the new fiber a hot reload makes.
const identities = new WeakMap<Mounted, PluginIdentity>()

/**
 * The identity of plugin `name` as loaded in `ctx`'s host: from the module of the
 * loader row that mounted it, else (mounted directly, or a named child of a
 * plugin) its package version alone.
 */
export function pluginIdentity(ctx: Context, name: string): PluginIdentity {
  const fiber = mountedFiber(ctx, name)
  if (!fiber) return versionOnly(packageVersion(name))
  let identity = identities.get(fiber)
  if (!identity) identities.set(fiber, (identity = identityOf(name, modulePath(fiber.entry!))))
  return identity
}

function mountedFiber(ctx: Context, name: string): Mounted | undefined {
  for (const runtime of ctx.registry.values()) {
    for (const fiber of runtime.fibers as Iterable<Mounted>) if (fiber.entry && fiber.name === name) return fiber
  }
  return undefined
}

/** The file a loader row's name designates: a path, a file URL, or a package resolved from the row's folder. */
function modulePath(entry: NonNullable<Mounted['entry']>): string | undefined {
  const specifier = entry.options.name
  const base = entry.parent?.tree?.ctx?.baseUrl
  try {
    if (specifier.startsWith('file:')) return fileURLToPath(specifier)
    if (isAbsolute(specifier)) return specifier
    if (base === undefined || specifier.startsWith('cordis:')) return undefined
    if (specifier.startsWith('.')) return fileURLToPath(new URL(specifier, base))
    return createRequire(new URL('noop.js', base)).resolve(specifier)
  } catch {
    return undefined
  }
}

function identityOf(name: string, file: string | undefined): PluginIdentity {
  if (file === undefined || !existsSync(file)) return versionOnly(packageVersion(name))
  if (statSync(file).isDirectory()) return { ...versionOnly(packageAt(file)?.version), sourceHash: folderHash(file) }
  const pkg = enclosingPackage(file)
  // Installed from a registry: the version says which code it is.
  if (realpathSync(file).split(sep).includes('node_modules')) return versionOnly(pkg?.name === name ? pkg.version : packageVersion(name))
  // A workspace package (the plugin is the package or one of its modules): its whole folder.
  if (pkg && (pkg.name === name || name.startsWith(`${pkg.name}/`))) return { ...versionOnly(pkg.version), sourceHash: folderHash(pkg.folder) }
  // A module loaded by path: that file (the project's package.json, if any, is not the plugin's).
  return { sourceHash: createHash('sha256').update(readFileSync(file)).digest('hex') }
}

function versionOnly(version: string | undefined): PluginIdentity {
  return version === undefined ? {} : { version }
}

interface PackageInfo {
  folder: string
  name?: string
  version?: string
}

function packageAt(folder: string): PackageInfo | undefined {
  const file = join(folder, 'package.json')
  if (!existsSync(file)) return undefined
  try {
    const { name, version } = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown }
    return { folder, ...(typeof name === 'string' && { name }), ...(typeof version === 'string' && { version }) }
  } catch {
    return { folder }
  }
}

/** The package the file belongs to: the nearest folder above it with a package.json. */
function enclosingPackage(file: string): PackageInfo | undefined {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const found = packageAt(dir)
    if (found) return found
    if (dirname(dir) === dir) return undefined
  }
}

/**
 * What a folder's hash leaves out: dependencies, and what builds and tests write or
 * hold (a build of `dist/`, a test run, a cache), which is not the plugin's source
 * and changes while nothing the plugin says does.
 */
const SKIPPED = new Set(['node_modules', 'dist', 'tests', 'test', 'bench', 'coverage'])
const skipped = (name: string) => SKIPPED.has(name) || name.startsWith('.') || name.endsWith('.tsbuildinfo')

/** sha256 over a folder's source files (path and bytes, in name order): see `SKIPPED`; symbolic links are not followed. */
export function folderHash(folder: string): string {
  const hash = createHash('sha256')
  const walk = (dir: string, prefix: string) => {
    const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const entry of entries) {
      if (skipped(entry.name)) continue
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path, `${prefix}${entry.name}/`)
      else if (entry.isFile()) hash.update(`${prefix}${entry.name}\0`).update(readFileSync(path)).update('\0')
    }
  }
  walk(folder, '')
  return hash.digest('hex')
}
