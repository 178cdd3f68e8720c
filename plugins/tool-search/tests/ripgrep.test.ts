// The ripgrep engine against the worker: the same answers on a generated tree that has
// everything the two could disagree on, the searches it leaves to the worker, its
// config key, and rg stopped at the timeout or on abort. Skipped when rg is not on PATH
// (the shared behaviour suite in tool-search.test.ts runs on the worker either way).
import { chmod, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { RipgrepEngine } from '../src/rg-engine.ts'
import { installedRipgrep } from '../src/ripgrep.ts'
import { ScanWorkers } from '../src/scan.ts'
import { grepJob, plainWalk } from './jobs.ts'

const RG = await installedRipgrep()

type Host = Awaited<ReturnType<typeof createHost>>
let base: string
let ws: string
let worker: Host
let ripgrep: Host
const savedEnv = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME }

const textOf = (r: { content: readonly { type: string; text?: string }[] }) => r.content.map(b => (b.type === 'text' ? b.text : '')).join('')

async function files(root: string, spec: Record<string, string | Buffer>) {
  for (const [path, content] of Object.entries(spec)) {
    await mkdir(dirname(join(root, path)), { recursive: true })
    await writeFile(join(root, path), content)
  }
}

/** One call through both engines: the text the model reads, and the meta. */
async function both(name: string, args: Record<string, unknown>, cwd = ws) {
  const [w, r] = await Promise.all([worker.callTool(name, args, { cwd }), ripgrep.callTool(name, args, { cwd })])
  // Each call keeps its long output under its own id.
  const text = (result: typeof w) => textOf(result).replace(/artifact:\/\/\S+?(?=[)"])/g, 'artifact://…')
  return { worker: { text: text(w), meta: w.meta as Record<string, unknown> }, ripgrep: { text: text(r), meta: r.meta as Record<string, unknown> } }
}

/**
 * The meta both engines agree on: all but the engine, binary files (ripgrep's engine
 * counts those with a match) and, unless the answer is empty, the ignored and hidden
 * entries (ripgrep's engine counts them for an empty answer, where the model reads them).
 */
const shared = (meta: Record<string, unknown>) => {
  const { engine: _engine, binarySkipped: _binary, artifact: _artifact, ignoredSkipped, hiddenSkipped, ...rest } = meta
  const empty = meta.matches === 0 || meta.total === 0
  return empty ? { ...rest, ignoredSkipped, hiddenSkipped } : rest
}

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'loom-tool-search-rg-')))
  ws = join(base, 'ws')
  await mkdir(ws)
  process.env.HOME = join(base, 'home')
  process.env.XDG_CONFIG_HOME = join(base, 'xdg')
  worker = await createHost()
  ripgrep = await createHost()
  await worker.mount(toolSearch, { ripgrep: 'never' })
  await ripgrep.mount(toolSearch, { ripgrep: RG ?? 'never' })
})

afterEach(async () => {
  for (const [key, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  await worker.dispose()
  await ripgrep.dispose()
  await rm(base, { recursive: true, force: true })
})

/** A tree with what the engines could disagree on. */
async function generateTree() {
  const needles = (n: number) => Array.from({ length: n }, (_, i) => `needle ${i + 1}\n`).join('')
  const utf16 = (text: string, bigEndian: boolean) => {
    const bytes = Buffer.from(`\uFEFF${text}`, 'utf16le')
    return bigEndian ? bytes.swap16() : bytes
  }
  await files(ws, {
    // ignore files at several levels, with negations, directories only, anchors, and each kind
    '.gitignore': 'dist/\n*.log\n!keep.log\nbuild\n/top-only.txt\nout/*\n**/gen/**\n/coverage\nlib/**\n!.env\n!.config/\n',
    '.git/HEAD': 'ref: refs/heads/main\n',
    '.git/info/exclude': 'excluded.txt\n',
    '.ignore': 'ignored-by-dot-ignore.txt\n!also-kept.log\n',
    '.rgignore': 'ignored-by-rgignore.txt\n',
    'excluded.txt': 'needle excluded\n',
    'ignored-by-dot-ignore.txt': 'needle\n',
    'ignored-by-rgignore.txt': 'needle\n',
    'top-only.txt': 'needle top\n',
    'sub/top-only.txt': 'needle sub\n',
    'keep.log': 'needle kept\n',
    'also-kept.log': 'needle kept too\n',
    'other.log': 'needle\n',
    'dist/a.js': 'needle dist\n',
    'pkg/build/out.js': 'needle build\n',
    // patterns with a slash, for searches below the folder of their file
    'out/c.txt': 'needle out\n',
    'x/gen/d.txt': 'needle gen\n',
    'coverage/e.txt': 'needle coverage\n',
    'src/coverage/f.txt': 'needle not anchored here\n',
    'lib/sub/g.txt': 'needle lib\n',
    'src/.gitignore': '*.gen.ts\n!important.gen.ts\n',
    'src/a.gen.ts': 'needle generated\n',
    'src/important.gen.ts': 'needle important\n',
    'src/deep/.gitignore': '/local\n',
    'src/deep/local/x.ts': 'needle local\n',
    'src/deep/other/local/y.ts': 'export const needle = 1\n',
    // a repository inside the repository: the enclosing .gitignore and exclude stop at it
    'vendor/lib/.git/HEAD': 'ref: refs/heads/main\n',
    'vendor/lib/.git/info/exclude': 'own-exclude.txt\n',
    'vendor/lib/kept.log': 'needle in a nested repository\n',
    'vendor/lib/own-exclude.txt': 'needle\n',
    'vendor/lib/excluded.txt': 'needle\n',
    'vendor/lib/ignored-by-dot-ignore.txt': 'needle\n',
    // hidden entries (some re-included by a negation, or of a file type searched for), and the names always skipped
    '.env': 'needle=secret\n',
    '.notes.md': 'needle notes\n',
    'src/.draft.md': 'needle draft\n',
    'docs/guide.md': 'needle guide\n',
    '.config/tool.ts': 'needle config\n',
    'src/.cache/c.ts': 'needle cache\n',
    'node_modules/pkg/index.js': 'needle dependency\n',
    'src/node_modules/z.js': 'needle nested dependency\n',
    // binary files: a NUL at once, a NUL past the first 8 KiB (text: the worker's test), control bytes
    'img.png': Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0]), Buffer.from('needle in binary\n')]),
    'late-nul.txt': Buffer.concat([Buffer.from(`${'text line\n'.repeat(1000)}`), Buffer.from([0]), Buffer.from('\nneedle after a NUL\n')]),
    'control.bin': Buffer.concat([Buffer.alloc(200, 0x01), Buffer.from('\nneedle among control bytes\n')]),
    // encodings, line ends, invalid UTF-8
    'utf16le.txt': utf16('first\r\nneedle é 😀\r\n', false),
    'utf16be.txt': utf16('needle big-endian\n', true),
    'bom8.txt': Buffer.from('\uFEFFneedle marked\n'),
    'latin1.txt': Buffer.from([...Buffer.from('caf'), 0xe9, ...Buffer.from(' needle\n'), 0xc3, 0x28, ...Buffer.from('x needle\n')]),
    'crlf.txt': 'needle \r\nneedle\r\nneedle\tx\r\nlast needle',
    'mid-cr.txt': 'needle\rx\nneedle \rx\n',
    // long lines, many matches, names that sort in surprising ways
    'long.txt': `needle ${'é'.repeat(3000)}\nshort needle\n`,
    'many/m.txt': needles(600),
    'a-x.ts': 'needle\n',
    'a.ts': 'needle\n',
    'a/b.ts': 'needle\n',
    'B.ts': 'needle\n',
    'ünï/çødé.ts': 'needle ünï\n',
    'a b/c d.txt': 'needle spaced\n',
    'empty.txt': '',
  })
  await files(join(base, 'outside'), { 'secret.txt': 'needle outside\n' })
  await symlink(join(ws, 'src/deep/other/local/y.ts'), join(ws, 'alias.ts'))
  await symlink(join(ws, 'src'), join(ws, 'linkdir'))
  await symlink(join(base, 'outside/secret.txt'), join(ws, 'outside-link.txt'))
  await symlink(join(ws, 'missing'), join(ws, 'dangling.txt'))
}

describe.skipIf(RG === undefined)(`identical results${RG === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
  beforeEach(generateTree)

  const GREPS: Record<string, unknown>[] = [
    { pattern: 'needle' },
    { pattern: 'needle', hidden: true },
    { pattern: 'needle', no_ignore: true },
    { pattern: 'needle', hidden: true, no_ignore: true },
    { pattern: 'NEEDLE \\d', ignore_case: true },
    { pattern: 'needle\\s*$' }, // \s can match the \r of a CRLF line: such lines are tested again
    { pattern: 'needle.x' },
    { pattern: 'caf. needle' }, // invalid UTF-8 read as U+FFFD
    { pattern: '\\uFFFD' },
    { pattern: '^needle$' },
    { pattern: 'needle', glob: '*.ts' },
    { pattern: 'needle', glob: 'src/**/*.ts' },
    { pattern: 'needle', glob: '{a,b}*' },
    { pattern: 'needle', path: 'src' },
    { pattern: 'needle', path: 'src/deep/other' },
    { pattern: 'needle', path: 'src/deep' },
    { pattern: 'needle', path: 'out' },
    { pattern: 'needle', path: 'x/gen' },
    { pattern: 'needle', path: 'coverage' },
    { pattern: 'needle', path: 'lib/sub' },
    { pattern: 'needle', path: 'dist' },
    { pattern: 'needle', path: 'node_modules' },
    { pattern: 'needle', path: '.config' },
    { pattern: 'needle', path: 'src/.cache', glob: '*.ts' },
    { pattern: 'needle', path: 'utf16le.txt' },
    { pattern: 'needle', path: 'img.png' },
    { pattern: 'needle', path: 'late-nul.txt' },
    { pattern: 'needle', path: 'control.bin' },
    { pattern: 'needle', path: 'alias.ts' },
    { pattern: 'absent' },
    { pattern: 'absent', path: 'src' },
    { pattern: 'absent', hidden: true },
    { pattern: 'absent', glob: '*.md' },
    { pattern: 'needle', glob: '*.md' },
    { pattern: 'needle', glob: '*.md', hidden: true },
    { pattern: 'needle \\d+', path: 'many' },
  ]

  /** Searches inside a folder a pattern above ignores: the worker answers them (see "what ripgrep leaves to the worker"). */
  const INSIDE_IGNORED = ['dist', 'coverage', 'lib/sub']

  it('grep answers the same, through ripgrep', async () => {
    for (const args of GREPS) {
      const r = await both('grep', args)
      expect(r.ripgrep.text, JSON.stringify(args)).toBe(r.worker.text)
      expect(shared(r.ripgrep.meta), JSON.stringify(args)).toEqual(shared(r.worker.meta))
      expect(r.ripgrep.meta.engine, JSON.stringify(args)).toBe(INSIDE_IGNORED.includes(args.path as string) ? 'worker' : 'ripgrep')
    }
  }, 120_000)

  it('without a session, stops at the same first matches', async () => {
    const h = await createHost()
    const w = await createHost()
    try {
      await h.mount(toolSearch, { root: ws, ripgrep: RG })
      await w.mount(toolSearch, { root: ws, ripgrep: 'never' })
      const run = (host: Host) => host.ctx.tools.execute({ callId: 'c', name: 'grep', arguments: { pattern: 'needle' }, signal: new AbortController().signal })
      const [a, b] = [await run(h), await run(w)]
      expect(textOf(a)).toBe(textOf(b))
      expect(textOf(a)).toContain('(Showing the first 250 matches; there are more.')
      expect(a.meta).toMatchObject({ engine: 'ripgrep', cut: true })
    } finally {
      await h.dispose()
      await w.dispose()
    }
  })

  const GLOBS: Record<string, unknown>[] = [
    { pattern: '**/*' },
    { pattern: '**/*', hidden: true },
    { pattern: '**/*', no_ignore: true },
    { pattern: '**/*.ts' },
    { pattern: '*' },
    { pattern: '*.log', no_ignore: true },
    { pattern: 'src/**' },
    { pattern: 'src/*/*' },
    { pattern: '**/*.{ts,js}', hidden: true, no_ignore: true },
    { pattern: '**/*.py' },
    { pattern: '**/*.md' },
    { pattern: '**/*.md', hidden: true },
    { pattern: '*.py', path: 'src' },
    { pattern: '*', path: '.config' },
    { pattern: '*', path: 'out' },
    { pattern: '**/*', path: 'lib' },
    { pattern: '**/*', path: 'src' },
    { pattern: 'node_modules/**' },
  ]

  it("shell syntax in a pattern, a glob or a folder name reaches rg as text (it is started through the launcher's shell)", async () => {
    const folder = "it's $(touch PWNED1) dir"
    await files(ws, { [`${folder}/a \`touch PWNED2\`.txt`]: "say 'it's' $(touch PWNED3) here\n" })
    const grep = await both('grep', { pattern: "'it's' \\$\\(touch PWNED3\\)", path: folder })
    expect(grep.ripgrep.meta.engine).toBe('ripgrep')
    expect(grep.ripgrep.text).toBe(`${folder}/a \`touch PWNED2\`.txt:1: say 'it's' $(touch PWNED3) here`)
    expect(grep.ripgrep.text).toBe(grep.worker.text)
    const glob = await both('glob', { pattern: '*`touch*', path: folder })
    expect(glob.ripgrep.meta.engine).toBe('ripgrep')
    expect(glob.ripgrep.text).toBe(`${folder}/a \`touch PWNED2\`.txt`)
    for (const at of [ws, join(ws, folder), process.cwd()]) expect((await readdir(at)).filter(name => name.startsWith('PWNED'))).toEqual([])
  })

  it('glob answers the same, through ripgrep', async () => {
    for (const args of GLOBS) {
      const r = await both('glob', args)
      expect(r.ripgrep.text, JSON.stringify(args)).toBe(r.worker.text)
      expect(shared(r.ripgrep.meta), JSON.stringify(args)).toEqual(shared(r.worker.meta))
      expect(r.ripgrep.meta.engine, JSON.stringify(args)).toBe('ripgrep')
    }
  }, 60_000)
})

describe.skipIf(RG === undefined)(`what ripgrep leaves to the worker${RG === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
  it('patterns without an exact Rust translation, and globs that could backtrack', async () => {
    await files(ws, { 'banana.ts': 'price: 10 USD\nabab\nFoo bar\nx = 1\n' })
    for (const args of [
      { pattern: '(?<=price: )\\d+' },
      { pattern: '(ab)\\1' },
      { pattern: '\\bfoo\\b', ignore_case: true },
      { pattern: 'x \\= 1' }, // valid only without the u flag
      { pattern: '\\p{Lu}oo' },
      { pattern: 'a', glob: '*a*a*a*.ts' },
    ]) {
      const r = await both('grep', args)
      expect(r.ripgrep.text, JSON.stringify(args)).toBe(r.worker.text)
      expect(r.ripgrep.text, JSON.stringify(args)).not.toMatch(/^No matches/)
      expect(r.ripgrep.meta.engine, JSON.stringify(args)).toBe('worker')
    }
  })

  it('a search inside a folder a pattern above ignores (the worker leaves that pattern out below it)', async () => {
    await files(ws, { '.gitignore': 'build/\n', 'build/a.txt': 'needle\n', 'build/x/build/b.txt': 'needle\n' })
    const r = await both('grep', { pattern: 'needle', path: 'build' })
    expect(r.ripgrep.text).toBe('build/a.txt:1: needle\nbuild/x/build/b.txt:1: needle')
    expect(r.ripgrep.meta.engine).toBe('worker')
  })

  it('ignore files above the workspace root (or the repository) when searching below it, which ripgrep would read', async () => {
    await files(base, { '.ignore': 'b.txt\n', '.gitignore': 'c.txt\n' }) // above the workspace, which is not a repository
    await files(ws, { 'sub/b.txt': 'needle\n', 'sub/c.txt': 'needle\n' })
    let r = await both('grep', { pattern: 'needle', path: 'sub' })
    expect(r.ripgrep.text).toBe('sub/b.txt:1: needle\nsub/c.txt:1: needle')
    expect(r.ripgrep.meta.engine).toBe('worker')
    r = await both('grep', { pattern: 'needle' }) // from the top: ripgrep is told to read none above it
    expect(r.ripgrep.text).toBe('sub/b.txt:1: needle\nsub/c.txt:1: needle')
    expect(r.ripgrep.meta.engine).toBe('ripgrep')
  })

  it('a global excludes file with anchored patterns, when searching below the top', async () => {
    await files(join(base, 'xdg'), { 'git/ignore': '/sub/b.txt\n' })
    await files(ws, { 'sub/b.txt': 'needle\n', 'sub/c.txt': 'needle\n' })
    let r = await both('grep', { pattern: 'needle', path: 'sub' })
    expect(r.ripgrep.text).toBe('sub/c.txt:1: needle')
    expect(r.ripgrep.meta.engine).toBe('worker')
    r = await both('grep', { pattern: 'needle' })
    expect(r.ripgrep.text).toBe('sub/c.txt:1: needle')
    expect(r.ripgrep.meta.engine).toBe('ripgrep')
  })

  it('output past its bound: the worker searches, and stops at the cap in path order', async () => {
    await files(ws, { 'many.txt': 'needle\n'.repeat(2000) })
    const workers = new ScanWorkers()
    try {
      const engine = new RipgrepEngine(RG!, workers, 1024)
      const job = grepJob(plainWalk(ws, '.', ws), 'needle', { maxMatches: 10, blockBytes: 1 << 24 })
      expect(await engine.run(job, new AbortController().signal)).toBeUndefined()
      const all = await new RipgrepEngine(RG!, workers).run(job, new AbortController().signal)
      expect(all).toMatchObject({ engine: 'ripgrep', cut: true, lines: Array.from({ length: 10 }, (_, i) => `many.txt:${i + 1}: needle`) })
    } finally {
      workers.close()
    }
  })
})

describe('the ripgrep config key', () => {
  it('refuses a path that is not an executable file, naming the key', async () => {
    const h = await createHost()
    try {
      await expect(h.mount(toolSearch, { ripgrep: join(base, 'no-rg') })).rejects.toThrow(
        `ripgrep: "${join(base, 'no-rg')}" is not an executable file; set "auto" (rg on PATH), "never" (the search worker only) or the absolute path of an rg binary`,
      )
    } finally {
      await h.dispose()
    }
  })

  it('fails a search with a configured binary that is not ripgrep, naming the key', async () => {
    const fake = join(base, 'not-rg')
    await writeFile(fake, '#!/bin/sh\necho "grep (GNU grep) 3.8"\n')
    await chmod(fake, 0o755)
    await files(ws, { 'a.txt': 'needle\n' })
    const h = await createHost()
    try {
      await h.mount(toolSearch, { ripgrep: fake })
      const r = await h.callTool('grep', { pattern: 'needle' }, { cwd: ws })
      expect(r.isError).toBe(true)
      expect(textOf(r)).toBe(
        `Error: ripgrep: "${fake}" does not run as ripgrep 11 or later (its --version says otherwise); set "auto", "never" or another binary`,
      )
    } finally {
      await h.dispose()
    }
  })

  it('keeps the guidance and the schemas the same whichever engine searches (the cached prefix)', async () => {
    const [a, b] = [await createHost(), await createHost()]
    try {
      const [w, r] = [await a.mount(toolSearch, { ripgrep: 'never' }), await b.mount(toolSearch)]
      expect(await r.delta({ cwd: ws })).toEqual(await w.delta({ cwd: ws }))
    } finally {
      await a.dispose()
      await b.dispose()
    }
  })

  it.skipIf(RG === undefined)('auto (the default) searches with the rg on PATH; never with the worker', async () => {
    await files(ws, { 'a.txt': 'needle\n' })
    const h = await createHost()
    try {
      await h.mount(toolSearch)
      expect((await h.callTool('grep', { pattern: 'needle' }, { cwd: ws })).meta).toMatchObject({ engine: 'ripgrep' })
      expect((await h.callTool('glob', { pattern: '*' }, { cwd: ws })).meta).toMatchObject({ engine: 'ripgrep' })
    } finally {
      await h.dispose()
    }
    expect((await worker.callTool('grep', { pattern: 'needle' }, { cwd: ws })).meta).toMatchObject({ engine: 'worker' })
  })
})

describe.skipIf(RG === undefined)(`ripgrep stopped${RG === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
  /** An rg that hangs (as a search of a huge tree would) when its arguments hold SLOWMARKER, and writes its pid. */
  async function slowRipgrep() {
    const script = join(base, 'slow-rg')
    const pidFile = join(base, 'slow-rg.pid')
    await writeFile(script, `#!/bin/sh\ncase "$PWD $*" in\n  *SLOWMARKER*) echo $$ > '${pidFile}'; exec sleep 600 ;;\nesac\nexec '${RG}' "$@"\n`)
    await chmod(script, 0o755)
    /** The hanging rg's pid, once it runs. */
    const started = () =>
      vi.waitFor(
        async () => {
          const pid = Number(await readFile(pidFile, 'utf8'))
          if (!(pid > 0)) throw new Error('the pid is not written yet')
          return pid
        },
        { timeout: 10_000, interval: 20 },
      )
    /** Resolves once that process is gone; removes its pid file for the next one. */
    const gone = async () => {
      const pid = await started()
      await vi.waitFor(() => expect(() => process.kill(pid, 0)).toThrow(), { timeout: 10_000 })
      await rm(pidFile)
    }
    return { script, started, gone }
  }

  it('grep: at the timeout, rg is killed and the call answers with the timeout notice', async () => {
    const slow = await slowRipgrep()
    const h = await createHost()
    try {
      await h.mount(toolSearch, { ripgrep: slow.script, timeoutMs: 1000 })
      await files(ws, { 'a.txt': 'x\n' })
      const r = await h.callTool('grep', { pattern: 'SLOWMARKER' }, { cwd: ws })
      expect(r.isError).toBe(false)
      expect(textOf(r)).toBe(
        'No matches for /SLOWMARKER/ in ".".\n(grep timed out after 1000 ms and was stopped: the results are partial. A pattern with nested quantifiers such as (a+)+ can take exponential time on one line; simplify it, or narrow the path or the glob.)',
      )
      expect(r.meta).toMatchObject({ engine: 'ripgrep', timedOut: true })
      await slow.gone()
    } finally {
      await h.dispose()
    }
  }, 30_000)

  it('grep and glob: an aborted call kills rg', async () => {
    const slow = await slowRipgrep()
    const h = await createHost()
    try {
      await h.mount(toolSearch, { ripgrep: slow.script })
      await files(ws, { 'SLOWMARKER/a.txt': 'x\n' })
      for (const [name, args] of [
        ['grep', { pattern: 'SLOWMARKER' }],
        ['glob', { pattern: '*', path: 'SLOWMARKER' }],
      ] as const) {
        const controller = new AbortController()
        const call = h.callTool(name, args, { cwd: ws, signal: controller.signal })
        await slow.started()
        controller.abort()
        expect((await call).isError, name).toBe(true)
        await slow.gone()
      }
    } finally {
      await h.dispose()
    }
  }, 60_000)
})
