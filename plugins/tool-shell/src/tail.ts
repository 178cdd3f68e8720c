/**
 * Keeps the last `cap` bytes written to it (the tail of a stream), counting what
 * it dropped. Memory stays bounded by about `cap` plus one chunk, however much
 * the command prints.
 */
export class TailBuffer {
  readonly cap: number
  private chunks: Buffer[] = []
  private held = 0
  /** Bytes written in total. */
  total = 0

  constructor(cap: number) {
    this.cap = cap
  }

  write(chunk: Buffer): void {
    this.total += chunk.length
    this.chunks.push(chunk)
    this.held += chunk.length
    // Drop whole chunks from the head while the rest still covers the cap.
    while (this.chunks.length > 1 && this.held - this.chunks[0].length >= this.cap) {
      this.held -= this.chunks.shift()!.length
    }
  }

  /** The kept text and the number of bytes cut from the head. */
  read(): { text: string; truncated: number } {
    let bytes = Buffer.concat(this.chunks)
    if (bytes.length > this.cap) bytes = bytes.subarray(bytes.length - this.cap)
    // Start on a character boundary: skip UTF-8 continuation bytes the cut split.
    let start = 0
    if (bytes.length < this.total) {
      while (start < bytes.length && start < 4 && (bytes[start] & 0xc0) === 0x80) start++
    }
    bytes = bytes.subarray(start)
    return { text: bytes.toString('utf8'), truncated: this.total - bytes.length }
  }
}
