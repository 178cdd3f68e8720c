// What a plugin loaded by path imports, found by reading its source: the relative
// modules (followed while they lie inside the workspace) and the packages of bare
// specifiers, as Node would find them. The next run executes them as the user, so they
// are protected with the plugin (protect.ts). Static imports, re-exports, `require` and
// `import()` with a literal specifier are seen; a computed specifier is not.
import { readFileSync, statSync } from 'node:fs'
import { isBuiltin } from 'node:module'
import { dirname, extname, join, resolve } from 'node:path'
import { installedFrom } from '@loom/tools'
import { packageName } from './compose.ts'

const SPECIFIER = /(?:\bfrom|\bimport|\brequire)\s*\(?\s*(['"])([^'"\n]+)\1/g
const SOURCE = /\.[cm]?[jt]sx?$/
/** How many modules one plugin's imports are followed through, at most. */
const MAX_MODULES = 2000

/** The modules `entry` imports, directly or not, that lie `within` the workspace, and the package folders its bare imports name. */
export function pluginImports(entry: string, within: (path: string) => boolean): { files: string[]; packages: string[] } {
  const files = new Set<string>()
  const packages = new Set<string>()
  const queue = [entry]
  for (let i = 0; i < queue.length && i < MAX_MODULES; i++) {
    const file = queue[i]
    let source: string
    try {
      source = readFileSync(file, 'utf8')
    } catch {
      continue
    }
    for (const [, , specifier] of source.matchAll(SPECIFIER)) {
      if (specifier.startsWith('.')) {
        const found = moduleFile(resolve(dirname(file), specifier))
        if (found && within(found) && !files.has(found) && found !== entry) {
          files.add(found)
          if (SOURCE.test(found)) queue.push(found)
        }
      } else if (!isBuiltin(specifier) && !specifier.startsWith('/') && !specifier.includes(':')) {
        const folder = installedFrom(dirname(file), packageName(specifier))
        if (folder) packages.add(folder)
      }
    }
  }
  return { files: [...files], packages: [...packages] }
}

/** The file a relative specifier names: as written, its TypeScript source (`./x.js` for `x.ts`), or with an extension or an index file added. */
function moduleFile(base: string): string | undefined {
  const ext = extname(base)
  const typescript = { '.js': '.ts', '.mjs': '.mts', '.cjs': '.cts', '.jsx': '.tsx' }[ext]
  const candidates = [
    base,
    ...(typescript ? [base.slice(0, -ext.length) + typescript] : []),
    ...['.ts', '.mts', '.tsx', '.js', '.mjs', '.cjs', '.json'].map(suffix => base + suffix),
    ...['index.ts', 'index.js', 'index.mjs'].map(index => join(base, index)),
  ]
  for (const candidate of candidates) {
    if (isFile(candidate)) return candidate
  }
  return undefined
}

function isFile(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isFile() === true
}
