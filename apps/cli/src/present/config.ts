// `loom config` on the terminal: the composed rows in the include's YAML
// dialect, under a header naming the layers they came from. A literal
// `apiKey:` in loom.yml, or a known secret inside any value, is [REDACTED].
import { redactDeep } from '@loom/secrets'
import { CLI_ROOT, dumpRows, type Composition } from '../compose.ts'
import { hostSecrets, type Io } from './term.ts'

export function printConfig(io: Io, composition: Composition, json: boolean) {
  const layers = composition.layers.map(({ kind, label, file }) => ({ kind, label, file }))
  const rows = redactDeep(composition.rows, hostSecrets())
  if (json) {
    io.stdout.write(JSON.stringify({ layers, rows }, null, 2) + '\n')
    return
  }
  const width = Math.max(...layers.map(layer => `${layer.kind} ${layer.label}`.length))
  const header = [
    '# The deployment as it boots: these rows, in this order, mounted by the Cordis loader.',
    '# Layers, applied in order over an empty list:',
    ...layers.map(
      layer =>
        `#   ${`${layer.kind} ${layer.label}`.padEnd(width)}  ${layer.file.startsWith(CLI_ROOT) ? '<loom>/' + layer.file.slice(CLI_ROOT.length) : layer.file}`,
    ),
  ]
  io.stdout.write(header.join('\n') + '\n' + dumpRows(rows))
}
