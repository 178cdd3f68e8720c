import picomatch from 'picomatch'

/** Characters that make a glob segment a pattern rather than a literal name. */
const MAGIC = /[*?[\]{}()\\]/

/** Characters of a glob at most. */
export const GLOB_MAX_LENGTH = 1000

/** A compiled glob: `test(path)` for a `/`-separated relative path (the whole path must match). */
export interface GlobMatcher {
  test(path: string): boolean
}

/**
 * Compiles a glob with picomatch: `**` (any number of directories), `*` and `?` within
 * one name, `[abc]`, `[a-z]`, `[!a]`, `{a,b}`, `\` escapes and extglobs such as
 * `@(a|b)`. Names starting with a dot match like any other (the walk decides whether
 * hidden files are seen at all), and a leading `!` is literal.
 *
 * Compiled with the `u` flag, so `?` and classes match a code point (an emoji too);
 * a pattern whose translation is not valid so (`x\-y`) is compiled without it.
 * picomatch compiles to a backtracking RegExp, so testing may be slow for a pattern
 * like `*a*a*a*a*b`: walks and tests run in the search worker, stopped at the timeout.
 */
export function compileGlob(pattern: string): GlobMatcher {
  if (pattern.length > GLOB_MAX_LENGTH) throw new RangeError(`it is ${pattern.length} characters long; at most ${GLOB_MAX_LENGTH} are supported`)
  const options = { dot: true, posix: true, nonegate: true }
  let test: (path: string) => boolean
  try {
    test = picomatch(pattern, { ...options, flags: 'u', debug: true })
  } catch {
    test = picomatch(pattern, options)
  }
  return { test }
}

/**
 * Splits a glob into its literal leading directories (where the walk can start) and
 * the rest: `src/**\/*.ts` → `{ base: 'src', rest: '**\/*.ts' }`, `*.ts` → `{ base: '', rest: '*.ts' }`.
 * An absolute pattern keeps its leading `/` in `base`. The last segment always stays in `rest`.
 */
export function splitGlob(pattern: string): { base: string; rest: string } {
  const segments = pattern.split('/')
  let n = 0
  while (n < segments.length - 1 && !MAGIC.test(segments[n])) n++
  if (n === 0) return { base: '', rest: pattern }
  const base = segments.slice(0, n).join('/')
  return { base: base === '' ? '/' : base, rest: segments.slice(n).join('/') }
}

/** How many directory levels below the start a match can be at most (Infinity with `**` anywhere, braces included). */
export function globDepth(pattern: string): number {
  if (pattern.includes('**')) return Infinity
  return pattern.split('/').length // braces may hide slashes; the total count bounds every alternative
}
