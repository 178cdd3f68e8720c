// The conversation's input without a terminal: keys from bytes, the editing of
// a message, completion, the history file, `@path` attachments, the status line,
// and the prompt driven by keys written to a stand-in terminal.
import type { SessionEvent } from '@loom/session'
import { mkdirSync, mkdtempSync as makeTemporary, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { afterAll, describe, expect, it } from 'vitest'
import { attachMentions, mentions } from '../src/input/attach.ts'
import { complete, sharedPrefix } from '../src/input/complete.ts'
import { historyFile, InputHistory, projectFolder } from '../src/input/history.ts'
import { KeyDecoder } from '../src/input/keys.ts'
import { HistoryWalk, LineBuffer } from '../src/input/line.ts'
import { KeyReader, TerminalPrompt, type TtyInput } from '../src/input/terminal.ts'
import { writePreview } from '../src/present/diff.ts'
import { styler } from '../src/present/term.ts'
import { describeStatus, sessionStatus } from '../src/present/status.ts'
import { clipToWidth, displayWidth } from '../src/present/width.ts'

/** Temporary folders of this file, removed after it. */
const temporary: string[] = []
afterAll(() => {
  for (const folder of temporary.splice(0)) rmSync(folder, { recursive: true, force: true })
})
const mkdtempSync = (prefix: string) => {
  const folder = makeTemporary(prefix)
  temporary.push(folder)
  return folder
}

const names = (decoder: KeyDecoder, chunk: string) => decoder.push(chunk).map(key => (key.text === undefined ? key.name : `${key.name}:${key.text}`))

describe('keys from the bytes a terminal sends', () => {
  it('letters, Enter, Tab, Backspace, control keys, arrows and the editing keys', () => {
    const keys = new KeyDecoder()
    expect(names(keys, 'hé 世\r')).toEqual(['text:hé 世', 'enter'])
    expect(names(keys, 'a\r\nb')).toEqual(['text:a', 'enter', 'text:b'])
    expect(names(keys, '\t\x7f\b\x03\x04\x0c\x15\x17')).toEqual(['tab', 'backspace', 'backspace', 'ctrl-c', 'ctrl-d', 'ctrl-l', 'ctrl-u', 'ctrl-w'])
    expect(names(keys, '\x1b[A\x1b[B\x1b[C\x1b[D\x1bOA\x1b[H\x1b[F\x1b[1~\x1b[4~\x1b[3~')).toEqual([
      'up',
      'down',
      'right',
      'left',
      'up',
      'home',
      'end',
      'home',
      'end',
      'delete',
    ])
    expect(names(keys, '\x1b[1;5C\x1b[1;5D\x1bb\x1bf\x1b\x7f')).toEqual(['word-right', 'word-left', 'word-left', 'word-right', 'word-backspace'])
    // Sequences nobody handles are dropped whole, not typed.
    expect(names(keys, 'x\x1b[5~\x1b[200;1Zy')).toEqual(['text:xy'])
  })

  it('Shift+Enter where the terminal tells it apart (CSI u, modifyOtherKeys), Alt+Enter and Ctrl-J are a new line', () => {
    const keys = new KeyDecoder()
    expect(names(keys, '\x1b[13;2u\x1b[27;2;13~\x1b\r\n')).toEqual(['newline', 'newline', 'newline', 'newline'])
  })

  it('a bracketed paste is one key with its line breaks, even split across chunks', () => {
    const keys = new KeyDecoder()
    expect(names(keys, 'go \x1b[200~line one\r\nline two\rline')).toEqual(['text:go '])
    expect(names(keys, ' three\x1b[20')).toEqual([])
    expect(names(keys, '1~!')).toEqual(['paste:line one\nline two\nline three', 'text:!'])
  })

  it('Esc alone is a key once nothing follows it; a sequence split across chunks is whole', () => {
    const keys = new KeyDecoder()
    expect(names(keys, 'a\x1b')).toEqual(['text:a'])
    expect(keys.waiting).toBe(true)
    expect(keys.flush().map(key => key.name)).toEqual(['escape'])
    expect(names(keys, '\x1b[')).toEqual([])
    expect(names(keys, 'A')).toEqual(['up'])
    expect(names(keys, '\x1b\x1b')).toEqual(['escape'])
    expect(keys.flush().map(key => key.name)).toEqual(['escape'])
  })
})

describe('editing a message', () => {
  it('inserts and deletes at the cursor, a character at a time (a surrogate pair is one)', () => {
    const line = new LineBuffer()
    line.insert('ab😀c')
    line.left()
    line.left()
    expect(line.cursor).toBe(2)
    line.delete()
    expect(line.text).toBe('abc')
    line.end()
    line.insert('😀')
    line.backspace()
    expect(line.text).toBe('abc')
  })

  it('Home, End, Ctrl-U and Ctrl-K act on the line of the cursor; Up and Down move between lines, keeping the column', () => {
    const line = new LineBuffer('first line\nsecond\nthird line')
    expect(line.position()).toEqual({ line: 2, column: 10 })
    expect(line.up()).toBe(true)
    expect(line.position()).toEqual({ line: 1, column: 6 })
    line.home()
    expect(line.position()).toEqual({ line: 1, column: 0 })
    expect(line.up()).toBe(true)
    expect(line.up()).toBe(false)
    line.end()
    line.killToStart()
    expect(line.text).toBe('\nsecond\nthird line')
    expect(line.down()).toBe(true)
    line.killToEnd()
    expect(line.text).toBe('\n\nthird line')
    line.end()
    expect(line.down()).toBe(true)
    expect(line.down()).toBe(false)
  })

  it('word moves and Ctrl-W', () => {
    const line = new LineBuffer('read the notes  ')
    line.wordLeft()
    expect(line.cursor).toBe(9)
    line.end()
    line.deleteWordBefore()
    expect(line.text).toBe('read the ')
    line.home()
    line.wordRight()
    expect(line.cursor).toBe(4)
  })

  it('the history walk keeps the line being typed and comes back to it', () => {
    const walk = new HistoryWalk(['one', 'two'])
    expect(walk.previous('draft')).toBe('two')
    expect(walk.previous('two')).toBe('one')
    expect(walk.previous('one')).toBeUndefined()
    expect(walk.next()).toBe('two')
    expect(walk.next()).toBe('draft')
    expect(walk.next()).toBeUndefined()
  })
})

describe('completion', () => {
  const folders: Record<string, string[]> = {
    '/p': ['notes.txt', 'notebook/', 'src/', '.env', 'README.md'],
    '/p/src': ['main.ts', 'mail.ts'],
  }
  const sources = { commands: ['/help', '/model', '/manifest', '/new'], cwd: '/p', list: (dir: string) => folders[dir] ?? [] }

  it('a slash command at the start of the line', () => {
    expect(complete('/m', 2, sources)).toEqual({ start: 0, end: 2, candidates: ['/manifest', '/model'] })
    expect(complete('/he', 3, sources)?.candidates).toEqual(['/help'])
    expect(complete('/x', 2, sources)).toBeUndefined()
  })

  it('a path, after @ as well; folders end with /, hidden entries only when asked for', () => {
    expect(complete('read no', 7, sources)).toEqual({ start: 5, end: 7, candidates: ['notebook/', 'notes.txt'] })
    expect(complete('look at @src/ma', 15, sources)).toEqual({ start: 8, end: 15, candidates: ['@src/mail.ts', '@src/main.ts'] })
    expect(complete('@.e', 3, sources)?.candidates).toEqual(['@.env'])
    expect(complete('@', 1, sources)?.candidates).toEqual(['@README.md', '@notebook/', '@notes.txt', '@src/'])
    expect(complete('say ', 4, sources)).toBeUndefined()
    expect(sharedPrefix(['@src/mail.ts', '@src/main.ts'])).toBe('@src/mai')
  })
})

describe('the input history', () => {
  it('is kept per project under $LOOM_HOME, readable by its owner only, without a repeat of the last entry or a known secret', () => {
    const base = mkdtempSync(join(tmpdir(), 'loom-history-'))
    mkdirSync(join(base, 'project', '.git'), { recursive: true })
    mkdirSync(join(base, 'project', 'sub'))
    expect(projectFolder(join(base, 'project', 'sub'))).toBe(join(base, 'project'))
    const file = historyFile(join(base, 'home'), join(base, 'project', 'sub'))
    expect(file).toBe(historyFile(join(base, 'home'), join(base, 'project')))
    expect(file.startsWith(join(base, 'home', 'history', 'project-'))).toBe(true)

    const saved = process.env.DEEPSEEK_API_KEY
    process.env.DEEPSEEK_API_KEY = 'sk-history-test-0123456789'
    try {
      const history = new InputHistory(file)
      history.add('first')
      history.add('first')
      history.add('a message\nof two lines')
      history.add('my key is sk-history-test-0123456789')
      history.add('   ')
    } finally {
      if (saved === undefined) delete process.env.DEEPSEEK_API_KEY
      else process.env.DEEPSEEK_API_KEY = saved
    }
    const again = new InputHistory(file)
    expect(again.list()).toEqual(['first', 'a message\nof two lines', expect.stringMatching(/^my key is (?!sk-history)/)])
    expect(statSync(file).mode & 0o777).toBe(0o600)
  })

  it('keeps the last entries only: the file is rewritten when it holds twice as many; a torn line is skipped', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'loom-history-')), 'h.jsonl')
    writeFileSync(file, '"zero"\n{"torn')
    const history = new InputHistory(file, 3)
    for (const entry of ['one', 'two', 'three', 'four', 'five']) history.add(entry)
    expect(history.list()).toEqual(['three', 'four', 'five'])
    expect(readFileSync(file, 'utf8')).toBe('"three"\n"four"\n"five"\n')
    expect(new InputHistory(file, 3).list()).toEqual(['three', 'four', 'five'])
  })

  it('a history that cannot be written stays in memory', () => {
    // Its folder's place is taken by a file: no one, not even root, can create it.
    const dir = mkdtempSync(join(tmpdir(), 'loom-history-'))
    writeFileSync(join(dir, 'history'), '')
    const history = new InputHistory(join(dir, 'history', 'h.jsonl'))
    history.add('kept anyway')
    expect(history.list()).toEqual(['kept anyway'])
  })
})

describe('@path attachments', () => {
  const folder = () => {
    const cwd = mkdtempSync(join(tmpdir(), 'loom-attach-'))
    writeFileSync(join(cwd, 'notes.txt'), 'first line\nsecond line\n')
    writeFileSync(join(cwd, 'big.log'), 'x'.repeat(600))
    writeFileSync(join(cwd, 'image.png'), Buffer.from([0x89, 0x50, 0x00, 0x01]))
    writeFileSync(join(cwd, 'secret.txt'), 'hush\n')
    mkdirSync(join(cwd, 'src'))
    return cwd
  }

  it('names the words that start with @', () => {
    expect(mentions('@a.txt and b@c.d, (@e) @a.txt\n@f')).toEqual(['a.txt', 'f'])
  })

  it('attaches the files after the message; a folder, a binary, a file over the cap and a denied one are notes; other words stay words', async () => {
    const cwd = folder()
    const denied = (path: string) => (path.endsWith('secret.txt') ? 'a test rule' : undefined)
    const result = await attachMentions('see @notes.txt. @src @image.png @big.log @secret.txt @alice', { cwd, denied, maxBytes: 500 })
    expect(result.attached).toEqual([{ path: 'notes.txt', bytes: 23, lines: 2 }])
    expect(result.text).toBe(
      'see @notes.txt. @src @image.png @big.log @secret.txt @alice\n\n<attached-file path="notes.txt">\nfirst line\nsecond line\n</attached-file>',
    )
    expect(result.notes).toEqual([
      '@src is not attached: it is a folder (name a file in it)',
      '@image.png is not attached: it is a binary file',
      '@big.log is not attached: 600 bytes is more than the 500 bytes a file may have; the model can read it in parts with the read tool',
      '@secret.txt is not attached: tools may not read it (a test rule)',
    ])
  })

  it('the files of one message share a budget', async () => {
    const cwd = folder()
    const result = await attachMentions('@big.log @notes.txt', { cwd, denied: () => undefined, maxTotalBytes: 610 })
    expect(result.attached.map(file => file.path)).toEqual(['big.log'])
    expect(result.notes).toEqual(['@notes.txt is not attached: the files of one message may have 610 bytes together, and the ones before it have 600 bytes'])
  })

  it('a message without one is unchanged', async () => {
    expect(await attachMentions('plain', { cwd: folder(), denied: () => undefined })).toEqual({ text: 'plain', attached: [], notes: [] })
  })
})

describe('the status line', () => {
  const event = (type: string, data: unknown, seq = 0) => ({ type, seq, time: 0, data }) as unknown as SessionEvent
  const usage = (inputTokens: number, cacheReadTokens: number, outputTokens: number) =>
    event('assistant/message', { turn: 1, step: 1, message: { role: 'assistant', content: [] }, usage: { inputTokens, cacheReadTokens, outputTokens } })
  const prices = (provider: string) => (provider === 'p' ? { hit: 0.1, miss: 1, output: 2 } : null)

  it('route, the last request against the window, cache hits and cost of the whole session', () => {
    const events = [event('request/context', { provider: 'p', model: 'm', contextWindow: 128_000 }), usage(1000, 3000, 200), usage(500, 4500, 300)]
    const status = sessionStatus(events, { provider: 'p', model: 'm' }, prices)
    expect(status).toEqual({ provider: 'p', model: 'm', contextTokens: 5300, contextWindow: 128_000, cacheHitShare: 7500 / 9000, costUsd: expect.any(Number) })
    expect(status.costUsd).toBeCloseTo((1000 + 300 + 400 + 500 + 450 + 600) / 1e6, 10)
    expect(describeStatus(status)).toBe('p/m · context 5.3k of 128k tokens (4%) · cache hit 83% · $0.0032')
  })

  it('a new session shows its route; an unknown price, no cost; a switched route, no window yet', () => {
    expect(describeStatus(sessionStatus([], { provider: 'p', model: 'm' }, prices))).toBe('p/m')
    const events = [event('request/context', { provider: 'q', model: 'm', contextWindow: 8000 }), usage(100, 0, 10)]
    expect(describeStatus(sessionStatus(events, { provider: 'q', model: 'm' }, prices))).toBe('q/m · context 110 of 8k tokens (1%) · cache hit 0%')
    expect(describeStatus(sessionStatus(events, { provider: 'p', model: 'm' }, prices))).toBe('p/m · context 110 tokens · cache hit 0%')
  })

  it('fits one row: clipped by terminal cells, wide characters counted twice', () => {
    expect(displayWidth('\x1b[2mab世\x1b[22m')).toBe(4)
    expect(clipToWidth('abcdef', 4)).toBe('abc…\x1b[0m')
    expect(clipToWidth('ab世界', 4)).toBe('ab…\x1b[0m')
    expect(clipToWidth('abc', 4)).toBe('abc')
  })
})

describe('a write shown before it is approved', () => {
  const plain = styler({ write: () => {} })

  it('a new file: its size and first lines', () => {
    const content = Array.from({ length: 14 }, (_, i) => `line ${i + 1}`).join('\n') + '\n'
    expect(writePreview('write', { path: 'a.txt', content }, { kind: 'none' }, plain)).toEqual([
      `    a new file, 14 lines, ${Buffer.byteLength(content)} bytes:`,
      ...Array.from({ length: 12 }, (_, i) => `    + line ${i + 1}`),
      '    … 2 more lines',
    ])
  })

  it('an existing file: the diff against what it holds; the same content says so; a hidden one is not shown', () => {
    expect(writePreview('write', { path: 'a.txt', content: 'one\nTWO\n' }, { kind: 'text', text: 'one\ntwo\n' }, plain)).toEqual([
      '    replaces 2 lines, 8 bytes with 2 lines, 8 bytes:',
      '      one',
      '    - two',
      '    + TWO',
    ])
    expect(writePreview('write', { path: 'a.txt', content: 'x' }, { kind: 'text', text: 'x' }, plain)).toEqual([
      '    the same content as the file has now (1 line, 1 byte)',
    ])
    expect(writePreview('write', { path: 'k', content: 'y\n' }, { kind: 'hidden', why: 'tools may not read it' }, plain)).toEqual([
      '    replaces a file (tools may not read it) with 1 line, 2 bytes:',
      '    + y',
    ])
    expect(writePreview('edit', { path: 'a.txt' }, { kind: 'none' }, plain)).toBeUndefined()
  })
})

/** A stand-in terminal: keys written to its input, what the prompt draws collected from its output. */
function fakeTerminal(columns = 40) {
  const input = Object.assign(new PassThrough(), {
    isTTY: true,
    isRaw: false,
    setRawMode(mode: boolean) {
      input.isRaw = mode
    },
  }) as PassThrough & TtyInput & { isRaw: boolean }
  let drawn = ''
  const output = { columns, write: (text: string) => void (drawn += text) }
  const keys = KeyReader.of(input)
  return { input, output, keys, drawn: () => drawn }
}

describe('the prompt, driven by keys', () => {
  const type = (input: PassThrough, ...chunks: string[]) => {
    for (const chunk of chunks) input.write(chunk)
  }

  it('edits a message of several lines (paste, trailing backslash, Shift+Enter) and returns it on Enter, in raw mode meanwhile', async () => {
    const { input, output, keys } = fakeTerminal()
    const prompt = new TerminalPrompt(keys, output, { prompt: '> ', multiline: true })
    const reading = prompt.read({ status: 'p/m' })
    expect(input.isRaw).toBe(true)
    type(input, 'one \\', '\r', '\x1b[200~two\nthree\x1b[201~', '\x1b[13;2ufour', '\r')
    expect(await reading).toEqual({ kind: 'line', text: 'one \ntwo\nthree\nfour' })
    expect(input.isRaw).toBe(false)
  })

  it('Ctrl-C drops a line being typed, and on an empty one says so; Ctrl-D on an empty line ends', async () => {
    const { input, output, keys } = fakeTerminal()
    const prompt = new TerminalPrompt(keys, output, { prompt: '> ' })
    let reading = prompt.read()
    type(input, 'half a thought\x03')
    expect(await reading).toEqual({ kind: 'interrupt', dropped: true })
    reading = prompt.read()
    type(input, '\x03')
    expect(await reading).toEqual({ kind: 'interrupt', dropped: false })
    reading = prompt.read()
    type(input, '\x04')
    expect(await reading).toEqual({ kind: 'end' })
  })

  it('Up recalls the history; Tab completes, and lists the candidates when it cannot add to them', async () => {
    const { input, output, keys, drawn } = fakeTerminal()
    const prompt = new TerminalPrompt(keys, output, {
      prompt: '> ',
      history: () => ['older', 'newer'],
      completion: { commands: () => ['/model', '/manifest'], cwd: '/' },
    })
    let reading = prompt.read()
    type(input, '\x1b[A', '\x1b[A', '\r')
    expect(await reading).toEqual({ kind: 'line', text: 'older' })
    reading = prompt.read()
    type(input, '/m\t')
    await new Promise(resolve => setImmediate(resolve))
    expect(drawn()).toContain('manifest  model')
    type(input, 'o\t\r')
    expect(await reading).toEqual({ kind: 'line', text: '/model ' })
  })

  it('passes Ctrl-C and Esc to the listener below when asked to (the approver’s note), and closes when its signal aborts', async () => {
    const { input, output, keys } = fakeTerminal()
    const below: string[] = []
    const release = keys.open()
    const stop = keys.on(key => {
      below.push(key.name)
      return true
    })
    const controller = new AbortController()
    const prompt = new TerminalPrompt(keys, output, { prompt: 'note: ', passInterrupts: true })
    const reading = prompt.read({ signal: controller.signal })
    type(input, 'abc\x03')
    await new Promise(resolve => setImmediate(resolve))
    expect(below).toEqual(['ctrl-c'])
    controller.abort()
    expect(await reading).toEqual({ kind: 'end' })
    stop()
    release()
  })

  it('draws a long status within one row, and a message wider than the terminal on the rows it takes', async () => {
    const { input, output, keys, drawn } = fakeTerminal(20)
    const prompt = new TerminalPrompt(keys, output, { prompt: '> ' })
    const reading = prompt.read({ status: 'a status line much wider than twenty cells' })
    type(input, 'x'.repeat(30))
    await new Promise(resolve => setImmediate(resolve))
    // The status cut to 19 cells; the cursor ends after 32 cells on the third row: up 0 from the last row, column 12.
    expect(drawn()).toContain('a status line much…')
    expect(drawn().endsWith(`\r\n> ${'x'.repeat(30)}\r\x1b[12C`)).toBe(true)
    type(input, '\r')
    await reading
  })
})
