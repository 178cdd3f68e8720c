import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, isAbsolute, join, resolve } from 'node:path'

/** `auto`: bubblewrap when it works here, else `none`. */
export type SandboxMode = 'auto' | 'bwrap' | 'none'

/**
 * bubblewrap around each command, for process control only: the filesystem,
 * the devices and the network stay as they are.
 */
export const BWRAP_ARGS: readonly string[] = Object.freeze([
  // The whole filesystem, writable as without bwrap, devices included.
  '--dev-bind',
  '/',
  '/',
  // A /proc of the new PID namespace (`ps` sees only the command's processes).
  '--proc',
  '/proc',
  // Its own PID namespace: when the shell exits, or bwrap is killed, the kernel
  // kills every process in it, `setsid` ones included.
  '--unshare-pid',
  // bwrap, and so the namespace, dies with the host, even when the host gets SIGKILL.
  '--die-with-parent',
  // The shell leads its own session and group, so a SIGTERM reaches the command's
  // processes and not bwrap itself (which would end them all at once).
  '--new-session',
])

export interface BwrapProbe {
  ok: boolean
  /** Why bubblewrap cannot be used, when it cannot. */
  reason?: string
}

let probed: BwrapProbe | undefined

/** Whether `bwrap` runs a command with `BWRAP_ARGS` here; tried once per process. */
export function probeBwrap(): BwrapProbe {
  if (probed) return probed
  const result = spawnSync('bwrap', [...BWRAP_ARGS, '--', 'true'], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 5_000 })
  if (result.error) probed = { ok: false, reason: result.error.message }
  else if (result.status !== 0) probed = { ok: false, reason: `exit ${result.status ?? result.signal}: ${result.stderr.toString().trim()}` }
  else probed = { ok: true }
  return probed
}

/** The sandbox a mode comes to here; `bwrap` when it does not work is an error naming the reason. */
export function resolveSandbox(mode: SandboxMode, owner: string): 'bwrap' | 'none' {
  if (mode === 'none') return 'none'
  const probe = probeBwrap()
  if (probe.ok) return 'bwrap'
  if (mode === 'auto') return 'none'
  throw new Error(
    `${owner}: config sandbox is 'bwrap' but bubblewrap does not work here (${probe.reason}); install it (apt-get install bubblewrap) or set sandbox to 'auto' or 'none'`,
  )
}

/**
 * The path of an executable as `spawn` would find it (PATH lookup for a bare
 * name), or an ENOENT error like `spawn`'s. Inside bwrap a missing shell would
 * only be a message of bwrap's on stderr; this keeps the error the same.
 */
export function findExecutable(file: string, cwd: string, path = process.env.PATH ?? ''): string {
  const candidates = file.includes('/')
    ? [isAbsolute(file) ? file : resolve(cwd, file)]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map(dir => join(dir, file))
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {}
  }
  throw Object.assign(new Error(`spawn ${file} ENOENT`), { code: 'ENOENT' })
}
