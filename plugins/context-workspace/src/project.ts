// What the project's own files say about how it is built and tested: the
// package manager (the `packageManager` field of a package.json, else the
// lockfile) and the test command (`scripts.test` of the nearest package.json).
// Read from the working directory up to the repository root (the folder holding
// `.git`), nearest first, so a package of a monorepo finds the root's lockfile.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, sep } from 'node:path'

/** Lockfiles and the package manager that writes each. */
export const LOCKFILES: readonly (readonly [file: string, manager: string])[] = [
  ['pnpm-lock.yaml', 'pnpm'],
  ['package-lock.json', 'npm'],
  ['npm-shrinkwrap.json', 'npm'],
  ['yarn.lock', 'yarn'],
  ['bun.lock', 'bun'],
  ['bun.lockb', 'bun'],
]

export interface ProjectFacts {
  /** The manager and the file that says so (`pnpm-lock.yaml`, `package.json packageManager`). */
  packageManager?: { name: string; from: string }
  /** Lockfiles of different managers side by side: none is asserted. */
  lockfiles?: string[]
  /** The command that runs the `test` script, and where it was read. */
  test?: { command: string; from: string }
}

interface PackageJson {
  packageManager?: string
  test?: boolean
}

/** Parsed package.json files by path, while their mtime and size stay the same: one `stat` per step. */
export class PackageJsonCache {
  readonly #entries = new Map<string, { stamp: string; value: PackageJson | undefined }>()

  read(path: string): PackageJson | undefined {
    const stat = statSync(path, { throwIfNoEntry: false })
    if (!stat?.isFile()) return undefined
    const stamp = `${stat.mtimeMs}:${stat.size}:${stat.ino}`
    const cached = this.#entries.get(path)
    if (cached?.stamp === stamp) return cached.value
    let value: PackageJson | undefined
    try {
      const json = JSON.parse(readFileSync(path, 'utf8'))
      const manager = typeof json?.packageManager === 'string' ? /^([a-z]+)@/.exec(json.packageManager)?.[1] : undefined
      value = { ...(manager && { packageManager: manager }), test: typeof json?.scripts?.test === 'string' && json.scripts.test.trim() !== '' }
    } catch {
      // Not JSON (yet: an editor may be mid-write): it says nothing.
      value = undefined
    }
    if (this.#entries.size >= 64) this.#entries.clear()
    this.#entries.set(path, { stamp, value })
    return value
  }
}

/** `npm test`, `pnpm test`, `yarn test`; `bun test` is bun's own runner, so `bun run test`. */
export function testCommand(manager: string | undefined): string {
  return manager === 'bun' ? 'bun run test' : `${manager ?? 'npm'} test`
}

/** The project facts of `cwd`; paths in `from` are relative to it. */
export function readProjectFacts(cwd: string, cache: PackageJsonCache): ProjectFacts {
  const label = (path: string) => relative(cwd, path).split(sep).join('/')
  let declared: ProjectFacts['packageManager']
  let locked: { path: string; manager: string }[] | undefined
  let hasTest: string | undefined
  let nearest = true
  for (let at = cwd; ; at = dirname(at)) {
    const manifest = join(at, 'package.json')
    const pkg = cache.read(manifest)
    if (pkg) {
      if (nearest && pkg.test) hasTest = `${label(manifest)} scripts.test`
      nearest = false
      if (!declared && pkg.packageManager) declared = { name: pkg.packageManager, from: `${label(manifest)} packageManager` }
    }
    if (!locked) {
      const found = LOCKFILES.filter(([file]) => existsSync(join(at, file))).map(([file, manager]) => ({ path: label(join(at, file)), manager }))
      if (found.length) locked = found
    }
    if (existsSync(join(at, '.git')) || dirname(at) === at) break
  }
  const managers = new Set(locked?.map(lock => lock.manager))
  const packageManager = declared ?? (locked && managers.size === 1 ? { name: locked[0].manager, from: locked[0].path } : undefined)
  return {
    ...(packageManager && { packageManager }),
    ...(!packageManager && locked && managers.size > 1 && { lockfiles: locked.map(lock => lock.path) }),
    ...(hasTest && { test: { command: testCommand(packageManager?.name), from: hasTest } }),
  }
}
