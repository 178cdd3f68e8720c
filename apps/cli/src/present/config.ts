// `loom config` on the terminal: the composed rows in the include's YAML
// dialect, under a header naming the layers, each row under the files that wrote it. A literal
// `apiKey:` in loom.yml, or a known secret inside any value, is [REDACTED].
import { redactDeep } from '@loom/secrets'
import { CLI_ROOT, dumpRows, type Composition } from '../compose.ts'
import { hostSecrets, type Io } from './term.ts'

export function printConfig(io: Io, composition: Composition, json: boolean) {
  const layers = composition.layers.map(({ kind, label, file }) => ({ kind, label, file }))
  const rows = redactDeep(composition.rows, hostSecrets())
  const { sources } = composition
  if (json) {
    io.stdout.write(JSON.stringify({ layers, rows, sources }, null, 2) + '\n')
    return
  }
  const shown = (file: string) => (file.startsWith(CLI_ROOT) ? '<loom>/' + file.slice(CLI_ROOT.length) : file)
  const width = Math.max(...layers.map(layer => `${layer.kind} ${layer.label}`.length))
  const header = [
    '# The deployment as it boots: these rows, in this order, mounted by the Cordis loader.',
    '# Layers, applied in order over an empty list:',
    ...layers.map(layer => `#   ${`${layer.kind} ${layer.label}`.padEnd(width)}  ${shown(layer.file)}`),
  ]
  // Each row under a comment naming the files that wrote it.
  const body = rows.map(row => {
    const from = row.id === undefined ? [] : (sources[row.id] ?? [])
    return (from.length ? `# from ${from.map(shown).join(', ')}\n` : '') + dumpRows([row])
  })
  io.stdout.write(header.join('\n') + '\n' + body.join(''))
}
