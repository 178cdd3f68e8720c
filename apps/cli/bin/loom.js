#!/usr/bin/env node
// The `loom` launcher. It runs src/main.ts on the workspace's pinned Node (the
// `node` devDependency of the repository root), which runs TypeScript natively
// (type stripping): in this process when that is the Node running it, else in a
// child process of the pinned binary. Without a pinned Node it uses the running
// one, through tsx if that Node cannot strip types.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const main = join(here, '..', 'src', 'main.ts')

/** The pinned Node: node_modules/node of the nearest folder above that has one. */
function pinnedNode() {
  for (let dir = here; ; dir = dirname(dir)) {
    const manifest = join(dir, 'node_modules', 'node', 'package.json')
    const binary = join(dir, 'node_modules', 'node', 'bin', 'node')
    if (existsSync(manifest) && existsSync(binary)) {
      return { binary, version: 'v' + JSON.parse(readFileSync(manifest, 'utf8')).version }
    }
    if (dirname(dir) === dir) return undefined
  }
}

const pinned = pinnedNode()
if (!pinned || pinned.version === process.version) {
  if (!process.features.typescript) {
    const { register } = await import('tsx/esm/api')
    register()
  }
  await import(pathToFileURL(main).href)
} else {
  const child = spawn(pinned.binary, [main, ...process.argv.slice(2)], { stdio: 'inherit' })
  // Ctrl-C reaches the child through the terminal's process group: this process
  // only waits for it. Other signals sent to the launcher are passed on.
  process.on('SIGINT', () => {})
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal))
  child.on('exit', (code, signal) => {
    process.exit(signal ? 128 + (constants.signals[signal] ?? 0) : code ?? 1)
  })
  child.on('error', error => {
    process.stderr.write(`loom: cannot start the pinned Node (${pinned.binary}): ${error.message}\n`)
    process.exit(1)
  })
}
