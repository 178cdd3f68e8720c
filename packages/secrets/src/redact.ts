import { DEFAULT_SECRET_PATTERNS, isSecretName, type SecretPattern } from './names.ts'
import { hostSecretValues } from './registry.ts'

/** What a secret is replaced with. */
export const REDACTED = '[REDACTED]'

/** The shortest end of a secret redacted at the start of a cut text (`headCut`). */
const MIN_FRAGMENT = 4

// A credential as it appears after a header or an assignment: 8 or more characters
// of the bearer-token alphabet (RFC 6750). The alternatives in group `cred` also need a
// digit, so that code such as `password: string` or `token = getToken()` is left alone;
// that is checked on the match (see `redactContext`), not by a lookahead, which would
// scan the rest of the run again from every place a name matches (`token=token=…`).
// At most 64 KiB: far beyond any real token, and an unbounded run of megabytes overflows V8's regex stack.
const CRED_ANY = String.raw`[A-Za-z0-9._~+/=-]{8,65536}`
// Quotes and blanks around `:` or `=` (`"apiKey": "..."`, `TOKEN=...`, `x-api-key: ...`).
const ASSIGN = String.raw`["']?[ \t]*[:=][ \t]*["']?`

/**
 * Credentials recognized by their context, known or not. Each alternative matches
 * only the credential (the context is a lookbehind), so one replacement fits all.
 */
const CONTEXT_PATTERN = new RegExp(
  [
    // `Authorization: Bearer <token>`, `Basic <base64>`, `token <token>` (also Proxy-Authorization).
    String.raw`(?<=\bauthorization${ASSIGN}(?:bearer|basic|token)[ \t]+)${CRED_ANY}`,
    // `Bearer <token>` anywhere (a JSON header echo, a log line).
    String.raw`(?<=\bbearer[ \t]+)(?<bearer>${CRED_ANY})`,
    // A secret-looking name assigned a credential: `x-api-key: ...`, `OPENAI_API_KEY=...`, `"password": "..."`.
    String.raw`(?<=(?:api[-_]?key|[-_]key|token|secret|password|passwd|passphrase|credentials?|authorization)${ASSIGN})(?<assigned>${CRED_ANY})`,
    // A credential in a URL query: `?api_key=...`, `&access_token=...`.
    String.raw`(?<=[?&](?:access_token|api_key|apikey|key|token|secret|password)=)[^&#\s"'<>]+`,
    // The password of a URL with credentials: `postgres://app:<password>@db`.
    String.raw`(?<=\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:)[^\s/@$<{[][^\s/@]*(?=@)`,
  ].join('|'),
  'gi',
)

/**
 * Credentials recognized by their shape alone, wherever they are (a `GH_PAT=` line in a dotfile):
 * issuers' token formats with a fixed prefix. Redacted in every pass, file contents included, as
 * is the body of a private key (`PRIVATE_KEY`): no edit needs one, and nothing else has these shapes.
 */
const SHAPE_PATTERN = new RegExp(
  [
    // GitHub: classic, OAuth, user, server and refresh tokens; fine-grained ones.
    String.raw`\bgh[pousr]_[A-Za-z0-9]{36,255}\b`,
    String.raw`\bgithub_pat_[A-Za-z0-9_]{22,255}`,
    // GitLab, Slack, npm, Anthropic and OpenAI project keys.
    String.raw`\bglpat-[A-Za-z0-9_-]{20,}`,
    String.raw`\bxox[abposr]-[A-Za-z0-9-]{10,}`,
    String.raw`\bnpm_[A-Za-z0-9]{36}\b`,
    String.raw`\bsk-(?:ant|proj)-[A-Za-z0-9_-]{20,}`,
  ].join('|'),
  'g',
)

/** A PEM private key: its framing lines stay, so the reader sees what was there; its body goes. */
const PRIVATE_KEY = /(-----BEGIN [A-Z0-9 ]{0,20}PRIVATE KEY-----)[^]*?(-----END [A-Z0-9 ]{0,20}PRIVATE KEY-----|$(?![^]))/g

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

export interface RedactOptions {
  /**
   * The text is the tail of a longer one (output cut at a size limit): a start that
   * is the end of a known secret (at least 4 characters) is redacted too.
   */
  headCut?: boolean
  /** The text is the head of a longer one: an end that is the start of a known secret (at least 4 characters) is redacted too. */
  tailCut?: boolean
}

/** Redacts one text. */
export type Redactor = (text: string, options?: RedactOptions) => string

/**
 * A redactor for a fixed list of secret values: one RegExp of all of them
 * (longest first, so a secret containing another is replaced whole), compiled
 * once, then a pass for credentials recognized by their shape (a GitHub token, a
 * private key), then (unless `contextual: false`) one for credentials recognized
 * by their context. Text a model edits from (file contents) wants
 * `contextual: false`: only secrets are hidden, nothing else moves.
 */
export function createRedactor(secrets: readonly string[], { contextual = true }: { contextual?: boolean } = {}): Redactor {
  const known = [...new Set(secrets)].filter(Boolean).sort((a, b) => b.length - a.length)
  const literal = known.length ? new RegExp(known.map(escapeRegExp).join('|'), 'g') : undefined
  return (text, options = {}) => {
    let out = literal ? text.replace(literal, REDACTED) : text
    out = out.replace(SHAPE_PATTERN, REDACTED).replace(PRIVATE_KEY, `$1${REDACTED}$2`)
    if (contextual) out = out.replace(CONTEXT_PATTERN, redactContext)
    if (options.headCut) out = redactHeadFragment(out, known)
    if (options.tailCut) out = redactTailFragment(out, known)
    return out
  }
}

function redactHeadFragment(text: string, secrets: readonly string[]): string {
  let longest = 0
  for (const secret of secrets) {
    for (let length = Math.min(secret.length - 1, text.length); length >= MIN_FRAGMENT && length > longest; length--) {
      if (text.startsWith(secret.slice(secret.length - length))) longest = length
    }
  }
  return longest ? REDACTED + text.slice(longest) : text
}

function redactTailFragment(text: string, secrets: readonly string[]): string {
  let longest = 0
  for (const secret of secrets) {
    for (let length = Math.min(secret.length - 1, text.length); length >= MIN_FRAGMENT && length > longest; length--) {
      if (text.endsWith(secret.slice(0, length))) longest = length
    }
  }
  return longest ? text.slice(0, text.length - longest) + REDACTED : text
}

// One redactor per secrets array, so repeated calls with the same list compile nothing.
const redactors = new WeakMap<readonly string[], Redactor>()

/** `text` with every known secret value, and every credential recognized by its context, replaced by `[REDACTED]`. */
export function redact(text: string, secrets: readonly string[], options?: RedactOptions): string {
  let redactor = redactors.get(secrets)
  if (!redactor) redactors.set(secrets, (redactor = createRedactor(secrets)))
  return redactor(text, options)
}

/**
 * A redactor of the host's secret values as they are now: those of `env` and the
 * registered ones (`registerSecret`), read on every call (the environment may
 * change), rebuilt only when they changed; `undefined` when there are none.
 * `contextual` as in `createRedactor`.
 */
export function hostRedactor(options: { env?: NodeJS.ProcessEnv; patterns?: readonly SecretPattern[]; contextual?: boolean } = {}): Redactor | undefined {
  const secrets = hostSecretValues(options)
  if (!secrets.length) return undefined
  const key = `${options.contextual !== false}\0${secrets.join('\0')}`
  let redactor = hostRedactors.get(key)
  if (!redactor) {
    if (hostRedactors.size >= 16) hostRedactors.clear()
    hostRedactors.set(key, (redactor = createRedactor(secrets, { contextual: options.contextual })))
  }
  return redactor
}

const hostRedactors = new Map<string, Redactor>()

export interface RedactDeepOptions {
  /** Keys whose values are redacted whole (default `DEFAULT_SECRET_PATTERNS`; `false`: no key is). */
  keys?: readonly SecretPattern[] | false
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * A copy of a JSON-like value for printing: every string redacted, and every
 * non-empty string under a secret-named key (`apiKey`, `token`, `password`,
 * `clientSecret`, at any depth below it) replaced by `[REDACTED]`. Numbers,
 * booleans and null stay; instances other than arrays and plain objects are
 * kept as they are; a cycle becomes `[Circular]`.
 */
export function redactDeep<T>(value: T, secrets: readonly string[] = [], options: RedactDeepOptions = {}): T {
  const keys = options.keys === undefined ? DEFAULT_SECRET_PATTERNS : options.keys
  const redactor = createRedactor(secrets)
  const ancestors = new Set<object>()
  const walk = (node: unknown, hidden: boolean): unknown => {
    if (typeof node === 'string') return hidden && node !== '' ? REDACTED : redactor(node)
    if (!Array.isArray(node) && !isPlainObject(node)) return node
    if (ancestors.has(node)) return '[Circular]'
    ancestors.add(node)
    const copy = Array.isArray(node)
      ? node.map(item => walk(item, hidden))
      : Object.fromEntries(Object.entries(node).map(([key, item]) => [key, walk(item, hidden || (keys !== false && isSecretName(key, keys)))]))
    ancestors.delete(node)
    return copy
  }
  return walk(value, false) as T
}

/** A match of `CONTEXT_PATTERN`, redacted unless it is one that needs a digit and has none. */
function redactContext(match: string, ...rest: unknown[]): string {
  const groups = rest.at(-1) as { bearer?: string; assigned?: string }
  return (groups.bearer ?? groups.assigned) !== undefined && !/\d/.test(match) ? match : REDACTED
}
