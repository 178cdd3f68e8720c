import { mkdir, mkdtemp, realpath, rm, symlink, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { compileGlob, splitGlob } from '../src/pattern.ts'

const GLOB_TEXT =
  'Use `glob` to find files by name, not `find` or `ls -R` in a shell. Patterns are relative to `path` (default: the workspace root): `**` matches any number of directories, `*` and `?` match within one name, and `{a,b}` and `[abc]` work, so `**/*.ts` finds every TypeScript file and `*.ts` only those directly in `path`. Results are the newest files first, at most 100. `.git` and `node_modules` are skipped.'
const GREP_TEXT =
  'Use `grep` to search file contents, not `grep` or `rg` in a shell. `pattern` is a JavaScript regular expression, matched line by line; narrow the search with `path` (a directory or one file) and `glob` (`*.ts` matches file names at any depth). Results read `file:line: text`, in path order, at most 250 lines; binary files are skipped. `.git` and `node_modules` are skipped.'

type Host = Awaited<ReturnType<typeof createHost>>
type Mounted = Awaited<ReturnType<Host['mount']>>

let host: Host
let mounted: Mounted
let base: string
let ws: string
let outside: string

const textOf = (r: { content: readonly { type: string; text?: string }[] }) => r.content.map(b => (b.type === 'text' ? b.text : '')).join('')

async function call(name: string, args: Record<string, unknown>, cwd = ws) {
  const result = await host.callTool(name, args, { cwd })
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
  host = await createHost()
  mounted = await host.mount(toolSearch)
})

afterEach(async () => {
  await host.dispose()
  await rm(base, { recursive: true, force: true })
})

describe('what the model sees', () => {
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
    expect(Object.keys((delta.tools[1].parameters as any).properties)).toEqual(['pattern', 'path', 'glob', 'ignore_case'])
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
      expect(glob.text).toContain('at most 7. `dist` is skipped.')
      expect(grep.text).toContain('at most 9 lines; binary files are skipped. `dist` is skipped.')
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
    expect(matches('a/**/b/**', 'a/b')).toBe(false)
  })

  it('never backtracks: *a*a*a*a*b against long names of a', () => {
    const matcher = compileGlob('*a*a*a*a*b')
    expect(matcher.test('a'.repeat(100))).toBe(false)
    expect(matcher.test('a'.repeat(20_000))).toBe(false)
    expect(matcher.test(`${'a'.repeat(20_000)}b`)).toBe(true)
    expect(compileGlob('**/*a*a*a*a*b').test(`${'a/'.repeat(2000)}${'a'.repeat(5000)}`)).toBe(false)
    expect(compileGlob(`${'{a,'.repeat(50)}b${'}'.repeat(50)}*`).test('a'.repeat(1000))).toBe(true)
  })

  it('splits the literal leading directories off', () => {
    expect(splitGlob('src/**/*.ts')).toEqual({ base: 'src', rest: '**/*.ts' })
    expect(splitGlob('*.ts')).toEqual({ base: '', rest: '*.ts' })
    expect(splitGlob('/abs/dir/*.ts')).toEqual({ base: '/abs/dir', rest: '*.ts' })
    expect(splitGlob('a/b/c.txt')).toEqual({ base: 'a/b', rest: 'c.txt' })
  })
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
    expect(r.meta).toEqual({ pattern: '**/*.ts', path: '.', total: 3, shown: 3 })
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
      await h.mount(toolSearch, { ignore: [] })
      const r = await h.callTool('glob', { pattern: '**/*.ts' }, { cwd: ws })
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
    expect(r.meta).toEqual({ pattern: 'many/*.txt', path: '.', total: 130, shown: 100 })
  })

  it('refuses a missing path or a file as path', async () => {
    expect((await call('glob', { pattern: '*', path: 'missing' })).text).toBe('Error: path not found: "missing" (paths are relative to the workspace root)')
    expect((await call('glob', { pattern: '*', path: 'old.ts' })).text).toBe('Error: "old.ts" is not a directory; glob\'s path is the directory to search in')
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
    expect((await call('grep', { pattern: 'x \\= 1' })).text).toBe('b.ts:1: const x = 1') // valid only without the u flag
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

  it('stops at 250 matches with a notice', async () => {
    await files(ws, { 'many/hits.txt': Array.from({ length: 300 }, (_, i) => `hit ${i + 1}\n`).join('') })
    const r = await call('grep', { pattern: '^hit', path: 'many' })
    const [list, notice] = r.text.split('\n\n')
    expect(list.split('\n')).toHaveLength(250)
    expect(list.split('\n')[249]).toBe('many/hits.txt:250: hit 250')
    expect(notice).toBe('(Showing the first 250 matches; there are more. Narrow the pattern, the path or the glob to see the others.)')
    expect(r.meta).toMatchObject({ matches: 250, cut: true })
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
      await h.mount(toolSearch, { grepMaxMatches: 1, grepMaxLineBytes: 5, globMaxResults: 1 })
      expect(textOf(await h.callTool('grep', { pattern: 'TODO', glob: '*.ts' }, { cwd: ws }))).toBe(
        'a.ts:3: TODO ... (line truncated to 5 bytes)\n\n(Showing the first 1 matches; there are more. Narrow the pattern, the path or the glob to see the others.)',
      )
      expect(textOf(await h.callTool('glob', { pattern: '*.ts' }, { cwd: ws }))).toMatch(/\n\n\(Showing 1 of 2 files, newest first\./)
    } finally {
      await h.dispose()
    }
  })

  it('searches a large file (beyond the line cap) and skips files over 16 MiB', async () => {
    await files(ws, {
      'big/large.log': `${'filler line\n'.repeat(200_000)}needle at the end\n`,
      'huge/over.log': Buffer.alloc(16 * 1024 * 1024 + 1, 0x61),
    })
    expect((await call('grep', { pattern: 'needle', path: 'big' })).text).toBe('big/large.log:200001: needle at the end')
    expect((await call('grep', { pattern: 'zzz', path: 'huge' })).text).toBe('No matches for /zzz/ in "huge".\n(Skipped 1 file larger than 16 MiB.)')
  })
})

describe('bounded search', () => {
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

  it('stops a catastrophic regular expression at the timeout, with partial results, and the host stays responsive', async () => {
    const h = await createHost()
    try {
      await h.mount(toolSearch, { timeoutMs: 2000 })
      await files(ws, { 'a-first.txt': 'aa\n', 'evil.txt': `${'a'.repeat(50_000)}!\n`, 'z-last.txt': 'aaa\n' })
      let ticks = 0
      const interval = setInterval(() => ticks++, 50)
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
        'a-first.txt:1: aa\n\n(grep timed out after 2000 ms and was stopped while searching "evil.txt": the results are partial. A pattern with nested quantifiers such as (a+)+ can take exponential time on one line; simplify it, or narrow the path or the glob.)',
      )
      expect(r.meta).toMatchObject({ matches: 1, files: 1, timedOut: true })
      expect(elapsed).toBeGreaterThanOrEqual(1900)
      expect(elapsed).toBeLessThan(2000 + 10_000) // the timeout plus generous slack; it ran for 30 s+ before
      expect(ticks).toBeGreaterThan(10) // ~40 expected: the event loop was free during the search
      // The stopped worker is not reused: the next search runs in a fresh one.
      expect(textOf(await h.callTool('grep', { pattern: '^a+$', path: 'z-last.txt' }, { cwd: ws }))).toBe('z-last.txt:1: aaa')
    } finally {
      await h.dispose()
    }
  }, 30_000)

  it('stops the worker when the call is aborted', async () => {
    await files(ws, { 'evil.txt': `${'a'.repeat(50_000)}!\n`, 'ok.txt': 'fine!\n' })
    const terminate = vi.spyOn(Worker.prototype, 'terminate')
    try {
      const controller = new AbortController()
      setTimeout(() => controller.abort(), 300)
      const started = Date.now()
      const r = await host.callTool('grep', { pattern: '(a+)+$' }, { cwd: ws, signal: controller.signal })
      expect(r.isError).toBe(true)
      expect(Date.now() - started).toBeLessThan(5000)
      await vi.waitFor(() => expect(terminate).toHaveBeenCalled())
    } finally {
      terminate.mockRestore()
    }
    expect(textOf(await call('grep', { pattern: '!$', path: 'ok.txt' }))).toBe('ok.txt:1: fine!')
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
