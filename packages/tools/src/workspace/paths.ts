import { lstatSync, readlinkSync, realpathSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import type { ToolRunContext } from '../types.ts'

/** A path the model gave, checked against the workspace. */
export interface WorkspacePath {
  /** What the model passed. */
  readonly input: string
  /** The workspace root, symlinks resolved. */
  readonly root: string
  /** The absolute path to operate on: symlinks resolved, inside `root`. Do I/O on this, never on `input`. */
  readonly path: string
  /** The path to show the model: relative to the root with `/` separators (`.` for the root itself). */
  readonly display: string
}

/** The error every confinement refusal throws; its message says the path is outside the workspace. */
export class OutsideWorkspaceError extends Error {
  override name = 'OutsideWorkspaceError'
}

/** Symlink hops followed by hand (for links whose target does not exist yet) before giving up. */
const MAX_LINK_HOPS = 40

/**
 * The workspace root of a tool call: the plugin's configured `root` (a leading `~/`
 * is the home directory; relative roots resolve against the process cwd), else the
 * calling agent's session cwd, else `process.cwd()`.
 */
export function workspaceRootOf(configRoot: string | undefined, exec?: Pick<ToolRunContext, 'agent'>): string {
  if (configRoot !== undefined && configRoot !== '') {
    if (configRoot === '~') return homedir()
    if (configRoot.startsWith('~/')) return join(homedir(), configRoot.slice(2))
    return resolve(configRoot)
  }
  const cwd = exec?.agent?.cwd
  return cwd !== undefined && isAbsolute(cwd) ? cwd : process.cwd()
}

/** Whether `path` is `root` or lies below it (both absolute and normalized). */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path)
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))
}

/** `path` relative to `root`, with `/` separators; `.` for the root itself. */
export function displayPath(root: string, path: string): string {
  const rel = relative(root, path)
  return rel === '' ? '.' : sep === '/' ? rel : rel.split(sep).join('/')
}

/**
 * Like `realpath`, but for a path that may not exist (yet): the nearest existing
 * ancestor is resolved and the missing rest appended. A dangling symlink is followed
 * to where its target would be, so writing through it cannot land elsewhere.
 */
export async function realpathLoose(path: string): Promise<string> {
  return realpathLooseSync(path, 0)
}

// Synchronous: resolving a path is a few microseconds of lookups in the kernel's cache,
// less than a round trip through the thread pool, and every tool call resolves its paths.
function realpathLooseSync(path: string, hops: number): string {
  try {
    return realpathSync.native(path)
  } catch (error) {
    if (!isMissing(error)) throw error
  }
  let stat
  try {
    stat = lstatSync(path)
  } catch (error) {
    if (!isMissing(error)) throw error
    const parent = dirname(path)
    if (parent === path) return path
    return join(realpathLooseSync(parent, hops), basename(path))
  }
  if (!stat.isSymbolicLink()) return path
  if (hops >= MAX_LINK_HOPS) throw new Error(`too many levels of symbolic links at "${path}"`)
  const target = readlinkSync(path)
  return realpathLooseSync(resolve(realpathLooseSync(dirname(path), hops + 1), target), hops + 1)
}

/**
 * Resolves a path the model gave against the workspace root and checks that it stays
 * inside: `..` escapes, absolute paths elsewhere and symlinks (of the path or of any
 * parent, existing or not yet) leading outside are refused with an
 * `OutsideWorkspaceError`. The returned `path` is the fully resolved one; use it for
 * all I/O so a symlink is never followed a second time.
 *
 * A race in which something replaces a checked directory by a symlink between this
 * check and the I/O is not covered (there is no portable `openat` in Node).
 */
export async function resolveInWorkspace(root: string, input: string): Promise<WorkspacePath> {
  if (typeof input !== 'string' || input === '') throw new Error('path is empty')
  if (input.includes('\0')) throw new Error(`path ${JSON.stringify(input)} contains a NUL character`)
  let realRoot: string
  try {
    realRoot = realpathSync.native(root)
  } catch (error) {
    throw new Error(`workspace root "${root}" cannot be resolved: ${(error as Error).message}`)
  }
  const expanded = input === '~' || input.startsWith('~/') ? join(homedir(), input.slice(1)) : input
  const lexical = resolve(root, expanded)
  const real = realpathLooseSync(lexical, 0)
  if (!isInside(realRoot, real)) {
    const viaLink = isInside(root, lexical) || isInside(realRoot, lexical)
    throw new OutsideWorkspaceError(
      viaLink
        ? `path "${input}" is outside the workspace: it resolves through a symlink to "${real}", and only files under "${realRoot}" are allowed`
        : `path "${input}" is outside the workspace; only files under "${realRoot}" are allowed (use a path relative to it)`,
    )
  }
  const display = isInside(root, lexical) ? displayPath(root, lexical) : displayPath(realRoot, real)
  return { input, root: realRoot, path: real, display }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return code === 'ENOENT' || code === 'ENOTDIR'
}
