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

/** A unique `sleep` duration (e.g. `300.4817263`): its command lines identify a test's processes. */
export function uniqueSleep(): string {
  return (300 + Math.random()).toFixed(7)
}

/** Live (non-zombie) processes whose command line contains `text`. */
export function withArg(text: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text)) continue
      if (isAlive(Number(entry))) found.push(Number(entry))
    } catch {}
  }
  return found
}

/** Polls until no live process has `text` in its command line; returns those left after `ms`. */
export async function waitGone(text: string, ms = 20_000): Promise<number[]> {
  const until = Date.now() + ms
  for (;;) {
    const left = withArg(text)
    if (!left.length || Date.now() > until) return left
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

/** Polls until at least `count` live processes have `text` in their command line. */
export async function waitStarted(text: string, count: number, ms = 20_000): Promise<number[]> {
  const until = Date.now() + ms
  for (;;) {
    const found = withArg(text)
    if (found.length >= count) return found
    if (Date.now() > until) throw new Error(`${found.length} of ${count} processes with "${text}" started`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}
