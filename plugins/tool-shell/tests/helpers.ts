import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ToolExecutionResult } from '@loom/tools'

/** A fresh temporary directory (real path) and its removal. */
export function tempDir(prefix = 'loom-tool-shell-'): { dir: string; remove(): void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

export function textOf(result: ToolExecutionResult): string {
  return result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
}

/** Alive means: exists and is not a zombie (an orphan nobody reaped yet is dead). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
}

/** Polls until every pid is dead; returns those still alive after `ms`. */
export async function waitDead(pids: number[], ms = 2_000): Promise<number[]> {
  const until = Date.now() + ms
  for (;;) {
    const alive = pids.filter(isAlive)
    if (!alive.length || Date.now() > until) return alive
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

/** Waits until `file` holds `count` pids (one per line) and returns them. */
export async function readPids(file: string, count: number, ms = 5_000): Promise<number[]> {
  const until = Date.now() + ms
  for (;;) {
    let pids: number[] = []
    try {
      pids = readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number)
    } catch {}
    if (pids.length >= count) return pids
    if (Date.now() > until) throw new Error(`${file} has ${pids.length} of ${count} pids`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

/** Live (non-zombie) processes of process group `pgid`, read from /proc. */
export function groupMembers(pgid: number): number[] {
  const members: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(pgrp) === pgid && state !== 'Z') members.push(Number(entry))
    } catch {}
  }
  return members
}
