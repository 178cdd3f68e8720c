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

  /** The kept bytes and the number of bytes cut from the head; a cut starts on a character boundary. */
  bytes(): { bytes: Buffer; truncated: number } {
    let bytes = Buffer.concat(this.chunks)
    if (bytes.length > this.cap) bytes = bytes.subarray(bytes.length - this.cap)
    // Start on a character boundary: skip UTF-8 continuation bytes the cut split.
    let start = 0
    if (bytes.length < this.total) {
      while (start < bytes.length && start < 4 && (bytes[start] & 0xc0) === 0x80) start++
    }
    bytes = bytes.subarray(start)
    return { bytes, truncated: this.total - bytes.length }
  }

  /** The kept text and the number of bytes cut from the head. */
  read(): { text: string; truncated: number } {
    const { bytes, truncated } = this.bytes()
    return { text: bytes.toString('utf8'), truncated }
  }
}

/**
 * Keeps a whole stream up to `cap` bytes; past it, its first and last `cap / 2` bytes,
 * counting what it dropped in between. Memory stays bounded by about `cap` plus one chunk.
 */
export class StreamBuffer {
  readonly cap: number
  private readonly headCap: number
  private readonly head: Buffer[] = []
  private headBytes = 0
  private readonly rest: TailBuffer
  /** Bytes written in total. */
  total = 0

  constructor(cap: number) {
    this.cap = cap
    this.headCap = Math.ceil(cap / 2)
    this.rest = new TailBuffer(cap - this.headCap)
  }

  write(chunk: Buffer): void {
    this.total += chunk.length
    const room = this.headCap - this.headBytes
    if (room > 0) {
      const part = chunk.subarray(0, room)
      this.head.push(part)
      this.headBytes += part.length
      chunk = chunk.subarray(part.length)
    }
    if (chunk.length > 0) this.rest.write(chunk)
  }

  /** The stream (`text`), or when it was longer than `cap` its head (`text`) and tail, and the bytes dropped between them. */
  read(): { text: string; tail: string; truncated: number } {
    const head = Buffer.concat(this.head)
    const { bytes: tail, truncated } = this.rest.bytes()
    if (truncated === 0) return { text: Buffer.concat([head, tail]).toString('utf8'), tail: '', truncated: 0 }
    const kept = head.subarray(0, wholeCharacters(head))
    return { text: kept.toString('utf8'), tail: tail.toString('utf8'), truncated: this.total - kept.length - tail.length }
  }
}

/** The length of the longest prefix of `bytes` that does not end inside a UTF-8 character. */
function wholeCharacters(bytes: Buffer): number {
  let lead = bytes.length - 1
  while (lead > 0 && bytes.length - lead < 4 && (bytes[lead] & 0xc0) === 0x80) lead--
  if (lead < 0) return 0
  const byte = bytes[lead]
  const size = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
  return lead + size <= bytes.length ? bytes.length : lead
}
