import { mkdir, mkdtemp, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A fresh workspace directory and a sibling "outside" directory, both with symlinks resolved. */
export async function makeDirs() {
  const base = await realpath(await mkdtemp(join(tmpdir(), 'loom-tool-fs-')))
  const ws = join(base, 'ws')
  const outside = join(base, 'outside')
  await mkdir(ws)
  await mkdir(outside)
  return { ws, outside, cleanup: () => rm(base, { recursive: true, force: true }) }
}

/** The text of a tool result (its text blocks joined). */
export function textOf(result: { content: readonly { type: string; text?: string }[] }): string {
  return result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}
