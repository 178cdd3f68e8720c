// `loom dev`: the deployment with hot reload. Saving a plugin file replaces that
// plugin (its old contributions vanish, the new ones apply at the next
// assembly); an edit that does not compile keeps the last good version and prints
// the error with its location; an edit of a layer file (loom.yml, a --patch)
// applies as one transaction or not at all. Each line typed is a task for the
// agent; `/prompt` shows what the model would get next.
import Hmr from '@deepseek-ai/cordis-plugin-hmr'
import Timer from '@deepseek-ai/cordis-plugin-timer'
import { spawn } from 'node:child_process'
import { relative } from 'node:path'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { boot, type Deployment } from './boot.ts'
import { BootError, ConfigError } from './errors.ts'
import type { Runner } from './runner.ts'
import { styler, type Io } from './term.ts'

export interface DevOptions {
  cwd: string
  bundles: string[]
  patches: string[]
  provider?: string
  model?: string
  io: Io
  input?: Readable
}

/**
 * Hot reload needs Node's internal module loader (`--expose-internals`). Without
 * it, `loom dev` starts itself again with the flag and passes its exit code on.
 */
export function relaunchWithInternals(): Promise<number> {
  return new Promise(resolve => {
    const child = spawn(process.execPath, ['--expose-internals', ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' })
    process.on('SIGINT', () => {}) // the child gets the terminal's Ctrl-C itself
    child.on('exit', (code, signal) => resolve(signal ? 130 : code ?? 1))
    child.on('error', error => {
      process.stderr.write(`loom: cannot restart with --expose-internals: ${error.message}\n`)
      resolve(1)
    })
  })
}

export async function dev(options: DevOptions): Promise<number> {
  if (!process.execArgv.includes('--expose-internals')) return relaunchWithInternals()
  const { io, cwd } = options
  const out = styler(io.stdout)
  const say = (text: string) => io.stdout.write(text + '\n')
  const warn = (text: string) => io.stderr.write(styler(io.stderr).yellow(`loom: ${text}`) + '\n')

  const deployment: Deployment = await boot({
    cwd,
    bundles: options.bundles,
    patches: options.patches,
    // awaitWriteFinish: an editor's save can arrive as a truncation and a write;
    // reloading between the two would import an empty or half-written file.
    plugins: [{ plugin: Timer }, { plugin: Hmr, config: { root: ['.'], awaitWriteFinish: { stabilityThreshold: 50, pollInterval: 10 } } }],
    log: (level, text) => warn(level === 'info' ? text : `${level === 'warn' ? 'warning' : level}: ${text}`),
  })
  const root = deployment.root
  const runner = () => root.get('runner') as Runner | undefined
  const flags = { provider: options.provider, model: options.model, cwd }

  /** The sections and tools now in the prompt, one line each, with their owners. */
  const summary = async () => {
    const current = runner()
    if (!current) return say('(the deployment has no runner row: nothing to show)')
    try {
      const report = await current.prompt(flags)
      say(out.bold('prompt:') + ' ' + report.sections.map(s => `${s.name} ${out.dim(`← ${s.owner}`)}`).join(', '))
      say(out.bold('tools:') + ' ' + (report.tools.map(t => t.name).join(', ') || '(none)'))
    } catch (error) {
      warn(`the prompt does not assemble: ${(error as Error).message}`)
    }
  }

  // Module reloads: the old fiber is gone and the new one active once the loader settled.
  root.on('hmr/reload', async reloads => {
    await root.loader.await()
    const files = [...reloads.values()].map(reload => relative(cwd, fileURLToPath(reload.filename)))
    say(out.green(`reloaded ${files.join(', ')}`))
    await summary()
  })

  // Layer files are not modules: an edit recomposes the whole deployment, as one transaction.
  const layerFiles = () => new Set(deployment.composition.layers.map(layer => layer.file))
  root.on('hmr/change', async url => {
    if (!url.startsWith('file:') || !layerFiles().has(fileURLToPath(url))) return
    const file = relative(cwd, fileURLToPath(url))
    try {
      await deployment.recompose()
      say(out.green(`applied ${file}`))
      await summary()
    } catch (error) {
      if (!(error instanceof ConfigError || error instanceof BootError)) throw error
      warn(`${file} was not applied; the running deployment is unchanged:\n  ${error.message.replace(/\n/g, '\n  ')}`)
    }
  })

  say(`loom dev: watching ${cwd}`)
  say(out.dim('type a task to run it, /prompt to see the prompt, /quit to stop'))
  await summary()

  const input = createInterface({ input: options.input ?? process.stdin, terminal: false })
  let busy = Promise.resolve(0)
  const stop = new Promise<void>(resolve => {
    input.on('line', line => {
      const task = line.trim()
      if (!task) return
      if (task === '/quit') return resolve()
      busy = busy.then(async () => {
        if (task === '/prompt') {
          await summary()
          const report = await runner()?.prompt(flags)
          if (report) say(report.system)
          return 0
        }
        return runner()?.run(task, flags, io) ?? 1
      }).catch(error => {
        warn((error as Error).message)
        return 1
      })
    })
    input.on('close', resolve)
    process.once('SIGINT', resolve)
  })
  await stop
  await busy
  input.close()
  await deployment.dispose()
  return 0
}
