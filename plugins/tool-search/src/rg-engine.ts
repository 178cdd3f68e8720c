// grep and glob through ripgrep, answering exactly what the search worker answers (the
// same ScanResult, rendered by the same code in search.ts). ripgrep walks and matches;
// this module tells it the worker's rules and completes what it does differently:
//
// - the walk: ripgrep runs in the searched folder over `.`, reading `.rgignore`,
//   `.ignore` and `.gitignore` there and above (also outside a repository:
//   `--no-require-git`) and each repository's exclude file; the worker's global excludes
//   file by `--ignore-file` (ripgrep's own lookup is off); the `ignore` names as
//   `--glob '!…'` overrides, which decide before any ignore file, as the worker's check
//   does. Hidden entries are left to ripgrep's own test, which an ignore file's `!`
//   pattern or the file type can let through: such paths are dropped here (an override
//   would be matched against every path, a cost the answer does not need).
// - symlinks: ripgrep follows them (`--follow`); what it finds through a symlinked
//   directory, or in a link to a file outside the workspace, is dropped, so what stays is
//   what the worker searches (symlinked files whose target is inside, never symlinked
//   directories).
// - the matching: the pattern is translated to Rust's dialect (rust-regex.ts) or the
//   call goes to the worker; `--text`, and the worker's binary test on each file with a
//   match (so a NUL past the first 8 KiB does not hide the rest of a file); lines
//   ending in `\r\n` that a `\r`-matching pattern found are tested again with the
//   JavaScript expression, in the worker. A glob's last segment, when it is plain, is
//   handed to ripgrep as a file type (checked after the ignore files, as the worker's
//   glob is), and the whole glob is then matched here.
// - the order: ripgrep searches in parallel; the matches are sorted by path here and cut
//   as the worker cuts them. Output past MAX_OUTPUT_BYTES sends the call to the worker,
//   which stops at the cap in path order.
// - an empty answer: what the walk skipped (its notes) is counted by the worker's walk.
//
// Anything else stays with the worker (`run` answers undefined; see planWalk): the read
// rules' denials in the walk, a glob that could backtrack for long on this thread, ignore
// rules ripgrep would read or apply otherwise.
import { closeSync, existsSync, lstatSync, openSync, readSync, realpathSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { cutBytes, isInside, SNIFF_BYTES } from '@loom/tools/workspace'
import { IGNORE_FILES, isAnchored, RANK, startChain } from './ignore-files.ts'
import { compileGlob } from './pattern.ts'
import { locateRipgrep, type RipgrepSetting, runRipgrep, type RunResult } from './ripgrep.ts'
import { type RustRegex, toRustRegex, Untranslatable } from './rust-regex.ts'
import type { GlobJob, GrepJob, ScanResult, ScanWorkers, WalkJob } from './scan.ts'
import { textEncoding } from './text.ts'

/** Bytes of output ripgrep may print before the call leaves it to the worker (which stops at the cap, in path order). */
export const MAX_OUTPUT_BYTES = 16 * 1024 * 1024

/** How to run a walk through ripgrep: in the walk's start, over `.`, with these arguments. */
interface WalkPlan {
  args: string[]
  walk: WalkJob
}

/** A file ripgrep reported, placed: where it is read, how it is shown, its path from the walk's start. */
interface Place {
  abs: string
  display: string
  rel: string
}

/** A file's matching lines as ripgrep printed them. */
interface FileMatches extends Place {
  lines: { n: number; text: string; crlf: boolean }[]
}

type Counts = ScanResult['skipped']
const noCounts = (): Counts => ({ binary: 0, ignored: 0, hidden: 0, denied: 0 })

export class RipgrepEngine {
  readonly #setting: RipgrepSetting
  readonly #workers: ScanWorkers
  readonly #maxOutputBytes: number

  /** `workers` tests the lines ripgrep's answer leaves in doubt and counts what an empty answer skipped; past `maxOutputBytes` of output the worker searches instead. */
  constructor(setting: RipgrepSetting, workers: ScanWorkers, maxOutputBytes = MAX_OUTPUT_BYTES) {
    this.#setting = setting
    this.#workers = workers
    this.#maxOutputBytes = maxOutputBytes
  }

  /** The binary, once checked; undefined when the worker does every search. Throws when the configured path is not ripgrep. */
  async binary(): Promise<string | undefined> {
    const located = locateRipgrep(this.#setting)
    return located !== undefined && (await this.#check(located.runs)) ? located.binary : undefined
  }

  /** Runs `job` with ripgrep; undefined when the worker must (see the module comment). */
  async run(job: GrepJob | GlobJob, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult | undefined> {
    const located = locateRipgrep(this.#setting)
    if (located === undefined) return undefined
    // The binary's check (once, begun when the plugin started) need not hold up the search: it decides on its answer.
    const searched = this.#search(located.binary, job, signal, deadline)
    searched.catch(() => {}) // awaited below, unless the check fails first
    const runs = await this.#check(located.runs)
    const found = await searched
    return runs ? found : undefined
  }

  /** Whether the located binary is ripgrep; a configured path that is not fails, naming the key. */
  async #check(runs: Promise<boolean>): Promise<boolean> {
    if ((await runs) || this.#setting === 'auto') return runs
    throw new Error(`ripgrep: "${this.#setting}" does not run as ripgrep 11 or later (its --version says otherwise); set "auto", "never" or another binary`)
  }

  async #search(binary: string, job: GrepJob | GlobJob, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult | undefined> {
    try {
      const found = job.kind === 'glob' ? await this.#glob(binary, job, signal) : await this.#grep(binary, job, signal, deadline)
      return found === undefined ? undefined : await this.#countSkipped(job, found, signal, deadline)
    } catch (error) {
      if (signal.aborted) throw error
      if (error instanceof Untranslatable) return undefined
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'EACCES' || code === 'ECHILD') return undefined // the binary, a file or the launcher went away: the worker answers
      throw error
    }
  }

  async #grep(binary: string, job: GrepJob, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult | undefined> {
    const regex = toRustRegex(job.source, job.flags)
    const counts = noCounts()
    const searchArgs = [
      '--no-config',
      '--null',
      '--line-number',
      '--with-filename',
      '--no-heading',
      '--color',
      'never',
      '--text',
      ...(regex.transcode ? ['--encoding', 'utf-8'] : []),
      '-e',
      regex.source,
    ]
    let files: FileMatches[]
    let run: RunResult
    if ('file' in job.files) {
      // One file, named explicitly: its first bytes decide before ripgrep reads it.
      const { real, display } = job.files.file
      if (textEncoding(head(real)) === 'binary') return finish(job, [], { ...counts, binary: 1 }, false)
      run = await runRipgrep(binary, [...searchArgs, '--', real], { cwd: dirname(real), signal, deadline, maxOutputBytes: this.#maxOutputBytes })
      if (unusable(run)) return undefined
      files = parseMatches(run.stdout, path => (path === real ? { abs: real, display, rel: display } : undefined))
    } else {
      const { walk, glob } = job.files
      if (glob !== undefined && !quickGlob(glob.pattern)) return undefined
      const plan = planWalk(walk, glob === undefined ? undefined : fileType(glob.pattern))
      if (plan === undefined) return undefined
      run = await runRipgrep(binary, [...searchArgs, '--follow', ...plan.args, '--', '.'], {
        cwd: plan.walk.start,
        signal,
        deadline,
        maxOutputBytes: this.#maxOutputBytes,
      })
      if (unusable(run)) return undefined
      const matcher = glob === undefined ? undefined : compileGlob(glob.pattern)
      const selected = (rel: string) => matcher === undefined || matcher.test(glob!.basename ? rel.slice(rel.lastIndexOf('/') + 1) : rel)
      const inWalk = walkedFiles(plan)
      files = parseMatches(run.stdout, path => placeOf(plan, path)).filter(file => selected(file.rel) && inWalk(file) !== undefined)
    }
    files = files.filter(file => {
      if (textEncoding(head(file.abs)) !== 'binary') return true
      counts.binary++
      return false
    })
    const timedOut = run.stopped === 'deadline' || !(await this.#confirm(job, regex, files, signal, deadline))
    files.sort((a, b) => (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
    return finish(job, files, counts, timedOut)
  }

  /**
   * On a line that ended in `\r\n`, a pattern that can match `\r` may have matched the
   * `\r` grep drops: such lines are tested again with the JavaScript expression, in the
   * worker (a backtracking expression cannot hold up this thread). False: the deadline
   * stopped the test (the untested lines are left out).
   */
  async #confirm(job: GrepJob, regex: RustRegex, files: FileMatches[], signal: AbortSignal, deadline?: AbortSignal): Promise<boolean> {
    if (!regex.matchesCr) return true
    const doubtful = files.flatMap(file => file.lines.filter(line => line.crlf).map(line => ({ file, line })))
    if (doubtful.length === 0) return true
    const lines = doubtful.map(({ file, line }) => ({ display: file.display, text: line.text }))
    const tested = await this.#workers.run({ kind: 'test', source: job.source, flags: job.flags, lines }, signal, deadline)
    const wrong = new Set(doubtful.filter((_, i) => tested.verdicts?.[i] !== true).map(({ line }) => line))
    for (const file of files) file.lines = file.lines.filter(line => !wrong.has(line))
    files.splice(0, files.length, ...files.filter(file => file.lines.length > 0))
    return !tested.timedOut
  }

  /** glob: the files of ripgrep's walk that match the pattern, newest first (ties by path), as the worker lists them. */
  async #glob(binary: string, job: GlobJob, signal: AbortSignal): Promise<ScanResult | undefined> {
    if (!quickGlob(job.pattern)) return undefined
    const plan = planWalk(job.walk, fileType(job.pattern))
    if (plan === undefined) return undefined
    const matcher = compileGlob(job.pattern)
    const inWalk = walkedFiles(plan)
    const found: { display: string; mtimeMs: number }[] = []
    // Each path is matched and its mtime read as ripgrep prints it: the stats overlap ripgrep's walk.
    let carried: Buffer = Buffer.alloc(0)
    const onStdout = (chunk: Buffer) => {
      const bytes = carried.length === 0 ? chunk : Buffer.concat([carried, chunk])
      const end = bytes.lastIndexOf(0) + 1
      carried = bytes.subarray(end)
      const listed = bytes.toString('utf8', 0, end).split('\0')
      listed.pop()
      for (const path of listed) {
        const place = placeOf(plan, path)
        if (place === undefined || !matcher.test(place.rel)) continue
        const mtimeMs = inWalk(place)
        if (mtimeMs !== undefined) found.push({ display: place.display, mtimeMs })
      }
    }
    const run = await runRipgrep(binary, ['--no-config', '--files', '--null', '--follow', ...plan.args, '--', '.'], {
      cwd: plan.walk.start,
      signal,
      maxOutputBytes: Number.POSITIVE_INFINITY,
      onStdout,
    })
    if (unusable(run)) return undefined
    found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.display < b.display ? -1 : a.display > b.display ? 1 : 0))
    const shown = found.slice(0, job.max).map(file => file.display)
    return { engine: 'ripgrep', lines: [], files: 0, cut: false, truncatedLines: 0, glob: { shown, total: found.length }, skipped: noCounts(), timedOut: false }
  }

  /** An empty answer says what the walk left out: the worker's walk counts it. */
  async #countSkipped(job: GrepJob | GlobJob, found: ScanResult, signal: AbortSignal, deadline?: AbortSignal): Promise<ScanResult> {
    const empty = job.kind === 'glob' ? found.glob!.total === 0 : found.lines.length === 0 && !found.timedOut
    const walk = job.kind === 'glob' ? job.walk : 'walk' in job.files ? job.files.walk : undefined // one file named: no walk
    if (!empty || walk === undefined) return found
    const counted = await this.#workers.run({ kind: 'count', walk }, signal, deadline)
    if (counted.timedOut) return { ...found, timedOut: job.kind === 'grep' }
    return { ...found, skipped: { ...counted.skipped, binary: found.skipped.binary } }
  }
}

/** The worker's cut: at most `maxMatches` lines and `maxBytes` of them, lines cut at `maxLineBytes`. */
function finish(job: GrepJob, files: FileMatches[], skipped: Counts, timedOut: boolean): ScanResult {
  const lines: string[] = []
  let cut = false
  let posted = 0
  let truncatedLines = 0
  let withLines = 0
  found: for (const file of files) {
    let listed = false
    for (const { n, text } of file.lines) {
      if (lines.length === job.maxMatches) {
        cut = true
        break found
      }
      const truncated = Buffer.byteLength(text) > job.maxLineBytes
      const shown = truncated ? `${cutBytes(text, job.maxLineBytes)}... (line truncated to ${job.maxLineBytes} bytes)` : text
      const match = `${file.display}:${n}: ${shown}`
      posted += Buffer.byteLength(match) + 1
      if (posted > job.maxBytes) {
        cut = true
        break found
      }
      lines.push(match)
      if (truncated) truncatedLines++
      if (!listed) withLines++
      listed = true
    }
  }
  return { engine: 'ripgrep', lines, files: withLines, cut: cut && !timedOut, truncatedLines, skipped, timedOut }
}

/**
 * The arguments that make ripgrep's walk the worker's; undefined when it cannot be (see
 * the module comment). ripgrep runs in the walk's start over `.`: it then reads the
 * ignore files of the folders above as the worker does (given a relative path below its
 * working folder, ripgrep 13 misreads the patterns with a slash in them).
 */
function planWalk(walk: WalkJob, type: string | undefined): WalkPlan | undefined {
  // The worker skips and counts what tools may not read: in the walk, or (through a symlink) anywhere in the workspace.
  if (walk.targetReads.deny.length > 0) return undefined
  const args = walk.hidden ? ['--hidden'] : []
  for (const name of walk.names) {
    // Each override costs every path a match; a hidden name is left to the hidden test, where it can.
    if (walk.hidden || !name.startsWith('.')) args.push('--glob', `!${name.replace(/[\\*?[\]{}!]/g, '\\$&')}`)
  }
  if (type !== undefined) args.push('--type-add', `loomglob:${type}`, '--type', 'loomglob')
  if (Number.isFinite(walk.maxDepth)) args.push('--max-depth', String(walk.maxDepth))
  if (walk.ignoreFiles === undefined) return { walk, args: [...args, '--no-ignore'] }
  const { chain, top, trimmed, globalFile } = startChain(walk.start, walk.root, walk.ignoreFiles)
  // A path named explicitly is searched, even where a pattern above it would ignore it: the worker leaves that
  // pattern out below it, ripgrep would not.
  if (trimmed) return undefined
  // ripgrep reads the ignore files above the start up to the filesystem's root; the worker, up to the top.
  if (walk.start === top) args.push('--no-ignore-parent')
  else if (ignoreFilesAbove(top, existsSync(join(top, '.git')))) return undefined
  // The global excludes file: the worker's own lookup, its patterns relative to the top (given to ripgrep, to its working folder).
  const global = chain.find(file => file.rank === RANK.global)
  if (global !== undefined && globalFile !== undefined) {
    if (walk.start !== top && global.lines.some(isAnchored)) return undefined
    args.push('--ignore-file', globalFile)
  }
  return { walk, args: [...args, '--no-require-git', '--no-ignore-global'] }
}

/** Whether a folder above `top` holds an ignore file ripgrep would read (`.gitignore` only outside a repository). */
function ignoreFilesAbove(top: string, inRepository: boolean): boolean {
  const names = inRepository ? IGNORE_FILES.filter(name => name !== '.gitignore') : IGNORE_FILES
  for (let dir = dirname(top); ; dir = dirname(dir)) {
    if (names.some(name => existsSync(join(dir, name)))) return true
    if (dirname(dir) === dir) return false
  }
}

/** Globs picomatch compiles to an expression that cannot backtrack for long on this thread: no extglob or group, at most two `*` in a segment. */
export function quickGlob(pattern: string): boolean {
  if (/[()|]/.test(pattern)) return false
  return pattern.split('/').every(segment => segment === '**' || (segment.match(/\*/g)?.length ?? 0) <= 2)
}

/**
 * The glob ripgrep can filter file names by, ahead of the exact match here: the
 * pattern's last segment when it is plain (letters, digits, `._-`, `*`, `?` and simple
 * braces), as a file type. What it lets through is a superset; undefined: no filter.
 */
function fileType(pattern: string): string | undefined {
  const slash = pattern.lastIndexOf('/')
  const last = pattern.slice(slash + 1)
  const before = pattern.slice(0, slash + 1)
  const balanced = (before.match(/\{/g)?.length ?? 0) === (before.match(/\}/g)?.length ?? 0)
  if (!balanced || last === '*' || !/^(?:[\w.-]|\*(?!\*)|\?|\{[\w.*?-]*(?:,[\w.*?-]*)+\})+$/.test(last)) return undefined
  return last
}

/**
 * Whether a file ripgrep reported through `--follow` is one the worker's walk meets:
 * no symlinked directory on its way from the walk's start, and, when it is itself a
 * symlink, a file inside the workspace at its end. The answer is its modification time
 * (undefined: not in the walk).
 */
function walkedFiles(plan: WalkPlan): (place: Place) => number | undefined {
  const linkedDirs = new Map<string, boolean>()
  const throughLink = (dir: string): boolean => {
    if (dir.length <= plan.walk.start.length) return false
    let linked = linkedDirs.get(dir)
    if (linked === undefined) {
      linked = lstatSync(dir, { throwIfNoEntry: false })?.isSymbolicLink() !== false || throughLink(dirname(dir))
      linkedDirs.set(dir, linked)
    }
    return linked
  }
  return ({ abs }) => {
    if (throughLink(dirname(abs))) return undefined
    const info = lstatSync(abs, { throwIfNoEntry: false })
    if (info?.isFile()) return info.mtimeMs
    if (!info?.isSymbolicLink()) return undefined
    try {
      const real = realpathSync(abs)
      const target = statSync(real)
      return isInside(plan.walk.root, real) && target.isFile() ? target.mtimeMs : undefined
    } catch {
      return undefined // dangling or looping
    }
  }
}

/**
 * ripgrep printed more than the call keeps, or said something other than that it could
 * not read a file (a pattern or a glob it refuses, an ignore file it reads otherwise):
 * the worker searches instead.
 */
const unusable = (run: RunResult) => run.stopped === 'overflow' || run.stderr.split('\n').some(line => line.trim() !== '' && !BENIGN.test(line))

/** ripgrep's messages about one file (the worker skips it too), and its notice that a filter let no file through. */
const BENIGN = /\(os error \d+\)$|^(?:rg: )?File system loop found|^No files were searched|^Running with --debug/

/**
 * A path ripgrep printed (`./` and the path from the walk's start), placed; undefined
 * when it is hidden and the walk is not (see the module comment). ripgrep's paths are
 * normalized: they are joined as strings.
 */
const placeOf = ({ walk }: WalkPlan, path: string): Place | undefined => {
  const rel = path.startsWith('./') ? path.slice(2) : path
  if (!walk.hidden && (rel.startsWith('.') || rel.includes('/.'))) return undefined
  const abs = walk.start.endsWith('/') ? walk.start + rel : `${walk.start}/${rel}`
  return { abs, display: walk.display === '.' ? rel : `${walk.display}/${rel}`, rel }
}

const sniffed = Buffer.alloc(SNIFF_BYTES)

/** The first bytes of a file (empty when it cannot be read); valid until the next call. */
function head(path: string): Buffer {
  let fd: number | undefined
  try {
    fd = openSync(path, 'r')
    return sniffed.subarray(0, readSync(fd, sniffed, 0, SNIFF_BYTES, 0))
  } catch {
    return sniffed.subarray(0, 0)
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/**
 * ripgrep's `path NUL line:text LF` records, grouped by file (its matches in line order).
 * The line's final `\r` is dropped, as grep drops it; `crlf` says it was there. A record
 * cut by a kill is left out.
 */
function parseMatches(stdout: Buffer, place: (path: string) => Place | undefined): FileMatches[] {
  const byPath = new Map<string, FileMatches>()
  let at = 0
  while (at < stdout.length) {
    const nul = stdout.indexOf(0, at)
    const colon = nul === -1 ? -1 : stdout.indexOf(0x3a, nul)
    const end = colon === -1 ? -1 : stdout.indexOf(0x0a, colon)
    if (end === -1) break
    const path = stdout.toString('utf8', at, nul)
    const n = Number(stdout.toString('latin1', nul + 1, colon))
    const crlf = end > colon + 1 && stdout[end - 1] === 0x0d
    const text = stdout.toString('utf8', colon + 1, crlf ? end - 1 : end)
    at = end + 1
    let file = byPath.get(path)
    if (file === undefined) {
      const where = place(path)
      if (where === undefined) continue
      file = { ...where, lines: [] }
      byPath.set(path, file)
    }
    file.lines.push({ n, text, crlf })
  }
  return [...byPath.values()]
}
