// The text being typed at the prompt, and its cursor: what each editing key does
// to them. Pure, so the keys are tested without a terminal. The text may hold
// line breaks (a paste, Shift+Enter, a trailing backslash): Up and Down move
// between its lines, and leave it for the history at its first and last line.

export class LineBuffer {
  text: string
  /** Index into `text` (UTF-16 units, never inside a surrogate pair). */
  cursor: number

  constructor(text = '', cursor = text.length) {
    this.text = text
    this.cursor = cursor
  }

  set(text: string): void {
    this.text = text
    this.cursor = text.length
  }

  insert(text: string): void {
    this.text = this.text.slice(0, this.cursor) + text + this.text.slice(this.cursor)
    this.cursor += text.length
  }

  backspace(): void {
    if (this.cursor === 0) return
    const from = previousBoundary(this.text, this.cursor)
    this.text = this.text.slice(0, from) + this.text.slice(this.cursor)
    this.cursor = from
  }

  delete(): void {
    if (this.cursor >= this.text.length) return
    this.text = this.text.slice(0, this.cursor) + this.text.slice(nextBoundary(this.text, this.cursor))
  }

  left(): void {
    this.cursor = previousBoundary(this.text, this.cursor)
  }

  right(): void {
    this.cursor = nextBoundary(this.text, this.cursor)
  }

  /** To the start of the cursor's line. */
  home(): void {
    this.cursor = this.text.lastIndexOf('\n', this.cursor - 1) + 1
  }

  /** To the end of the cursor's line. */
  end(): void {
    const next = this.text.indexOf('\n', this.cursor)
    this.cursor = next < 0 ? this.text.length : next
  }

  wordLeft(): void {
    let at = this.cursor
    while (at > 0 && /\s/.test(this.text[at - 1])) at--
    while (at > 0 && !/\s/.test(this.text[at - 1])) at--
    this.cursor = at
  }

  wordRight(): void {
    let at = this.cursor
    while (at < this.text.length && /\s/.test(this.text[at])) at++
    while (at < this.text.length && !/\s/.test(this.text[at])) at++
    this.cursor = at
  }

  /** Ctrl-W: the word before the cursor (and the spaces after it). */
  deleteWordBefore(): void {
    const end = this.cursor
    this.wordLeft()
    this.text = this.text.slice(0, this.cursor) + this.text.slice(end)
  }

  /** Ctrl-U: from the start of the cursor's line to the cursor. */
  killToStart(): void {
    const end = this.cursor
    this.home()
    this.text = this.text.slice(0, this.cursor) + this.text.slice(end)
  }

  /** Ctrl-K: from the cursor to the end of its line. */
  killToEnd(): void {
    const start = this.cursor
    this.end()
    this.text = this.text.slice(0, start) + this.text.slice(this.cursor)
    this.cursor = start
  }

  /** The cursor's line (0-based) and column (characters into that line). */
  position(): { line: number; column: number } {
    const before = this.text.slice(0, this.cursor)
    const start = before.lastIndexOf('\n') + 1
    return { line: countBreaks(before), column: this.cursor - start }
  }

  /** Up a line, keeping the column where it can; false on the first line (the history's turn). */
  up(): boolean {
    const { line, column } = this.position()
    if (line === 0) return false
    this.moveTo(line - 1, column)
    return true
  }

  /** Down a line; false on the last line. */
  down(): boolean {
    const { line, column } = this.position()
    if (line === countBreaks(this.text)) return false
    this.moveTo(line + 1, column)
    return true
  }

  private moveTo(line: number, column: number) {
    const lines = this.text.split('\n')
    let at = 0
    for (let i = 0; i < line; i++) at += lines[i].length + 1
    this.cursor = at + Math.min(column, lines[line].length)
  }
}

function countBreaks(text: string): number {
  let count = 0
  for (const char of text) if (char === '\n') count++
  return count
}

function previousBoundary(text: string, at: number): number {
  if (at <= 0) return 0
  const code = text.charCodeAt(at - 1)
  return code >= 0xdc00 && code <= 0xdfff && at >= 2 ? at - 2 : at - 1
}

function nextBoundary(text: string, at: number): number {
  if (at >= text.length) return text.length
  const code = text.charCodeAt(at)
  return code >= 0xd800 && code <= 0xdbff && at + 1 < text.length ? at + 2 : at + 1
}

/**
 * The input history: the lines entered before, oldest first, and a walk through
 * them with Up and Down that keeps the line being typed (the draft) to come back to.
 */
export class HistoryWalk {
  private readonly entries: readonly string[]
  /** Index into `entries` of the entry shown; `entries.length` is the draft. */
  private index: number
  private draft = ''

  constructor(entries: readonly string[]) {
    this.entries = entries
    this.index = entries.length
  }

  /** The entry before the one shown (saving `current` when leaving the draft), or undefined at the oldest. */
  previous(current: string): string | undefined {
    if (this.index === 0) return undefined
    if (this.index === this.entries.length) this.draft = current
    return this.entries[--this.index]
  }

  /** The entry after the one shown, the draft after the newest, or undefined at the draft. */
  next(): string | undefined {
    if (this.index >= this.entries.length) return undefined
    this.index++
    return this.index === this.entries.length ? this.draft : this.entries[this.index]
  }
}
