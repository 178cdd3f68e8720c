// The body of the search worker threads (see scan.ts): for each job it is sent, walks
// the files (see walk.ts) and either tests their paths against a glob or reads them
// and tests each line against a regular expression, posting grep's matches as it
// finds them, so that a search stopped midway still has them. It also tests lines the
// ripgrep engine leaves in doubt, and walks to count what an empty answer skipped.
// Node runs this file itself (type stripping, or the host's loader), so it holds only
// erasable TypeScript.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import { cutBytes, SNIFF_BYTES } from '@loom/tools/workspace'
import { compileGlob } from './pattern.ts'
import { Progress } from './progress.ts'
import type { CountJob, GlobJob, GrepJob, ScanJob, ScanMessage, TestJob, WalkJob } from './scan.ts'
import { decodeText, textEncoding } from './text.ts'
import { walkFiles } from './walk.ts'

const post = (message: ScanMessage) => parentPort!.postMessage(message)

/** The files of a walk, counting what it skipped. */
const walk = (job: WalkJob, progress: Progress) => walkFiles(job.start, { ...job, onSkip: reason => progress.count(reason) })

/** glob: the matching files, newest first (ties by path), and how many matched. */
function glob(job: GlobJob, progress: Progress): { shown: string[]; total: number } {
  const matcher = compileGlob(job.pattern)
  const found: { display: string; mtimeMs: number }[] = []
  for (const file of walk(job.walk, progress)) {
    if (!matcher.test(file.rel)) continue
    let info
    try {
      info = statSync(file.real)
    } catch {
      continue // gone since the walk listed it, or unreadable
    }
    if (info.isFile()) found.push({ display: file.display, mtimeMs: info.mtimeMs })
  }
  found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
  return { shown: found.slice(0, job.max).map(file => file.display), total: found.length }
}

/** Read into this buffer when they fit: most files do, and it saves an allocation per file. */
const scratch = Buffer.allocUnsafe(1 << 20)

/** Reads up to `length` bytes at the file's position into `buffer` (the whole of them unless the file ends first). */
function readInto(fd: number, buffer: Buffer, length: number): Buffer {
  let read = 0
  while (read < length) {
    const n = readSync(fd, buffer, read, length - read, null)
    if (n === 0) break
    read += n
  }
  return buffer.subarray(0, read)
}

const DECODER_LABELS = { utf8: 'utf-8', utf16le: 'utf-16le', utf16be: 'utf-16be' } as const

/**
 * Calls `line` for each line of a file (numbered from 1, its final `\r` dropped), in the
 * encoding its first bytes announce (text.ts); `line` returns false to stop. A file
 * that fits a block is read whole, and skipped at once when it lacks `literal`; a larger
 * one is decoded block by block, a line that spans blocks carried over.
 */
function eachLine(path: string, blockBytes: number, literal: string | undefined, line: (n: number, text: string) => boolean): 'binary' | 'unreadable' | 'read' {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return 'unreadable'
  }
  try {
    const size = fstatSync(fd).size
    if (size <= blockBytes) {
      const bytes = readInto(fd, size <= scratch.length ? scratch : Buffer.allocUnsafe(size), size)
      const encoding = textEncoding(bytes.subarray(0, SNIFF_BYTES))
      if (encoding === 'binary') return 'binary'
      if (literal === undefined || encoding !== 'utf8' || bytes.indexOf(literal) !== -1) eachLineOf(decodeText(bytes, encoding), 1, line)
      return 'read'
    }
    const buffer = Buffer.allocUnsafe(Math.max(blockBytes, SNIFF_BYTES))
    let block = readInto(fd, buffer, buffer.length)
    const encoding = textEncoding(block.subarray(0, SNIFF_BYTES))
    if (encoding === 'binary') return 'binary'
    const decoder = new TextDecoder(DECODER_LABELS[encoding]) // drops the byte-order mark, as decodeText does
    let carried = ''
    let next = 1
    for (;;) {
      const last = block.length === 0
      const text = carried + decoder.decode(block, { stream: !last })
      const end = last ? text.length : text.lastIndexOf('\n') + 1
      next = eachLineOf(text.slice(0, end), next, line)
      if (next === -1 || last) return 'read'
      carried = text.slice(end)
      block = readInto(fd, buffer, blockBytes)
    }
  } catch {
    return 'unreadable'
  } finally {
    closeSync(fd)
  }
}

/** Calls `line` for each line of `text`, numbered from `first`; returns the next number, or -1 when `line` stopped. */
function eachLineOf(text: string, first: number, line: (n: number, text: string) => boolean): number {
  let n = first
  for (let start = 0; start < text.length; n++) {
    const newline = text.indexOf('\n', start)
    const end = newline === -1 ? text.length : newline
    const content = text.slice(start, text.charCodeAt(end - 1) === 0x0d && end > start ? end - 1 : end)
    start = end + 1
    if (!line(n, content)) return -1
  }
  return n
}

/** A regular expression without special characters matches its source text: a file without it has no match. */
const literalOf = (job: GrepJob) => (job.flags.includes('i') || /[\\^$.|?*+()[\]{}]/.test(job.source) ? undefined : job.source)

/** The files grep searches: the one it was given, or those of the walk that match its glob. */
function* filesOf(job: GrepJob, progress: Progress): Generator<{ display: string; real: string }> {
  if ('file' in job.files) {
    yield job.files.file
    return
  }
  const { walk: at, glob } = job.files
  if (glob === undefined) {
    yield* walk(at, progress)
    return
  }
  const matcher = compileGlob(glob.pattern)
  for (const file of walk(at, progress)) {
    if (matcher.test(glob.basename ? file.rel.slice(file.rel.lastIndexOf('/') + 1) : file.rel)) yield file
  }
}

/** Which of the lines ripgrep reported the JavaScript expression matches too (see rg-engine.ts). */
function test(job: TestJob, progress: Progress): boolean[] {
  const regex = new RegExp(job.source, job.flags)
  return job.lines.map(({ display, text }) => {
    progress.searching(display)
    return regex.test(text)
  })
}

/** grep: posts the matching lines; returns whether the match cap cut the search short. */
function grep(job: GrepJob, progress: Progress): boolean {
  const regex = new RegExp(job.source, job.flags)
  const literal = literalOf(job)
  let index = 0
  let matches = 0
  let posted = 0
  let cut = false
  for (const file of filesOf(job, progress)) {
    index++
    progress.searching(file.display)
    const read = eachLine(file.real, job.blockBytes, literal, (n, line) => {
      if (!regex.test(line)) return true
      if (matches === job.maxMatches) return !(cut = true)
      const truncated = Buffer.byteLength(line) > job.maxLineBytes
      const shown = truncated ? `${cutBytes(line, job.maxLineBytes)}... (line truncated to ${job.maxLineBytes} bytes)` : line
      const match = `${file.display}:${n}: ${shown}`
      posted += Buffer.byteLength(match) + 1
      if (posted > job.maxBytes) return !(cut = true)
      matches++
      post({ kind: 'match', file: index, text: match, truncated })
      return true
    })
    if (read === 'binary') progress.count('binary') // an unreadable file is skipped without a count
    if (cut) return true
  }
  progress.searching(undefined)
  return false
}

/** A walk and nothing else, for what it skipped (the notes of an empty answer ripgrep found). */
function count(job: CountJob, progress: Progress): void {
  const files = walk(job.walk, progress)
  while (!files.next().done) {
    // each step counts what the walk left out
  }
}

parentPort!.on('message', (job: ScanJob) => {
  const progress = new Progress(job.progress)
  if (job.kind === 'glob') post({ kind: 'done', cut: false, glob: glob(job, progress) })
  else if (job.kind === 'test') post({ kind: 'done', cut: false, verdicts: test(job, progress) })
  else if (job.kind === 'count') {
    count(job, progress)
    post({ kind: 'done', cut: false })
  } else post({ kind: 'done', cut: grep(job, progress) })
})
