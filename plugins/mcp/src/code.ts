// The code a stdio server runs from the project: a program given as a path, script
// arguments that are files, a package `npx` runs from the project's node_modules. The
// next start runs it as the user, outside any sandbox, so the agent's own tools must
// not change it (`tools.protect`): its `command` is what the user trusted, not what an
// edited script would do.
import { statSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import { installedFrom } from '@loom/tools'
import type { StdioServerConfig } from './config.ts'

/** Runners whose first argument that is not a flag names a package (`npx -y @scope/server`). */
const PACKAGE_RUNNERS = new Set(['npx', 'pnpx', 'bunx'])

/** The files and package folders `server` runs from, absolute; `cwd` is where it starts. */
export function serverCode(server: StdioServerConfig, cwd: string): string[] {
  const found = new Set<string>()
  const { command, args = [] } = server
  if (command.includes('/')) found.add(resolve(cwd, command))
  for (const arg of args) {
    // A flag, or a flag's value glued to it, is not a script; a folder argument would protect too much.
    if (arg.startsWith('-') || arg === '') continue
    const path = resolve(cwd, arg)
    if (isFile(path)) found.add(path)
  }
  if (PACKAGE_RUNNERS.has(basename(command))) {
    const spec = args.find(arg => !arg.startsWith('-'))
    const folder = spec === undefined ? undefined : installedFrom(cwd, packageOf(spec))
    if (folder) found.add(folder)
  }
  return [...found]
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}

/** `@scope/name@1.2.3` or `name@latest`: the package's name. */
function packageOf(spec: string): string {
  const at = spec.indexOf('@', spec.startsWith('@') ? 1 : 0)
  return at === -1 ? spec : spec.slice(0, at)
}
