// How many cells text takes on a terminal, to draw it within one row.
// Terminal cells: wide characters (CJK, emoji) take two, combining marks none, escape codes none.
const WIDE = [
  [0x1100, 0x115f],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x1f300, 0x1f64f],
  [0x1f900, 0x1f9ff],
  [0x20000, 0x3fffd],
]

function charWidth(code: number): number {
  if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return 0
  if ((code >= 0x300 && code <= 0x36f) || (code >= 0x200b && code <= 0x200f) || (code >= 0xfe00 && code <= 0xfe0f)) return 0
  return WIDE.some(([from, to]) => code >= from && code <= to) ? 2 : 1
}

const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g

/** The cells `text` takes on a terminal. */
export function displayWidth(text: string): number {
  let width = 0
  for (const char of text.replace(ANSI, '')) width += charWidth(char.codePointAt(0)!)
  return width
}

/** `text` cut to `width` cells (escape codes kept, closed by a reset when cut), with an ellipsis when cut. */
export function clipToWidth(text: string, width: number): string {
  if (displayWidth(text) <= width) return text
  let out = ''
  let used = 0
  for (const part of text.split(/(\x1b\[[0-9;?]*[A-Za-z])/)) {
    if (part.startsWith('\x1b[')) {
      out += part
      continue
    }
    for (const char of part) {
      const cells = charWidth(char.codePointAt(0)!)
      if (used + cells > width - 1) return `${out}…\x1b[0m`
      out += char
      used += cells
    }
  }
  return out
}
