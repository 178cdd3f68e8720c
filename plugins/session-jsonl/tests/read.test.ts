// Reading a log a piece at a time: the scanner fed whole lines in any grouping,
// and JsonlFiles.read, which reads a long log in blocks and decodes it in pieces,
// must find exactly what a scan of the whole text finds.
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { createAssistantMessage, userText } from '@loom/llm'
import { EVENT_BLOCK, interruptedTurnClosers, Session, type SessionEvent, type SessionHeader } from '@loom/session'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SessionPersistenceCorruptionError } from '../src/errors.ts'
import { type FileOps, nodeFileOps } from '../src/file.ts'
import { encodeEvents, encodeHeaderLine } from '../src/format.ts'
import { LogScanner, type ScanResult, scanLog } from '../src/scanner.ts'
import { JsonlFiles } from '../src/store.ts'

const META: SessionHeader = { version: 0, id: 's1', createdAt: 1000, cwd: '/proj' }
const HEADER = encodeHeaderLine(META)

/** A session of `turns` turns: user text (`text(turn)`), three streamed chunks packed into one row, an answer. */
function conversation(turns: number, text: (turn: number) => string = turn => `question ${turn}`): readonly SessionEvent[] {
  const session = Session.create('s1')
  for (let turn = 1; turn <= turns; turn++) {
    session.append('turn/start', { turn })
    session.append('step/start', { turn, step: 1 })
    session.append('user/message', userText(text(turn)), { surfaceOp: 'append' })
    for (const part of ['é ', '中 ', '🙂 ']) session.append('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text: part } })
    const message = createAssistantMessage({ content: [{ type: 'text', text: `answer ${turn}` }], source: { provider: 'p', model: 'm' } })
    session.append('assistant/message', { turn, step: 1, message }, { surfaceOp: 'append' })
    session.append('step/end', { turn, step: 1 })
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
  }
  return session.events
}

const logText = (lines: readonly string[], fragment = '') => [HEADER, ...lines].map(line => `${line}\n`).join('') + fragment
const utf8 = (text: string) => Buffer.byteLength(text, 'utf8')

/** Feeds `text` (whole lines only) to a LogScanner in the groups of lines `sizes` gives, cycling. */
function scanInGroups(text: string, sizes: readonly number[]): ScanResult {
  const lines = text.split(/(?<=\n)/)
  const scanner = new LogScanner('/log')
  for (let i = 0, k = 0; i < lines.length; k++) {
    const group = lines.slice(i, i + sizes[k % sizes.length]).join('')
    scanner.scan(group, utf8(group))
    i += sizes[k % sizes.length]
  }
  return scanner.result()
}

function thrown(run: () => unknown): Error {
  try {
    run()
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a throw')
}

describe('LogScanner', () => {
  const lines = encodeEvents(conversation(3))

  it('finds what scanLog finds, however the lines are grouped', () => {
    const text = logText(lines)
    const whole = scanLog(text, '/log')
    expect(whole.events).toHaveLength(27)
    for (const sizes of [[1], [2], [3, 1], [100]]) {
      const pieces = scanInGroups(text, sizes)
      expect(pieces.events).toEqual(whole.events)
      expect(pieces.header).toEqual(whole.header)
      expect(pieces.committedBytes).toBe(utf8(text))
    }
  })

  it('counts committed bytes of non-ASCII text across groups, up to the first damaged line', () => {
    const damaged = logText([...lines.slice(0, 5), '{"type":"turn/st', lines[5]])
    const expected = utf8(logText(lines.slice(0, 5)))
    expect(scanLog(damaged, '/log').committedBytes).toBe(expected)
    for (const sizes of [[1], [2], [4, 3]]) expect(scanInGroups(damaged, sizes).committedBytes).toBe(expected)
  })

  it('names the damaged line when a later group closes a turn', () => {
    const text = logText([lines[0], 'garbage', ...lines.slice(2)])
    expect(thrown(() => scanLog(text, '/log')).message).toMatch(/unparsable committed event at line 3\b/)
    const error = thrown(() => scanInGroups(text, [2]))
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/unparsable committed event at line 3 \(raw log: \/log\)/)
  })

  it('refuses a log without a header line', () => {
    expect(thrown(() => new LogScanner('/log').result()).message).toMatch(/^empty or header-less session log/)
    expect(thrown(() => new LogScanner('/log').scan('\n', 1)).message).toMatch(/^empty or header-less session log/)
  })
})

describe('JsonlFiles.read', () => {
  let root: string
  let files: JsonlFiles
  let file: string
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-session-jsonl-read-'))
    files = new JsonlFiles({ root, packChunks: true })
    file = files.pathOf(META)
  })
  afterEach(() => {
    fs.rmSync(root, { recursive: true, force: true })
  })

  it('reads a log longer than its read buffer, with a line longer than the buffer, as one scan of the text would', async () => {
    // Over 2 MB in all, non-ASCII throughout, and one user message of 1.5 MB.
    const events = conversation(1000, turn => (turn === 2 ? '∑'.repeat(500_000) : `question ${turn}`))
    await files.materialize(META, events)
    const torn = '{"type":"turn/start","seq":'
    fs.appendFileSync(file, torn)
    const text = fs.readFileSync(file, 'utf8')
    expect(utf8(text)).toBeGreaterThan(2 * 1024 * 1024)

    const log = await files.read(file, 's1')
    const expected = scanLog(text, file)
    expect(log.events).toEqual(expected.events)
    expect(log.events).toEqual(JSON.parse(JSON.stringify(events)))
    expect(log.committedBytes).toBe(expected.committedBytes)
    expect(log.fileBytes).toBe(utf8(text))
    expect(log.fileBytes - log.committedBytes).toBe(torn.length)
    expect(files.restore(log).deriveMessages()).toEqual(Session.create('s1', events).deriveMessages())
  })

  it('restores a log of several blocks with its open turn closed, as one array of its events would', async () => {
    // The last turn lost its step/end and turn/end.
    const open = conversation(1000).slice(0, -2)
    await files.materialize(META, open)
    const log = await files.read(file, 's1')
    expect(log.blocks.length).toBeGreaterThan(2)
    expect(log.count).toBe(open.length)
    expect(log.closers).toEqual(interruptedTurnClosers(open))
    expect(log.closers.map(event => event.type)).toEqual(['step/end', 'turn/end'])
    const restored = files.restore(log)
    // Then the marker a restore ends with.
    expect(restored.seq).toBe(open.length + 3)
    expect(restored.events.slice(0, -1)).toEqual(JSON.parse(JSON.stringify([...open, ...log.closers])))
    for (const seq of [0, EVENT_BLOCK - 1, EVENT_BLOCK, open.length]) expect(restored.eventAt(seq)?.seq).toBe(seq)
    expect(restored.deriveMessages()).toEqual(Session.create('s1', open).deriveMessages())
  })

  it('names the line of a damaged packed row far into a long log', async () => {
    const lines = encodeEvents(conversation(3000))
    const row = lines.findIndex((line, i) => i > lines.length / 2 && line.startsWith('{"type":"text-chunks"'))
    lines[row] = lines[row].replace('"dt":[', '"dt":["x",')
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, logText(lines))
    const error = await files.read(file, 's1').then(
      () => undefined,
      (error: Error) => error,
    )
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    // Line 1 is the header.
    expect(error?.message).toMatch(new RegExp(`unparsable committed event at line ${row + 2}\\b`))
  })

  it('reads again when a write lands during the read, damage seen meanwhile included', async () => {
    const events = conversation(2)
    const lines = encodeEvents(events)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    // What the first read sees: a damaged line before a turn/end, which alone would be corruption.
    fs.writeFileSync(file, logText([lines[0], 'garbage', ...lines.slice(2)]))
    let opens = 0
    const ops: FileOps = {
      ...nodeFileOps,
      async open(p, flags, mode) {
        const handle = await nodeFileOps.open(p, flags, mode)
        // Once the first read has its handle, the log is replaced by a sound one.
        if (opens++ === 0) {
          fs.writeFileSync(`${p}.new`, logText(lines))
          fs.renameSync(`${p}.new`, p)
        }
        return handle
      },
    }
    const log = await new JsonlFiles({ root, packChunks: true, ops }).read(file, 's1')
    expect(opens).toBe(2)
    expect(log.events).toEqual(JSON.parse(JSON.stringify(events)))
    const stat = fs.statSync(file, { bigint: true })
    expect(log.revision).toBe(`${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`)
  })

  it('still reports damage when nothing changed during the read', async () => {
    const lines = encodeEvents(conversation(2))
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, logText([lines[0], 'garbage', ...lines.slice(2)]))
    await expect(files.read(file, 's1')).rejects.toThrow(/unparsable committed event at line 3\b/)
  })
})
