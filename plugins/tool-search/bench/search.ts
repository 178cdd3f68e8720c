// grep and glob through the real tools, on each engine (ripgrep, and the search worker),
// against plain ripgrep on the same 10,000-file tree.
//
// The tree: 6,000 source files (TypeScript, JavaScript, Markdown, JSON; 20 to 80 lines
// each) under src/ and packages/, 3,000 built files under dist/ (ignored by the root
// .gitignore, with *.log), 499 ignored .log files, and 500 binary objects under .git/.
//
// What is compared: the tool's median wall time for a call through the host's tool
// pipeline (after a first call, reported apart as `loom_first_ms`: a freshly mounted
// plugin, so ripgrep is located and probed, or the worker started; the process has made
// one tool call before, on another host, since the first tool call of a process loads
// the argument validator, Ajv, whatever the tool: a cost of the host's start, about 40
// ms under the source loader) against `rg` run by
// spawnSync (process start included; its first run apart as `rg_first_ms`), which skips
// the same by its defaults (.gitignore, hidden .git). The tool starts rg through its
// launcher (src/launcher.ts), a small shell, where spawnSync forks this process: as it
// would from a host. Runs alternate, after a warm-up, so both read from the page cache. `identical`: the tool listed exactly rg's lines (grep)
// or files (glob); the tool's caps are raised so both list everything.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHost } from '@loom/testkit'
import * as toolSearch from '../src/index.ts'
import { installedRipgrep } from '../src/ripgrep.ts'

export interface SearchFigure {
  bench: 'tool-search/grep' | 'tool-search/glob'
  engine: 'ripgrep' | 'worker'
  pattern: string
  files: number
  /** Lines (grep) or files (glob) found. */
  matches: number
  loom_ms: number
  loom_first_ms: number
  rg_ms: number | null
  rg_first_ms: number | null
  /** loom_ms / rg_ms (target: at most 1.2 for the ripgrep engine). */
  ratio: number | null
  /** loom_first_ms / rg_first_ms (target: at most 2). */
  first_ratio: number | null
  /** The tool found exactly what rg found. */
  identical: boolean | null
}

/** A literal word and a regular expression (valid in JavaScript and Rust alike). */
const GREPS = ['computeChecksum', 'export (async )?function [a-z]+Checksum']
/** Every Markdown file, and the TypeScript files of one kind of folder. */
const GLOBS = ['**/*.md', 'src/**/e1/*.ts']

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
const round = (ms: number) => Math.round(ms * 10) / 10
const ratio = (a: number, b: number | null) => (b === null ? null : Math.round((a / b) * 100) / 100)
/** rg's output lines, without the `./` of the path searched. */
const lines = (stdout: string) =>
  stdout
    .split('\n')
    .filter(Boolean)
    .map(line => line.replace(/^\.\//, ''))
const sameSet = (a: string[], b: string[]) => a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n')

/** One measured search: the tool's call and rg's command for the same answer. */
interface Search {
  bench: SearchFigure['bench']
  pattern: string
  tool: { name: string; args: Record<string, unknown> }
  rg: string[]
  /** What rg printed, in the tool's terms. */
  fromRg: (stdout: string) => string[]
  /** What the tool answered, as a list. */
  fromTool: (text: string) => string[]
}

const searches: Search[] = [
  ...GREPS.map(pattern => ({
    bench: 'tool-search/grep' as const,
    pattern,
    tool: { name: 'grep', args: { pattern } },
    rg: ['--no-config', '--line-number', '--with-filename', '--no-heading', '--color', 'never', '-e', pattern, '.'],
    fromRg: (stdout: string) => lines(stdout).map(line => line.replace(/^([^:]*:\d+):/, '$1: ')),
    fromTool: (text: string) => text.split('\n').filter(Boolean),
  })),
  ...GLOBS.map(pattern => ({
    bench: 'tool-search/glob' as const,
    pattern,
    tool: { name: 'glob', args: { pattern } },
    rg: ['--no-config', '--files', '--glob', pattern, '.'],
    fromRg: lines,
    fromTool: (text: string) => text.split('\n').filter(Boolean),
  })),
]

/** One tool call in this process, on a throwaway host and folder (see the top: what a first call measures). */
async function warmProcess() {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'loom-bench-warm-')))
  const host = await createHost()
  try {
    await host.mount(toolSearch, { root: dir, ripgrep: 'never' })
    await host.ctx.tools.execute({ callId: 'warm', name: 'glob', arguments: { pattern: '*' }, signal: new AbortController().signal })
  } finally {
    await host.dispose()
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function benchSearch(runs = 21): Promise<SearchFigure[]> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'loom-bench-search-')))
  const rgBinary = await installedRipgrep()
  const engines = [...(rgBinary === undefined ? [] : [{ engine: 'ripgrep' as const, ripgrep: rgBinary }]), { engine: 'worker' as const, ripgrep: 'never' }]
  const config = { root, grepMaxMatches: 100_000, globMaxResults: 100_000 }
  try {
    await warmProcess()
    const files = buildTree(root)
    const figures: SearchFigure[] = []
    for (const search of searches) {
      const rg = () => {
        const start = performance.now()
        const result = spawnSync(rgBinary!, search.rg, { cwd: root, encoding: 'utf8', maxBuffer: 1 << 28 })
        return { ms: performance.now() - start, found: search.fromRg(result.stdout) }
      }
      const rgFirst = rgBinary === undefined ? undefined : rg()
      for (const { engine, ripgrep } of engines) {
        const host = await createHost()
        try {
          await host.mount(toolSearch, { ...config, ripgrep })
          const loom = async () => {
            const start = performance.now()
            const result = await host.ctx.tools.execute({
              callId: 'bench',
              name: search.tool.name,
              arguments: search.tool.args,
              signal: new AbortController().signal,
            })
            const ms = performance.now() - start
            const text = result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
            const ran = (result.meta as { engine?: string }).engine
            if (ran !== engine) throw new Error(`${search.tool.name} ${search.pattern}: ran on ${ran}, not ${engine}`)
            return { ms, found: search.fromTool(text) }
          }
          const first = await loom()
          if (rgBinary !== undefined) rg()
          const loomMs: number[] = []
          const rgMs: number[] = []
          let identical: boolean | null = rgFirst === undefined ? null : sameSet(first.found, rgFirst.found)
          for (let i = 0; i < runs; i++) {
            const a = await loom()
            loomMs.push(a.ms)
            if (rgBinary === undefined) continue
            const b = rg()
            rgMs.push(b.ms)
            identical &&= sameSet(a.found, b.found)
          }
          const loom_ms = round(median(loomMs))
          const rg_ms = rgMs.length === 0 ? null : round(median(rgMs))
          const rg_first_ms = rgFirst === undefined ? null : round(rgFirst.ms)
          figures.push({
            bench: search.bench,
            engine,
            pattern: search.pattern,
            files,
            matches: first.found.length,
            loom_ms,
            loom_first_ms: round(first.ms),
            rg_ms,
            rg_first_ms,
            ratio: ratio(loom_ms, rg_ms),
            first_ratio: ratio(first.ms, rg_first_ms),
            identical,
          })
        } finally {
          await host.dispose()
        }
      }
    }
    return figures
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}
