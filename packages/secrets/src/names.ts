/**
 * Which names (environment variables, object keys, headers) hold secrets, and
 * which values of an environment are secrets.
 */

/** A name pattern: a RegExp, or a glob string where `*` is any run of characters and `?` one (case-insensitive, whole name). */
export type SecretPattern = string | RegExp

/** Values shorter than this are never treated as secrets: redacting them would hit ordinary words. */
export const MIN_SECRET_LENGTH = 8

/**
 * The default rule, applied to a name and to its normalized form (`normalizeName`:
 * `apiKey` → `API_KEY`, `x-api-key` → `X_API_KEY`). A name is secret when
 *
 * - it contains `PASSWORD` anywhere (`DB_PASSWORD`, `PGPASSWORD`);
 * - its last word is `TOKEN`, `SECRET`, `PASSWD`, `PASS`, `PASSPHRASE`, `APIKEY`,
 *   `CREDENTIAL(S)`, `AUTHORIZATION`, `COOKIE` or `PAT` (a personal access token)
 *   (`GITHUB_TOKEN`, `NPM_TOKEN`, `CLIENT_SECRET`, `GH_PAT`, `token`, `authorization`);
 * - its last word is `KEY` after at least one other word (`DEEPSEEK_API_KEY`,
 *   `OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `apiKey`; a bare `key` is not secret).
 *
 * Not secret, on purpose: `maxTokens` (last word `TOKENS`), `AWS_ACCESS_KEY_ID`
 * (last word `ID`), `SSH_AUTH_SOCK`, `PWD`.
 */
export const DEFAULT_SECRET_PATTERNS: readonly RegExp[] = Object.freeze([
  /PASSWORD/i,
  /(^|_)(TOKEN|SECRET|PASSWD|PASS|PASSPHRASE|APIKEY|CREDENTIALS?|AUTHORIZATION|COOKIE|PAT)$/i,
  /[A-Z0-9]_KEY$/i,
])

/** `apiKey` → `API_KEY`, `x-api-key` → `X_API_KEY`, `OAuthToken` → `OAUTH_TOKEN`. */
export function normalizeName(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .toUpperCase()
}

function globToRegExp(glob: string): RegExp {
  const source = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.')
  return new RegExp(`^${source}$`, 'i')
}

// Globs are compiled once per string, not once per name tested.
const compiled = new Map<string, RegExp>()

function toRegExp(pattern: SecretPattern): RegExp {
  if (typeof pattern !== 'string') return pattern
  let regexp = compiled.get(pattern)
  if (!regexp) compiled.set(pattern, (regexp = globToRegExp(pattern)))
  return regexp
}

/** Whether `name` or its normalized form matches one of the patterns. */
export function matchesName(name: string, patterns: readonly SecretPattern[]): boolean {
  const normal = normalizeName(name)
  return patterns.some(pattern => {
    const regexp = toRegExp(pattern)
    // A global or sticky RegExp keeps state between `test` calls; start from 0 each time.
    regexp.lastIndex = 0
    if (regexp.test(name)) return true
    regexp.lastIndex = 0
    return regexp.test(normal)
  })
}

/** Whether a variable, key or header name holds a secret (default rule: `DEFAULT_SECRET_PATTERNS`). */
export function isSecretName(name: string, patterns: readonly SecretPattern[] = DEFAULT_SECRET_PATTERNS): boolean {
  return matchesName(name, patterns)
}

export interface ScrubOptions {
  /** The secret name patterns (default `DEFAULT_SECRET_PATTERNS`; spread it to add to it). */
  patterns?: readonly SecretPattern[]
  /** Names (or globs) kept even when they look secret. */
  allow?: readonly SecretPattern[]
}

export interface ScrubResult {
  /** A copy of the environment without the secret variables. */
  env: Record<string, string>
  /** The names removed, sorted. */
  removed: string[]
}

/** A copy of `env` without its secret variables, and their names. Undefined values are dropped. */
export function scrubEnv(env: Readonly<Record<string, string | undefined>>, options: ScrubOptions = {}): ScrubResult {
  const patterns = options.patterns ?? DEFAULT_SECRET_PATTERNS
  const allow = options.allow ?? []
  const kept: Record<string, string> = {}
  const removed: string[] = []
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue
    if (isSecretName(name, patterns) && !matchesName(name, allow)) removed.push(name)
    else kept[name] = value
  }
  return { env: kept, removed: removed.sort() }
}

// `scheme://user:password@host`: the password of a URL with credentials.
const URL_PASSWORD = /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:([^\s/@]+)@/gi

/**
 * The secret values of an environment, longest first, without duplicates:
 * the values of variables whose name is secret, each line of a multi-line one
 * (a PEM key printed line by line), and the password of any URL with credentials
 * in any variable (`DATABASE_URL=postgres://app:pw@db/app`). Values shorter
 * than `MIN_SECRET_LENGTH` are left out.
 */
export function secretValues(env: Readonly<Record<string, string | undefined>>, patterns: readonly SecretPattern[] = DEFAULT_SECRET_PATTERNS): string[] {
  const values = new Set<string>()
  const add = (value: string) => {
    if (value.length >= MIN_SECRET_LENGTH) values.add(value)
  }
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue
    if (isSecretName(name, patterns)) {
      add(value)
      if (value.includes('\n')) for (const line of value.split(/\r?\n/)) add(line.trim())
    }
    for (const match of value.matchAll(URL_PASSWORD)) add(match[1])
  }
  return [...values].sort((a, b) => b.length - a.length || (a < b ? -1 : 1))
}
