// Entry point of the `loom` command (bin/loom.js and `pnpm loom` run this file).
import { main } from './cli.ts'
import type { Runner } from './runner.ts'

// A closed pipe (`loom sessions show ID | head`) is not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
    throw error
  })
}

// The first Ctrl-C cancels the running turn (exit 130 once it is closed and
// written); a second one, or one before the deployment is up, exits at once.
let runner: Runner | undefined
let interrupted = false
for (const [signal, exitCode] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  process.on(signal, () => {
    if (runner && !interrupted) {
      interrupted = true
      runner.cancel()
      return
    }
    process.exit(exitCode)
  })
}

const code = await main(process.argv.slice(2), { onRunner: value => { runner = value } })
process.exitCode = code
// Plugins should leave nothing running; if one does, do not hang the shell.
setTimeout(() => process.exit(code), 2000).unref()
