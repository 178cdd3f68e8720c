import { mkdir, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { WorkspacePath } from '@loom/tools/workspace'
import { replaceFile } from './replace.ts'
import { plural } from '@loom/tools/workspace'

export interface WriteArgs {
  path: string
  content: string
}

/**
 * Writes `content` (UTF-8) to the file, creating missing parent directories; reports
 * the bytes written. The file is replaced through a temporary file and a rename, so a
 * hard link to it from elsewhere keeps its old bytes (see `replaceFile`).
 */
export async function writeText(file: WorkspacePath, args: WriteArgs, signal: AbortSignal) {
  let existed = false
  let previous = 0
  try {
    const info = await stat(file.path)
    if (info.isDirectory()) throw new Error(`"${file.display}" is a directory; write needs a file path`)
    if (!info.isFile()) throw new Error(`"${file.display}" is not a regular file; write only writes regular files`)
    existed = true
    previous = info.size
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOTDIR') throw new Error(`cannot write "${file.display}": a parent of it is a file, not a directory`)
    if (code !== 'ENOENT') throw error
  }
  const data = Buffer.from(args.content, 'utf8')
  try {
    await mkdir(dirname(file.path), { recursive: true })
    await replaceFile(file.path, [data], signal)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOTDIR' || code === 'EEXIST') throw new Error(`cannot write "${file.display}": a parent of it is a file, not a directory`)
    throw new Error(`cannot write "${file.display}": ${(error as Error).message}`)
  }
  const what = existed ? `overwrote the previous ${plural(previous, 'byte')}` : 'new file'
  return {
    content: `Wrote ${plural(data.length, 'byte')} to "${file.display}" (${what}).`,
    meta: { path: file.display, bytes: data.length, created: !existed },
  }
}
