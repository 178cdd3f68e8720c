#!/usr/bin/env node
// The `loom` launcher. Installed, it runs the compiled CLI (dist/) on the Node
// that starts it. In the Loom workspace (the sources are here and not inside a
// node_modules folder) it runs the TypeScript sources of every @loom package
// instead (`--conditions=loom-source`), on the workspace's pinned Node when
// there is one: in this process when it already runs that way, else in a child.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const SOURCE_CONDITION = '--conditions=loom-source'
const here = dirname(fileURLToPath(import.meta.url))
const sources = join(here, '..', 'src', 'main.ts')
const inWorkspace = existsSync(sources) && !here.split(sep).includes('node_modules')

/** The pinned Node: node_modules/node of the nearest folder above that has one. */
function pinnedNode() {
  for (let dir = here; ; dir = dirname(dir)) {
    const manifest = join(dir, 'node_modules', 'node', 'package.json')
    const binary = join(dir, 'node_modules', 'node', 'bin', 'node')
    if (existsSync(manifest) && existsSync(binary)) {
      return { binary, version: `v${JSON.parse(readFileSync(manifest, 'utf8')).version}` }
    }
    if (dirname(dir) === dir) return undefined
  }
}

if (!inWorkspace) {
  await import(pathToFileURL(join(here, '..', 'dist', 'main.js')).href)
} else {
  const pinned = pinnedNode()
  const sourceConditioned = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].includes(SOURCE_CONDITION)
  if ((!pinned || pinned.version === process.version) && sourceConditioned && process.features.typescript) {
    await import(pathToFileURL(sources).href)
  } else {
    runChild(pinned?.binary ?? process.execPath)
  }
}

function runChild(binary) {
  // This process cannot pass a SIGKILL on, and an orphaned child would finish
  // its turn and keep the session's lease. So the child holds one end of a pipe
  // (fd 3, named by LOOM_LAUNCHER_FD) whose other end closes when this process
  // dies, however it dies, and the child then stops as on SIGTERM (src/main.ts).
  const child = spawn(binary, [SOURCE_CONDITION, sources, ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
    env: { ...process.env, LOOM_LAUNCHER_FD: '3' },
  })
  // Ctrl-C reaches the child through the terminal's process group: this process
  // only waits for it. Other signals sent to the launcher are passed on.
  process.on('SIGINT', () => {})
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal))
  child.on('exit', (code, signal) => {
    process.exit(signal ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1))
  })
  child.on('error', error => {
    process.stderr.write(`loom: cannot start Node (${binary}): ${error.message}\n`)
    process.exit(1)
  })
}
