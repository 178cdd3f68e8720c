import { execFileSync } from 'node:child_process'
import { chmod, link, lstat, mkdir, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import * as toolFs from '../src/index.ts'
import { makeDirs, textOf } from './helpers.ts'

const READ_TEXT =
  'Use `read` to look at a file, not `cat`, `head` or `tail` in a shell. It shows numbered lines like `cat -n`: the number and the tab before each line are not part of the file. One call shows at most 2000 lines from `offset` (1-based, default 1); when a file is longer, the footer tells you the offset to continue from. Lines longer than 2000 characters are cut. Binary files are refused. A tool output too long to show whole is kept as an artifact: pass its reference (`artifact://...`) as the path to read it the same way.'
const WRITE_TEXT =
  'Use `write` to create a file or to replace all of its content; missing parent directories are created. Read an existing file before you overwrite it, and prefer `edit` for changing part of a file: it sends only the change.'
const EDIT_TEXT =
  'Use `edit` to change part of a file; read the file first. `old_string` is matched literally (no regex or wildcards), including whitespace and indentation: copy it from `read` output without the line-number prefix. It must occur exactly once; if it occurs several times, add surrounding lines to make it unique, or set `replace_all` to change every occurrence.'

type Host = Awaited<ReturnType<typeof createHost>>
type Mounted = Awaited<ReturnType<Host['mount']>>

let host: Host
let mounted: Mounted
let ws: string
let outside: string
let cleanup: () => Promise<void>

const lines = (n: number, make = (i: number) => `line ${i}`) => Array.from({ length: n }, (_, i) => `${make(i + 1)}\n`).join('')
const numbered = (from: number, texts: string[]) => texts.map((t, i) => `${String(from + i).padStart(6)}\t${t}\n`).join('')

async function call(name: string, args: Record<string, unknown>, cwd = ws) {
  const result = await host.callTool(name, args, { cwd })
  return { ...result, text: textOf(result) }
}

beforeEach(async () => {
  ;({ ws, outside, cleanup } = await makeDirs())
  host = await createHost()
  mounted = await host.mount(toolFs)
})

afterEach(async () => {
  await host.dispose()
  await cleanup()
})

describe('what the model sees', () => {
  it('adds three static guidance sections in the first-party band and the three tools', async () => {
    const delta = await mounted.delta({ cwd: ws })
    expect(delta.sections.map(s => [s.name, s.order, s.stability])).toEqual([
      ['tool:read', 100, 'static'],
      ['tool:write', 101, 'static'],
      ['tool:edit', 102, 'static'],
    ])
    expect(delta.sections.map(s => s.text)).toEqual([READ_TEXT, WRITE_TEXT, EDIT_TEXT])
    expect(delta.sections.map(s => s.rendered)).toEqual([READ_TEXT, WRITE_TEXT, EDIT_TEXT])
    expect(delta.tools.map(t => t.name)).toEqual(['edit', 'read', 'write'])
    expect(delta.contexts).toEqual([])
    expect(delta.variables).toEqual([])
  })

  it('publishes the documented schemas', async () => {
    const { tools } = await mounted.delta({ cwd: ws })
    const byName = Object.fromEntries(tools.map(t => [t.name, t.parameters as any]))
    expect(byName.read.required).toEqual(['path'])
    expect(Object.keys(byName.read.properties)).toEqual(['path', 'offset', 'limit'])
    expect(byName.write.required).toEqual(['path', 'content'])
    expect(byName.edit.required).toEqual(['path', 'old_string', 'new_string'])
    expect(Object.keys(byName.edit.properties)).toEqual(['path', 'old_string', 'new_string', 'replace_all'])
    for (const t of tools) expect((t.parameters as any).additionalProperties).toBe(false)
  })

  it('states the configured limits in the section text', async () => {
    const host2 = await createHost()
    try {
      const m = await host2.mount(toolFs, { readLimit: 50, maxLineLength: 80 })
      const delta = await m.delta({ cwd: ws })
      expect(delta.sections[0].text).toContain('at most 50 lines')
      expect(delta.sections[0].text).toContain('longer than 80 characters')
    } finally {
      await host2.dispose()
    }
  })

  it('runs read as parallel-safe, write and edit as exclusive', () => {
    expect(mounted.ctx.tools.executionMode({ name: 'read', arguments: { path: 'a' } })).toBe('parallel')
    expect(mounted.ctx.tools.executionMode({ name: 'write', arguments: { path: 'a', content: '' } })).toBe('exclusive')
    expect(mounted.ctx.tools.executionMode({ name: 'edit', arguments: { path: 'a', old_string: 'x', new_string: 'y' } })).toBe('exclusive')
  })

  it('works in a real turn: the model calls read and sees the numbered lines', async () => {
    await writeFile(join(ws, 'hello.txt'), 'hello\n')
    host.scriptedModel([{ toolCalls: [{ name: 'read', arguments: { path: 'hello.txt' } }] }, 'done'])
    const run = await host.run('show me hello.txt', { cwd: ws })
    expect(run.text).toBe('done')
    expect(run.requests).toHaveLength(2)
    const snapshot = host.snapshot(run.requests[1])
    expect(snapshot).toContain(JSON.stringify(`${numbered(1, ['hello'])}\n(End of file: showed lines 1-1 of 1.)`).slice(1, -1))
    expect(host.snapshot(run.requests[0])).toContain(JSON.stringify(READ_TEXT).slice(1, -1))
  })
})

describe('read', () => {
  it('numbers lines like cat -n and ends with an end-of-file footer', async () => {
    await writeFile(join(ws, 'a.txt'), 'alpha\nbeta\n')
    const r = await call('read', { path: 'a.txt' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe(`${numbered(1, ['alpha', 'beta'])}\n(End of file: showed lines 1-2 of 2.)`)
    expect(r.meta).toEqual({ path: 'a.txt', startLine: 1, endLine: 2, totalLines: 2, stop: 'eof', truncatedLines: 0 })
  })

  it('counts a last line without a newline and drops the \\r of CRLF lines', async () => {
    await writeFile(join(ws, 'crlf.txt'), 'one\r\ntwo\r\nthree')
    const r = await call('read', { path: 'crlf.txt' })
    expect(r.text).toBe(`${numbered(1, ['one', 'two', 'three'])}\n(End of file: showed lines 1-3 of 3.)`)
  })

  it('reads from offset for limit lines and says how to continue', async () => {
    await writeFile(join(ws, 'ten.txt'), lines(10))
    const r = await call('read', { path: 'ten.txt', offset: 3, limit: 2 })
    expect(r.text).toBe(`${numbered(3, ['line 3', 'line 4'])}\n(Showing lines 3-4 of 10. To read more, call read with offset=5.)`)
    const end = await call('read', { path: 'ten.txt', offset: 9 })
    expect(end.text).toBe(`${numbered(9, ['line 9', 'line 10'])}\n(End of file: showed lines 9-10 of 10.)`)
  })

  it('shows 2000 lines by default and never more, even when asked', async () => {
    await writeFile(
      join(ws, 'long.txt'),
      lines(2500, i => `${i}`),
    )
    for (const args of [{ path: 'long.txt' }, { path: 'long.txt', limit: 5000 }]) {
      const r = await call('read', args)
      const body = r.text.split('\n\n(')[0]
      expect(body.split('\n').filter(Boolean)).toHaveLength(2000)
      expect(r.text.endsWith('\n\n(Showing lines 1-2000 of 2500. To read more, call read with offset=2001.)')).toBe(true)
    }
    const rest = await call('read', { path: 'long.txt', offset: 2001 })
    expect(rest.text.startsWith(numbered(2001, ['2001']))).toBe(true)
    expect(rest.text.endsWith('(End of file: showed lines 2001-2500 of 2500.)')).toBe(true)
  })

  it('cuts lines longer than 2000 characters with a visible suffix', async () => {
    await writeFile(join(ws, 'wide.txt'), `${'x'.repeat(2500)}\nshort\n`)
    const r = await call('read', { path: 'wide.txt' })
    expect(r.text).toBe(`${numbered(1, [`${'x'.repeat(2000)}... (line truncated to 2000 chars)`, 'short'])}\n(End of file: showed lines 1-2 of 2.)`)
    expect((r.meta as any).truncatedLines).toBe(1)
  })

  it('caps the output at 51200 bytes with a notice giving the offset to continue from', async () => {
    await writeFile(
      join(ws, 'wide-lines.txt'),
      lines(2000, i => `${i}:${'y'.repeat(100)}`),
    )
    const r = await call('read', { path: 'wide-lines.txt' })
    const [body, footer] = r.text.split('\n\n(')
    const shown = body.split('\n').length
    expect(Buffer.byteLength(`${body}\n`)).toBeLessThanOrEqual(51200)
    expect(Buffer.byteLength(`${body}\n`) + 120).toBeGreaterThan(51200) // filled up to the cap
    expect(`(${footer}`).toBe(`(Output capped at 51200 bytes: showing lines 1-${shown} of 2000. To read more, call read with offset=${shown + 1}.)`)
    const next = await call('read', { path: 'wide-lines.txt', offset: shown + 1 })
    expect(next.text.startsWith(`${String(shown + 1).padStart(6)}\t${shown + 1}:`)).toBe(true)
  })

  it('honours readLimit, maxLineLength and maxBytes from the config', async () => {
    const h = await createHost()
    try {
      await h.mount(toolFs, { readLimit: 3, maxLineLength: 4, maxBytes: 30 })
      await writeFile(join(ws, 'c.txt'), 'abcdefgh\n1\n2\n3\n4\n')
      const r = await h.callTool('read', { path: 'c.txt' }, { cwd: ws })
      expect(textOf(r)).toBe(
        `${numbered(1, ['abcd... (line truncated to 4 chars)'])}\n(Output capped at 30 bytes: showing lines 1-1 of 5. To read more, call read with offset=2.)`,
      )
      const r2 = await h.callTool('read', { path: 'c.txt', offset: 2, limit: 10 }, { cwd: ws })
      expect(textOf(r2)).toBe(`${numbered(2, ['1', '2', '3'])}\n(Showing lines 2-4 of 5. To read more, call read with offset=5.)`)
    } finally {
      await h.dispose()
    }
  })

  it('reports an empty file, and refuses an offset past the end', async () => {
    await writeFile(join(ws, 'empty.txt'), '')
    const empty = await call('read', { path: 'empty.txt' })
    expect(empty.isError).toBe(false)
    expect(empty.text).toBe('(File is empty: "empty.txt" has 0 lines.)')
    await writeFile(join(ws, 'three.txt'), lines(3))
    const past = await call('read', { path: 'three.txt', offset: 10 })
    expect(past.isError).toBe(true)
    expect(past.text).toBe('Error: offset 10 is past the end of "three.txt" (3 lines); use an offset from 1 to 3')
  })

  it('refuses binary files with a clear message', async () => {
    await writeFile(join(ws, 'image.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]))
    const r = await call('read', { path: 'image.png' })
    expect(r.isError).toBe(true)
    expect(r.text).toBe('Error: "image.png" is a binary file (12 bytes); only text files can be read or edited')
  })

  it('names a missing file and suggests glob for a directory', async () => {
    const missing = await call('read', { path: 'nope/missing.txt' })
    expect(missing.isError).toBe(true)
    expect(missing.text).toBe('Error: file not found: "nope/missing.txt" (paths are relative to the workspace root)')
    await mkdir(join(ws, 'src'))
    const dir = await call('read', { path: 'src' })
    expect(dir.isError).toBe(true)
    expect(dir.text).toBe('Error: "src" is a directory, not a file; use glob to list its files (e.g. pattern "src/*")')
  })

  it.skipIf(process.platform === 'win32')('refuses a FIFO instead of blocking on it', async () => {
    execFileSync('mkfifo', [join(ws, 'pipe')])
    const r = await call('read', { path: 'pipe' })
    expect(r.text).toBe('Error: "pipe" is not a regular file (a device, socket or pipe); only regular files can be read')
  })

  it('reads the start of a huge file without counting all of it', async () => {
    // 12 MiB: past the 10 MiB line-counting bound. Not counted is seen in the result: no total line count.
    const line = `${'z'.repeat(99)}\n`
    await writeFile(join(ws, 'huge.txt'), line.repeat((12 * 1024 * 1024) / 100))
    const r = await call('read', { path: 'huge.txt', limit: 2 })
    expect(r.text).toBe(`${numbered(1, ['z'.repeat(99), 'z'.repeat(99)])}\n(Showing lines 1-2 of more than 2. To read more, call read with offset=3.)`)
    expect((r.meta as any).totalLines).toBeNull()
  })

  it('holds only the shown part of a huge line', async () => {
    await writeFile(join(ws, 'one-line.txt'), 'q'.repeat(12 * 1024 * 1024))
    const r = await call('read', { path: 'one-line.txt' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe(`${numbered(1, [`${'q'.repeat(2000)}... (line truncated to 2000 chars)`])}\n(End of file: showed lines 1-1 of 1.)`)
  })

  it("resolves paths against the agent's cwd, or the configured root", async () => {
    await writeFile(join(ws, 'where.txt'), 'workspace\n')
    await writeFile(join(outside, 'where.txt'), 'outside\n')
    expect((await call('read', { path: 'where.txt' }, outside)).text).toContain('outside')
    const h = await createHost()
    try {
      await h.mount(toolFs, { root: ws })
      expect(textOf(await h.callTool('read', { path: 'where.txt' }, { cwd: outside }))).toContain('\tworkspace\n')
    } finally {
      await h.dispose()
    }
  })

  it('accepts an absolute path inside the workspace and a symlink that stays inside', async () => {
    await mkdir(join(ws, 'real'))
    await writeFile(join(ws, 'real', 'in.txt'), 'inside\n')
    await symlink(join(ws, 'real'), join(ws, 'alias'))
    expect((await call('read', { path: join(ws, 'real', 'in.txt') })).text).toContain('\tinside\n')
    expect((await call('read', { path: 'alias/in.txt' })).text).toContain('\tinside\n')
    expect((await call('read', { path: 'real/../real/./in.txt' })).text).toContain('\tinside\n')
  })
})

describe('read of an artifact', () => {
  /** Keeps `text` as an artifact of the session `callTool` uses for `cwd`, as a tool with long output does. */
  const keep = async (text: string, cwd = ws) => (await host.root.tools.artifacts.keep({ callId: 'call_long', agent: host.agent(cwd) }, text))!

  it('pages through the artifact like a file, with offset and limit', async () => {
    const reference = await keep(lines(3000).slice(0, -1))
    expect(reference).toBe('artifact://call_long')
    const first = await call('read', { path: reference })
    expect(first.text).toBe(
      `${numbered(
        1,
        Array.from({ length: 2000 }, (_, i) => `line ${i + 1}`),
      )}\n(Showing lines 1-2000 of 3000. To read more, call read with offset=2001.)`,
    )
    const page = await call('read', { path: reference, offset: 2501, limit: 2 })
    expect(page.text).toBe(`${numbered(2501, ['line 2501', 'line 2502'])}\n(Showing lines 2501-2502 of 3000. To read more, call read with offset=2503.)`)
    expect(page.meta).toMatchObject({ path: reference, startLine: 2501, endLine: 2502, totalLines: 3000 })
    const end = await call('read', { path: reference, offset: 3000 })
    expect(end.text).toBe(`${numbered(3000, ['line 3000'])}\n(End of file: showed lines 3000-3000 of 3000.)`)
    expect((await call('read', { path: reference, offset: 3001 })).text).toBe(
      `Error: offset 3001 is past the end of "${reference}" (3000 lines); use an offset from 1 to 3000`,
    )
  })

  it("reads only the calling session's artifacts, and nothing but artifact names", async () => {
    const reference = await keep('mine\n')
    const other = await call('read', { path: reference }, outside)
    expect(other.isError).toBe(true)
    expect(other.text).toMatch(/^Error: artifact:\/\/call_long is not an artifact of this session: .*another session's artifacts cannot be read/)
    for (const path of ['artifact://../x', 'artifact://a/b', 'artifact://']) {
      expect((await call('read', { path })).text).toBe(
        `Error: "${path}" is not an artifact reference: one reads artifact://<name>, exactly as a tool result gave it`,
      )
    }
  })
})

describe('write', () => {
  it('creates parent directories and reports the bytes written', async () => {
    const r = await call('write', { path: 'deep/er/new.txt', content: 'héllo\n' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe('Wrote 7 bytes to "deep/er/new.txt" (new file).')
    expect(r.meta).toEqual({ path: 'deep/er/new.txt', bytes: 7, created: true })
    expect(await readFile(join(ws, 'deep/er/new.txt'), 'utf8')).toBe('héllo\n')
  })

  it('overwrites an existing file and says so', async () => {
    await writeFile(join(ws, 'a.txt'), 'old content')
    const r = await call('write', { path: 'a.txt', content: 'new' })
    expect(r.text).toBe('Wrote 3 bytes to "a.txt" (overwrote the previous 11 bytes).')
    expect(await readFile(join(ws, 'a.txt'), 'utf8')).toBe('new')
  })

  it('writes an empty file', async () => {
    const r = await call('write', { path: 'empty', content: '' })
    expect(r.text).toBe('Wrote 0 bytes to "empty" (new file).')
    expect((await stat(join(ws, 'empty'))).size).toBe(0)
  })

  it('refuses a directory and a path below a file', async () => {
    await mkdir(join(ws, 'dir'))
    const dir = await call('write', { path: 'dir', content: 'x' })
    expect(dir.isError).toBe(true)
    expect(dir.text).toBe('Error: "dir" is a directory; write needs a file path')
    await writeFile(join(ws, 'file'), 'x')
    const below = await call('write', { path: 'file/child.txt', content: 'x' })
    expect(below.isError).toBe(true)
    expect(below.text).toBe('Error: cannot write "file/child.txt": a parent of it is a file, not a directory')
  })
})

describe('edit', () => {
  beforeEach(async () => {
    await writeFile(join(ws, 'code.ts'), 'const a = 1\nconst b = 2\nconst a2 = a + b\n')
  })

  it('replaces a unique literal match', async () => {
    const r = await call('edit', { path: 'code.ts', old_string: 'const b = 2', new_string: 'const b = 3' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe('Edited "code.ts": replaced 1 occurrence (at line 2).')
    expect(await readFile(join(ws, 'code.ts'), 'utf8')).toBe('const a = 1\nconst b = 3\nconst a2 = a + b\n')
  })

  it('refuses an ambiguous match, saying how many it found', async () => {
    const r = await call('edit', { path: 'code.ts', old_string: 'const a', new_string: 'let a' })
    expect(r.isError).toBe(true)
    expect(r.text).toBe(
      'Error: old_string matches 2 times in "code.ts"; it must match exactly once: include more surrounding lines to pick one place, or set replace_all to true to replace all 2',
    )
    expect(await readFile(join(ws, 'code.ts'), 'utf8')).toBe('const a = 1\nconst b = 2\nconst a2 = a + b\n')
  })

  it('replaces every occurrence with replace_all', async () => {
    const r = await call('edit', { path: 'code.ts', old_string: 'const', new_string: 'let', replace_all: true })
    expect(r.text).toBe('Edited "code.ts": replaced 3 occurrences (at lines 1, 2, 3).')
    expect(await readFile(join(ws, 'code.ts'), 'utf8')).toBe('let a = 1\nlet b = 2\nlet a2 = a + b\n')
  })

  it('reports zero matches', async () => {
    const r = await call('edit', { path: 'code.ts', old_string: 'const c', new_string: 'x' })
    expect(r.isError).toBe(true)
    expect(r.text).toBe(
      'Error: old_string was not found in "code.ts" (0 matches); it must match the file\'s text exactly, including whitespace and indentation, without read\'s line-number prefixes; read the file again to copy the current text',
    )
  })

  it('matches and replaces literally: no regex, no $ patterns', async () => {
    await writeFile(join(ws, 'lit.txt'), 'a.c abc (x)\n')
    expect((await call('edit', { path: 'lit.txt', old_string: 'a.c', new_string: '$&$1' })).isError).toBe(false)
    expect(await readFile(join(ws, 'lit.txt'), 'utf8')).toBe('$&$1 abc (x)\n')
    expect((await call('edit', { path: 'lit.txt', old_string: '(x)', new_string: '$`', replace_all: true })).isError).toBe(false)
    expect(await readFile(join(ws, 'lit.txt'), 'utf8')).toBe('$&$1 abc $`\n')
  })

  it('refuses an empty old_string and a no-op', async () => {
    expect((await call('edit', { path: 'code.ts', old_string: '', new_string: 'x' })).text).toBe(
      'Error: old_string is empty; to create a file or replace all of it, use write',
    )
    expect((await call('edit', { path: 'code.ts', old_string: 'a', new_string: 'a' })).text).toBe(
      'Error: old_string and new_string are the same; there is nothing to change',
    )
  })

  it('matches \\n against a CRLF file and keeps its line endings', async () => {
    await writeFile(join(ws, 'win.txt'), 'one\r\ntwo\r\nthree\r\n')
    const r = await call('edit', { path: 'win.txt', old_string: 'one\ntwo', new_string: 'uno\ndos' })
    expect(r.isError).toBe(false)
    expect(await readFile(join(ws, 'win.txt'), 'utf8')).toBe('uno\r\ndos\r\nthree\r\n')
  })

  it('keeps a byte-order mark', async () => {
    await writeFile(join(ws, 'bom.txt'), '\uFEFFhello\n')
    await call('edit', { path: 'bom.txt', old_string: 'hello', new_string: 'bye' })
    expect(await readFile(join(ws, 'bom.txt'), 'utf8')).toBe('\uFEFFbye\n')
  })

  it('refuses binary, non-UTF-8, missing files and directories', async () => {
    await writeFile(join(ws, 'bin'), Buffer.from([1, 2, 0, 3]))
    expect((await call('edit', { path: 'bin', old_string: 'a', new_string: 'b' })).text).toBe(
      'Error: "bin" is a binary file (4 bytes); only text files can be read or edited',
    )
    await writeFile(join(ws, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]))
    expect((await call('edit', { path: 'latin1.txt', old_string: 'caf', new_string: 'x' })).text).toBe(
      'Error: "latin1.txt" is not valid UTF-8 text; edit only changes UTF-8 files (rewrite it with write if you must)',
    )
    expect((await call('edit', { path: 'gone.txt', old_string: 'a', new_string: 'b' })).text).toBe(
      'Error: file not found: "gone.txt" (paths are relative to the workspace root)',
    )
    await mkdir(join(ws, 'd'))
    expect((await call('edit', { path: 'd', old_string: 'a', new_string: 'b' })).text).toContain('is a directory, not a file; use glob')
  })
})

describe('confinement', () => {
  const outsideError = /^Error: path ".*" is outside the workspace/

  beforeEach(async () => {
    await writeFile(join(outside, 'secret.txt'), 'secret\n')
    await symlink(outside, join(ws, 'link-dir'))
    await symlink(join(outside, 'secret.txt'), join(ws, 'link-file'))
    await symlink(join(outside, 'not-yet.txt'), join(ws, 'dangling'))
    await mkdir(join(ws, 'sub'))
  })

  const attacks = () => ['../outside/secret.txt', 'sub/../../outside/secret.txt', join(outside, 'secret.txt'), 'link-dir/secret.txt', 'link-file']

  it('refuses read outside the workspace by .., absolute path or symlink', async () => {
    for (const path of attacks()) {
      const r = await call('read', { path })
      expect(r.isError, path).toBe(true)
      expect(r.text, path).toMatch(outsideError)
      expect(r.text).not.toContain('secret\n')
    }
    expect((await call('read', { path: 'link-file' })).text).toContain(`it resolves through a symlink to "${join(outside, 'secret.txt')}"`)
  })

  it('refuses write outside the workspace, new files and dangling symlinks included', async () => {
    for (const path of [...attacks(), '../outside/new.txt', join(outside, 'new.txt'), 'link-dir/new.txt', 'link-dir/sub/new.txt', 'dangling']) {
      const r = await call('write', { path, content: 'pwned' })
      expect(r.isError, path).toBe(true)
      expect(r.text, path).toMatch(outsideError)
    }
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('secret\n')
    await expect(stat(join(outside, 'new.txt'))).rejects.toThrow()
    await expect(stat(join(outside, 'not-yet.txt'))).rejects.toThrow()
    await expect(stat(join(outside, 'sub'))).rejects.toThrow()
  })

  it('refuses edit outside the workspace', async () => {
    for (const path of attacks()) {
      const r = await call('edit', { path, old_string: 'secret', new_string: 'pwned' })
      expect(r.isError, path).toBe(true)
      expect(r.text, path).toMatch(outsideError)
    }
    expect(await readFile(join(outside, 'secret.txt'), 'utf8')).toBe('secret\n')
  })

  it('refuses a home-relative path', async () => {
    const r = await call('read', { path: '~/.ssh/id_rsa' })
    expect(r.text).toMatch(outsideError)
  })

  it('writes through a dangling symlink that stays inside the workspace', async () => {
    await symlink(join(ws, 'target.txt'), join(ws, 'inner-dangling'))
    const r = await call('write', { path: 'inner-dangling', content: 'ok' })
    expect(r.isError).toBe(false)
    expect(await readFile(join(ws, 'target.txt'), 'utf8')).toBe('ok')
  })
})

describe('hard links and replacement by rename', () => {
  // A pnpm store file seen through node_modules is exactly this: one inode, a name outside the workspace and one inside.
  const STORE = Buffer.from('export const version = "1.0.0"\n// store copy\n')

  beforeEach(async () => {
    await writeFile(join(outside, 'store.js'), STORE)
    await link(join(outside, 'store.js'), join(ws, 'linked.js'))
  })

  it('write replaces a hard-linked file without touching the other name of its inode', async () => {
    expect((await stat(join(ws, 'linked.js'))).nlink).toBe(2)
    const r = await call('write', { path: 'linked.js', content: 'patched\n' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe(`Wrote 8 bytes to "linked.js" (overwrote the previous ${STORE.length} bytes).`)
    expect(await readFile(join(ws, 'linked.js'), 'utf8')).toBe('patched\n')
    expect((await readFile(join(outside, 'store.js'))).equals(STORE)).toBe(true)
    expect((await stat(join(ws, 'linked.js'))).nlink).toBe(1)
    expect((await stat(join(outside, 'store.js'))).nlink).toBe(1)
  })

  it('edit replaces a hard-linked file without touching the other name of its inode', async () => {
    const r = await call('edit', { path: 'linked.js', old_string: '1.0.0', new_string: '2.0.0' })
    expect(r.isError).toBe(false)
    expect(await readFile(join(ws, 'linked.js'), 'utf8')).toBe('export const version = "2.0.0"\n// store copy\n')
    expect((await readFile(join(outside, 'store.js'))).equals(STORE)).toBe(true)
    expect((await stat(join(ws, 'linked.js'))).nlink).toBe(1)
  })

  it.skipIf(process.platform === 'win32')('keeps the file mode', async () => {
    await writeFile(join(ws, 'run.sh'), 'echo one\n')
    await chmod(join(ws, 'run.sh'), 0o751)
    await call('write', { path: 'run.sh', content: 'echo two\n' })
    expect((await stat(join(ws, 'run.sh'))).mode & 0o7777).toBe(0o751)
    await call('edit', { path: 'run.sh', old_string: 'two', new_string: 'three' })
    expect((await stat(join(ws, 'run.sh'))).mode & 0o7777).toBe(0o751)
    expect(await readFile(join(ws, 'run.sh'), 'utf8')).toBe('echo three\n')
  })

  it('leaves no temporary file behind', async () => {
    await call('write', { path: 'a.txt', content: 'a' })
    await call('write', { path: 'a.txt', content: 'b' })
    await call('edit', { path: 'a.txt', old_string: 'b', new_string: 'c' })
    await call('edit', { path: 'a.txt', old_string: 'absent', new_string: 'd' })
    expect((await readdir(ws)).sort()).toEqual(['a.txt', 'linked.js'])
  })

  it('replaces the target of a symlink inside the workspace and keeps the link', async () => {
    await writeFile(join(ws, 'target.txt'), 'one\n')
    await symlink(join(ws, 'target.txt'), join(ws, 'alias.txt'))
    expect((await call('write', { path: 'alias.txt', content: 'two\n' })).isError).toBe(false)
    expect((await call('edit', { path: 'alias.txt', old_string: 'two', new_string: 'three' })).isError).toBe(false)
    expect((await lstat(join(ws, 'alias.txt'))).isSymbolicLink()).toBe(true)
    expect(await readFile(join(ws, 'target.txt'), 'utf8')).toBe('three\n')
  })

  it('still refuses a symlink to the hard-linked store file outside', async () => {
    await symlink(join(outside, 'store.js'), join(ws, 'store-link.js'))
    expect((await call('write', { path: 'store-link.js', content: 'x' })).text).toMatch(/^Error: path "store-link.js" is outside the workspace/)
    expect((await call('edit', { path: 'store-link.js', old_string: '1.0.0', new_string: 'x' })).text).toMatch(
      /^Error: path "store-link.js" is outside the workspace/,
    )
    expect((await readFile(join(outside, 'store.js'))).equals(STORE)).toBe(true)
  })

  it('edits a 20 MB file', async () => {
    const line = `${'w'.repeat(79)}\n` // 80 bytes
    const half = line.repeat(131_072) // 10 MiB
    await writeFile(join(ws, 'big.txt'), `${half}MARKER\n${half}`)
    const r = await call('edit', { path: 'big.txt', old_string: 'MARKER', new_string: 'CHANGED\nTWICE' })
    expect(r.isError).toBe(false)
    expect(r.text).toBe('Edited "big.txt": replaced 1 occurrence (at line 131073).')
    const after = await readFile(join(ws, 'big.txt'))
    expect(after.length).toBe(2 * half.length + 'CHANGED\nTWICE\n'.length)
    expect(after.subarray(half.length, half.length + 14).toString()).toBe('CHANGED\nTWICE\n')
    expect(after.subarray(0, half.length).equals(Buffer.from(half))).toBe(true)
    expect(after.subarray(half.length + 14).equals(Buffer.from(half))).toBe(true)
  })

  it('counts replacement lines across multi-line replacements', async () => {
    await writeFile(join(ws, 'multi.txt'), 'x\nx\nx\n')
    const r = await call('edit', { path: 'multi.txt', old_string: 'x', new_string: 'y\ny', replace_all: true })
    expect(r.text).toBe('Edited "multi.txt": replaced 3 occurrences (at lines 1, 3, 5).')
    expect(await readFile(join(ws, 'multi.txt'), 'utf8')).toBe('y\ny\ny\ny\ny\ny\n')
    const back = await call('edit', { path: 'multi.txt', old_string: 'y\ny\n', new_string: 'z', replace_all: true })
    expect(back.text).toBe('Edited "multi.txt": replaced 3 occurrences (at lines 1, 1, 1).')
    expect(await readFile(join(ws, 'multi.txt'), 'utf8')).toBe('zzz')
  })
})

describe('lifecycle', () => {
  it('leaves nothing behind after dispose', async () => {
    await writeFile(join(ws, 'a.txt'), 'a\n')
    await call('read', { path: 'a.txt' })
    await call('write', { path: 'b.txt', content: 'b' })
    await call('edit', { path: 'b.txt', old_string: 'b', new_string: 'c' })
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
    const gone = await host.callTool('read', { path: 'a.txt' }, { cwd: ws })
    expect(gone.isError).toBe(true)
    expect(textOf(gone)).toContain('unknown tool "read"')
  })
})
