/** Characters that make a glob segment a pattern rather than a literal name. */
const MAGIC = /[*?[\]{}\\]/

const escapeRegExp = (c: string) => /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c

/** For every `{` at index i that has a matching `}`, the index of that `}` (nesting and `\` escapes respected). */
function bracePairs(pattern: string): Map<number, number> {
  const pairs = new Map<number, number>()
  const open: number[] = []
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') i++
    else if (c === '{') open.push(i)
    else if (c === '}' && open.length > 0) pairs.set(open.pop()!, i)
  }
  return pairs
}

/**
 * Compiles a glob to an anchored regular expression over `/`-separated relative
 * paths. Supported: `**` as a whole segment (any number of directories, none
 * included), `*` (any characters but `/`), `?` (one character but `/`), `[abc]`,
 * `[a-z]`, `[!abc]` / `[^abc]`, `{a,b}` (nestable) and `\` escapes. Names starting
 * with a dot are matched like any other.
 */
export function globToRegExp(pattern: string, flags = ''): RegExp {
  const pairs = bracePairs(pattern)
  const closers = new Set(pairs.values())
  let depth = 0
  let re = ''
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i]
    if (c === '\\') {
      re += i + 1 < pattern.length ? escapeRegExp(pattern[i + 1]) : '\\\\'
      i += 2
    } else if (c === '*') {
      let j = i
      while (pattern[j] === '*') j++
      const wholeSegment = j - i >= 2 && (i === 0 || pattern[i - 1] === '/') && (j === pattern.length || pattern[j] === '/')
      if (wholeSegment && j === pattern.length) {
        re += '.*'
        i = j
      } else if (wholeSegment) {
        re += '(?:[^/]*/)*'
        i = j + 1
      } else {
        re += '[^/]*'
        i = j
      }
    } else if (c === '?') {
      re += '[^/]'
      i++
    } else if (c === '[') {
      let j = i + 1
      if (pattern[j] === '!' || pattern[j] === '^') j++
      if (pattern[j] === ']') j++
      while (j < pattern.length && pattern[j] !== ']') j++
      if (j >= pattern.length) {
        re += '\\['
        i++
        continue
      }
      let body = pattern.slice(i + 1, j)
      const negate = body[0] === '!' || body[0] === '^'
      if (negate) body = body.slice(1)
      const inner = [...body].map(ch => (ch === '\\' || ch === ']' || ch === '[' || ch === '^') ? `\\${ch}` : ch).join('')
      re += negate ? `[^/${inner}]` : `[${inner}]`
      i = j + 1
    } else if (c === '{' && pairs.has(i)) {
      re += '(?:'
      depth++
      i++
    } else if (c === '}' && depth > 0 && closers.has(i)) {
      re += ')'
      depth--
      i++
    } else if (c === ',' && depth > 0) {
      re += '|'
      i++
    } else {
      re += escapeRegExp(c)
      i++
    }
  }
  return new RegExp(`^${re}$`, flags)
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

/** How many directory levels below the start a match can be at most (Infinity with `**`). */
export function globDepth(pattern: string): number {
  if (/(^|\/)\*\*(\/|$)/.test(pattern)) return Infinity
  return pattern.split('/').length // braces may hide slashes; the total count bounds every alternative
}
