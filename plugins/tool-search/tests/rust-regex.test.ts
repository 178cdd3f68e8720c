// Which JavaScript patterns ripgrep runs (translated to Rust's dialect) and which stay
// with the worker; and, when rg is installed, that a translated pattern finds the same
// lines as JavaScript's engine on a corpus chosen to make the dialects disagree
// (Unicode case folding, \w and \s, `.`, line ends, invalid UTF-8), for hand-picked
// patterns and a few hundred generated ones.
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { installedRipgrep } from '../src/ripgrep.ts'
import { toRustRegex, Untranslatable } from '../src/rust-regex.ts'
import { compileRegExp } from '../src/search.ts'

const RG = await installedRipgrep()

/** The translation of a pattern as grep compiles it, or why it stays with the worker. */
function translate(pattern: string, ignoreCase = false) {
  const regex = compileRegExp(pattern, ignoreCase)
  try {
    return toRustRegex(regex.source, regex.flags)
  } catch (error) {
    if (error instanceof Untranslatable) return `worker: ${error.message}`
    throw error
  }
}

describe('the dialect rule', () => {
  it("translates with JavaScript's meaning of each class, written out as code points", () => {
    expect(translate('computeChecksum')).toEqual({ source: 'computeChecksum', transcode: false, matchesCr: false })
    expect(translate('export (async )?function [a-z]+\\(')).toEqual({
      source: 'export\\x{20}(?:async\\x{20})?function\\x{20}[\\x{61}-\\x{7A}]+\\x{28}',
      transcode: false,
      matchesCr: false,
    })
    expect(translate('\\d\\w')).toMatchObject({ source: '[\\x{30}-\\x{39}][\\x{30}-\\x{39}\\x{41}-\\x{5A}\\x{5F}\\x{61}-\\x{7A}]' })
    expect(translate('a.b')).toEqual({ source: 'a[^\\x{D}\\x{2028}-\\x{2029}\\x{A}]b', transcode: true, matchesCr: false })
    expect(translate('x\\s$')).toMatchObject({ source: expect.stringMatching(/^x\[.*\\x\{D\}.*\](?:\(\?:\\x\{D\}\?\$\))$/), matchesCr: true })
    expect(translate('\\bword\\B')).toMatchObject({ source: '(?-u:\\b)word(?-u:\\B)' })
    expect(translate('(?<year>\\d{4})-\\d{2,}?|\\u{1F600}', true)).toMatchObject({
      source: '(?i)(?:[\\x{30}-\\x{39}]{4})\\x{2D}[\\x{30}-\\x{39}]{2,}?|\\x{1F600}',
    })
  })

  it('leaves to the worker what Rust has no exact equivalent for', () => {
    expect(translate('(?<=a)b')).toMatch(/^worker: the group "\(\?<"/)
    expect(translate('a(?!b)')).toMatch(/^worker: the group "\(\?!"/)
    expect(translate('(a)\\1')).toBe('worker: a backreference')
    expect(translate('(?<n>a)\\k<n>')).toBe('worker: a backreference')
    expect(translate('\\p{Lu}')).toBe('worker: a Unicode property escape')
    expect(translate('\\bfoo', true)).toBe('worker: \\b or \\B with ignore_case')
    expect(translate('x \\= 1')).toBe('worker: valid only without the u flag')
    expect(translate('a\\nb')).toBe('worker: a line feed, which no line contains')
    expect(translate('[]')).toBe('worker: a class that matches nothing')
  })
})

describe.skipIf(RG === undefined)(`the same lines as JavaScript${RG === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
  let base: string
  let worker: Awaited<ReturnType<typeof createHost>>
  let ripgrep: Awaited<ReturnType<typeof createHost>>

  // Lines where the dialects differ: case folding (ſ, K, ß, İ), ASCII \w and \b, JavaScript's \s
  // (NBSP, U+FEFF, U+2028), `.` and line terminators, CRLF, a \r inside a line, invalid UTF-8.
  const LINES: (string | number[])[] = [
    'aaa bbb',
    'Sss ſ K k',
    'KELVIN \u212A sign',
    'café é É',
    'ß SS ss',
    'İ ı i I',
    'tab\there',
    ' leading space',
    'trailing space ',
    '😀 emoji 😂',
    'nbsp\u00a0here',
    'zwnbsp\uFEFFhere',
    'ls\u2028here',
    'a\rb inside',
    '0123456789',
    'under_score-dash',
    '',
    'é',
    'word_1 (paren) [bracket] {brace} a.b a*b',
    [0x61, 0xff, 0x62, 0x20, 0x63],
    [0x63, 0x61, 0x66, 0xe9, 0x20, 0x78],
    [0xe9, 0x80, 0x41, 0xf0, 0x9f, 0x98],
    // Lines of one character, which whole-line patterns (^…$) tell apart.
    'ſ',
    '\u212A',
    'K',
    '\u00a0',
    '\uFEFF',
    '\u2028',
    '😀',
    '_',
    '7',
    '\t',
    '\r',
    [0xff],
  ]
  const corpus = Buffer.concat(
    LINES.map((line, i) => {
      const bytes = typeof line === 'string' ? Buffer.from(line) : Buffer.from(line)
      return Buffer.concat([bytes, Buffer.from(i % 3 === 1 ? '\r\n' : '\n')])
    }),
  )

  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), 'loom-rust-regex-')))
    await mkdir(join(base, 'ws'))
    await writeFile(join(base, 'ws', 'corpus.txt'), corpus)
    worker = await createHost()
    ripgrep = await createHost()
    await worker.mount(toolSearch, { ripgrep: 'never' })
    await ripgrep.mount(toolSearch, { ripgrep: RG })
  })

  afterAll(async () => {
    await worker.dispose()
    await ripgrep.dispose()
    await rm(base, { recursive: true, force: true })
  })

  const textOf = (r: { content: readonly { type: string; text?: string }[] }) => r.content.map(b => (b.type === 'text' ? b.text : '')).join('')

  async function compare(pattern: string, ignoreCase: boolean) {
    const args = { pattern, path: 'corpus.txt', ignore_case: ignoreCase }
    const cwd = join(base, 'ws')
    const [w, r] = await Promise.all([worker.callTool('grep', args, { cwd }), ripgrep.callTool('grep', args, { cwd })])
    const what = `/${pattern}/${ignoreCase ? 'i' : ''} → ${JSON.stringify(translate(pattern, ignoreCase))}`
    expect(textOf(r), what).toBe(textOf(w))
    if (typeof translate(pattern, ignoreCase) !== 'string') expect((r.meta as { engine: string }).engine, what).toBe('ripgrep')
  }

  const PICKED = [
    's',
    'k',
    'S\\w',
    '\\W',
    '[^a-z]',
    '[a-z]+',
    '\\s',
    '\\S\\s\\S',
    '\\s$',
    '\\S$',
    'e$',
    '^$',
    '^.*$',
    'a.b',
    '.',
    '[^x]$',
    '\\uFFFD',
    'caf.',
    '\\D{3}',
    '\\bb',
    'b\\b',
    '\\Bé',
    'é\\b',
    '😀.',
    '[😀-😂]',
    'ss|SS',
    'ß',
    'İ',
    '\\r',
    '[\\r]',
    '\\t|\\v',
    '\\u00a0|\\uFEFF|\\u2028',
    '\\x41',
    '(?:a|b){2}',
    'a{2,}?b',
    '\\(paren\\)',
    '[\\[\\]{}]',
    '\\.b',
    '[\\s\\S]{20,}',
    '^\\w$',
    '^\\W$',
    '^\\s$',
    '^\\S$',
    '^\\d$',
    '^\\D$',
    '^.$',
    '^[^a-z]$',
    '^[a-z]$',
    '^$',
    '^\\s*$',
  ]

  it('hand-picked patterns, with and without ignore_case', async () => {
    for (const pattern of PICKED) {
      await compare(pattern, false)
      await compare(pattern, true)
    }
  }, 120_000)

  it('generated patterns', async () => {
    let seed = 7
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed % n
    }
    const pick = <T>(items: T[]) => items[next(items.length)]
    const ATOMS = [
      'a',
      'b',
      'e',
      'é',
      's',
      'S',
      'ſ',
      'K',
      'k',
      'x',
      ' ',
      '-',
      '0',
      '😀',
      '_',
      'ß',
      'I',
      'ı',
      '.',
      '\\d',
      '\\D',
      '\\w',
      '\\W',
      '\\s',
      '\\S',
      '\\r',
      '\\t',
      '\\uFFFD',
      '\\u00e9',
      '\\x41',
      '[a-e]',
      '[^a-e]',
      '[\\s\\d]',
      '[^\\w]',
      '[é-ſ]',
      '[^]',
      '[\\r\\t ]',
      '[-a]',
      '[😀-😂]',
      '[^\\s]',
    ]
    const QUANTIFIERS = ['', '', '', '*', '+', '?', '{2}', '{1,3}', '*?', '+?']
    const term = (depth: number): string => {
      const roll = next(10)
      if (roll === 0 && depth < 2) return `(${alternation(depth + 1)})${pick(QUANTIFIERS)}`
      if (roll === 1) return pick(['^', '$', '\\b', '\\B'])
      return pick(ATOMS) + pick(QUANTIFIERS)
    }
    const sequence = (depth: number) => Array.from({ length: 1 + next(4) }, () => term(depth)).join('')
    const alternation = (depth: number) => (next(4) === 0 ? `${sequence(depth)}|${sequence(depth)}` : sequence(depth))
    let compared = 0
    while (compared < 120) {
      const pattern = next(3) === 0 ? `^(?:${alternation(0)})$` : alternation(0)
      try {
        new RegExp(pattern, 'u')
      } catch {
        continue
      }
      await compare(pattern, next(3) === 0)
      compared++
    }
  }, 300_000)
})
