import { spawnSync } from 'node:child_process'
import { accessSync, constants, realpathSync, statSync } from 'node:fs'
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path'
import { isInside, readDenial, type ReadRules } from '@loom/tools/workspace'

/** `auto`: bubblewrap when it works here, else `none`. */
export type SandboxMode = 'auto' | 'bwrap' | 'none'

/** What a command confined by bubblewrap may change and reach. */
export interface Confinement {
  /** Keep the host's network; otherwise the command has a loopback of its own and nothing else. */
  network: boolean
  /** Absolute, symlink-free paths the command may write (the workspace root among them); everything else is read-only. */
  writable: readonly string[]
  /** Paths inside those that stay read-only (Loom's protected paths: its config, git hooks); missing ones are skipped. */
  readOnly?: readonly string[]
  /** What the read rules hide (credential stores), as `readMounts` found it at the call. */
  hidden?: readonly ReadMount[]
}

/** A path the read rules hide (`dir`: under an empty read-only tmpfs; `file`: /dev/null over it), or one an allow rule brings back from a hidden folder (`reveal`). */
export interface ReadMount {
  /** Absolute and symlink-free. */
  path: string
  kind: 'dir' | 'file' | 'reveal'
}

/**
 * The mounts that carry out the read rules (`ctx.tools.readRules()`) as the disk is now: a rule
 * whose path exists and changes what its parent folder says (denied in a readable folder, or
 * allowed in a denied one). Missing paths need nothing: a command cannot create them where it
 * cannot write, and where it can, it made them itself.
 */
export function readMounts(rules: ReadRules): ReadMount[] {
  const denied = (path: string) => readDenial(rules, path) !== undefined
  const found = new Map<string, ReadMount>()
  for (const { path } of [...rules.deny, ...rules.allow]) {
    const hide = denied(path)
    if (hide === denied(dirname(path))) continue
    let real: string
    let isDirectory: boolean
    try {
      real = realpathSync(path)
      isDirectory = statSync(real).isDirectory()
    } catch {
      continue
    }
    found.set(real, { path: real, kind: !hide ? 'reveal' : isDirectory ? 'dir' : 'file' })
  }
  return [...found.values()]
}

/**
 * The read-only paths that need a mount of their own: one inside another is covered by it,
 * unless a writable place lies between them. Each mount costs bubblewrap time at every call,
 * and a deployment protects every package folder it loads.
 */
function outermost(readOnly: readonly string[], writable: readonly string[]): string[] {
  const all = new Set(readOnly)
  const places = new Set(writable)
  const covered = (path: string) => {
    // Up the ancestors: a protected one covers the path, a writable place between stops the walk.
    for (let at = dirname(path); at !== dirname(at); at = dirname(at)) {
      if (all.has(at)) return true
      if (places.has(at)) return false
    }
    return all.has('/')
  }
  return readOnly.filter(path => !covered(path))
}

/**
 * The bubblewrap arguments of a confined command, up to `--chdir`. The order
 * matters: later mounts go over earlier ones, so the writable binds come after
 * the private /tmp (a workspace under /tmp is the host's directory, not a hole),
 * and every mount below another comes after it: a protected path or a hidden
 * credential store inside the workspace stays so, and a workspace inside a hidden
 * folder is bound back.
 */
export function bwrapArgs(confinement: Confinement): string[] {
  const { writable } = confinement
  // A path under the private /tmp is visible only through a writable bind.
  const visible = (path: string) => !isInside('/tmp', path) || writable.some(place => isInside(place, path))
  const mounts = [
    ...writable.map(path => ({ path, args: ['--bind', path, path] })),
    // A protected file or folder in a writable place stays as it is (elsewhere all is read-only already).
    ...outermost(confinement.readOnly ?? [], writable)
      .filter(path => writable.some(place => isInside(place, path)))
      .map(path => ({ path, args: ['--ro-bind-try', path, path] })),
    ...(confinement.hidden ?? [])
      .filter(mount => visible(mount.path))
      .map(({ path, kind }) => ({
        path,
        args: kind === 'dir' ? ['--tmpfs', path] : kind === 'file' ? ['--ro-bind', '/dev/null', path] : ['--ro-bind', path, path],
      })),
  ]
  // Ancestors first (a shorter path); at the same path, the order above (stable sort).
  mounts.sort((a, b) => a.path.length - b.path.length)
  const emptied = (confinement.hidden ?? []).filter(mount => mount.kind === 'dir' && visible(mount.path))
  return [
    // Every file readable, none writable.
    '--ro-bind',
    '/',
    '/',
    // A minimal /dev of its own (null, zero, random, tty, shm, ...), without the host's disks.
    '--dev',
    '/dev',
    // A /proc of the new PID namespace (`ps` sees only the command's processes).
    '--proc',
    '/proc',
    // An empty /tmp of its own, gone with the call.
    '--tmpfs',
    '/tmp',
    ...mounts.flatMap(mount => mount.args),
    // The tmpfs over a hidden folder, once what goes inside it is bound: read-only, so nothing is written there to vanish.
    ...emptied.flatMap(mount => ['--remount-ro', mount.path]),
    // Its own network namespace: only a loopback interface of its own.
    ...(confinement.network ? [] : ['--unshare-net']),
    // Its own PID namespace: when the shell exits, or bwrap is killed, the kernel
    // kills every process in it, `setsid` ones included.
    '--unshare-pid',
    // bwrap, and so the namespace, dies with the host, even when the host gets SIGKILL.
    '--die-with-parent',
    // The shell leads its own session and group, so a SIGTERM reaches the command's
    // processes and not bwrap itself (which would end them all at once).
    '--new-session',
    // As root bwrap keeps every capability, and with CAP_SYS_ADMIN a command could
    // simply remount / writable (or mknod a disk): root runs without any.
    ...(process.getuid?.() === 0 ? ['--cap-drop', 'ALL'] : []),
  ]
}

export interface BwrapProbe {
  ok: boolean
  /** Why bubblewrap cannot be used, when it cannot. */
  reason?: string
}

// One probe per network setting: a host may allow bwrap but not network namespaces.
const probes = new Map<boolean, BwrapProbe>()

/**
 * Whether `bwrap` runs a command confined as `bwrapArgs` would (read-only root,
 * private /tmp, a writable bind, no network unless `network`); tried once per process.
 */
export function probeBwrap(network = false): BwrapProbe {
  let probe = probes.get(network)
  if (probe) return probe
  const args = [...bwrapArgs({ network, writable: ['/tmp'] }), '--', 'true']
  const result = spawnSync('bwrap', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 5_000 })
  if (result.error) probe = { ok: false, reason: result.error.message }
  else if (result.status !== 0) probe = { ok: false, reason: `exit ${result.status ?? result.signal}: ${result.stderr.toString().trim()}` }
  else probe = { ok: true }
  probes.set(network, probe)
  return probe
}

/** The sandbox a mode comes to here; `bwrap` when it does not work is an error naming the reason. */
export function resolveSandbox(mode: SandboxMode, owner: string, network = false): 'bwrap' | 'none' {
  if (mode === 'none') return 'none'
  const probe = probeBwrap(network)
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
