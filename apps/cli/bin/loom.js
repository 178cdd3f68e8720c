#!/usr/bin/env node
// The `loom` launcher. Installed, it runs the compiled CLI (dist/) on the Node
// that starts it. In the Loom workspace (the sources are here and not inside a
// node_modules folder) it runs the TypeScript sources of every @loom package
// instead (`--conditions=loom-source`), on the workspace's pinned Node when
// there is one: in this process when it already runs that way, else in a child.
// Plain JavaScript that any Node runs: before the CLI is loaded, it checks that
// the Node that will run it satisfies the package's `engines.node` (an older one
// would crash on a missing API with a stack trace); only Node's own modules, in
// every Node that runs ES modules, are imported before that check.
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

/** `22.18.1` → [22, 18, 1]; missing parts are 0. */
const versionParts = text =>
  text
    .replace(/^v/, '')
    .split('.')
    .concat('0', '0')
    .slice(0, 3)
    .map(part => Number.parseInt(part, 10) || 0)

/**
 * Exits with one line when `version` does not satisfy the package's
 * `engines.node`. Only the `>=X.Y.Z` form is checked (the form this package
 * uses); npm's EBADENGINE warning at install time reads the same field.
 */
function requireNode(version) {
  const range = JSON.parse(readFileSync(join(here, '..', 'package.json'), 'utf8')).engines?.node ?? ''
  const minimum = /^\s*>=\s*v?(\d+(?:\.\d+){0,2})\s*$/.exec(range)?.[1]
  if (minimum === undefined) return
  const [have, need] = [versionParts(version), versionParts(minimum)]
  const older = have.findIndex((part, index) => part !== need[index])
  if (older === -1 || have[older] > need[older]) return
  process.stderr.write(
    `loom: needs Node.js >= ${minimum} (this is ${version}); install a current Node.js LTS from https://nodejs.org or with a version manager (nvm install --lts)\n`,
  )
  process.exit(1)
}

const pinned = inWorkspace ? pinnedNode() : undefined
// The Node that will run the CLI: the pinned one in the workspace, else this one.
requireNode(pinned?.version ?? process.version)

if (!inWorkspace) {
  await import(pathToFileURL(join(here, '..', 'dist', 'main.js')).href)
} else {
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
