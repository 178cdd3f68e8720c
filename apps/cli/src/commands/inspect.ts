// `loom inspect [ID|prefix|last] [--open] [--port N]`: the inspector
// (@loom/inspector) on loopback for the stored sessions of this deployment, until
// a stop signal. It opens the store alone, as `loom sessions` does, and loads the
// inspector only here, so no other command pays for it.
import { spawn } from 'node:child_process'
import { type PlanMaker, store } from '../context.ts'
import { UsageError } from '../errors.ts'

export const plan: PlanMaker = ({ id: ref }, parsed) =>
  store(async (store, { io, cwd, onInterrupt }) => {
    const id = ref === undefined ? undefined : await store.resolve(ref, cwd)
    if (id !== undefined && !(await store.persistence.list()).some(header => header.id === id)) {
      throw new UsageError(`no stored session ${id} (see: loom sessions list)`)
    }
    const { persistenceSource, startInspector } = await import('@loom/inspector')
    const server = await startInspector({
      source: persistenceSource(store.persistence, { prices: store.prices }),
      port: parsed.port,
      report: error => io.stderr.write(`loom inspect: ${(error as Error)?.stack ?? String(error)}\n`),
    })
    const url = server.url(id)
    io.stdout.write(`loom inspect: ${url}\n(the address holds this run's token: share it with no one; Ctrl-C stops the server)\n`)
    if (parsed.open) openBrowser(url, message => io.stderr.write(`loom inspect: ${message}\n`))
    return new Promise<number>(resolve => {
      onInterrupt?.(() => {
        void server.close().then(() => resolve(0))
        return 'stopping'
      })
    })
  })

/** `$BROWSER URL`, else the system's opener; a failure is said, and the address is printed anyway. */
function openBrowser(url: string, warn: (message: string) => void) {
  const command = process.env.BROWSER || (process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open')
  try {
    const child = spawn(command, [url], { stdio: 'ignore', detached: true })
    child.on('error', error => warn(`cannot start ${command} (${(error as NodeJS.ErrnoException).code ?? error.message}): open the address above yourself`))
    child.unref()
  } catch (error) {
    warn(`cannot start ${command}: ${(error as Error).message}`)
  }
}
