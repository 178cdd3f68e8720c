// grep through the real tool against GNU grep on the same 10,000-file tree.
//
// The tree: 6,000 source files (TypeScript, JavaScript, Markdown, JSON; 20 to 80 lines
// each) under src/ and packages/, 3,000 built files under dist/ (ignored by the root
// .gitignore, with *.log), 499 ignored .log files, and 500 binary objects under .git/.
//
// What is compared: the tool's median wall time for a grep call (through the host's
// tool pipeline, the worker kept warm by a first call, which is reported apart as
// `loom_first_ms`) against `grep -rnI` run by spawnSync (process start included), told
// to skip what the tool skips: directories and files whose name starts with a dot
// (.git, .gitignore), dist/ and node_modules/, and *.log. (Given the root as an absolute path:
// as `.`, `--exclude-dir=.*` would exclude the root itself.) Both print `file:line: text`
// for every match (fewer than the tool's 250-line cap, so both search the whole tree),
// and the match counts are checked to agree. Runs alternate, after a warm-up, so both
// read from the page cache.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHost } from '@loom/testkit'
import * as toolSearch from '../src/index.ts'

export interface GrepFigure {
  bench: 'tool-search/grep'
  pattern: string
  files: number
  matches: number
  loom_ms: number
  loom_first_ms: number
  gnu_grep_ms: number
  ratio: number
}

/** The two searches: a literal word and a regular expression (valid in both JavaScript and POSIX ERE). */
const SEARCHES = [
  { pattern: 'computeChecksum', gnu: ['-F'] },
  { pattern: 'export (async )?function [a-z]+Checksum', gnu: ['-E'] },
]

/** Deterministic pseudo-random numbers, so every run builds the same tree. */
function random(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return seed / 0x7fffffff
  }
}

/** Writes the tree; returns how many files it holds. */
export function buildTree(root: string): number {
  const next = random(42)
  let count = 0
  const write = (path: string, content: string | Buffer) => {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), content)
    count++
  }
  const sourceLines = (i: number) => {
    const lines: string[] = [`// module ${i}`, `import { helper${i % 50} } from './helper'`]
    const n = 20 + Math.floor(next() * 60)
    for (let l = 0; l < n; l++) lines.push(`export const value${i}_${l} = helper${i % 50}(${l}, 'some text ${l}')`)
    if (i % 300 === 7) lines.push(`export async function computeChecksum${i}(data: string) { return data.length }`)
    return `${lines.join('\n')}\n`
  }
  write('.gitignore', 'dist/\n*.log\n')
  const kinds = ['ts', 'ts', 'ts', 'js', 'md', 'json']
  for (let i = 0; i < 6000; i++) {
    const top = i % 3 === 0 ? `packages/p${i % 12}/src` : 'src'
    write(`${top}/d${i % 37}/e${i % 5}/f${i}.${kinds[i % kinds.length]}`, sourceLines(i))
  }
  for (let i = 0; i < 3000; i++) write(`dist/chunk${i % 20}/f${i}.js`, sourceLines(i)) // ignored: matches there must not count
  for (let i = 0; i < 499; i++) write(`logs/run${i}.log`, `computeChecksum called ${i}\n`.repeat(20)) // ignored too
  for (let i = 0; i < 500; i++)
    write(`.git/objects/${String(i % 256).padStart(2, '0')}/o${i}`, Buffer.from(Array.from({ length: 600 }, () => Math.floor(next() * 256))))
  return count
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

export async function benchGrep(runs = 5): Promise<GrepFigure[]> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'loom-bench-grep-')))
  const host = await createHost()
  try {
    const files = buildTree(root)
    await host.mount(toolSearch)
    const figures: GrepFigure[] = []
    for (const search of SEARCHES) {
      const loom = async () => {
        const start = performance.now()
        const result = await host.callTool('grep', { pattern: search.pattern }, { cwd: root })
        const ms = performance.now() - start
        return { ms, matches: (result.meta as { matches: number }).matches }
      }
      const gnu = () => {
        const start = performance.now()
        const args = ['-rnI', ...search.gnu, '--exclude-dir=.*', '--exclude-dir=dist', '--exclude-dir=node_modules', '--exclude=.*', '--exclude=*.log']
        const result = spawnSync('grep', [...args, '-e', search.pattern, root], { encoding: 'utf8' })
        const ms = performance.now() - start
        return { ms, matches: result.stdout.split('\n').filter(Boolean).length }
      }
      const first = await loom()
      gnu()
      const loomMs: number[] = []
      const gnuMs: number[] = []
      for (let i = 0; i < runs; i++) {
        const a = await loom()
        const b = gnu()
        if (a.matches !== b.matches) throw new Error(`grep /${search.pattern}/: the tool found ${a.matches} lines, GNU grep ${b.matches}`)
        loomMs.push(a.ms)
        gnuMs.push(b.ms)
      }
      const loom_ms = Math.round(median(loomMs) * 10) / 10
      const gnu_grep_ms = Math.round(median(gnuMs) * 10) / 10
      figures.push({
        bench: 'tool-search/grep',
        pattern: search.pattern,
        files,
        matches: first.matches,
        loom_ms,
        loom_first_ms: Math.round(first.ms * 10) / 10,
        gnu_grep_ms,
        ratio: Math.round((loom_ms / gnu_grep_ms) * 100) / 100,
      })
    }
    return figures
  } finally {
    await host.dispose()
    rmSync(root, { recursive: true, force: true })
  }
}
