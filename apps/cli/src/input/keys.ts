// The keys of a terminal in raw mode, from the bytes it sends. A terminal sends
// most keys as one byte (letters, Enter as \r, Ctrl-C as \x03) and the others as
// escape sequences (arrows as ESC [ A, Delete as ESC [ 3 ~); a paste arrives
// between ESC [ 200 ~ and ESC [ 201 ~ once bracketed paste is on. Esc alone is
// the first byte of every sequence: it is a key only when nothing follows it
// soon (`flush`, called by the reader after a short wait).

export type KeyName =
  | 'text'
  | 'paste'
  | 'enter'
  /** Shift+Enter, Alt+Enter or Ctrl-J: a line break inside the message. */
  | 'newline'
  | 'tab'
  | 'backspace'
  | 'delete'
  | 'left'
  | 'right'
  | 'up'
  | 'down'
  | 'home'
  | 'end'
  | 'word-left'
  | 'word-right'
  | 'word-backspace'
  | 'escape'
  | `ctrl-${string}`

export interface Key {
  name: KeyName
  /** The characters of `text` and `paste`. */
  text?: string
}

const PASTE_START = '\x1b[200~'
const PASTE_END = '\x1b[201~'

/** Named CSI sequences: final byte (with its parameters) → key. */
const CSI: Record<string, KeyName> = {
  A: 'up',
  B: 'down',
  C: 'right',
  D: 'left',
  H: 'home',
  F: 'end',
  '1~': 'home',
  '7~': 'home',
  '4~': 'end',
  '8~': 'end',
  '3~': 'delete',
  // Ctrl or Alt with an arrow: a word at a time.
  '1;5C': 'word-right',
  '1;5D': 'word-left',
  '1;3C': 'word-right',
  '1;3D': 'word-left',
  // Shift+Enter where the terminal tells it apart: the kitty keyboard protocol (CSI u) and xterm's modifyOtherKeys.
  '13;2u': 'newline',
  '13;5u': 'newline',
  '27;2;13~': 'newline',
  '27;5;13~': 'newline',
}

/** ESC followed by one byte (Alt+key). */
const ALT: Record<string, KeyName> = {
  '\r': 'newline',
  b: 'word-left',
  f: 'word-right',
  '\x7f': 'word-backspace',
  '\b': 'word-backspace',
}

export class KeyDecoder {
  /** Bytes of an escape sequence that may be incomplete. */
  private pending = ''
  /** The text of a paste not yet ended, or undefined outside a paste. */
  private paste: string | undefined

  /** The keys in `chunk` (with what earlier chunks left pending). */
  push(chunk: string): Key[] {
    const keys: Key[] = []
    let data = this.pending + chunk
    this.pending = ''
    let text = ''
    const emit = (key: Key) => {
      if (text) keys.push({ name: 'text', text })
      text = ''
      keys.push(key)
    }
    let i = 0
    while (i < data.length) {
      if (this.paste !== undefined) {
        const end = data.indexOf(PASTE_END, i)
        if (end < 0) {
          // The end marker may be split across chunks: keep a possible start of it pending.
          const keep = partialSuffix(data.slice(i), PASTE_END)
          this.paste += data.slice(i, data.length - keep)
          this.pending = data.slice(data.length - keep)
          break
        }
        emit({ name: 'paste', text: normalizeBreaks(this.paste + data.slice(i, end)) })
        this.paste = undefined
        i = end + PASTE_END.length
        continue
      }
      const char = data[i]
      if (char === '\x1b') {
        const sequence = readEscape(data, i)
        if (sequence === undefined) {
          this.pending = data.slice(i)
          break
        }
        i += sequence.length
        if (sequence === PASTE_START) {
          if (text) keys.push({ name: 'text', text })
          text = ''
          this.paste = ''
          continue
        }
        const key = escapeKey(sequence)
        if (key) emit(key)
        continue
      }
      const code = char.charCodeAt(0)
      i++
      if (char === '\r') {
        emit({ name: 'enter' })
        if (data[i] === '\n') i++
      } else if (char === '\n') emit({ name: 'newline' })
      else if (char === '\t') emit({ name: 'tab' })
      else if (char === '\x7f' || char === '\b') emit({ name: 'backspace' })
      else if (code < 0x20) emit({ name: `ctrl-${String.fromCharCode(code + 0x60)}` })
      else text += char
    }
    if (text) keys.push({ name: 'text', text })
    data = ''
    return keys
  }

  /** Whether bytes wait for more (a lone Esc, or the start of a sequence). */
  get waiting(): boolean {
    return this.pending !== ''
  }

  /** Nothing more came: what is pending is what it is (a lone Esc is the Esc key). */
  flush(): Key[] {
    const pending = this.pending
    this.pending = ''
    if (this.paste !== undefined) {
      // A paste whose end never came: what arrived is still the paste.
      const text = this.paste + pending
      this.paste = undefined
      return [{ name: 'paste', text: normalizeBreaks(text) }]
    }
    if (!pending) return []
    if (pending === '\x1b') return [{ name: 'escape' }]
    const keys = this.push(pending.slice(1))
    return [{ name: 'escape' }, ...keys]
  }
}

/**
 * The escape sequence starting at `data[at]` (ESC), or undefined when the data
 * ends inside it. CSI is ESC [ parameters final; SS3 is ESC O final; anything
 * else is ESC and one byte (Alt+key), or ESC ESC (Esc pressed twice).
 */
function readEscape(data: string, at: number): string | undefined {
  const next = data[at + 1]
  if (next === undefined) return undefined
  if (next === '[') {
    for (let i = at + 2; i < data.length; i++) {
      const code = data.charCodeAt(i)
      if (code >= 0x40 && code <= 0x7e) return data.slice(at, i + 1)
    }
    return undefined
  }
  if (next === 'O') return data[at + 2] === undefined ? undefined : data.slice(at, at + 3)
  if (next === '\x1b') return '\x1b'
  return data.slice(at, at + 2)
}

function escapeKey(sequence: string): Key | undefined {
  if (sequence === '\x1b') return { name: 'escape' }
  if (sequence.startsWith('\x1b[')) {
    const name = CSI[sequence.slice(2)]
    return name ? { name } : undefined
  }
  if (sequence.startsWith('\x1bO')) {
    const name = CSI[sequence.slice(2)]
    return name ? { name } : undefined
  }
  const name = ALT[sequence[1]]
  return name ? { name } : undefined
}

/** How many characters at the end of `text` start `marker` (so they may continue in the next chunk). */
function partialSuffix(text: string, marker: string): number {
  for (let length = Math.min(marker.length - 1, text.length); length > 0; length--) {
    if (marker.startsWith(text.slice(text.length - length))) return length
  }
  return 0
}

/** A paste's line breaks as the message holds them: \n. */
function normalizeBreaks(text: string): string {
  return text.replace(/\r\n?/g, '\n')
}
