// grep's pattern is a JavaScript regular expression; ripgrep's default engine speaks
// Rust's regex dialect. This module translates the part of JavaScript's syntax that has
// an exact Rust equivalent (as grep matches it: one line at a time, the line's final
// `\r` dropped, invalid UTF-8 read as U+FFFD) and refuses the rest, which the search
// worker then runs with JavaScript's own engine. Nothing is approximated: a pattern is
// either translated to one that matches the same lines, or not translated at all.
//
// Only patterns valid with the `u` flag are translated (grep compiles them so; without
// it JavaScript's case folding and escapes differ). Every character class is written out
// as code point ranges, so the meaning of `\d`, `\w`, `\s`, `.` and negated classes is
// JavaScript's, not Rust's Unicode-aware one.

/** A translated pattern, and what running it under ripgrep needs. */
export interface RustRegex {
  /** The pattern in Rust's syntax. */
  source: string
  /**
   * It can match U+FFFD, which is how JavaScript reads invalid UTF-8: ripgrep must
   * transcode (`-E utf-8`, the same WHATWG replacement as Node's decoder) to see it.
   */
  transcode: boolean
  /**
   * It can match `\r`: on a line ending in `\r\n` it may match the `\r` that grep drops,
   * so such a line is tested again with the JavaScript expression.
   */
  matchesCr: boolean
}

/** Why a pattern stays with the worker (for tests and the README's rule). */
export class Untranslatable extends Error {}

type Ranges = [number, number][]

const MAX = 0x10ffff
const LF = 0x0a
const CR = 0x0d
const REPLACEMENT = 0xfffd

const DIGIT: Ranges = [[0x30, 0x39]]
const WORD: Ranges = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]
// JavaScript's \s: WhiteSpace (TAB, VT, FF, ZWNBSP and the Zs category) and LineTerminator.
const SPACE: Ranges = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
])
// `.` with the u flag: any code point but a line terminator.
const DOT: Ranges = complement([
  [LF, LF],
  [CR, CR],
  [0x2028, 0x2029],
])

function normalize(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0])
  const out: Ranges = []
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1]
    if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi)
    else out.push([lo, hi])
  }
  return out
}

function complement(ranges: Ranges): Ranges {
  const out: Ranges = []
  let next = 0
  for (const [lo, hi] of normalize(ranges)) {
    if (lo > next) out.push([next, lo - 1])
    next = hi + 1
  }
  if (next <= MAX) out.push([next, MAX])
  return out
}

/** `ranges` without the code points of `removed`. */
function subtract(ranges: Ranges, removed: Ranges): Ranges {
  const keep = complement(removed)
  const out: Ranges = []
  for (const [lo, hi] of normalize(ranges)) {
    for (const [klo, khi] of keep) {
      const a = Math.max(lo, klo)
      const b = Math.min(hi, khi)
      if (a <= b) out.push([a, b])
    }
  }
  return out
}

const LF_RANGE: [number, number] = [LF, LF]
const SURROGATES: [number, number] = [0xd800, 0xdfff]
const contains = (ranges: Ranges, cp: number) => ranges.some(([lo, hi]) => lo <= cp && cp <= hi)
const hex = (cp: number) => `\\x{${cp.toString(16).toUpperCase()}}`

/**
 * Translates a JavaScript regular expression (its `source` and `flags`, as grep compiled
 * it) to Rust's dialect; throws `Untranslatable` naming the construct that has no exact
 * equivalent: lookaround, backreferences, `\p{…}`, flag groups, `\b` with `i`, a `\n`
 * or an empty class (they never match a line), or a pattern valid only without `u`.
 */
export function toRustRegex(source: string, flags: string): RustRegex {
  if (!flags.includes('u')) throw new Untranslatable('valid only without the u flag')
  return new Translator(source, flags.includes('i')).translate()
}

class Translator {
  readonly #cps: number[]
  readonly #ignoreCase: boolean
  #at = 0
  #transcode = false
  #matchesCr = false

  constructor(source: string, ignoreCase: boolean) {
    this.#cps = Array.from(source, c => c.codePointAt(0)!)
    this.#ignoreCase = ignoreCase
  }

  translate(): RustRegex {
    const body = this.#disjunction()
    if (this.#at < this.#cps.length) throw new Untranslatable(`unexpected "${this.#char()}"`)
    return { source: `${this.#ignoreCase ? '(?i)' : ''}${body}`, transcode: this.#transcode, matchesCr: this.#matchesCr }
  }

  #char(offset = 0): string {
    const cp = this.#cps[this.#at + offset]
    return cp === undefined ? '' : String.fromCodePoint(cp)
  }

  #eat(text: string): boolean {
    const cps = Array.from(text, c => c.codePointAt(0)!)
    if (!cps.every((cp, i) => this.#cps[this.#at + i] === cp)) return false
    this.#at += cps.length
    return true
  }

  #disjunction(): string {
    const alternatives = [this.#alternative()]
    while (this.#eat('|')) alternatives.push(this.#alternative())
    return alternatives.join('|')
  }

  #alternative(): string {
    let out = ''
    while (this.#at < this.#cps.length && this.#char() !== '|' && this.#char() !== ')') out += this.#term()
    return out
  }

  #term(): string {
    const c = this.#char()
    if (c === '^') {
      this.#at++
      return '^'
    }
    if (c === '$') {
      this.#at++
      // The line grep tests has lost its final `\r`; ripgrep's still has it.
      return '(?:\\x{D}?$)'
    }
    if (c === '\\' && (this.#char(1) === 'b' || this.#char(1) === 'B')) {
      // JavaScript's word characters are ASCII (and, with `i`, also ſ and K, which no Rust boundary knows).
      if (this.#ignoreCase) throw new Untranslatable('\\b or \\B with ignore_case')
      const negated = this.#char(1) === 'B'
      this.#at += 2
      return negated ? '(?-u:\\B)' : '(?-u:\\b)'
    }
    return this.#atom() + this.#quantifier()
  }

  #quantifier(): string {
    const c = this.#char()
    let q: string
    if (c === '*' || c === '+' || c === '?') {
      this.#at++
      q = c
    } else if (c === '{') {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...this.#cps.slice(this.#at, this.#at + 24)))
      if (match === null) return ''
      this.#at += match[0].length
      q = match[0]
    } else {
      return ''
    }
    if (this.#eat('?')) q += '?'
    return q
  }

  #atom(): string {
    const c = this.#char()
    if (c === '(') return this.#group()
    if (c === '[') return this.#set(this.#class())
    if (c === '.') {
      this.#at++
      return this.#set(DOT)
    }
    if (c === '\\') {
      this.#at++
      const escaped = this.#escape(false)
      return Array.isArray(escaped) ? this.#set(escaped) : this.#literal(escaped)
    }
    if (c === ')' || c === '*' || c === '+' || c === '?' || c === '{' || c === '}' || c === ']') throw new Untranslatable(`unexpected "${c}"`)
    this.#at++
    return this.#literal(c.codePointAt(0)!)
  }

  #group(): string {
    this.#at++
    if (this.#eat('?')) {
      if (this.#eat(':')) {
        // A plain group.
      } else if (this.#char() === '<' && this.#char(1) !== '=' && this.#char(1) !== '!') {
        const end = this.#cps.indexOf('>'.codePointAt(0)!, this.#at)
        if (end === -1) throw new Untranslatable('unterminated group name')
        this.#at = end + 1
      } else {
        throw new Untranslatable(`the group "(?${this.#char()}" (lookaround or flags)`)
      }
    }
    const inner = this.#disjunction()
    if (!this.#eat(')')) throw new Untranslatable('unterminated group')
    return `(?:${inner})`
  }

  /** After a backslash: a code point, or a set for a class escape. */
  #escape(inClass: boolean): number | Ranges {
    const c = this.#char()
    this.#at++
    switch (c) {
      case 'd':
        return DIGIT
      case 'D':
        return complement(DIGIT)
      case 'w':
        return WORD
      case 'W':
        return complement(WORD)
      case 's':
        return SPACE
      case 'S':
        return complement(SPACE)
      case 'f':
        return 0x0c
      case 'n':
        return LF
      case 'r':
        return CR
      case 't':
        return 0x09
      case 'v':
        return 0x0b
      case 'c': {
        const letter = this.#char()
        if (!/^[A-Za-z]$/.test(letter)) throw new Untranslatable('\\c without a letter')
        this.#at++
        return letter.charCodeAt(0) % 32
      }
      case '0':
        if (/^\d$/.test(this.#char())) throw new Untranslatable('a backreference')
        return 0
      case 'x': {
        const digits = this.#hexDigits(2)
        if (digits === undefined) throw new Untranslatable('\\x without two hex digits')
        return digits
      }
      case 'u':
        return this.#unicodeEscape()
      case 'b':
        if (inClass) return 0x08
        break
      case '-':
        if (inClass) return 0x2d
        break
    }
    if (c !== '' && '^$\\.*+?()[]{}|/'.includes(c)) return c.codePointAt(0)!
    throw new Untranslatable(/^[1-9k]$/.test(c) ? 'a backreference' : /^[pP]$/.test(c) ? 'a Unicode property escape' : `the escape "\\${c}"`)
  }

  #hexDigits(n: number): number | undefined {
    const text = String.fromCodePoint(...this.#cps.slice(this.#at, this.#at + n))
    if (text.length !== n || !/^[0-9a-fA-F]+$/.test(text)) return undefined
    this.#at += n
    return Number.parseInt(text, 16)
  }

  #unicodeEscape(): number {
    if (this.#eat('{')) {
      const end = this.#cps.indexOf('}'.codePointAt(0)!, this.#at)
      const text = String.fromCodePoint(...this.#cps.slice(this.#at, end))
      if (end === -1 || !/^[0-9a-fA-F]+$/.test(text)) throw new Untranslatable('a malformed \\u{…}')
      this.#at = end + 1
      return Number.parseInt(text, 16)
    }
    const unit = this.#hexDigits(4)
    if (unit === undefined) throw new Untranslatable('a malformed \\u')
    // With the u flag, \uD83D\uDE00 is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && this.#char() === '\\' && this.#char(1) === 'u') {
      const saved = this.#at
      this.#at += 2
      const low = this.#hexDigits(4)
      if (low !== undefined && low >= 0xdc00 && low <= 0xdfff) return 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00)
      this.#at = saved
    }
    return unit
  }

  /** A bracketed class, as the set of code points it matches. */
  #class(): Ranges {
    this.#at++
    const negated = this.#eat('^')
    const ranges: Ranges = []
    const atom = (): number | Ranges => {
      const c = this.#char()
      this.#at++
      if (c === '\\') return this.#escape(true)
      return c.codePointAt(0)!
    }
    while (this.#char() !== ']') {
      if (this.#at >= this.#cps.length) throw new Untranslatable('unterminated class')
      const first = atom()
      if (typeof first === 'number' && this.#char() === '-' && this.#char(1) !== ']' && this.#char(1) !== '') {
        this.#at++
        const last = atom()
        if (typeof last !== 'number' || last < first) throw new Untranslatable('a malformed range')
        ranges.push([first, last])
      } else {
        ranges.push(...(typeof first === 'number' ? ([[first, first]] as Ranges) : first))
      }
    }
    this.#at++
    return negated ? complement(ranges) : normalize(ranges)
  }

  #literal(cp: number): string {
    if (cp === LF) throw new Untranslatable('a line feed, which no line contains')
    if (cp >= 0xd800 && cp <= 0xdfff) throw new Untranslatable('a lone surrogate')
    if (cp === CR) this.#matchesCr = true
    if (cp === REPLACEMENT) this.#transcode = true
    return /^[0-9A-Za-z]$/.test(String.fromCodePoint(cp)) ? String.fromCodePoint(cp) : hex(cp)
  }

  /**
   * A set of code points as a Rust class. The line feed is left out (no line holds one,
   * and ripgrep refuses a pattern that could match it), and so are the surrogates (not
   * scalar values: Rust refuses them, and no decoded line holds one).
   */
  #set(ranges: Ranges): string {
    const set = subtract(ranges, [LF_RANGE, SURROGATES])
    if (set.length === 0) throw new Untranslatable('a class that matches nothing')
    if (contains(set, CR)) this.#matchesCr = true
    if (contains(set, REPLACEMENT)) this.#transcode = true
    // The shorter of the class and its negation.
    const negation = complement([...set, LF_RANGE, SURROGATES])
    const body = (list: Ranges) => list.map(([lo, hi]) => (lo === hi ? hex(lo) : `${hex(lo)}-${hex(hi)}`)).join('')
    return negation.length < set.length ? `[^${body(negation)}${hex(LF)}]` : `[${body(set)}]`
  }
}
