/** One line of the memory index: `- [title](path): summary`. */
export interface IndexEntry {
  readonly title: string
  /** The link target as written (relative to the index file's directory). */
  readonly target: string
  readonly summary: string
  /** The whole index line, trimmed. */
  readonly line: string
}

const ENTRY = /^\s*[-*+]\s+\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)\s*(?:[:\u2013\u2014-]\s*)?(.*)$/

/** The record lines of an index, in file order. */
export function parseIndex(text: string): IndexEntry[] {
  const entries: IndexEntry[] = []
  for (const raw of text.split('\n')) {
    const match = ENTRY.exec(raw.replace(/\r$/, ''))
    if (match) entries.push({ title: match[1].trim(), target: match[2], summary: match[3].trim(), line: raw.trim() })
  }
  return entries
}

const STOPWORDS = new Set(
  (
    'the and for with that this these those from into onto you your yours are was were have has had not but can could would should ' +
    'will what when where which who whom whose how why please about then than there here its our ours out all any some use using ' +
    "let lets make get just also like need want help does did done doing been being they them their she her his him its it's " +
    "i'm i've don't can't won't isn't aren't very more most much many only other such own same too now new one two way " +
    'may might must shall yes okay thanks thank hello tell show give look see know think try via per'
  ).split(' '),
)

const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u
const TOKEN = /[\p{L}\p{N}]+(?:['’][\p{L}]+)?/gu

/**
 * The words of a text for matching: lowercase runs of letters and digits of at
 * least three characters that are not common function words, a final plural `s`
 * dropped; runs of CJK script
 * (written without spaces) give their overlapping two-character pieces instead.
 */
export function wordsOf(text: string): Set<string> {
  const words = new Set<string>()
  for (const [token] of text.toLowerCase().matchAll(TOKEN)) {
    const word = token.replace('’', "'")
    if (CJK.test(word)) {
      const chars = [...word]
      for (let i = 0; i + 1 < chars.length; i++) words.add(chars[i] + chars[i + 1])
      continue
    }
    if (word.length < 3 || STOPWORDS.has(word)) continue
    // A plural and its singular are one word: `tests` matches `test`, `deploys` matches `deploy`.
    words.add(word.length > 3 && word.endsWith('s') && !word.endsWith('ss') ? word.slice(0, -1) : word)
  }
  return words
}

/**
 * The index entries whose title, summary or record file name shares a word with
 * `message`, most shared words first, then in index order.
 */
export function matchEntries(entries: readonly IndexEntry[], message: string): { entry: IndexEntry; words: string[] }[] {
  const wanted = wordsOf(message)
  if (wanted.size === 0) return []
  const matches: { entry: IndexEntry; words: string[]; index: number }[] = []
  entries.forEach((entry, index) => {
    const stem = (entry.target.split('/').pop() ?? '').replace(/\.[^.]*$/, '').replace(/[_.-]+/g, ' ')
    const words = [...wordsOf(`${entry.title} ${entry.summary} ${stem}`)].filter(word => wanted.has(word))
    if (words.length) matches.push({ entry, words, index })
  })
  matches.sort((a, b) => b.words.length - a.words.length || a.index - b.index)
  return matches.map(({ entry, words }) => ({ entry, words }))
}
