// The keyboard and the prompt of a conversation on a terminal. `KeyReader` puts
// the terminal in raw mode and turns its bytes into keys (keys.ts) for whoever
// listens: the prompt while it is open, the approver's question, and beneath
// them the conversation, which takes Ctrl-C and Esc while a turn runs. In raw
// mode the terminal sends no SIGINT: Ctrl-C is a key like the others, so two in
// a row are two, and Esc can be read at all. `TerminalPrompt` edits one message
// (keys in line.ts, completion in complete.ts) and draws it under an optional
// status line; drawing stays within the lines it owns, so scrollback and tmux
// captures see plain lines.
import { StringDecoder } from 'node:string_decoder'
import { complete as completeAt, type Completion, sharedPrefix } from './complete.ts'
import { type Key, KeyDecoder } from './keys.ts'
import { HistoryWalk, LineBuffer } from './line.ts'
import { clipToWidth, displayWidth } from '../present/width.ts'

export interface TtyInput extends NodeJS.ReadableStream {
  isTTY?: boolean
  isRaw?: boolean
  setRawMode?(mode: boolean): unknown
}

export interface TtyOutput {
  write(text: string): unknown
  columns?: number
  on?(event: 'resize', listener: () => void): unknown
  off?(event: 'resize', listener: () => void): unknown
}

/** A listener of keys: true when it took the key, false to pass it to the listener below. */
export type KeyHandler = (key: Key) => boolean

/** How long a lone Esc waits for the rest of a sequence before it is the Esc key. */
const ESCAPE_WAIT_MS = 40

const readers = new WeakMap<TtyInput, KeyReader>()

export class KeyReader {
  /** The one reader of `input`: the conversation and the approver share it. */
  static of(input: TtyInput): KeyReader {
    let reader = readers.get(input)
    if (!reader) readers.set(input, (reader = new KeyReader(input)))
    return reader
  }

  private readonly input: TtyInput
  private readonly decoder = new KeyDecoder()
  private readonly text = new StringDecoder('utf8')
  /** Listeners, the last one first. */
  private readonly handlers: KeyHandler[] = []
  private users = 0
  private wasRaw = false
  private escapeTimer: NodeJS.Timeout | undefined

  private constructor(input: TtyInput) {
    this.input = input
  }

  /** Raw mode and reading, until every `open` is released. */
  open(): () => void {
    if (this.users++ === 0) {
      this.wasRaw = Boolean(this.input.isRaw)
      this.input.setRawMode?.(true)
      this.input.on('data', this.onData)
      this.input.resume()
    }
    let released = false
    return () => {
      if (released) return
      released = true
      if (--this.users > 0) return
      clearTimeout(this.escapeTimer)
      this.input.off('data', this.onData)
      this.input.setRawMode?.(this.wasRaw)
      this.input.pause()
    }
  }

  /** Adds a listener on top of the others; returns what removes it. */
  on(handler: KeyHandler): () => void {
    this.handlers.unshift(handler)
    return () => {
      const index = this.handlers.indexOf(handler)
      if (index >= 0) this.handlers.splice(index, 1)
    }
  }

  private readonly onData = (chunk: string | Buffer) => {
    clearTimeout(this.escapeTimer)
    this.dispatch(this.decoder.push(typeof chunk === 'string' ? chunk : this.text.write(chunk)))
    if (this.decoder.waiting) {
      this.escapeTimer = setTimeout(() => this.dispatch(this.decoder.flush()), ESCAPE_WAIT_MS)
    }
  }

  private dispatch(keys: Key[]) {
    for (const key of keys) {
      // A listener may remove itself (or add another) while it takes a key.
      for (const handler of [...this.handlers]) if (handler(key)) break
    }
  }
}

export type PromptResult =
  | { kind: 'line'; text: string }
  /** Ctrl-C: `dropped` when it dropped a line being typed, false on an empty one. */
  | { kind: 'interrupt'; dropped: boolean }
  /** Ctrl-D on an empty line, or the prompt was closed. */
  | { kind: 'end' }

export interface PromptOptions {
  /** Before the first line, and before each following one of a message (both styled as they are). */
  prompt: string
  continuation?: string
  /** Line breaks in a message (paste, Shift+Enter, a trailing backslash); otherwise a paste's breaks become spaces. */
  multiline?: boolean
  /** Entries for Up and Down, oldest first. */
  history?: () => readonly string[]
  /** Tab completion; none without it. */
  completion?: { commands: () => readonly string[]; cwd: string }
  /** Ctrl-C and Esc go to the listener below (the conversation cancels the turn); the prompt ends only by Enter or `signal`. */
  passInterrupts?: boolean
}

/** The most candidates a Tab lists. */
const MAX_LISTED = 60

/** One message typed at the terminal; `read` may be called again once it resolved. */
export class TerminalPrompt {
  private readonly keys: KeyReader
  private readonly output: TtyOutput
  private readonly options: PromptOptions
  private buffer = new LineBuffer()
  private status: string | undefined
  /** The row of the cursor within what the prompt drew (0: its first row); undefined when nothing is drawn. */
  private cursorRow: number | undefined

  constructor(keys: KeyReader, output: TtyOutput, options: PromptOptions) {
    this.keys = keys
    this.output = output
    this.options = options
  }

  /** Whether a `read` is open. */
  get open(): boolean {
    return this.cursorRow !== undefined
  }

  /** Reads one message, starting with `text`: `status` is drawn above it while it is typed, and cleared when it is entered. */
  read({ status, text = '', signal }: { status?: string; text?: string; signal?: AbortSignal } = {}): Promise<PromptResult> {
    return new Promise(resolve => {
      if (signal?.aborted) return resolve({ kind: 'end' })
      this.buffer = new LineBuffer(this.options.multiline ? text : text.replace(/\n/g, ' '))
      this.status = status
      const walk = new HistoryWalk(this.options.history?.() ?? [])
      const release = this.keys.open()
      const finish = (result: PromptResult, { keepText = true } = {}) => {
        stop()
        if (!keepText) this.buffer = new LineBuffer()
        this.buffer.cursor = this.buffer.text.length
        this.status = undefined
        this.draw()
        this.output.write('\r\n\x1b[?2004l')
        this.cursorRow = undefined
        release()
        resolve(result)
      }
      const onKey = (key: Key): boolean => {
        const result = this.edit(key, walk)
        if (result === 'pass') return false
        if (result) finish(result)
        else this.draw()
        return true
      }
      const onResize = () => this.draw()
      const onAbort = () => finish({ kind: 'end' }, { keepText: true })
      const removeKeys = this.keys.on(onKey)
      this.output.on?.('resize', onResize)
      signal?.addEventListener('abort', onAbort, { once: true })
      const stop = () => {
        removeKeys()
        this.output.off?.('resize', onResize)
        signal?.removeEventListener('abort', onAbort)
      }
      // Bracketed paste on: a pasted text arrives marked, and is one message.
      this.output.write('\x1b[?2004h')
      this.cursorRow = 0
      this.draw()
    })
  }

  /** Prints `text` above the prompt while it is open (it is drawn again below), else plainly. */
  print(text: string): void {
    if (this.cursorRow === undefined) {
      this.output.write(text.endsWith('\n') ? text : `${text}\n`)
      return
    }
    this.output.write(this.clear() + (text.endsWith('\n') ? text : `${text}\n`))
    this.cursorRow = 0
    this.draw()
  }

  /** What a key does: a result ends the read, `pass` leaves the key to the listener below. */
  private edit(key: Key, walk: HistoryWalk): PromptResult | 'pass' | undefined {
    const { buffer, options } = this
    switch (key.name) {
      case 'text':
        buffer.insert(key.text!)
        return undefined
      case 'paste':
        buffer.insert(options.multiline ? key.text! : key.text!.replace(/\n/g, ' '))
        return undefined
      case 'newline':
        if (options.multiline) buffer.insert('\n')
        return undefined
      case 'enter':
        // A trailing backslash continues the message on a new line.
        if (options.multiline && buffer.cursor === buffer.text.length && buffer.text.endsWith('\\')) {
          buffer.backspace()
          buffer.insert('\n')
          return undefined
        }
        return { kind: 'line', text: buffer.text }
      case 'tab':
        this.complete()
        return undefined
      case 'backspace':
        return void buffer.backspace()
      case 'delete':
        return void buffer.delete()
      case 'left':
      case 'ctrl-b':
        return void buffer.left()
      case 'right':
      case 'ctrl-f':
        return void buffer.right()
      case 'home':
      case 'ctrl-a':
        return void buffer.home()
      case 'end':
      case 'ctrl-e':
        return void buffer.end()
      case 'word-left':
        return void buffer.wordLeft()
      case 'word-right':
        return void buffer.wordRight()
      case 'word-backspace':
      case 'ctrl-w':
        return void buffer.deleteWordBefore()
      case 'ctrl-u':
        return void buffer.killToStart()
      case 'ctrl-k':
        return void buffer.killToEnd()
      case 'up':
      case 'ctrl-p': {
        if (buffer.up()) return undefined
        const entry = walk.previous(buffer.text)
        if (entry !== undefined) buffer.set(entry)
        return undefined
      }
      case 'down':
      case 'ctrl-n': {
        if (buffer.down()) return undefined
        const entry = walk.next()
        if (entry !== undefined) buffer.set(entry)
        return undefined
      }
      case 'ctrl-l':
        // The screen cleared, the prompt drawn again at its top.
        this.output.write('\x1b[H\x1b[2J')
        this.cursorRow = 0
        return undefined
      case 'ctrl-c':
        if (options.passInterrupts) return 'pass'
        return { kind: 'interrupt', dropped: buffer.text !== '' }
      case 'escape':
        return options.passInterrupts ? 'pass' : undefined
      case 'ctrl-d':
        if (buffer.text === '') return { kind: 'end' }
        return void buffer.delete()
      default:
        return undefined
    }
  }

  /** Tab: inserts what the candidates share; when that adds nothing, lists them. One candidate is inserted whole. */
  private complete() {
    const { completion } = this.options
    if (!completion) return
    const found: Completion | undefined = completeAt(this.buffer.text, this.buffer.cursor, { commands: completion.commands(), cwd: completion.cwd })
    if (!found) return
    const { text } = this.buffer
    const current = text.slice(found.start, found.end)
    const [only] = found.candidates
    let insert = found.candidates.length === 1 ? only : sharedPrefix(found.candidates)
    // A whole file or command is followed by a space; a folder is not (its entries come next).
    if (found.candidates.length === 1 && !only.endsWith('/')) insert += ' '
    if (insert.length > current.length) {
      this.buffer.text = text.slice(0, found.start) + insert + text.slice(found.end)
      this.buffer.cursor = found.start + insert.length
      return
    }
    const names = found.candidates.map(candidate => candidate.slice(candidate.lastIndexOf('/', candidate.length - 2) + 1))
    const listed = names.slice(0, MAX_LISTED).join('  ') + (names.length > MAX_LISTED ? `  … ${names.length - MAX_LISTED} more` : '')
    this.print(listed)
  }

  /** Moves to the first row the prompt drew and clears from there down. */
  private clear(): string {
    const up = this.cursorRow ?? 0
    return `${up > 0 ? `\x1b[${up}A` : ''}\r\x1b[J`
  }

  /** Draws the status line and the message with its cursor, over what was drawn before. */
  private draw() {
    if (this.cursorRow === undefined) return
    const columns = Math.max(10, this.output.columns || 80)
    const { prompt, continuation = prompt.replace(/\S/g, ' ') } = this.options
    const lines = this.buffer.text.split('\n').map((line, index) => (index === 0 ? prompt : continuation) + line)
    // The status stays on one row: a wrapped one would shift every row below it.
    const rows = this.status === undefined ? lines : [clipToWidth(this.status, columns - 1), ...lines]
    const offset = rows.length - lines.length
    const heights = rows.map(row => Math.max(1, Math.ceil(displayWidth(row) / columns)))
    // Where the cursor goes: its line, and its column counted in terminal cells.
    const { line, column } = this.buffer.position()
    const before = (line === 0 ? prompt : continuation) + this.buffer.text.split('\n')[line].slice(0, column)
    const cells = displayWidth(before)
    let row = heights.slice(0, offset + line).reduce((sum, height) => sum + height, 0) + Math.floor(cells / columns)
    let col = cells % columns
    // At the end of a line that fills its last row exactly, the terminal keeps the cursor on that row.
    if (cells > 0 && col === 0 && cells === displayWidth(rows[offset + line])) {
      row--
      col = columns - 1
    }
    const last = heights.reduce((sum, height) => sum + height, 0) - 1
    this.output.write(this.clear() + rows.join('\r\n') + (last > row ? `\x1b[${last - row}A` : '') + '\r' + (col > 0 ? `\x1b[${col}C` : ''))
    this.cursorRow = row
  }
}
