// The body of the search worker threads (see scan.ts): for each job it is sent, walks
// the files (see walk.ts) and either tests their paths against a glob or reads them
// and tests each line against a regular expression, posting grep's matches as it
// finds them, so that a search stopped midway still has them. Node runs this file
// itself (type stripping, or the host's loader), so it holds only erasable TypeScript.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import { cutBytes, looksBinary, SNIFF_BYTES } from '@loom/tools/workspace'
import { compileGlob } from './pattern.ts'
import { Progress } from './progress.ts'
import type { GlobJob, GrepJob, ScanJob, ScanMessage, WalkJob } from './scan.ts'
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

/** A file's bytes (valid until the next read); 'large' past `maxBytes`; undefined when unreadable. */
function readBytes(path: string, maxBytes: number): Buffer | 'large' | undefined {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return undefined
  }
  try {
    const size = fstatSync(fd).size
    if (size > maxBytes) return 'large'
    const buffer = size <= scratch.length ? scratch : Buffer.allocUnsafe(size)
    let length = 0
    while (length < size) {
      const n = readSync(fd, buffer, length, size - length, null)
      if (n === 0) break
      length += n
    }
    return buffer.subarray(0, length)
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
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

/** grep: posts the matching lines; returns whether the match cap cut the search short. */
function grep(job: GrepJob, progress: Progress): boolean {
  const regex = new RegExp(job.source, job.flags)
  const literal = literalOf(job)
  let index = 0
  let matches = 0
  let posted = 0
  for (const file of filesOf(job, progress)) {
    index++
    progress.searching(file.display)
    const bytes = readBytes(file.real, job.maxFileBytes)
    if (bytes === undefined) continue // unreadable files are skipped
    if (bytes === 'large') {
      progress.count('large')
      continue
    }
    if (looksBinary(bytes.subarray(0, SNIFF_BYTES))) {
      progress.count('binary')
      continue
    }
    if (literal !== undefined && bytes.indexOf(literal) === -1) continue
    const text = bytes.toString('utf8')
    let lineNo = 0
    for (let start = 0; start < text.length; ) {
      const newline = text.indexOf('\n', start)
      const end = newline === -1 ? text.length : newline
      let line = text.slice(start, end)
      if (line.endsWith('\r')) line = line.slice(0, -1)
      start = end + 1
      lineNo++
      if (!regex.test(line)) continue
      if (matches === job.maxMatches) return true
      const truncated = Buffer.byteLength(line) > job.maxLineBytes
      if (truncated) line = `${cutBytes(line, job.maxLineBytes)}... (line truncated to ${job.maxLineBytes} bytes)`
      const match = `${file.display}:${lineNo}: ${line}`
      posted += Buffer.byteLength(match) + 1
      if (posted > job.maxBytes) return true
      matches++
      post({ kind: 'match', file: index, text: match, truncated })
    }
  }
  progress.searching(undefined)
  return false
}

parentPort!.on('message', (job: ScanJob) => {
  const progress = new Progress(job.progress)
  if (job.kind === 'glob') post({ kind: 'done', cut: false, glob: glob(job, progress) })
  else post({ kind: 'done', cut: grep(job, progress) })
})
