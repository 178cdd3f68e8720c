// A new project that `npm install`s with no registry: every package it depends
// on, found next to the CLI (the tree the CLI was installed in) or in a folder of
// tarballs (`--packs DIR`), is written as a tarball into the project's
// `.loom/packs/`, and a package-lock.json locks each one to its tarball.
//
// Why a lockfile: package.json names the packages as a registry install names
// them (`"@loom/plugin": "^0.1.0"`), and npm installs a locked package from its
// `resolved` location without asking a registry (`npm install` and `npm ci`
// alike). Overrides cannot do it: npm refuses one that changes the spec of a
// direct dependency (EOVERRIDE); nor can a registry setting: npm has no registry
// in a folder. The project's .npmrc turns `omit-lockfile-registry-resolved` off,
// since with it on npm takes `^` ranges for registry packages and drops their
// locations when it rewrites the lockfile.
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join, sep } from 'node:path'
import { packFolder, readTarballManifest } from './tarball.ts'

/** The folder of the tarballs, relative to the project (and the `resolved` of every locked package). */
export const PACKS_FOLDER = '.loom/packs'

/** The project's .npmrc: what keeps npm from dropping the tarballs' locations from the lockfile. */
export const NPMRC = `# package-lock.json installs the Loom packages from .loom/packs/ (they are on no
# registry). With this setting on, npm would drop those locations from the lockfile
# as if they were registry packages, and the next install would ask a registry.
omit-lockfile-registry-resolved=false
`

type Deps = Record<string, string>

/** The fields of a package.json read here. */
export interface Manifest {
  name: string
  version: string
  license?: string
  dependencies?: Deps
  devDependencies?: Deps
  optionalDependencies?: Deps
  peerDependencies?: Deps
  peerDependenciesMeta?: Record<string, { optional?: boolean }>
  bundleDependencies?: string[] | boolean
  bundledDependencies?: string[] | boolean
  bin?: string | Deps
  engines?: Deps
  os?: string[]
  cpu?: string[]
  funding?: unknown
  scripts?: Deps
}

type EdgeType = 'prod' | 'dev' | 'optional' | 'peer' | 'peerOptional'

interface Edge {
  name: string
  type: EdgeType
  /** The package that satisfies it; absent when none was found (then npm asks the registry, or leaves an optional one out). */
  to?: Package
}

/** One package of the project's tree, by name and version. */
interface Package {
  id: string
  manifest: Manifest
  /** Where its own dependencies are looked up: its installed folder, else the CLI's. */
  base: string
  /** Its tarball: a file of --packs, or made from its installed folder. */
  source: { tarball: string } | { folder: string }
  edges: Edge[]
}

/** What the project's install will take from where. */
export interface OfflineInstall {
  /** How many packages are locked to a tarball of .loom/packs. */
  locked: number
  /** The project's own dependencies npm fetches from the registry, since they (or a package under them) were not found. */
  fromRegistry: string[]
  /** Why, one line per package not found. */
  missing: string[]
}

/** Where a project's packages are found: installed from the folder `from` up (Node's lookup), or as tarballs of a folder, which win. */
export interface Sources {
  from: string
  /** The tarballs of `--packs DIR`, by package name. */
  packed: Map<string, { file: string; manifest: Manifest }>
}

/** The sources of packages: `from` (an installed CLI's folder) and the folder `packs` of tarballs, read now (a bad one throws, naming it). */
export function packageSources(from: string, packs?: string): Sources {
  return { from, packed: packs ? tarballsIn(packs) : new Map() }
}

/**
 * Writes `.loom/packs/` and package-lock.json into `project` for the project
 * whose package.json is `manifest`: its dependencies and theirs, each from
 * `sources`; what is not found there is left to the registry.
 */
export function writeOfflineInstall(project: string, manifest: Manifest, sources: Sources): OfflineInstall {
  const found = findPackages(manifest, sources)
  unlinkIncomplete(found.root, found.packages)
  const tree = layOut(found.root)
  const placed = [...new Set(tree.slice(1).map(place => place.node))]
  const files = writeTarballs(join(project, PACKS_FOLDER), placed)
  writeFileSync(join(project, 'package-lock.json'), `${JSON.stringify(lockfile(manifest, tree, files), null, 2)}\n`)
  writeFileSync(join(project, '.npmrc'), NPMRC)
  const required = found.root.edges.filter(edge => edge.type !== 'optional' && edge.type !== 'peerOptional')
  return { locked: placed.length, fromRegistry: required.filter(edge => !edge.to).map(edge => edge.name), missing: found.missing }
}

/** The version of `name` the project gets without a registry: its tarball of --packs, else the copy installed from `from` up. */
export function versionFound(name: string, sources: Sources): string | undefined {
  const packed = sources.packed.get(name)
  if (packed) return packed.manifest.version
  const installed = installedFolder(name, sources.from)
  return installed && isInstalledCopy(installed) ? readManifest(installed).version : undefined
}

// ---- finding the packages -------------------------------------------------

/** The project's dependencies and theirs, each found once by name and version. */
function findPackages(manifest: Manifest, sources: Sources) {
  const { packed, from } = sources
  const byId = new Map<string, Package>()
  const missing: string[] = []

  /** The package `name` as seen from the folder `base`: the tarball of --packs, else the installed copy; `known`: only one already found. */
  const lookup = (name: string, base: string, known = false): Package | string => {
    const installed = installedFolder(name, base) ?? (packed.has(name) ? installedFolder(name, from) : undefined)
    const tarball = packed.get(name)
    if (tarball) return packageOf(tarball.manifest, { tarball: tarball.file }, installed ?? from, known)
    if (!installed) return packed.size > 0 ? 'not found next to the CLI or in --packs' : 'not found next to the CLI'
    if (!isInstalledCopy(installed)) return `${installed} is a workspace package, not an installed one (pack it: --packs DIR)`
    return packageOf(readManifest(installed), { folder: installed }, installed, known)
  }
  const packageOf = (manifest: Manifest, source: Package['source'], base: string, known: boolean): Package | string => {
    const id = `${manifest.name}@${manifest.version}`
    const existing = byId.get(id)
    if (existing || known) return existing ?? 'not in the tree'
    const created: Package = { id, manifest, base, source, edges: edgesOf(manifest, false) }
    byId.set(id, created)
    queue.push(created)
    return created
  }

  const root: Package = { id: '', manifest, base: from, source: { folder: from }, edges: edgesOf(manifest, true) }
  const queue: Package[] = [root]
  for (const node of queue) {
    for (const edge of node.edges) {
      // An optional peer is installed only when something else brings it: linked below if it is in the tree.
      if (edge.type === 'peerOptional') continue
      const target = lookup(edge.name, node.base)
      if (typeof target !== 'string') edge.to = target
      else if (edge.type !== 'optional') missing.push(`${edge.name} (for ${node.id || manifest.name}): ${target}`)
    }
  }
  for (const node of queue) {
    for (const edge of node.edges) {
      if (edge.type !== 'peerOptional') continue
      const target = lookup(edge.name, node.base, true)
      if (typeof target !== 'string') edge.to = target
    }
  }
  return { root, packages: queue.slice(1), missing }
}

/** The dependencies of a package as npm reads them, in its order: a later kind replaces an earlier one of the same name; dev ones only for the project. */
function edgesOf(manifest: Manifest, isProject: boolean): Edge[] {
  const edges = new Map<string, Edge>()
  const add = (deps: Deps | undefined, type: (name: string) => EdgeType) => {
    for (const name of Object.keys(deps ?? {})) {
      edges.delete(name)
      edges.set(name, { name, type: type(name) })
    }
  }
  add(manifest.peerDependencies, name => (manifest.peerDependenciesMeta?.[name]?.optional ? 'peerOptional' : 'peer'))
  add(manifest.dependencies, () => 'prod')
  add(manifest.optionalDependencies, () => 'optional')
  if (isProject) add(manifest.devDependencies, () => 'dev')
  return [...edges.values()]
}

/** The installed folder (real path) of package `name` as Node finds it from the folder `from`: `node_modules/name` there or in a folder above. */
function installedFolder(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (basename(dir) !== 'node_modules' && existsSync(join(candidate, 'package.json'))) return realpathSync(candidate)
    if (dirname(dir) === dir) return undefined
  }
}

/** Whether a package folder is an installed copy (under a node_modules folder), not a workspace's source that links there. */
const isInstalledCopy = (folder: string) => folder.split(sep).includes('node_modules')

const readManifest = (folder: string): Manifest => JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8'))

/** The package tarballs of the folder `dir`, by package name. */
function tarballsIn(dir: string): Map<string, { file: string; manifest: Manifest }> {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`--packs ${dir}: no such folder`)
  const found = new Map<string, { file: string; manifest: Manifest }>()
  for (const name of readdirSync(dir).filter(name => name.endsWith('.tgz'))) {
    const file = join(dir, name)
    const manifest = readTarballManifest(file) as unknown as Manifest
    const other = found.get(manifest.name)
    if (other) throw new Error(`--packs ${dir}: two tarballs of ${manifest.name}: ${basename(other.file)} and ${name}; keep one`)
    found.set(manifest.name, { file, manifest })
  }
  if (found.size === 0) throw new Error(`--packs ${dir}: no package tarballs (*.tgz) in it`)
  return found
}

/**
 * Unlinks the packages whose tree was not all found: a package with a required
 * dependency not found (or itself unlinked) is left to the registry, with what
 * it needs; an optional dependency not found is left out, as npm leaves it.
 */
function unlinkIncomplete(root: Package, packages: Package[]) {
  const complete = new Set(packages)
  const required = (edge: Edge) => edge.type === 'prod' || edge.type === 'peer'
  for (let changed = true; changed; ) {
    changed = false
    for (const node of complete) {
      if (node.edges.some(edge => required(edge) && (!edge.to || !complete.has(edge.to)))) {
        complete.delete(node)
        changed = true
      }
    }
  }
  for (const node of [root, ...packages]) for (const edge of node.edges) if (edge.to && !complete.has(edge.to)) edge.to = undefined
}

// ---- laying out node_modules -----------------------------------------------

/** A folder of the project's node_modules tree: the project itself ('') or `node_modules/a/node_modules/b`. */
interface Place {
  path: string
  node: Package
  parent?: Place
  children: Map<string, Place>
}

/** What Node finds for `name` from the package at `place`: its node_modules, then each folder above. */
function resolve(place: Place, name: string): Place | undefined {
  for (let at: Place | undefined = place; at; at = at.parent) {
    const found = at.children.get(name)
    if (found) return found
  }
  return undefined
}

/**
 * The node_modules tree, as npm lays it out: each dependency as high as it can
 * go (the top when nothing there has its name) without hiding another version
 * from a package that already found it. Breadth first, so a package's subtree
 * is empty when its own dependencies are placed.
 */
function layOut(root: Package): Place[] {
  const top: Place = { path: '', node: root, children: new Map() }
  const places: Place[] = [top]
  const done = new Set<Place>()
  for (const place of places) {
    for (const edge of place.node.edges) {
      if (!edge.to || resolve(place, edge.name)?.node === edge.to) continue
      const at = highestFreeFolder(place, edge.name, done)
      const placed: Place = { path: join(at.path, 'node_modules', edge.name).split(sep).join('/'), node: edge.to, parent: at, children: new Map() }
      at.children.set(edge.name, placed)
      places.push(placed)
    }
    done.add(place)
  }
  for (const place of places) {
    for (const edge of place.node.edges) {
      if (edge.to && resolve(place, edge.name)?.node !== edge.to)
        throw new Error(`no node_modules layout gives ${place.node.id || 'the project'} its ${edge.to.id}`)
    }
  }
  return places
}

/**
 * The highest folder from `place` up where `name` can go: below the first one
 * that has another `name` (what `place` finds now), and not where one of the
 * `done` packages would find it instead of the `name` it found.
 */
function highestFreeFolder(place: Place, name: string, done: Set<Place>): Place {
  let best = place
  for (let at = place.parent; at && !at.children.has(name); at = at.parent) {
    const folder = at
    if ([...done].some(other => isUnder(other, folder) && seesThrough(other, folder, name))) break
    best = at
  }
  return best
}

const isUnder = (place: Place, folder: Place) => {
  for (let at: Place | undefined = place; at; at = at.parent) if (at === folder) return true
  return false
}

/** Whether the package at `place` needs `name` and finds it (or nothing) at `folder` or above, where a new `name` would hide it. */
function seesThrough(place: Place, folder: Place, name: string): boolean {
  if (!place.node.edges.some(edge => edge.name === name && edge.to)) return false
  for (let at: Place | undefined = place; at && at !== folder; at = at.parent) if (at.children.has(name)) return false
  return true
}

// ---- the tarballs and the lockfile ------------------------------------------

/** Writes each package's tarball into `dir`; its file name (npm pack's) and integrity by package id. */
function writeTarballs(dir: string, packages: Package[]): Map<string, { file: string; integrity: string }> {
  mkdirSync(dir, { recursive: true })
  const written = new Map<string, { file: string; integrity: string }>()
  for (const node of packages) {
    const file = `${node.manifest.name.replace(/^@/, '').replace('/', '-')}-${node.manifest.version}.tgz`
    const target = join(dir, file)
    if ('tarball' in node.source) {
      copyFileSync(node.source.tarball, target)
    } else {
      const bundled = node.manifest.bundleDependencies ?? node.manifest.bundledDependencies
      const names = bundled === true ? Object.keys(node.manifest.dependencies ?? {}) : bundled || []
      writeFileSync(target, packFolder(node.source.folder, names))
    }
    written.set(node.id, { file, integrity: `sha512-${createHash('sha512').update(readFileSync(target)).digest('base64')}` })
  }
  return written
}

/** npm's flags of each place: dev (only the project's devDependencies lead to it), optional, devOptional, peer (only peer dependencies do). */
function depFlags(places: Place[]) {
  type Flags = { dev: boolean; optional: boolean; devOptional: boolean; peer: boolean }
  const flags = new Map<Place, Flags>(places.map(place => [place, { dev: true, optional: true, devOptional: true, peer: true }]))
  flags.set(places[0], { dev: false, optional: false, devOptional: false, peer: false })
  const work = [places[0]]
  while (work.length > 0) {
    const from = work.pop()!
    const mine = flags.get(from)!
    for (const edge of from.node.edges) {
      const to = edge.to && resolve(from, edge.name)
      if (!to) continue
      const theirs = flags.get(to)!
      const before = JSON.stringify(theirs)
      const dev = edge.type === 'dev'
      const optional = edge.type === 'optional' || edge.type === 'peerOptional'
      const peer = edge.type === 'peer' || edge.type === 'peerOptional'
      if (!mine.devOptional && !mine.dev && !mine.optional && !dev && !optional) theirs.devOptional = false
      if (!mine.dev && !dev) theirs.dev = false
      if (!mine.optional && !optional) theirs.optional = false
      if (!mine.peer && !peer) theirs.peer = false
      if (JSON.stringify(theirs) !== before) work.push(to)
    }
  }
  return flags
}

/** The package-lock.json (version 3) of the tree: each package with its tarball, integrity, flags and the fields npm records. */
function lockfile(manifest: Manifest, places: Place[], files: Map<string, { file: string; integrity: string }>) {
  const flags = depFlags(places)
  // As npm writes them: no empty or false fields, dependencies sorted by name.
  const pick = <T extends object>(fields: T) =>
    Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== false && !isEmpty(value)))
  const sorted = (deps: Deps | undefined) => deps && Object.fromEntries(Object.entries(deps).sort(([a], [b]) => a.localeCompare(b, 'en')))
  const packages: Record<string, unknown> = {
    '': pick({
      name: manifest.name,
      version: manifest.version,
      license: manifest.license,
      dependencies: manifest.dependencies,
      devDependencies: manifest.devDependencies,
      optionalDependencies: manifest.optionalDependencies,
      peerDependencies: manifest.peerDependencies,
      engines: manifest.engines,
    }),
  }
  for (const place of places.slice(1).sort((a, b) => a.path.localeCompare(b.path, 'en'))) {
    const { manifest: pkg, id } = place.node
    const flag = flags.get(place)!
    const scripts = pkg.scripts ?? {}
    packages[place.path] = pick({
      version: pkg.version,
      resolved: `file:${PACKS_FOLDER}/${files.get(id)!.file}`,
      integrity: files.get(id)!.integrity,
      dev: flag.dev,
      optional: flag.optional,
      devOptional: flag.devOptional && !flag.dev && !flag.optional,
      peer: flag.peer,
      hasInstallScript: Boolean(scripts.preinstall || scripts.install || scripts.postinstall),
      license: typeof pkg.license === 'string' ? pkg.license : undefined,
      dependencies: sorted(pkg.dependencies),
      optionalDependencies: sorted(pkg.optionalDependencies),
      bin: binOf(pkg),
      engines: pkg.engines,
      os: pkg.os,
      cpu: pkg.cpu,
      funding: typeof pkg.funding === 'string' ? { url: pkg.funding } : pkg.funding,
      peerDependencies: sorted(pkg.peerDependencies),
      peerDependenciesMeta: pkg.peerDependenciesMeta,
    })
  }
  return { name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages }
}

const isEmpty = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0

/** `bin` as npm records it: always an object, paths without `./`. */
function binOf(pkg: Manifest): Deps | undefined {
  if (!pkg.bin) return undefined
  const bins = typeof pkg.bin === 'string' ? { [pkg.name.split('/').pop()!]: pkg.bin } : pkg.bin
  return Object.fromEntries(Object.entries(bins).map(([name, path]) => [name, path.replace(/^(\.\/)+/, '')]))
}
