/** Why a markdown section is kept when a file must be trimmed. */
export type Keep = 'first' | 'rule' | 'other'

/** One section of a markdown file: a heading line and everything up to the next heading. */
export interface MarkdownSection {
  /** The heading title, or `undefined` for text before the first heading. */
  readonly title: string | undefined
  /** 0 for text before the first heading, else the ATX heading level (1..6). */
  readonly level: number
  /** The exact source lines of the section (heading included), trailing blank lines removed. */
  readonly text: string
  readonly keep: Keep
}

const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/
const FENCE = /^ {0,3}(`{3,}|~{3,})/

/** Compiles `keepHeadings` patterns: each one matches whole words of a heading title, case-insensitively. */
export function compileKeepPatterns(patterns: readonly string[]): RegExp[] {
  return patterns.map((pattern, index) => {
    try {
      return new RegExp(`(?<![\\p{L}\\p{N}_])(?:${pattern})(?![\\p{L}\\p{N}_])`, 'iu')
    } catch (error) {
      throw new Error(
        `@loom/agent-instructions: config keepHeadings[${index}] ${JSON.stringify(pattern)} is not a valid regular expression: ${(error as Error).message}`,
      )
    }
  })
}

/**
 * Splits markdown into sections at ATX headings (`#` … `######`), ignoring lines
 * inside fenced code blocks. A section is a `rule` when its title, or the title of
 * a heading it is nested under, matches one of `keep`; the first non-blank
 * section is always kept as `first` (the file's title and introduction).
 */
export function splitSections(text: string, keep: readonly RegExp[]): MarkdownSection[] {
  const lines = text.split('\n')
  const raw: { title: string | undefined; level: number; lines: string[] }[] = [{ title: undefined, level: 0, lines: [] }]
  let fence: string | undefined
  for (const line of lines) {
    const bare = line.endsWith('\r') ? line.slice(0, -1) : line
    const fenceMatch = FENCE.exec(bare)
    if (fence !== undefined) {
      if (fenceMatch && fenceMatch[1][0] === fence[0] && fenceMatch[1].length >= fence.length && bare.trim() === fenceMatch[1]) fence = undefined
      raw[raw.length - 1].lines.push(line)
      continue
    }
    if (fenceMatch) {
      fence = fenceMatch[1]
      raw[raw.length - 1].lines.push(line)
      continue
    }
    const heading = HEADING.exec(bare)
    if (heading) raw.push({ title: (heading[2] ?? '').trim(), level: heading[1].length, lines: [line] })
    else raw[raw.length - 1].lines.push(line)
  }

  const sections: MarkdownSection[] = []
  const ancestors: { level: number; rule: boolean }[] = []
  let firstTaken = false
  for (const part of raw) {
    const body = part.lines.join('\n').replace(/\s+$/, '')
    if (part.level > 0) {
      while (ancestors.length && ancestors[ancestors.length - 1].level >= part.level) ancestors.pop()
    }
    const own = part.title !== undefined && keep.some(pattern => pattern.test(part.title!))
    const inherited = ancestors.some(ancestor => ancestor.rule)
    if (part.level > 0) ancestors.push({ level: part.level, rule: own })
    if (body.trim() === '') continue
    const kind: Keep = !firstTaken ? 'first' : own || inherited ? 'rule' : 'other'
    firstTaken = true
    sections.push({ title: part.title, level: part.level, text: body, keep: kind })
  }
  return sections
}

/** How a section is named in a notice. */
export function sectionLabel(section: MarkdownSection): string {
  return section.title === undefined ? '(text before the first heading)' : JSON.stringify(section.title || '(untitled)')
}
