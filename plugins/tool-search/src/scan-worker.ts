// The body of grep's worker threads (see scan.ts): for each job it is sent, reads the
// files, tests each line against the regular expression and posts the matches as it
// finds them, so that a search stopped midway still has them. Node runs this file
// itself (type stripping, or the host's loader), so it holds only erasable TypeScript.
import { readFileSync } from 'node:fs'
import { parentPort } from 'node:worker_threads'
import { cutBytes, looksBinary, SNIFF_BYTES } from '@loom/tools/workspace'
import type { ScanJob, ScanMessage } from './scan.ts'

const post = (message: ScanMessage) => parentPort!.postMessage(message)

/** Searches every file of the job; returns whether the match cap cut the search short. */
function scan(job: ScanJob): boolean {
  const regex = new RegExp(job.source, job.flags)
  let matches = 0
  for (let index = 0; index < job.files.length; index++) {
    Atomics.store(job.progress, 0, index)
    const file = job.files[index]
    if (file.size > job.maxFileBytes) {
      post({ kind: 'skip', file: index, reason: 'large' })
      continue
    }
    let bytes: Buffer
    try {
      bytes = readFileSync(file.real)
    } catch {
      continue // unreadable files are skipped
    }
    if (looksBinary(bytes.subarray(0, SNIFF_BYTES))) {
      post({ kind: 'skip', file: index, reason: 'binary' })
      continue
    }
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
      matches++
      const truncated = Buffer.byteLength(line) > job.maxLineBytes
      if (truncated) line = `${cutBytes(line, job.maxLineBytes)}... (line truncated to ${job.maxLineBytes} bytes)`
      post({ kind: 'match', file: index, text: `${file.display}:${lineNo}: ${line}`, truncated })
    }
  }
  return false
}

parentPort!.on('message', (job: ScanJob) => post({ kind: 'done', cut: scan(job) }))
