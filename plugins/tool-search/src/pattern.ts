/** Characters that make a glob segment a pattern rather than a literal name. */
const MAGIC = /[*?[\]{}\\]/

/** A compiled glob: `test(path)` runs in time proportional to the path's length times the pattern's. */
export interface GlobMatcher {
  test(path: string): boolean
}

/** The parts of a glob, before compilation. */
type Part =
  | { kind: 'char'; test: (c: number) => boolean } // one character (a code point)
  | { kind: 'name' } // `*`: any characters but `/`
  | { kind: 'dirs' } // `**/`: any number of whole directories, none included
  | { kind: 'rest' } // a final `**`: anything
  | { kind: 'alt'; options: Part[][] } // `{a,b}`

/**
 * The instructions of a matching program: `char` consumes one character that passes
 * `test` and goes on at the next instruction; `fork` goes on at every target without
 * consuming anything; `match` accepts.
 */
type Fork = { op: 'fork'; to: number[] }
type Op = { op: 'char'; test: (c: number) => boolean } | Fork | { op: 'match' }

/** The instructions a match can be at after some characters (forks followed), as a state of the matcher's DFA. */
interface State {
  pcs: number[]
  accepts: boolean
  /** Kept in the matcher's cache (else it is rebuilt each time it is reached). */
  cached: boolean
  /** Cached transitions by code point; null: no match is possible any more. */
  next: Map<number, State | null>
}
/** Instructions held by cached states plus cached transitions, per matcher: a few MB at most. */
const CACHE_BUDGET = 1 << 20
/** Characters of a glob at most: testing one path costs up to its length times the pattern's. */
export const GLOB_MAX_LENGTH = 1000

const SLASH = 0x2f
const notSlash = (c: number) => c !== SLASH
const anything = () => true

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

/** The test of a `[...]` class body (without the brackets): members and `a-z` ranges, by code point. */
function classTest(body: string): (c: number) => boolean {
  const negate = body[0] === '!' || body[0] === '^'
  const chars = [...(negate ? body.slice(1) : body)]
  const ranges: [number, number][] = []
  for (let k = 0; k < chars.length; k++) {
    const low = chars[k].codePointAt(0)!
    const range = chars[k + 1] === '-' && k + 2 < chars.length
    ranges.push([low, range ? chars[k + 2].codePointAt(0)! : low])
    if (range) k += 2
  }
  const member = (c: number) => ranges.some(([low, high]) => c >= low && c <= high)
  return negate ? c => c !== SLASH && !member(c) : member
}

/** The code point of `pattern` at `i`, and how many code units it takes. */
const codeAt = (pattern: string, i: number) => {
  const code = pattern.codePointAt(i)!
  return { code, units: code > 0xffff ? 2 : 1 }
}

/** Parses `pattern` from `i` up to `end`; inside braces (`inAlt`) a `,` ends the option. */
function parse(pattern: string, pairs: Map<number, number>, i: number, end: number, inAlt: boolean): { parts: Part[]; next: number } {
  const parts: Part[] = []
  const literal = (code: number) => parts.push({ kind: 'char', test: c => c === code })
  while (i < end) {
    const c = pattern[i]
    if (c === '\\') {
      const escaped = i + 1 < pattern.length ? codeAt(pattern, i + 1) : { code: 0x5c, units: 1 } // a final `\\` is itself
      literal(escaped.code)
      i += 1 + escaped.units
    } else if (c === '*') {
      let j = i
      while (pattern[j] === '*') j++
      const wholeSegment = j - i >= 2 && (i === 0 || pattern[i - 1] === '/') && (j === pattern.length || pattern[j] === '/')
      if (!wholeSegment) {
        parts.push({ kind: 'name' })
      } else if (j === pattern.length) {
        parts.push({ kind: 'rest' })
      } else {
        parts.push({ kind: 'dirs' })
        j++ // the `/` is part of `**/`
      }
      i = j
    } else if (c === '?') {
      parts.push({ kind: 'char', test: notSlash })
      i++
    } else if (c === '[') {
      let j = i + 1
      if (pattern[j] === '!' || pattern[j] === '^') j++
      if (pattern[j] === ']') j++
      while (j < pattern.length && pattern[j] !== ']') j++
      if (j >= pattern.length) {
        literal(0x5b) // unclosed: a literal `[`
        i++
      } else {
        parts.push({ kind: 'char', test: classTest(pattern.slice(i + 1, j)) })
        i = j + 1
      }
    } else if (c === '{' && pairs.has(i)) {
      const close = pairs.get(i)!
      const options: Part[][] = []
      let at = i + 1
      for (;;) {
        const option = parse(pattern, pairs, at, close, true)
        options.push(option.parts)
        at = option.next
        if (at >= close) break
        at++ // past the `,`
      }
      parts.push({ kind: 'alt', options })
      i = Math.max(at, close + 1)
    } else if (c === ',' && inAlt) {
      break
    } else {
      // Every other character, a `}` without its `{` and a `,` outside braces included.
      const { code, units } = codeAt(pattern, i)
      literal(code)
      i += units
    }
  }
  return { parts, next: i }
}

/** Appends the instructions of `parts`: a Thompson construction, where loops and alternatives become forks. */
function emit(parts: Part[], program: Op[]): void {
  /** A loop over `body` (zero or more times): `start: fork(body, out); body…; fork(start); out:`. */
  const repeat = (body: () => void) => {
    const fork: Fork = { op: 'fork', to: [] }
    const start = program.push(fork) - 1
    fork.to.push(program.length)
    body()
    program.push({ op: 'fork', to: [start] })
    fork.to.push(program.length)
  }
  const char = (test: (c: number) => boolean) => program.push({ op: 'char', test })
  for (const part of parts) {
    if (part.kind === 'char') char(part.test)
    else if (part.kind === 'name') repeat(() => char(notSlash))
    else if (part.kind === 'rest') repeat(() => char(anything))
    else if (part.kind === 'dirs')
      repeat(() => {
        repeat(() => char(notSlash))
        char(c => c === SLASH)
      })
    else {
      const fork: Fork = { op: 'fork', to: [] }
      program.push(fork)
      const exits: Fork[] = []
      for (const option of part.options) {
        fork.to.push(program.length)
        emit(option, program)
        exits.push({ op: 'fork', to: [] })
        program.push(exits[exits.length - 1])
      }
      for (const exit of exits) exit.to.push(program.length)
    }
  }
}

/**
 * Compiles a glob to a matcher of `/`-separated relative paths (the whole path must
 * match). Supported: `**` as a whole segment (any number of directories, none
 * included), `*` (any characters but `/`), `?` (one character but `/`), `[abc]`,
 * `[a-z]`, `[!abc]` / `[^abc]`, `{a,b}` (nestable) and `\` escapes. Names starting
 * with a dot are matched like any other.
 *
 * The matcher never backtracks: it follows every way the pattern can match at once,
 * one character at a time (a Thompson NFA, its state sets cached as a lazy DFA), so a
 * test costs at most the path's length times the pattern's (capped at
 * `GLOB_MAX_LENGTH`). A backtracking RegExp takes time growing with the path's length
 * to the power of the number of stars for `*a*a*a*a*b` against a long name of `a`s.
 */
export function compileGlob(pattern: string): GlobMatcher {
  if (pattern.length > GLOB_MAX_LENGTH) throw new RangeError(`it is ${pattern.length} characters long; at most ${GLOB_MAX_LENGTH} are supported`)
  const program: Op[] = []
  emit(parse(pattern, bracePairs(pattern), 0, pattern.length, false).parts, program)
  program.push({ op: 'match' })
  const seen = new Uint32Array(program.length)
  let generation = 0

  /** The `char` and `match` instructions reachable from `from` without consuming a character. */
  const closure = (from: number[]): number[] => {
    if (++generation === 0xffffffff) {
      seen.fill(0)
      generation = 1
    }
    const out: number[] = []
    const stack = from.slice()
    while (stack.length > 0) {
      const pc = stack.pop()!
      if (seen[pc] === generation) continue
      seen[pc] = generation
      const op = program[pc]
      if (op.op === 'fork') stack.push(...op.to)
      else out.push(pc)
    }
    return out
  }

  // The sets of instructions met so far become states of a DFA built lazily, so a
  // character seen before in the same situation costs one map lookup. What is cached
  // is bounded (`budget`: instructions held by cached states plus cached transitions);
  // past it the matcher recomputes instead: slower, never wrong.
  const states = new Map<string, State>()
  let budget = CACHE_BUDGET
  const stateOf = (pcs: number[]): State => {
    const key = pcs.sort((x, y) => x - y).join(',')
    let state = states.get(key)
    if (state === undefined) {
      state = { pcs, accepts: pcs.some(pc => program[pc].op === 'match'), cached: budget >= pcs.length, next: new Map() }
      if (state.cached) {
        budget -= pcs.length
        states.set(key, state)
      }
    }
    return state
  }
  const step = (state: State, c: number): State | null => {
    let to = state.next.get(c)
    if (to === undefined) {
      const next: number[] = []
      for (const pc of state.pcs) {
        const op = program[pc]
        if (op.op === 'char' && op.test(c)) next.push(pc + 1)
      }
      to = next.length === 0 ? null : stateOf(closure(next))
      if (budget > 0 && state.cached && (to === null || to.cached)) {
        budget--
        state.next.set(c, to)
      }
    }
    return to
  }
  const start = stateOf(closure([0]))

  return {
    test(path: string): boolean {
      let state: State | null = start
      for (let i = 0; i < path.length; i++) {
        const code = path.codePointAt(i)!
        if (code > 0xffff) i++ // the second half of a surrogate pair
        state = step(state, code)
        if (state === null) return false
      }
      return state.accepts
    },
  }
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
