// How grep reads a file's bytes, the same in the search worker and around ripgrep: a
// byte-order mark decides the encoding (UTF-16, little- or big-endian, which ripgrep
// transcodes too; a UTF-8 mark is dropped), and a file without a UTF-16 mark is text
// unless its first bytes look binary (the test `read` uses). Erasable TypeScript only:
// the worker runs this file itself.
import { looksBinary, SNIFF_BYTES } from '@loom/tools/workspace'

export type TextEncoding = 'utf8' | 'utf16le' | 'utf16be'

/**
 * grep reads a file up to this size at once, and a larger one in blocks of it (a line
 * may span blocks): files of any size are searched, as ripgrep searches them.
 */
export const GREP_BLOCK_BYTES = 16 * 1024 * 1024

/** The encoding a file's first bytes announce, or 'binary' for a file grep does not search. */
export function textEncoding(head: Uint8Array): TextEncoding | 'binary' {
  if (head[0] === 0xff && head[1] === 0xfe) return 'utf16le'
  if (head[0] === 0xfe && head[1] === 0xff) return 'utf16be'
  return looksBinary(head.subarray(0, SNIFF_BYTES)) ? 'binary' : 'utf8'
}

const decoders = { utf16le: new TextDecoder('utf-16le'), utf16be: new TextDecoder('utf-16be') }

/** A file's text without its byte-order mark; malformed bytes become U+FFFD (WHATWG decoding, as ripgrep's). */
export function decodeText(bytes: Buffer, encoding: TextEncoding): string {
  if (encoding !== 'utf8') return decoders[encoding].decode(bytes) // the decoder drops the mark
  const marked = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf
  return bytes.toString('utf8', marked ? 3 : 0)
}
