/**
 * Secrets the host holds that are not in its environment: a token read from a
 * file, a key written in a config layer. Registered here, they are redacted
 * wherever the environment's secrets are (`hostSecretValues`, `hostRedactor`).
 */
import { MIN_SECRET_LENGTH, secretValues, type SecretPattern } from './names.ts'

// One registry per process, like the environment it completes: kept on globalThis,
// so two copies of this package (sources and build) still share it.
const KEY = Symbol.for('loom.secrets.registered')
const registry: Map<string, number> =
  ((globalThis as Record<symbol, unknown>)[KEY] as Map<string, number> | undefined) ??
  ((globalThis as Record<symbol, unknown>)[KEY] = new Map<string, number>())

/** The values a registration stands for: the value, and each line of a multi-line one (a PEM key), trimmed; short ones left out. */
function valuesOf(value: string): string[] {
  const values = new Set<string>()
  const add = (text: string) => {
    if (text.length >= MIN_SECRET_LENGTH) values.add(text)
  }
  // Blanks around it (a file's final newline) are not part of the secret.
  add(value.trim())
  if (value.includes('\n')) for (const line of value.split(/\r?\n/)) add(line.trim())
  return [...values]
}

/**
 * Registers a secret value the host read from somewhere other than its environment
 * (a token file, a key in a config file): from now on it is redacted from tool
 * results, the session log and the terminal like an environment secret. Returns
 * what removes the registration (a value registered twice stays until both are
 * removed). A value shorter than `MIN_SECRET_LENGTH` (8) is not registered:
 * redacting it would hit ordinary words. In a plugin, tie it to the plugin's
 * lifetime: `ctx.effect(() => registerSecret(token))`.
 */
export function registerSecret(value: string): () => void {
  if (typeof value !== 'string') throw new TypeError(`registerSecret() takes a string, got ${value === null ? 'null' : typeof value}`)
  const values = valuesOf(value)
  for (const text of values) registry.set(text, (registry.get(text) ?? 0) + 1)
  let removed = false
  return () => {
    if (removed) return
    removed = true
    for (const text of values) {
      const left = registry.get(text)! - 1
      if (left > 0) registry.set(text, left)
      else registry.delete(text)
    }
  }
}

/** The registered secret values, longest first. */
export function registeredSecrets(): string[] {
  return [...registry.keys()].sort(byLength)
}

/**
 * Every secret value the host holds now: those of `env` (default `process.env`,
 * see `secretValues`) and the registered ones, longest first, without duplicates.
 */
export function hostSecretValues(options: { env?: Readonly<Record<string, string | undefined>>; patterns?: readonly SecretPattern[] } = {}): string[] {
  const fromEnv = secretValues(options.env ?? process.env, options.patterns)
  if (registry.size === 0) return fromEnv
  return [...new Set([...fromEnv, ...registry.keys()])].sort(byLength)
}

function byLength(a: string, b: string): number {
  return b.length - a.length || (a < b ? -1 : a > b ? 1 : 0)
}
