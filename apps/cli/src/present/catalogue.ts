// `loom plugins` on the terminal: each plugin with where it comes from, what it
// does, and a table of its config keys (or why it could not be loaded).
import { configKeys, type CataloguedPlugin } from '../catalogue.ts'
import { clip, styler, type Io } from './term.ts'

/** The JSON of `loom plugins --json`: the catalogue with each Config as its keys. */
export function catalogueJson(plugins: readonly CataloguedPlugin[]) {
  return {
    plugins: plugins.map(({ config, ...plugin }) => ({ ...plugin, keys: configKeys(config) })),
  }
}

export function printCatalogue(io: Io, plugins: readonly CataloguedPlugin[], json: boolean) {
  if (json) {
    io.stdout.write(JSON.stringify(catalogueJson(plugins), null, 2) + '\n')
    return
  }
  const out = styler(io.stdout)
  const blocks = plugins.map(plugin => {
    const from = plugin.source === 'bundled' ? 'bundled with the CLI' : 'installed'
    const lines = [`${out.bold(plugin.name)}  ${out.dim(`${from}${plugin.folder ? `, ${plugin.folder}` : ''}`)}`]
    if (plugin.description) lines.push(`  ${plugin.description}`)
    if (plugin.error) lines.push(`  ${out.red(`error: ${plugin.error}`)}`)
    else lines.push(...keyTable(plugin))
    return lines.join('\n')
  })
  const counts = ['bundled', 'installed'].map(source => `${plugins.filter(plugin => plugin.source === source).length} ${source}`)
  io.stdout.write(`${blocks.join('\n\n')}\n\n${plugins.length} plugins: ${counts.join(', ')}. A loom.yml row names one; \`loom schema\` types its config.\n`)
}

/** `KEY  TYPE  DEFAULT  DESCRIPTION`, one config key a line. */
function keyTable(plugin: CataloguedPlugin): string[] {
  const keys = configKeys(plugin.config)
  if (!keys.length) return [`  ${plugin.config ? 'config: no keys' : 'config: none declared'}`]
  const rows = keys.map(key => [
    key.key,
    key.type,
    key.required ? 'required' : key.default === undefined ? '-' : clip(JSON.stringify(key.default), 40),
    key.description ?? '',
  ])
  const head = ['KEY', 'TYPE', 'DEFAULT', 'DESCRIPTION']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)))
  const fmt = (r: string[]) => `  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')}`.trimEnd()
  return [fmt(head), ...rows.map(fmt)]
}
