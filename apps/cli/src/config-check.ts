// What `loom config` checks in the rows it prints: the config values and keys
// the boot would refuse (`loom run` and `loom prompt` exit 1 on them), found
// without starting anything. Each enabled row that a layer of yours wrote (the
// CLI's own bundles are checked by its tests) is checked against its plugin's
// schema, as the boot checks it. What cannot be checked without running code
// that may not be trusted is left to the boot: a `!!js` value, and a plugin
// mounted by path while a layer is untrusted.
import { isJsExpr, type EntryOptions } from '@deepseek-ai/cordis-plugin-loader'
import { isAbsolute, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { CLI_ROOT, type Composition } from './compose.ts'

const SHIPPED = join(CLI_ROOT, 'bundles')

/** One line per row whose config its plugin would refuse; `pathsTrusted`: plugins mounted by path may be loaded. */
export async function configProblems(composition: Composition, cwd: string, { pathsTrusted }: { pathsTrusted: boolean }): Promise<string[]> {
  const yours = composition.rows.filter(row => (row.id === undefined ? [] : (composition.sources[row.id] ?? [])).some(file => !file.startsWith(SHIPPED)))
  // Nothing of yours to check: the boot's modules stay unloaded.
  if (!yours.length) return []
  const [{ locateModule, pluginConfigProblems }, { unwrap }] = await Promise.all([import('./boot.ts'), import('./catalogue.ts')])
  const problems: string[] = []
  const check = async (row: EntryOptions) => {
    if (row.disabled === true || hasJs(row.disabled) || hasJs(row.config)) return
    if (row.group) {
      for (const child of Array.isArray(row.config) ? (row.config as EntryOptions[]) : []) await check(child)
      return
    }
    const byPath = row.name.startsWith('file:') || row.name.startsWith('.') || isAbsolute(row.name)
    if (row.name.startsWith('cordis:') || (byPath && !pathsTrusted)) return
    const where = locateModule(row.name, cwd)
    let plugin: { Config?: unknown } | undefined
    try {
      plugin = unwrap(await import(where.startsWith('file:') ? where : pathToFileURL(where).href))
    } catch {
      return // a module that does not load: the boot names it
    }
    if (!plugin) return
    problems.push(...pluginConfigProblems(plugin, row.config, { row, shownName: name => name, configFrom: composition.configFrom }))
  }
  for (const row of yours) await check(row)
  return problems
}

/** A `!!js` expression anywhere in the value: it is evaluated only when the row boots. */
function hasJs(value: unknown): boolean {
  if (isJsExpr(value)) return true
  if (Array.isArray(value)) return value.some(hasJs)
  return typeof value === 'object' && value !== null && Object.values(value).some(hasJs)
}
