/** Bytes sniffed at the start of a file to tell text from binary. */
export const SNIFF_BYTES = 8192

/**
 * Whether a file's first bytes look binary: a NUL byte, or more than 10% control
 * characters other than tab, newline, form feed, carriage return, backspace and
 * escape. UTF-16 text counts as binary (it is full of NULs).
 */
export function looksBinary(bytes: Uint8Array): boolean {
  if (bytes.length === 0) return false
  let control = 0
  for (const byte of bytes) {
    if (byte === 0) return true
    if (byte < 0x20 && byte !== 9 && byte !== 10 && byte !== 12 && byte !== 13 && byte !== 8 && byte !== 27) control++
    else if (byte === 0x7f) control++
  }
  return control / bytes.length > 0.1
}

/** `text` cut to at most `max` UTF-16 code units, never splitting a surrogate pair. */
export function cutChars(text: string, max: number): string {
  if (text.length <= max) return text
  const code = text.charCodeAt(max - 1)
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max)
}

/** `text` cut to at most `max` UTF-8 bytes, never splitting a character. */
export function cutBytes(text: string, max: number): string {
  if (Buffer.byteLength(text) <= max) return text
  const bytes = Buffer.from(text)
  let end = max
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  return bytes.subarray(0, end).toString('utf8')
}

/** `n` with the noun in singular or plural: `1 line`, `3 lines`. */
export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}
