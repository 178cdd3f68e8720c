import { mkdir, mkdtemp, realpath, rm, symlink, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { compileGlob, splitGlob } from '../src/pattern.ts'
import { installedRipgrep } from '../src/ripgrep.ts'
import { ScanWorkers } from '../src/scan.ts'
import { grepJob, plainWalk } from './jobs.ts'

const GLOB_TEXT =
  'Use `glob` to find files by name, not `find` or `ls -R` in a shell. Patterns are relative to `path` (default: the workspace root): `**` matches any number of directories, `*` and `?` match within one name, and `{a,b}` and `[abc]` work, so `**/*.ts` finds every TypeScript file and `*.ts` only those directly in `path`. Results are the newest files first, at most 100. Hidden files and files ignored by `.gitignore` or `.ignore` are skipped unless `hidden` or `no_ignore` is true; `.git` and `node_modules` always are.'
const GREP_TEXT =
  'Use `grep` to search file contents, not `grep` or `rg` in a shell. `pattern` is a JavaScript regular expression, matched line by line; narrow the search with `path` (a directory or one file) and `glob` (`*.ts` matches file names at any depth). Results read `file:line: text`, in path order, at most 250 lines: with more matches, the first and the last, and a reference `read` pages through. Binary files are skipped. Hidden files and files ignored by `.gitignore` or `.ignore` are skipped unless `hidden` or `no_ignore` is true; `.git` and `node_modules` always are.'

type Host = Awaited<ReturnType<typeof createHost>>
type Mounted = Awaited<ReturnType<Host['mount']>>

/** The two engines; ripgrep's cases are skipped when no rg is on PATH. */
const RG = await installedRipgrep()
interface Engine {
  name: 'worker' | 'ripgrep'
  /** The `ripgrep` config that selects it; undefined: not available here. */
  ripgrep: string | undefined
}
const ENGINES: Engine[] = [
  { name: 'worker', ripgrep: 'never' },
  { name: 'ripgrep', ripgrep: RG },
]
const WORKER = ENGINES[0]

let host: Host
let mounted: Mounted
/** The engine the running case mounted: `call` checks each search ran on it. */
let current: Engine
let base: string
let ws: string
let outside: string
const savedEnv = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME }

const textOf = (r: { content: readonly { type: string; text?: string }[] }) => r.content.map(b => (b.type === 'text' ? b.text : '')).join('')

/** Calls a tool; a search must have run on `engine` (default: the one the case mounted). */
async function call(name: string, args: Record<string, unknown>, cwd = ws, engine = current.name) {
  const result = await host.callTool(name, args, { cwd })
  const ran = (result.meta as { engine?: string } | undefined)?.engine
  if (ran !== undefined) expect(ran, `the engine of ${name} ${JSON.stringify(args)}`).toBe(engine)
  return { ...result, text: textOf(result) }
}

/** Writes files (creating directories); an mtime in seconds since the epoch may be given per file. */
async function files(root: string, spec: Record<string, string | Buffer | [string, number]>) {
  for (const [path, value] of Object.entries(spec)) {
    const full = join(root, path)
    await mkdir(dirname(full), { recursive: true })
    const [content, mtime] = Array.isArray(value) ? value : [value, undefined]
    await writeFile(full, content)
    if (mtime !== undefined) await utimes(full, mtime, mtime)
  }
}

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'loom-tool-search-')))
  ws = join(base, 'ws')
  outside = join(base, 'outside')
  await mkdir(ws)
  await mkdir(outside)
  // The git configuration of the machine (a global excludes file) must not decide what the tests find.
  process.env.HOME = join(base, 'home')
  process.env.XDG_CONFIG_HOME = join(base, 'xdg')
  host = await createHost()
})

afterEach(async () => {
  for (const [key, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  await host.dispose()
  await rm(base, { recursive: true, force: true })
})

describe('what the model sees', () => {
  beforeEach(async () => {
    current = WORKER
    mounted = await host.mount(toolSearch)
  })

  it('adds two static guidance sections and the two tools', async () => {
    const delta = await mounted.delta({ cwd: ws })
    expect(delta.sections.map(s => [s.name, s.order, s.stability])).toEqual([
      ['tool:glob', 103, 'static'],
      ['tool:grep', 104, 'static'],
    ])
    expect(delta.sections.map(s => s.text)).toEqual([GLOB_TEXT, GREP_TEXT])
    expect(delta.sections.map(s => s.rendered)).toEqual([GLOB_TEXT, GREP_TEXT])
    expect(delta.tools.map(t => t.name)).toEqual(['glob', 'grep'])
    expect((delta.tools[0].parameters as any).required).toEqual(['pattern'])
    expect(Object.keys((delta.tools[0].parameters as any).properties)).toEqual(['pattern', 'path', 'hidden', 'no_ignore'])
    expect(Object.keys((delta.tools[1].parameters as any).properties)).toEqual(['pattern', 'path', 'glob', 'ignore_case', 'hidden', 'no_ignore'])
    expect(delta.contexts).toEqual([])
    expect(delta.variables).toEqual([])
  })

  it('runs both tools as parallel-safe', () => {
    expect(mounted.ctx.tools.executionMode({ name: 'glob', arguments: { pattern: '*' } })).toBe('parallel')
    expect(mounted.ctx.tools.executionMode({ name: 'grep', arguments: { pattern: 'x' } })).toBe('parallel')
  })

  it('reflects the configured caps and ignore list in the section text', async () => {
    const h = await createHost()
    try {
      const m = await h.mount(toolSearch, { globMaxResults: 7, grepMaxMatches: 9, ignore: ['dist'] })
      const [glob, grep] = (await m.delta({ cwd: ws })).sections
      expect(glob.text).toContain('at most 7. Hidden files')
      expect(glob.text).toMatch(/is true; `dist` always is\.$/)
      expect(grep.text).toContain('at most 9 lines: with more matches, the first and the last')
    } finally {
      await h.dispose()
    }
  })
})

describe('glob patterns', () => {
  const matches = (pattern: string, path: string) => compileGlob(pattern).test(path)

  it('supports **, *, ?, braces, classes and escapes', () => {
    expect(matches('**/*.ts', 'a.ts')).toBe(true)
    expect(matches('**/*.ts', 'src/deep/a.ts')).toBe(true)
    expect(matches('*.ts', 'src/a.ts')).toBe(false)
    expect(matches('src/**', 'src/a/b.txt')).toBe(true)
    expect(matches('src/**', 'other/a')).toBe(false)
    expect(matches('src/**/test/*.ts', 'src/test/a.ts')).toBe(true)
    expect(matches('src/**/test/*.ts', 'src/x/y/test/a.ts')).toBe(true)
    expect(matches('?.md', 'a.md')).toBe(true)
    expect(matches('?.md', 'ab.md')).toBe(false)
    expect(matches('*.{js,ts}', 'a.ts')).toBe(true)
    expect(matches('*.{js,ts}', 'a.md')).toBe(false)
    expect(matches('{src,lib/{a,b}}/*.c', 'lib/b/x.c')).toBe(true)
    expect(matches('file[0-9].txt', 'file7.txt')).toBe(true)
    expect(matches('file[!0-9].txt', 'file7.txt')).toBe(false)
    expect(matches('file[!0-9].txt', 'fileA.txt')).toBe(true)
    expect(matches('a\\*b', 'a*b')).toBe(true)
    expect(matches('a\\*b', 'axb')).toBe(false)
    expect(matches('a.b(c)+', 'a.b(c)+')).toBe(true)
    expect(matches('a.b', 'axb')).toBe(false)
    expect(matches('{unclosed', '{unclosed')).toBe(true)
    expect(matches('*', '.hidden')).toBe(true)
  })

  it('matches by code point, with ranges, and nested braces around **', () => {
    expect(matches('?.txt', '😀.txt')).toBe(true)
    expect(matches('[😀-😂].txt', '😁.txt')).toBe(true)
    expect(matches('[a-c-]x', '-x')).toBe(true)
    expect(matches('[!a]', '/')).toBe(false)
    expect(matches('{src/**/,}*.ts', 'src/a/b/c.ts')).toBe(true)
    expect(matches('{src/**/,}*.ts', 'c.ts')).toBe(true)
    expect(matches('{src/**/,}*.ts', 'lib/c.ts')).toBe(false)
    expect(matches('a/**/b/**', 'a/x/b/y/z')).toBe(true)
    expect(matches('a/**/b/**', 'a/b')).toBe(true) // picomatch: a trailing /** also matches the directory itself
  })

  it("has picomatch's syntax: extglobs, POSIX classes, escaped parentheses", () => {
    expect(matches('@(src|lib)/*.ts', 'lib/a.ts')).toBe(true)
    expect(matches('@(src|lib)/*.ts', 'test/a.ts')).toBe(false)
    expect(matches('*.!(js)', 'a.ts')).toBe(true)
    expect(matches('*.!(js)', 'a.js')).toBe(false)
    expect(matches('file[[:digit:]].txt', 'file7.txt')).toBe(true)
    expect(matches('file[[:digit:]].txt', 'fileA.txt')).toBe(false)
    expect(matches('app/\\(auth\\)/*.tsx', 'app/(auth)/page.tsx')).toBe(true)
    expect(matches('!literal', '!literal')).toBe(true) // a leading ! does not negate
    expect(matches('x\\-y', 'x-y')).toBe(true) // not valid with the u flag: compiled without it
  })

  it('splits the literal leading directories off', () => {
    expect(splitGlob('src/**/*.ts')).toEqual({ base: 'src', rest: '**/*.ts' })
    expect(splitGlob('*.ts')).toEqual({ base: '', rest: '*.ts' })
    expect(splitGlob('/abs/dir/*.ts')).toEqual({ base: '/abs/dir', rest: '*.ts' })
    expect(splitGlob('a/b/c.txt')).toEqual({ base: 'a/b', rest: 'c.txt' })
  })
})

describe('bounded search', () => {
  // Mounted as deployed (ripgrep when installed): a glob that could backtrack for long is
  // matched in the worker whatever the engine, so the worker's bounds are what is tested.
  beforeEach(async () => {
    current = WORKER
    mounted = await host.mount(toolSearch)
  })

  it('glob "*a*a*a*a*b" over names of 100 a completes', async () => {
    await files(ws, { [`${'a'.repeat(100)}`]: '', [`d/${'a'.repeat(100)}`]: '', [`d/${'a'.repeat(99)}b`]: '' })
    expect((await call('glob', { pattern: '*a*a*a*a*b' })).text).toBe('No files match "*a*a*a*a*b" in ".".')
    expect((await call('glob', { pattern: '**/*a*a*a*a*b' })).text).toBe(`d/${'a'.repeat(99)}b`)
    expect((await call('grep', { pattern: 'x', glob: '*a*a*a*a*b' })).text).toBe('No matches for /x/ in "." (glob "*a*a*a*a*b").')
  })

  it('refuses a glob longer than 1000 characters', async () => {
    const long = '*a'.repeat(501)
    const r = await call('glob', { pattern: long })
    expect(r.isError).toBe(true)
    expect(r.text).toBe(`Error: invalid glob pattern "${long}": it is 1002 characters long; at most 1000 are supported`)
    expect((await call('grep', { pattern: 'x', glob: long })).text).toBe(
      `Error: invalid glob "${long}": it is 1002 characters long; at most 1000 are supported`,
    )
    expect((await call('glob', { pattern: '*a'.repeat(500) })).isError).toBe(false)
  })

  it('stops a glob that backtracks for long with the call, and the host stays responsive', async () => {
    const h = await createHost()
    try {
      await h.mount(toolSearch, { timeoutMs: 1000 })
      await files(ws, { [`${'a'.repeat(250)}`]: '', 'ok.txt': '' })
      const terminate = vi.spyOn(Worker.prototype, 'terminate')
      let ticks = 0
      const interval = setInterval(() => ticks++, 20)
      let r
      try {
        r = await h.callTool('glob', { pattern: '*a*a*a*a*a*a*a*a*b' }, { cwd: ws })
      } finally {
        clearInterval(interval)
      }
      expect(r.isError).toBe(true)
      expect(textOf(r)).toContain('timed out after 1000 ms')
      // ~50 expected; a busy machine may run fewer, but a search on this thread would let none run.
      expect(ticks).toBeGreaterThan(0)
      await vi.waitFor(() => expect(terminate).toHaveBeenCalled())
      terminate.mockRestore()
      expect(textOf(await h.callTool('glob', { pattern: 'ok.*' }, { cwd: ws }))).toBe('ok.txt')
    } finally {
      await h.dispose()
    }
  }, 30_000)

  it('stops a catastrophic regular expression at the timeout, with partial results, and the host stays responsive', async () => {
    const h = await createHost()
    try {
      await h.mount(toolSearch, { timeoutMs: 1000, ripgrep: 'never' }) // ripgrep's engine does not backtrack: see ripgrep.test.ts
      await files(ws, { 'a-first.txt': 'aa\n', 'evil.txt': `${'a'.repeat(50_000)}!\n`, 'z-last.txt': 'aaa\n' })
      // A first search starts the worker, so that the timeout below bounds the search, not a start a loaded machine can stretch.
      expect(textOf(await h.callTool('grep', { pattern: 'aa', path: 'a-first.txt' }, { cwd: ws }))).toBe('a-first.txt:1: aa')
      let ticks = 0
      const interval = setInterval(() => ticks++, 20)
      const started = Date.now()
      let r
      try {
        r = await h.callTool('grep', { pattern: '(a+)+$' }, { cwd: ws })
      } finally {
        clearInterval(interval)
      }
      const elapsed = Date.now() - started
      expect(r.isError).toBe(false)
      expect(textOf(r)).toBe(
        'a-first.txt:1: aa\n\n(grep timed out after 1000 ms and was stopped while searching "evil.txt": the results are partial. A pattern with nested quantifiers such as (a+)+ can take exponential time on one line; simplify it, or narrow the path or the glob.)',
      )
      expect(r.meta).toMatchObject({ matches: 1, files: 1, timedOut: true })
      // Not stopped before its time; after it, the answer above says so (the test's own timeout bounds a search that ran on).
      expect(elapsed).toBeGreaterThanOrEqual(950)
      // ~50 expected; a busy machine may run fewer, but a search on this thread would let none run.
      expect(ticks).toBeGreaterThan(0)
      // The stopped worker is not reused: the next search runs in a fresh one.
      expect(textOf(await h.callTool('grep', { pattern: '^a+$', path: 'z-last.txt' }, { cwd: ws }))).toBe('z-last.txt:1: aaa')
    } finally {
      await h.dispose()
    }
  }, 30_000)

  it('stops the worker when the call is aborted', async () => {
    await files(ws, { 'evil.txt': `${'a'.repeat(50_000)}!\n`, 'ok.txt': 'fine!\n' })
    const h = await createHost()
    const terminate = vi.spyOn(Worker.prototype, 'terminate')
    try {
      await h.mount(toolSearch, { ripgrep: 'never' })
      const controller = new AbortController()
      setTimeout(() => controller.abort(), 300)
      const r = await h.callTool('grep', { pattern: '(a+)+$' }, { cwd: ws, signal: controller.signal })
      expect(r.isError).toBe(true)
      await vi.waitFor(() => expect(terminate).toHaveBeenCalled())
      expect(textOf(await h.callTool('grep', { pattern: '!$', path: 'ok.txt' }, { cwd: ws }))).toBe('ok.txt:1: fine!')
    } finally {
      terminate.mockRestore()
      await h.dispose()
    }
  })
})

/** The behaviour both engines must share: every case runs against the worker and (when rg is installed) ripgrep. */
for (const engine of ENGINES) {
  describe.skipIf(engine.ripgrep === undefined)(`${engine.name} engine${engine.ripgrep === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
    beforeEach(async () => {
      current = engine
      mounted = await host.mount(toolSearch, { ripgrep: engine.ripgrep })
    })

    describe('glob', () => {
      beforeEach(async () => {
        await files(ws, {
          'old.ts': ['', 1_000_000],
          'src/new.ts': ['', 3_000_000],
          'src/mid.ts': ['', 2_000_000],
          'src/deep/x.js': ['', 2_500_000],
          'README.md': ['', 1_500_000],
          '.git/config.ts': '',
          'node_modules/pkg/index.ts': '',
          'src/node_modules/inner.ts': '',
        })
      })

      it('lists matching files newest first, relative to the workspace root', async () => {
        const r = await call('glob', { pattern: '**/*.ts' })
        expect(r.isError).toBe(false)
        expect(r.text).toBe('src/new.ts\nsrc/mid.ts\nold.ts')
        expect(r.meta).toEqual({ pattern: '**/*.ts', path: '.', total: 3, shown: 3, engine: engine.name })
      })

      it('breaks mtime ties by path', async () => {
        await files(ws, { 'tie/b.txt': ['', 5_000_000], 'tie/a.txt': ['', 5_000_000] })
        expect((await call('glob', { pattern: 'tie/*' })).text).toBe('tie/a.txt\ntie/b.txt')
      })

      it('matches relative to path, and * stays in one directory', async () => {
        expect((await call('glob', { pattern: '*.ts' })).text).toBe('old.ts')
        expect((await call('glob', { pattern: '*.ts', path: 'src' })).text).toBe('src/new.ts\nsrc/mid.ts')
        expect((await call('glob', { pattern: '**/*.{js,md}' })).text).toBe('src/deep/x.js\nREADME.md')
      })

      it('accepts an absolute pattern inside the workspace', async () => {
        expect((await call('glob', { pattern: join(ws, 'src', '*.ts') })).text).toBe('src/new.ts\nsrc/mid.ts')
      })

      it('skips .git and node_modules, unless path names them', async () => {
        expect((await call('glob', { pattern: '**/index.ts' })).text).toBe('No files match "**/index.ts" in ".".')
        expect((await call('glob', { pattern: '**/*.ts', path: 'node_modules' })).text).toBe('node_modules/pkg/index.ts')
      })

      it('uses the configured ignore list', async () => {
        const h = await createHost()
        try {
          await h.mount(toolSearch, { ignore: [], ripgrep: engine.ripgrep })
          const r = await h.callTool('glob', { pattern: '**/*.ts', hidden: true }, { cwd: ws })
          expect(textOf(r).split('\n').sort()).toEqual([
            '.git/config.ts',
            'node_modules/pkg/index.ts',
            'old.ts',
            'src/mid.ts',
            'src/new.ts',
            'src/node_modules/inner.ts',
          ])
        } finally {
          await h.dispose()
        }
      })

      it('says when nothing matches', async () => {
        const r = await call('glob', { pattern: '**/*.py', path: 'src' })
        expect(r.isError).toBe(false)
        expect(r.text).toBe('No files match "**/*.py" in "src".')
        expect((await call('glob', { pattern: 'nowhere/*.ts' })).text).toBe('No files match "nowhere/*.ts" in ".".')
      })

      it('caps the list at 100 with a notice naming the total', async () => {
        const many: Record<string, [string, number]> = {}
        for (let i = 0; i < 130; i++) many[`many/f${String(i).padStart(3, '0')}.txt`] = ['', 1_000_000 + i]
        await files(ws, many)
        const r = await call('glob', { pattern: 'many/*.txt' })
        const [list, notice] = r.text.split('\n\n')
        expect(list.split('\n')).toHaveLength(100)
        expect(list.split('\n')[0]).toBe('many/f129.txt')
        expect(notice).toBe('(Showing 100 of 130 files, newest first. Narrow the pattern or the path to see the others.)')
        expect(r.meta).toEqual({ pattern: 'many/*.txt', path: '.', total: 130, shown: 100, engine: engine.name })
      })

      it('refuses a missing path or a file as path', async () => {
        expect((await call('glob', { pattern: '*', path: 'missing' })).text).toBe('Error: path not found: "missing" (paths are relative to the workspace root)')
        expect((await call('glob', { pattern: '*', path: 'old.ts' })).text).toBe(
          'Error: "old.ts" is not a directory; glob\'s path is the directory to search in',
        )
      })
    })

    describe('grep', () => {
      beforeEach(async () => {
        await files(ws, {
          'b.ts': 'const x = 1\nTODO: fix\n',
          'a.ts': 'nothing\n// todo later\r\nTODO again\n',
          'src/c.md': 'TODO in docs\n',
          'bin.dat': Buffer.from([0x54, 0x4f, 0x44, 0x4f, 0, 1, 2]),
          '.git/HEAD': 'TODO in git\n',
          'node_modules/m/index.js': 'TODO in deps\n',
        })
      })

      it('returns file:line: text in path order, skipping binary files, .git and node_modules', async () => {
        const r = await call('grep', { pattern: 'TODO' })
        expect(r.isError).toBe(false)
        expect(r.text).toBe('a.ts:3: TODO again\nb.ts:2: TODO: fix\nsrc/c.md:1: TODO in docs')
        expect(r.meta).toMatchObject({ matches: 3, files: 3, cut: false, binarySkipped: 1 })
      })

      it('matches case-insensitively and with regex syntax', async () => {
        expect((await call('grep', { pattern: 'todo', ignore_case: true, path: 'a.ts' })).text).toBe('a.ts:2: // todo later\na.ts:3: TODO again')
        expect((await call('grep', { pattern: '^const \\w+ = \\d$' })).text).toBe('b.ts:1: const x = 1')
        expect((await call('grep', { pattern: 'x \\= 1' }, ws, 'worker')).text).toBe('b.ts:1: const x = 1') // valid only without the u flag: the worker's
      })

      it('filters by glob: by name at any depth without a slash, by path with one', async () => {
        expect((await call('grep', { pattern: 'TODO', glob: '*.md' })).text).toBe('src/c.md:1: TODO in docs')
        expect((await call('grep', { pattern: 'TODO', glob: 'src/*.md' })).text).toBe('src/c.md:1: TODO in docs')
        expect((await call('grep', { pattern: 'TODO', glob: '*.{ts,js}' })).text).toBe('a.ts:3: TODO again\nb.ts:2: TODO: fix')
      })

      it('searches one file or one directory', async () => {
        expect((await call('grep', { pattern: 'TODO', path: 'src' })).text).toBe('src/c.md:1: TODO in docs')
        expect((await call('grep', { pattern: 'TODO', path: 'b.ts' })).text).toBe('b.ts:2: TODO: fix')
        expect((await call('grep', { pattern: 'TODO', path: 'node_modules' })).text).toBe('node_modules/m/index.js:1: TODO in deps')
      })

      it('says when nothing matches, and when the file named is binary', async () => {
        expect((await call('grep', { pattern: 'absent' })).text).toBe('No matches for /absent/ in ".".')
        expect((await call('grep', { pattern: 'x', glob: '*.md', ignore_case: true })).text).toBe('No matches for /x/i in "." (glob "*.md").')
        expect((await call('grep', { pattern: 'TODO', path: 'bin.dat' })).text).toBe(
          'No matches for /TODO/ in "bin.dat".\n("bin.dat" is a binary file; grep searches text files only.)',
        )
      })

      it('reports an invalid regular expression', async () => {
        const r = await call('grep', { pattern: '(unclosed' })
        expect(r.isError).toBe(true)
        expect(r.text).toMatch(/^Error: invalid regular expression "\(unclosed": /)
      })

      it('past 250 matches, shows the first and the last and keeps them all as an artifact `read` pages through', async () => {
        const hits = Array.from({ length: 300 }, (_, i) => `hit ${i + 1}`)
        await files(ws, { 'many/hits.txt': hits.map(hit => `${hit}\n`).join('') })
        const r = await call('grep', { pattern: '^hit', path: 'many' })
        const lines = r.text.split('\n')
        expect(lines).toHaveLength(251)
        expect(lines[124]).toBe('many/hits.txt:125: hit 125')
        const notice =
          /^\[… lines 126-175 not shown \(\d+ characters\)\. The whole output is kept as (artifact:\/\/\S+): read it with `read` \(path "\1", offset 126\)\.\]$/.exec(
            lines[125],
          )!
        expect(notice).not.toBeNull()
        expect(lines[126]).toBe('many/hits.txt:176: hit 176')
        expect(lines[250]).toBe('many/hits.txt:300: hit 300')
        expect(r.meta).toMatchObject({ matches: 300, cut: false, artifact: notice[1] })
        const whole = await host.root.tools.artifacts.read({ callId: 'reader', agent: host.agent(ws) }, notice[1])
        expect(whole).toBe(hits.map((hit, i) => `many/hits.txt:${i + 1}: ${hit}`).join('\n'))
      })

      it('without a session, stops at 250 matches with a notice', async () => {
        await files(ws, { 'many/hits.txt': Array.from({ length: 300 }, (_, i) => `hit ${i + 1}\n`).join('') })
        const h = await createHost()
        try {
          await h.mount(toolSearch, { root: ws, ripgrep: engine.ripgrep })
          const result = await h.ctx.tools.execute({
            callId: 'no-session',
            name: 'grep',
            arguments: { pattern: '^hit', path: 'many' },
            signal: new AbortController().signal,
          })
          const [list, notice] = textOf(result).split('\n\n')
          expect(list.split('\n')).toHaveLength(250)
          expect(list.split('\n')[249]).toBe('many/hits.txt:250: hit 250')
          expect(notice).toBe('(Showing the first 250 matches; there are more. Narrow the pattern, the path or the glob to see the others.)')
          expect(result.meta).toMatchObject({ matches: 250, cut: true })
        } finally {
          await h.dispose()
        }
      })

      it('does not announce a cut at exactly the cap', async () => {
        await files(ws, { 'exact/hits.txt': Array.from({ length: 250 }, () => 'hit\n').join('') })
        const r = await call('grep', { pattern: 'hit', path: 'exact' })
        expect(r.text.split('\n')).toHaveLength(250)
        expect(r.meta).toMatchObject({ cut: false })
      })

      it('cuts matching lines at 2000 bytes without splitting a character', async () => {
        await files(ws, { 'wide/w.txt': `needle ${'é'.repeat(1500)}\n` })
        const r = await call('grep', { pattern: 'needle', path: 'wide' })
        const line = r.text
        const text = line.slice('wide/w.txt:1: '.length, -'... (line truncated to 2000 bytes)'.length)
        expect(line.endsWith('... (line truncated to 2000 bytes)')).toBe(true)
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(2000)
        expect(Buffer.byteLength(text)).toBeGreaterThan(1997)
        expect(text).not.toContain('\uFFFD')
      })

      it('honours the configured caps', async () => {
        const h = await createHost()
        try {
          await h.mount(toolSearch, { grepMaxMatches: 1, grepMaxLineBytes: 5, globMaxResults: 1, ripgrep: engine.ripgrep })
          expect(textOf(await h.callTool('grep', { pattern: 'TODO', glob: '*.ts' }, { cwd: ws }))).toMatch(
            /^a\.ts:3: TODO \.\.\. \(line truncated to 5 bytes\)\n\[… line 2 not shown \(\d+ characters\)\. The whole output is kept as artifact:\/\/testkit-call-\d+:/,
          )
          expect(textOf(await h.callTool('glob', { pattern: '*.ts' }, { cwd: ws }))).toMatch(/\n\n\(Showing 1 of 2 files, newest first\./)
        } finally {
          await h.dispose()
        }
      })

      it('searches files of any size: one over 16 MiB block by block, a line across two blocks whole', async () => {
        const block = 16 * 1024 * 1024
        const filler = 'filler line é\n' // 15 bytes: the block boundary falls inside the needle's line
        const head = filler.repeat(Math.floor(block / 15))
        await files(ws, {
          'big/large.log': `${'filler line\n'.repeat(200_000)}needle at the end\n`,
          'huge/over.log': `${head}needle across the boundary ${'x'.repeat(40)}\r\n${filler.repeat(1000)}last needle`,
        })
        expect((await call('grep', { pattern: 'needle', path: 'big' })).text).toBe('big/large.log:200001: needle at the end')
        const n = Math.floor(block / 15) + 1
        expect((await call('grep', { pattern: 'needle', path: 'huge' })).text).toBe(
          `huge/over.log:${n}: needle across the boundary ${'x'.repeat(40)}\nhuge/over.log:${n + 1001}: last needle`,
        )
      }, 60_000)

      it('finds the same lines reading a file block by block as whole, whatever the encoding', async () => {
        // Past the first 8 KiB (read at once, for the binary test), blocks of a few bytes split characters and lines.
        const text = `${'padding\r\n'.repeat(1000)}first é line\r\nsecond 😀 needle\nthird\r\n\nneedle at the end`
        const utf16 = (bigEndian: boolean) => {
          const bytes = Buffer.from(`\uFEFF${text}`, 'utf16le')
          return bigEndian ? bytes.swap16() : bytes
        }
        await files(ws, { 'enc/utf8.txt': `\uFEFF${text}`, 'enc/le.txt': utf16(false), 'enc/be.txt': utf16(true) })
        const workers = new ScanWorkers()
        try {
          const run = (blockBytes: number) =>
            workers.run(grepJob(plainWalk(join(ws, 'enc'), 'enc', ws), 'é|😀|needle|third', { maxMatches: 100, blockBytes }), new AbortController().signal)
          const whole = await run(1 << 20)
          expect(whole.lines).toEqual(
            ['be', 'le', 'utf8'].flatMap(name =>
              ['1001: first é line', '1002: second 😀 needle', '1003: third', '1005: needle at the end'].map(line => `enc/${name}.txt:${line}`),
            ),
          )
          for (const blockBytes of [1, 2, 3, 5, 7]) expect((await run(blockBytes)).lines, `blocks of ${blockBytes} bytes`).toEqual(whole.lines)
        } finally {
          workers.close()
        }
      })
    })

    describe('ignore files and hidden files', () => {
      it('skips what .gitignore ignores, so ignored files cannot fill the match cap', async () => {
        const noise = Array.from({ length: 300 }, () => 'needle\n').join('')
        await files(ws, {
          '.gitignore': 'dist/\n.venv/\n*.log\n',
          'dist/bundle.js': noise,
          'build.log': noise,
          '.venv/lib/site.py': 'needle\n',
          'src/main.ts': 'const x = 1\nneedle()\n',
        })
        const r = await call('grep', { pattern: 'needle' })
        expect(r.text).toBe('src/main.ts:2: needle()')
        // The worker counts what it skipped in its meta always; ripgrep's engine only for an empty answer (where the model reads it).
        expect(r.meta).toMatchObject({ matches: 1, cut: false, ...(engine.name === 'worker' && { ignoredSkipped: 2, hiddenSkipped: 2 }) })
        expect((await call('glob', { pattern: '**/*' })).text).toBe('src/main.ts')
      })

      it('searches ignored files with no_ignore: true, and says what it skipped when nothing matched', async () => {
        await files(ws, { '.gitignore': 'dist/\n*.log\n', 'dist/a.js': 'needle\n', 'b.log': 'needle\n', 'c.ts': '' })
        expect((await call('grep', { pattern: 'needle' })).text).toBe(
          'No matches for /needle/ in ".".\n(Skipped 2 ignored entries (no_ignore: true includes them) and 1 hidden entry (hidden: true includes them).)',
        )
        expect((await call('grep', { pattern: 'needle', no_ignore: true })).text).toBe('b.log:1: needle\ndist/a.js:1: needle')
        expect((await call('glob', { pattern: '**/*.js' })).text).toBe(
          'No files match "**/*.js" in ".".\n(Skipped 2 ignored entries (no_ignore: true includes them) and 1 hidden entry (hidden: true includes them).)',
        )
        expect((await call('glob', { pattern: '**/*.js', no_ignore: true })).text).toBe('dist/a.js')
      })

      it("reads .gitignore at every level with git's semantics: relative to its folder, negations, directories only", async () => {
        await files(ws, {
          '.gitignore': '*.log\nbuild/\nout\n',
          'a.log': 'hit\n',
          'sub/.gitignore': '!keep.log\n/local.txt\n',
          'sub/keep.log': 'hit\n',
          'sub/drop.log': 'hit\n',
          'sub/local.txt': 'hit\n',
          'sub/deeper/local.txt': 'hit\n',
          'local.txt': 'hit\n',
          'build/x.txt': 'hit\n',
          'pkg/build': 'hit\n', // a file: `build/` ignores directories only
          'pkg/out/y.txt': 'hit\n',
          'keep/.gitignore': '!build/\n', // re-includes a directory a parent's file ignores
          'keep/build/z.txt': 'hit\n',
        })
        expect((await call('grep', { pattern: 'hit' })).text.split('\n')).toEqual([
          'keep/build/z.txt:1: hit',
          'local.txt:1: hit',
          'pkg/build:1: hit',
          'sub/deeper/local.txt:1: hit',
          'sub/keep.log:1: hit',
        ])
      })

      it('applies the ignore files above the path searched, but searches a path that names an ignored directory', async () => {
        await files(ws, { '.gitignore': '*.log\ndist/\n', 'sub/a.log': 'hit\n', 'sub/b.txt': 'hit\n', 'dist/c.js': 'hit\n', 'dist/d.log': 'hit\n' })
        expect((await call('grep', { pattern: 'hit', path: 'sub' })).text).toBe('sub/b.txt:1: hit')
        expect((await call('grep', { pattern: 'hit', path: 'dist' }, ws, 'worker')).text).toBe('dist/c.js:1: hit') // inside what a pattern above ignores: the worker's
        expect((await call('glob', { pattern: 'sub/*' })).text).toBe('sub/b.txt')
      })

      it('treats a repository nested in the walk as git does: the enclosing .gitignore and exclude stop at it, .ignore does not', async () => {
        await files(ws, {
          '.git/HEAD': 'ref: refs/heads/main\n',
          '.git/info/exclude': 'excluded.txt\n',
          '.gitignore': '*.tmp\n',
          '.ignore': 'dot-ignored.txt\n',
          'a.tmp': 'hit\n',
          'excluded.txt': 'hit\n',
          'vendor/lib/.git/HEAD': 'ref: refs/heads/main\n',
          'vendor/lib/.git/info/exclude': 'own-exclude.txt\n',
          'vendor/lib/a.tmp': 'hit\n',
          'vendor/lib/excluded.txt': 'hit\n',
          'vendor/lib/own-exclude.txt': 'hit\n',
          'vendor/lib/dot-ignored.txt': 'hit\n',
          'vendor/lib/.gitignore': '*.gen\n',
          'vendor/lib/deep/x.gen': 'hit\n',
          'vendor/lib/deep/y.txt': 'hit\n',
          'vendor/other/a.tmp': 'hit\n',
        })
        expect((await call('grep', { pattern: 'hit' })).text).toBe('vendor/lib/a.tmp:1: hit\nvendor/lib/deep/y.txt:1: hit\nvendor/lib/excluded.txt:1: hit')
        expect((await call('glob', { pattern: 'vendor/**' })).text.split('\n').sort()).toEqual([
          'vendor/lib/a.tmp',
          'vendor/lib/deep/y.txt',
          'vendor/lib/excluded.txt',
        ])
      })

      it("honours ripgrep's .rgignore files, which win over .ignore", async () => {
        await files(ws, {
          '.rgignore': 'a.txt\n!b.txt\n',
          '.ignore': '!a.txt\nb.txt\nc.txt\n',
          'a.txt': 'hit\n',
          'b.txt': 'hit\n',
          'c.txt': 'hit\n',
          'sub/.rgignore': 'd.txt\n',
          'sub/d.txt': 'hit\n',
          'sub/e.txt': 'hit\n',
        })
        expect((await call('grep', { pattern: 'hit' })).text).toBe('b.txt:1: hit\nsub/e.txt:1: hit')
      })

      it('honours .ignore files, which win over .gitignore', async () => {
        await files(ws, {
          '.ignore': 'generated/\n!keep.tmp\n',
          '.gitignore': '*.tmp\n',
          'generated/g.ts': 'hit\n',
          'keep.tmp': 'hit\n',
          'other.tmp': 'hit\n',
          'src/.ignore': 'fixtures\n',
          'src/fixtures/f.ts': 'hit\n',
          'src/s.ts': 'hit\n',
        })
        expect((await call('grep', { pattern: 'hit' })).text).toBe('keep.tmp:1: hit\nsrc/s.ts:1: hit')
      })

      it('honours .git/info/exclude and the global excludes file', async () => {
        await files(ws, {
          '.git/info/exclude': '# local\nnotes.md\n',
          '.git/HEAD': 'ref: refs/heads/main\n',
          'notes.md': 'hit\n',
          'scratch.bak': 'hit\n',
          'sub/deep.bak': 'hit\n',
          'main.ts': 'hit\n',
        })
        await files(join(base, 'xdg'), { 'git/ignore': '*.bak\n' })
        expect((await call('grep', { pattern: 'hit', path: 'sub' })).text).toBe(
          'No matches for /hit/ in "sub".\n(Skipped 1 ignored entry (no_ignore: true includes them).)',
        )
        expect((await call('grep', { pattern: 'hit' })).text).toBe('main.ts:1: hit')
        // core.excludesFile, when git's config sets it, replaces the default file.
        await files(join(base, 'home'), { '.gitconfig': '[user]\n\tname = x\n[core]\n\texcludesFile = ~/my-ignore\n', 'my-ignore': 'main.ts\n' })
        expect((await call('grep', { pattern: 'hit' })).text).toBe('scratch.bak:1: hit\nsub/deep.bak:1: hit')
      })

      it('skips hidden files and directories unless hidden: true, and .git and node_modules even then', async () => {
        await files(ws, {
          '.env': 'needle\n',
          '.config/tool.ts': 'needle\n',
          'src/.cache/x.ts': 'needle\n',
          'src/a.ts': 'needle\n',
          '.git/config': 'needle\n',
          'node_modules/m/i.ts': 'needle\n',
        })
        expect((await call('grep', { pattern: 'needle' })).text).toBe('src/a.ts:1: needle')
        expect((await call('grep', { pattern: 'needle', hidden: true })).text).toBe(
          '.config/tool.ts:1: needle\n.env:1: needle\nsrc/.cache/x.ts:1: needle\nsrc/a.ts:1: needle',
        )
        expect((await call('glob', { pattern: '**/*.ts' })).text).toBe('src/a.ts')
        expect((await call('glob', { pattern: '**/*.ts', hidden: true })).text.split('\n').sort()).toEqual(['.config/tool.ts', 'src/.cache/x.ts', 'src/a.ts'])
        expect((await call('grep', { pattern: 'needle', path: '.env' })).text).toBe('.env:1: needle') // named explicitly
      })

      it('reads UTF-16 files with a byte-order mark (little- and big-endian) and drops a UTF-8 mark', async () => {
        const utf16 = (text: string, bigEndian: boolean) => {
          const bytes = Buffer.from(`\uFEFF${text}`, 'utf16le')
          return bigEndian ? bytes.swap16() : bytes
        }
        await files(ws, {
          'enc/le.txt': utf16('first line\r\nneedle é 😀\r\n', false),
          'enc/be.txt': utf16('needle in big-endian\n', true),
          'enc/bom8.txt': Buffer.from('\uFEFFneedle after a UTF-8 mark\n'),
          'enc/unmarked16.txt': Buffer.from('needle without a mark\n', 'utf16le'), // full of NULs: binary
        })
        expect((await call('grep', { pattern: '^needle', path: 'enc' })).text).toBe(
          'enc/be.txt:1: needle in big-endian\nenc/bom8.txt:1: needle after a UTF-8 mark\nenc/le.txt:2: needle é 😀',
        )
        expect((await call('grep', { pattern: '😀$', path: 'enc/le.txt' })).text).toBe('enc/le.txt:2: needle é 😀')
        expect((await call('grep', { pattern: 'needle', path: 'enc/unmarked16.txt' })).text).toBe(
          'No matches for /needle/ in "enc/unmarked16.txt".\n("enc/unmarked16.txt" is a binary file; grep searches text files only.)',
        )
      })

      it('skips binary files met in the walk and counts them', async () => {
        await files(ws, { 'img.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65]), 'a.txt': 'needle\n' })
        const r = await call('grep', { pattern: 'needle' })
        expect(r.text).toBe('a.txt:1: needle')
        expect(r.meta).toMatchObject({ binarySkipped: 1 })
      })

      it('streams files in the order of their full paths', async () => {
        await files(ws, { 'a/b.ts': 'x\n', 'a-x.ts': 'x\n', 'a.ts': 'x\n', 'a0/c.ts': 'x\n', 'B.ts': 'x\n' })
        expect((await call('grep', { pattern: 'x' })).text).toBe('B.ts:1: x\na-x.ts:1: x\na.ts:1: x\na/b.ts:1: x\na0/c.ts:1: x')
      })
    })

    describe('confinement', () => {
      const outsideError = /^Error: path ".*" is outside the workspace/

      beforeEach(async () => {
        await files(outside, { 'secret.ts': 'SECRET token\n' })
        await files(ws, { 'in.ts': 'inside token\n' })
        await symlink(outside, join(ws, 'link-dir'))
        await symlink(join(outside, 'secret.ts'), join(ws, 'link-file.ts'))
      })

      it('refuses glob paths and patterns that leave the workspace', async () => {
        for (const args of [
          { pattern: '*', path: '..' },
          { pattern: '*', path: '../outside' },
          { pattern: '*', path: outside },
          { pattern: '*', path: 'link-dir' },
          { pattern: '../outside/*' },
          { pattern: join(outside, '*.ts') },
          { pattern: 'link-dir/*.ts' },
        ]) {
          const r = await call('glob', args)
          expect(r.isError, JSON.stringify(args)).toBe(true)
          expect(r.text, JSON.stringify(args)).toMatch(outsideError)
        }
      })

      it('refuses grep paths that leave the workspace', async () => {
        for (const path of ['..', '../outside/secret.ts', outside, join(outside, 'secret.ts'), 'link-dir', 'link-file.ts']) {
          const r = await call('grep', { pattern: 'SECRET', path })
          expect(r.isError, path).toBe(true)
          expect(r.text, path).toMatch(outsideError)
        }
      })

      it('neither lists nor searches symlinks that lead outside during a walk', async () => {
        expect((await call('glob', { pattern: '**/*.ts' })).text).toBe('in.ts')
        expect((await call('grep', { pattern: 'token' })).text).toBe('in.ts:1: inside token')
      })

      it('follows a symlinked file that stays inside, but never enters symlinked directories', async () => {
        await files(ws, { 'real/inner.ts': 'inner token\n' })
        await symlink(join(ws, 'real', 'inner.ts'), join(ws, 'alias.ts'))
        await symlink(join(ws, 'real'), join(ws, 'alias-dir'))
        expect((await call('grep', { pattern: 'inner' })).text).toBe('alias.ts:1: inner token\nreal/inner.ts:1: inner token')
        expect((await call('glob', { pattern: '**/inner.ts' })).text).toBe('real/inner.ts')
        expect((await call('glob', { pattern: '*.ts', path: 'alias-dir' })).text).toBe('alias-dir/inner.ts')
      })
    })

    describe('lifecycle', () => {
      it('leaves nothing behind after dispose', async () => {
        await files(ws, { 'a.ts': 'x\n' })
        await call('glob', { pattern: '**/*' })
        await call('grep', { pattern: 'x' })
        await mounted.dispose()
        await host.assertZeroResidue(mounted)
        expect(textOf(await host.callTool('grep', { pattern: 'x' }, { cwd: ws }))).toContain('unknown tool "grep"')
      })
    })
  })
}
