// Protected paths: the files that decide what Loom runs and what it allows (its config layers,
// $LOOM_HOME, git hooks, the sources of plugins mounted by path). A tool that declares what it
// writes (`ToolDefinition.writes`) is asked about before it changes one of them, ahead of every
// pre-execute listener, so no permission rule or disabled plugin lets the agent rewrite its own
// policy unattended; the shell's sandbox mounts them read-only.
import { existsSync, realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path'
import type { PreToolDecision } from './types.ts'

export interface ProtectedPath {
  /** Absolute and symlink-resolved (as far as it exists); a folder protects everything below it. */
  readonly path: string
  /** Why, as the user and the model read it: `the project's loom.yml decides which plugins run`. */
  readonly reason: string
  /** The plugin that protected it. */
  readonly owner: string
}

/** The `rule` an ask about a protected path carries (an allow-session answer covers that tool's protected writes). */
export const PROTECTED_RULE = 'protected path'

/** What the model reads when a protected write is refused for want of a person to ask. */
export const PROTECTED_REFUSAL = 'a protected path changes only with the approval of a person at the terminal (or a run with --approve all); no rule allows it'

/** A path to protect (or to keep from reading), its existing part resolved through symlinks: it is compared with the resolved paths tools use. */
export function resolveProtected(path: string, method = 'tools.protect()'): string {
  if (typeof path !== 'string' || !isAbsolute(path)) throw new TypeError(`${method} takes an absolute path, got ${JSON.stringify(path)}`)
  const missing: string[] = []
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      return join(realpathSync.native(at), ...missing.reverse())
    } catch {
      if (dirname(at) === at) return resolve(path)
      missing.push(basename(at))
    }
  }
}

/**
 * Where package `name` is installed for code in `folder`, as Node (and npx) find it: the
 * first node_modules up from `folder` that holds it, as its real folder. What a plugin or
 * a server imports from there is code the next run executes, to protect with it.
 */
export function installedFrom(folder: string, name: string): string | undefined {
  for (let at = resolve(folder); ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return realpathSync.native(candidate)
    if (dirname(at) === at) return undefined
  }
}

/** The protected entry a path is, or lies inside. */
export function protectionOf(entries: Iterable<ProtectedPath>, path: string): ProtectedPath | undefined {
  // Both sides are absolute and normalized: a prefix test, which path.relative costs many times over.
  for (const entry of entries) if (path === entry.path || path.startsWith(entry.path.endsWith(sep) ? entry.path : entry.path + sep)) return entry
  return undefined
}

/** The decision for a call that would write `path`, protected by `entry`: ask, and refuse where nobody can answer. */
export function protectedDecision(tool: string, path: string, entry: ProtectedPath): PreToolDecision {
  const what = entry.path === path ? `"${path}"` : `"${path}" (inside "${entry.path}")`
  return {
    kind: 'ask',
    reason: `${tool} would change ${what}, which is protected: ${entry.reason}`,
    rule: PROTECTED_RULE,
    unattended: 'deny',
    refusal: PROTECTED_REFUSAL,
  }
}

/**
 * Credential stores under the home folder that no tool reads and the shell's sandbox hides
 * (`ctx.tools.denyRead`), relative to the home folder, with what each holds. The `allowRead`
 * key of the @loom/tools row lets one through on purpose.
 */
export const CREDENTIAL_STORES: readonly (readonly [path: string, holds: string])[] = Object.freeze([
  ['.ssh', 'SSH keys'],
  ['.gnupg', 'GnuPG keys'],
  ['.password-store', 'pass passwords'],
  ['.local/share/keyrings', 'the desktop keyring'],
  ['.netrc', 'passwords for hosts'],
  ['.git-credentials', 'git passwords and tokens'],
  ['.config/git/credentials', 'git passwords and tokens'],
  ['.config/gh', 'GitHub CLI tokens'],
  ['.config/hub', 'hub tokens'],
  ['.docker/config.json', 'Docker registry logins'],
  ['.config/containers/auth.json', 'container registry logins'],
  ['.npmrc', 'npm tokens'],
  ['.pypirc', 'PyPI tokens'],
  ['.gem/credentials', 'RubyGems keys'],
  ['.cargo/credentials', 'crates.io tokens'],
  ['.cargo/credentials.toml', 'crates.io tokens'],
  ['.pgpass', 'PostgreSQL passwords'],
  ['.my.cnf', 'MySQL passwords'],
  ['.aws', 'AWS credentials'],
  ['.azure', 'Azure credentials'],
  ['.config/gcloud', 'Google Cloud credentials'],
  ['.oci', 'Oracle Cloud keys'],
  ['.config/doctl', 'DigitalOcean tokens'],
  ['.kube', 'Kubernetes credentials'],
  ['.terraform.d/credentials.tfrc.json', 'Terraform Cloud tokens'],
  ['.vault-token', 'a Vault token'],
  ['.config/rclone', 'rclone remotes and their tokens'],
] as const)
