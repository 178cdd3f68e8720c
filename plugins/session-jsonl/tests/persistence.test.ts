// JsonlPersistence end to end: the `sessionPersistence` seam, live write-behind, cold
// load/repair, resume and fork over a real temp directory (spec §3.1–3.8, contracts 127–139).
import { Context, type Fiber } from '@deepseek-ai/cordis'
import { createAssistantMessage, createToolResultMessage, userText, type ContentBlock } from '@loom/llm'
import SessionStore, {
  TOOL_NOT_STARTED_TEXT,
  type Session,
  type SessionEvent,
  type SessionEventType,
  type SessionHeader,
  type SurfaceIntent,
} from '@loom/session'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { nodeFileOps, type FileOps } from '../src/file.ts'
import JsonlPersistence, { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '../src/index.ts'

// ---------------------------------------------------------------------------
// Logs
// ---------------------------------------------------------------------------

const MODEL = { provider: 'test', model: 'test-model' } as const
const CWD = '/workspace'

/** Receives one event to append: a raw array (seam batches) or a live Session. */
type Sink = (type: SessionEventType | string, data: unknown, intent?: SurfaceIntent) => SessionEvent

/** Raw events starting at `firstSeq`, with the envelope key order of `Session.append`. */
function raw(firstSeq: number, fill: (sink: Sink) => void): SessionEvent[] {
  const events: SessionEvent[] = []
  fill((type, data, intent) => {
    const seq = firstSeq + events.length
    const event = {
      type,
      seq,
      time: 1_700_000_000_000 + seq,
      data,
      ...(intent?.surfaceOp !== undefined && { surfaceOp: intent.surfaceOp }),
      ...(intent?.sourceEventSeqs !== undefined && { sourceEventSeqs: intent.sourceEventSeqs }),
    } as unknown as SessionEvent
    events.push(event)
    return event
  })
  return events
}

/** Appends to a live session (published through `session/event`). */
function live(session: Session): Sink {
  return (type, data, intent) => (intent ? session.append(type as 'user/message', data as never, intent) : session.append(type as 'turn/start', data as never))
}

const toolCallBlock = (id: string): ContentBlock => ({ type: 'tool-call', id, name: 'read_file', arguments: '{"path":"a.txt"}' })
const assistant = (turn: number, step: number, content: ContentBlock[]) => ({ turn, step, message: createAssistantMessage({ content, source: MODEL }) })

/** A closed turn without tools: 6 events. */
function shortTurn(sink: Sink, turn: number) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  sink('assistant/message', assistant(turn, 1, [{ type: 'text', text: `answer ${turn}` }]), { surfaceOp: 'append' })
  sink('step/end', { turn, step: 1 })
  sink('turn/end', { turn, reason: { kind: 'completed' } })
}

/** A closed turn with streamed text (a packable run of 3 chunks) and one tool call: 11 events. */
function toolTurn(sink: Sink, turn: number, callId = `call-${turn}`) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  for (const text of ['Let ', 'me ', 'look.']) sink('assistant/chunk', { turn, step: 1, chunk: { type: 'text-delta', index: 0, text } })
  sink('assistant/message', assistant(turn, 1, [{ type: 'text', text: 'Let me look.' }, toolCallBlock(callId)]), { surfaceOp: 'append' })
  const call = sink('tool/call', { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"a.txt"}' })
  sink(
    'tool/result',
    { turn, step: 1, message: createToolResultMessage({ callId, content: [{ type: 'text', text: `contents for ${callId}` }] }) },
    { surfaceOp: 'append', sourceEventSeqs: [call.seq] },
  )
  sink('step/end', { turn, step: 1 })
  sink('turn/end', { turn, reason: { kind: 'completed' } })
}

/** An open turn whose assistant message asks for `callId`; with `recorded`, the tool/call is logged too. */
function openToolTurn(sink: Sink, turn: number, callId: string, recorded: boolean) {
  sink('turn/start', { turn })
  sink('step/start', { turn, step: 1 })
  sink('user/message', userText(`question ${turn}`), { surfaceOp: 'append' })
  sink('assistant/message', assistant(turn, 1, [toolCallBlock(callId)]), { surfaceOp: 'append' })
  if (recorded) sink('tool/call', { turn, step: 1, callId, name: 'read_file', arguments: '{"path":"a.txt"}' })
}

const seqs = (events: readonly SessionEvent[]) => events.map(event => event.seq)
const types = (events: readonly SessionEvent[]) => events.map(event => event.type)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const lines = (events: readonly SessionEvent[]) => events.map(event => JSON.stringify(event) + '\n').join('')
const json = (value: unknown) => JSON.stringify(value)

// ---------------------------------------------------------------------------
// Hosts
// ---------------------------------------------------------------------------

let dir: string
let backends: Fiber[]

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-jsonl-'))
  backends = []
})
afterEach(async () => {
  await endLifetimes()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function endLifetimes() {
  for (const backend of backends.splice(0).reverse()) await Promise.resolve(backend.dispose()).catch(() => {})
}

/**
 * One process lifetime over the shared root: a store, the backend and an owner
 * plugin. The previous lifetimes end first, as a process would exit: their
 * writes are drained and their session leases released.
 */
async function lifecycle(maxDelayMs = 20) {
  await endLifetimes()
  const root = new Context()
  const errors: unknown[] = []
  root.logger.exporter({
    levels: { default: 3 },
    export(message) {
      if (message.type === 'error') errors.push(message.args[0])
    },
  })
  await root.plugin(SessionStore)
  const backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs })
  backends.push(backend)
  const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence'], apply() {} })
  const ctx = owner.ctx
  return { root, backend, owner, ctx, sessions: ctx.sessions, persistence: ctx.sessionPersistence, errors }
}

const meta = (id: string, extra: Partial<SessionHeader> = {}): SessionHeader => ({ version: 0, id, createdAt: 1_700_000_000_000, cwd: CWD, ...extra })

/** A log stored through the seam in its own lifecycle; returns its path. */
async function stored(id: string, events: SessionEvent[], header = meta(id)): Promise<string> {
  const { persistence } = await lifecycle()
  persistence.create(header)
  await persistence.append(id, events)
  return persistence.locate(header).path
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

const statOf = (file: string) => fs.statSync(file, { bigint: true })

// ---------------------------------------------------------------------------

describe('lazy materialization (127)', () => {
  it('create() writes no file and list() excludes the session until its first append', async () => {
    const { persistence } = await lifecycle()
    persistence.create(meta('empty'))
    expect(fs.existsSync(persistence.locate(meta('empty')).path)).toBe(false)
    expect(fs.readdirSync(dir)).toEqual([])
    expect(await persistence.list()).toEqual([])

    await persistence.append(
      'empty',
      raw(0, s => shortTurn(s, 1)),
    )
    expect(fs.existsSync(persistence.locate(meta('empty')).path)).toBe(true)
    expect((await persistence.list()).map(header => header.id)).toEqual(['empty'])
  })

  it('a second create of the same id throws', async () => {
    const { persistence } = await lifecycle()
    persistence.create(meta('twice'))
    expect(() => persistence.create(meta('twice'))).toThrow(/session "twice" already exists/)
  })

  it('create for an id already on disk throws', async () => {
    await stored(
      'on-disk',
      raw(0, s => shortTurn(s, 1)),
    )
    const { persistence } = await lifecycle()
    expect(() => persistence.create(meta('on-disk'))).toThrow(/session "on-disk" already has a persisted log on disk/)
  })

  it('a live session that appended nothing leaves no file, even after a flush', async () => {
    const { sessions, persistence } = await lifecycle()
    const session = sessions.create('quiet', { meta: { cwd: CWD } })
    await sessions.flush(session)
    expect(fs.existsSync(persistence.locate(session.header).path)).toBe(false)
    expect(await persistence.list()).toEqual([])
  })
})

describe('live round trip', () => {
  it('a live turn is on disk once sessions.flush resolves true, and a fresh lifecycle loads it byte-identically', async () => {
    const { sessions, persistence } = await lifecycle(10_000)
    const session = sessions.create('live', { meta: { cwd: CWD } })
    toolTurn(live(session), 1)
    const file = persistence.locate(session.header).path
    expect(fs.existsSync(file)).toBe(false)

    await expect(sessions.flush(session)).resolves.toBe(true)
    expect(fs.existsSync(file)).toBe(true)
    // The three text deltas were packed into one row.
    const text = fs.readFileSync(file, 'utf8')
    expect(text).toMatch(/"type":"text-chunks"/)
    expect(text).not.toMatch(/"type":"assistant\/chunk"/)

    const other = await lifecycle()
    const loaded = await other.persistence.load('live')
    expect(json(loaded.events)).toBe(json(session.events))
    expect(loaded.meta).toEqual(session.header)
  })
})

describe('seam append and load (128)', () => {
  it('create + append, then load in a fresh lifecycle, gives the same header and byte-identical events', async () => {
    const events = raw(0, s => toolTurn(s, 1))
    const file = await stored('round', events)
    expect(fs.readFileSync(file, 'utf8')).toMatch(/"type":"text-chunks"/)

    const { persistence } = await lifecycle()
    const loaded = await persistence.load('round')
    expect(json(loaded.events)).toBe(json(events))
    expect(loaded.meta).toEqual(meta('round'))
    expect(path.basename(file)).toBe('session.jsonl')
  })
})

describe('torn tail', () => {
  it('load cuts the torn fragment and closes the open turn; later appends continue the log (129)', async () => {
    const file = await stored(
      'torn',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(
      file,
      lines(
        raw(6, s => {
          s('turn/start', { turn: 2 })
          s('step/start', { turn: 2, step: 1 })
        }),
      ) + '{"type":"assistant/chunk","seq":8,"ti',
    )

    const { persistence } = await lifecycle()
    const { events } = await persistence.load('torn')
    expect(seqs(events)).toEqual(range(0, 9))
    expect(events[8]).toMatchObject({ type: 'step/end', data: { turn: 2, step: 1 } })
    expect(events[9]).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: { kind: 'interrupted' } } })
    expect(events.some(event => event.type === 'assistant/chunk')).toBe(false)

    await persistence.append(
      'torn',
      raw(10, s => {
        s('turn/start', { turn: 3 })
        s('turn/end', { turn: 3, reason: { kind: 'completed' } })
      }),
    )
    const reloaded = await (await lifecycle()).persistence.load('torn')
    expect(seqs(reloaded.events)).toEqual(range(0, 11))
    expect(json(reloaded.events.slice(0, 10))).toBe(json(events))
  })

  it('repair leaves the committed prefix byte for byte (130)', async () => {
    const file = await stored(
      'prefix',
      raw(0, s => shortTurn(s, 1)),
    )
    const original = fs.readFileSync(file)
    fs.appendFileSync(file, '\n{"partial')

    const { persistence } = await lifecycle()
    expect(seqs((await persistence.load('prefix')).events)).toEqual(range(0, 5))
    await persistence.append(
      'prefix',
      raw(6, s => shortTurn(s, 2)),
    )

    const after = fs.readFileSync(file)
    expect(after.subarray(0, original.length).equals(original)).toBe(true)
    expect(after.toString('utf8')).not.toMatch(/partial/)
    expect(seqs((await (await lifecycle()).persistence.load('prefix')).events)).toEqual(range(0, 11))
  })
})

describe('inspect (131)', () => {
  it('shows the repaired view without touching the file; load then commits it', async () => {
    const file = await stored(
      'peek',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(
      file,
      lines(
        raw(6, s => {
          s('turn/start', { turn: 2 })
          s('step/start', { turn: 2, step: 1 })
        }),
      ),
    )
    const bytes = fs.readFileSync(file)
    const before = statOf(file)

    const { persistence } = await lifecycle()
    const inspected = await persistence.inspect('peek')
    expect(seqs(inspected.events)).toEqual(range(0, 9))
    expect(types(inspected.events).slice(-4)).toEqual(['turn/start', 'step/start', 'step/end', 'turn/end'])
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    const after = statOf(file)
    expect(after.mtimeNs).toBe(before.mtimeNs)
    expect(after.size).toBe(before.size)

    const loaded = await persistence.load('peek')
    expect(seqs(loaded.events)).toEqual(range(0, 9))
    expect(json(loaded.events)).toBe(json(inspected.events))
    expect(fs.readFileSync(file).equals(bytes)).toBe(false)
    expect(statOf(file).size).toBeGreaterThan(before.size)
  })
})

describe('recovery tool results (132)', () => {
  it('a tool call without a tool/call record is closed with TOOL_NOT_STARTED', async () => {
    await stored(
      'not-started',
      raw(0, s => openToolTurn(s, 1, 'call-x', false)),
    )
    const { events } = await (await lifecycle()).persistence.load('not-started')
    expect(types(events)).toEqual(['turn/start', 'step/start', 'user/message', 'assistant/message', 'tool/result', 'step/end', 'turn/end'])
    const result = events[4] as SessionEvent<'tool/result'>
    expect(result.data.message.source).toEqual({ kind: 'tool', callId: 'call-x' })
    expect(result.data.message.content).toHaveLength(1)
    expect(result.data.message.content[0]).toMatchObject({ type: 'tool-result', toolCallId: 'call-x', isError: true })
    expect(result.data.error).toEqual({ name: 'ToolNotStartedError', code: 'TOOL_NOT_STARTED' })
    expect(json(result.data.message.content)).toContain(json(TOOL_NOT_STARTED_TEXT).slice(1, -1))
    expect(result.surfaceOp).toBe('append')
    expect(result.sourceEventSeqs).toBeUndefined()
    expect(events[6]).toMatchObject({ data: { turn: 1, reason: { kind: 'interrupted' } } })

    // The repair is on disk: the next lifecycle reads the same balanced log.
    expect(json((await (await lifecycle()).persistence.load('not-started')).events)).toBe(json(events))
  })

  it('a recorded tool/call without a result is closed with TOOL_OUTCOME_UNKNOWN', async () => {
    await stored(
      'unknown',
      raw(0, s => openToolTurn(s, 1, 'call-x', true)),
    )
    const { events } = await (await lifecycle()).persistence.load('unknown')
    expect(types(events).slice(-4)).toEqual(['tool/call', 'tool/result', 'step/end', 'turn/end'])
    const result = events[5] as SessionEvent<'tool/result'>
    expect(result.data.error).toEqual({ name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' })
    expect(result.data.message.source).toEqual({ kind: 'tool', callId: 'call-x' })
    expect(json(result.data.message.content)).toMatch(/retry only if the operation is read-only or idempotent/)
    expect(result.sourceEventSeqs).toEqual([4])
  })
})

describe('append failure rollback (134)', () => {
  it('a failed fsync rejects with ENOSPC, leaves the file as it was, and the retry succeeds', async () => {
    let failNextSync = false
    const ops: FileOps = {
      ...nodeFileOps,
      async sync(handle) {
        if (failNextSync) {
          failNextSync = false
          throw Object.assign(new Error('ENOSPC: no space left on device, fsync'), { code: 'ENOSPC', syscall: 'fsync' })
        }
        return nodeFileOps.sync(handle)
      },
    }
    const root = new Context()
    await root.plugin(SessionStore)
    let persistence!: JsonlPersistence
    const backend = await root.plugin({
      name: 'faulty-backend',
      inject: ['sessions'],
      apply(ctx: Context) {
        persistence = new JsonlPersistence(ctx, { root: dir, maxDelayMs: 20 }, ops)
      },
    })
    backends.push(backend)

    persistence.create(meta('enospc'))
    await persistence.append(
      'enospc',
      raw(0, s => shortTurn(s, 1)),
    )
    const file = persistence.locate(meta('enospc')).path
    const size = fs.statSync(file).size
    const bytes = fs.readFileSync(file)

    const turn2 = raw(6, s => {
      s('turn/start', { turn: 2 })
      s('turn/end', { turn: 2, reason: { kind: 'completed' } })
    })
    failNextSync = true
    await expect(persistence.append('enospc', turn2)).rejects.toThrow(/ENOSPC/)
    expect(failNextSync).toBe(false)
    expect(fs.statSync(file).size).toBe(size)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)

    await persistence.append('enospc', turn2)
    expect(seqs((await (await lifecycle()).persistence.load('enospc')).events)).toEqual(range(0, 7))
  })
})

describe('append contiguity (135)', () => {
  it('a batch that does not start at the stored length is refused', async () => {
    const { persistence } = await lifecycle()
    persistence.create(meta('gap'))
    await persistence.append(
      'gap',
      raw(0, s => shortTurn(s, 1)),
    )
    const file = persistence.locate(meta('gap')).path
    const size = fs.statSync(file).size

    const error = await rejection(
      persistence.append(
        'gap',
        raw(3, s => s('turn/start', { turn: 2 })),
      ),
    )
    expect(error.message).toMatch(/append seq mismatch for "gap": expected 6 at index 0, got 3/)
    expect(fs.statSync(file).size).toBe(size)
  })

  it('a gap inside a batch is refused and nothing of the batch is written', async () => {
    const { persistence } = await lifecycle()
    persistence.create(meta('gap'))
    await persistence.append(
      'gap',
      raw(0, s => shortTurn(s, 1)),
    )
    const file = persistence.locate(meta('gap')).path
    const size = fs.statSync(file).size

    const [start, , end] = raw(6, s => shortTurn(s, 2))
    const error = await rejection(persistence.append('gap', [start, end]))
    expect(error.message).toMatch(/expected 7 at index 1, got 8/)
    expect(fs.statSync(file).size).toBe(size)
    // The cursor did not move: the right continuation is still accepted.
    await persistence.append(
      'gap',
      raw(6, s => shortTurn(s, 2)),
    )
    expect(seqs((await persistence.load('gap')).events)).toEqual(range(0, 11))
  })
})

describe('stored-log refusals', () => {
  it('a newer format version is refused as unsupported, naming the version and the raw log (139)', async () => {
    const { persistence } = await lifecycle()
    const file = persistence.locate(meta('future')).path
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(
      file,
      '{"type":"session","version":1,"id":"future","createdAt":1,"delegationDepth":0}\n' + '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n',
    )
    const bytes = fs.readFileSync(file)

    const error = await rejection(persistence.load('future'))
    expect(error).toBeInstanceOf(SessionFormatUnsupportedError)
    expect(error.name).toBe('SessionFormatUnsupportedError')
    expect(error.message).toMatch(/session "future" uses log format v1/)
    expect(error.message).toMatch(/upgrade the harness/)
    expect(error.message.endsWith(`(raw log: ${file})`)).toBe(true)
    expect((error as SessionFormatUnsupportedError).location).toBe(file)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it('a newer header of a foreign shape is still unsupported, not corrupt (139)', async () => {
    const { persistence } = await lifecycle()
    const file = persistence.locate(meta('alien')).path
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, '{"type":"session","version":7,"id":"alien","created":"yesterday"}\n')

    const error = await rejection(persistence.load('alien'))
    expect(error).toBeInstanceOf(SessionFormatUnsupportedError)
    expect(error).not.toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/v7/)
  })

  it('damage before a committed turn/end is corruption: load rejects naming the line and leaves the file alone', async () => {
    const file = await stored(
      'damaged',
      raw(0, s => shortTurn(s, 1)),
    )
    // Line 1 is the header; line 4 holds seq 2 (the user message), followed by the turn's end.
    const text = fs.readFileSync(file, 'utf8').split('\n')
    text[3] = '{"type":"user/message","seq":2,"ti'
    fs.writeFileSync(file, text.join('\n'))
    const bytes = fs.readFileSync(file)
    const before = statOf(file)

    const error = await rejection((await lifecycle()).persistence.load('damaged'))
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/unparsable committed event at line 4/)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    expect(statOf(file).mtimeNs).toBe(before.mtimeNs)
  })

  it('an unknown event type in a stored log is refused', async () => {
    const file = await stored(
      'unknown-type',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(file, lines(raw(6, s => s('future/thing', { x: 1 }))))
    const bytes = fs.readFileSync(file)

    const error = await rejection((await lifecycle()).persistence.load('unknown-type'))
    expect(error).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(error.message).toMatch(/"future\/thing"/)
    expect(error.message).toMatch(/seq 6/)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it('an unknown event type marked ignorable is kept', async () => {
    const file = await stored(
      'ignorable',
      raw(0, s => shortTurn(s, 1)),
    )
    const extra = { type: 'future/thing', seq: 6, time: 1_700_000_000_006, data: { x: 1 }, ignorable: true }
    fs.appendFileSync(file, JSON.stringify(extra) + '\n')

    const { events } = await (await lifecycle()).persistence.load('ignorable')
    expect(seqs(events)).toEqual(range(0, 6))
    expect(json(events[6])).toBe(json(extra))
  })
})

describe('live-load guard (138)', () => {
  it('load of a live session with an open turn rejects and writes nothing', async () => {
    const { sessions, persistence } = await lifecycle(10_000)
    const session = sessions.create('open', { meta: { cwd: CWD } })
    openToolTurn(live(session), 1, 'call-x', true)
    await sessions.flush(session)
    const file = persistence.locate(session.header).path
    const bytes = fs.readFileSync(file)

    const error = await rejection(persistence.load('open'))
    expect(error.message).toMatch(/cannot load session "open" while its live turn is open/)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    expect(fs.readFileSync(file, 'utf8')).not.toMatch(/turn\/end|interrupted/)
    expect(session.events).toHaveLength(5)
  })

  it('prepare of a live session rejects', async () => {
    const { sessions, persistence } = await lifecycle()
    const session = sessions.create('busy', { meta: { cwd: CWD } })
    shortTurn(live(session), 1)
    await expect(persistence.prepare('busy')).rejects.toThrow(/cannot prepare session "busy" while it is live/)
  })

  it('load of a live balanced session flushes it and returns its events', async () => {
    const { sessions, persistence } = await lifecycle(10_000)
    const session = sessions.create('balanced', { meta: { cwd: CWD } })
    toolTurn(live(session), 1)
    const file = persistence.locate(session.header).path
    expect(fs.existsSync(file)).toBe(false)

    const loaded = await persistence.load('balanced')
    expect(json(loaded.events)).toBe(json(session.events))
    expect(loaded.meta).toEqual(session.header)
    expect(json((await persistence.readFrom('balanced', 0)).events)).toBe(json(session.events))
  })
})

describe('resume continuity', () => {
  it('prepare + enter/announce continues the stored log with one end-seed marker', async () => {
    const first = await lifecycle()
    const original = first.sessions.create('resume', { meta: { cwd: CWD } })
    toolTurn(live(original), 1)
    await expect(first.sessions.flush(original)).resolves.toBe(true)
    const events1 = original.events
    await first.backend.dispose()

    const second = await lifecycle()
    const session = await second.persistence.prepare('resume')
    expect(session.events).toHaveLength(events1.length + 1)
    expect(session.events.at(-1)!.type).toBe('session/end-seed')
    expect(session.firstLiveSeq).toBe(events1.length)
    expect(json(session.events.slice(0, -1))).toBe(json(events1))
    expect(session.deriveMessages()).toEqual(original.deriveMessages())

    second.ctx.sessions.enter(session)
    second.ctx.sessions.announce(session)
    toolTurn(live(session), 2)
    await expect(second.sessions.flush(session)).resolves.toBe(true)

    const { events } = await (await lifecycle()).persistence.load('resume')
    expect(seqs(events)).toEqual(range(0, events1.length + 1 + 10))
    expect(new Set(seqs(events)).size).toBe(events.length)
    expect(events.filter(event => event.type === 'session/end-seed')).toHaveLength(1)
    expect(events[events1.length].type).toBe('session/end-seed')
    expect(events.filter(event => event.type === 'turn/start').map(event => (event as SessionEvent<'turn/start'>).data.turn)).toEqual([1, 2])
    expect(json(events)).toBe(json(session.events))
  })
})

describe('fork persistence (3.8)', () => {
  it('a forked child is persisted with its seed and one end-seed marker, and its header names the parent', async () => {
    const { sessions, persistence } = await lifecycle()
    const parent = sessions.create('parent', { meta: { cwd: CWD } })
    shortTurn(live(parent), 1)
    shortTurn(live(parent), 2)
    const child = sessions.fork(parent, 5, 'child')
    shortTurn(live(child), 2)
    await expect(sessions.flush(child)).resolves.toBe(true)
    await sessions.flush(parent)

    const file = persistence.locate(child.header).path
    const text = fs.readFileSync(file, 'utf8')
    expect(text.match(/session\/end-seed/g)).toHaveLength(1)
    expect(JSON.parse(text.slice(0, text.indexOf('\n')))).toMatchObject({ parentSession: 'parent', seedLength: 6, cwd: CWD })

    const loaded = await (await lifecycle()).persistence.load('child')
    expect(loaded.meta).toMatchObject({ id: 'child', parentSession: 'parent', seedLength: 6, cwd: CWD })
    expect(seqs(loaded.events)).toEqual(range(0, 12))
    expect(loaded.events[6].type).toBe('session/end-seed')
    expect(loaded.events.filter(event => event.type === 'session/end-seed')).toHaveLength(1)
    expect(json(loaded.events.slice(0, 6))).toBe(json(parent.events.slice(0, 6)))
    expect(json(loaded.events)).toBe(json(child.events))
  })
})

describe('disposal', () => {
  it("disposing the owner plugin flushes its sessions' pending events", async () => {
    const { sessions, persistence, owner } = await lifecycle(10_000)
    const session = sessions.create('owned', { meta: { cwd: CWD } })
    toolTurn(live(session), 1)
    const file = persistence.locate(session.header).path
    expect(fs.existsSync(file)).toBe(false)

    await owner.dispose()
    await vi.waitFor(() => expect(fs.existsSync(file)).toBe(true), { timeout: 2000, interval: 10 })
    const loaded = await (await lifecycle()).persistence.load('owned')
    expect(json(loaded.events)).toBe(json(session.events))
  })

  it('disposing the backend plugin drains everything queued', async () => {
    const root = new Context()
    await root.plugin(SessionStore)
    const backend = await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 10_000 })
    backends.push(backend)
    // A writer that does not depend on the backend, so it outlives it.
    const writer = await root.plugin({ name: 'writer', inject: ['sessions'], apply() {} })
    const one = writer.ctx.sessions.create('drain-1', { meta: { cwd: CWD } })
    const two = writer.ctx.sessions.create('drain-2', { meta: { cwd: CWD } })
    toolTurn(live(one), 1)
    shortTurn(live(two), 1)
    shortTurn(live(two), 2)
    expect(fs.existsSync(root.sessionPersistence.locate(one.header).path)).toBe(false)

    await backend.dispose()
    const { persistence } = await lifecycle()
    expect(json((await persistence.load('drain-1')).events)).toBe(json(one.events))
    expect(json((await persistence.load('drain-2')).events)).toBe(json(two.events))
  })
})

describe('reads', () => {
  it('readFrom returns the stored suffix from the committed prefix, without repair', async () => {
    const file = await stored(
      'suffix',
      raw(0, s => shortTurn(s, 1)),
    )
    fs.appendFileSync(
      file,
      lines(
        raw(6, s => {
          s('turn/start', { turn: 2 })
          s('step/start', { turn: 2, step: 1 })
        }),
      ) + '{"type":"assistant/ch',
    )
    const bytes = fs.readFileSync(file)

    const { persistence } = await lifecycle()
    const { meta: header, events } = await persistence.readFrom('suffix', 4)
    expect(header).toEqual(meta('suffix'))
    expect(seqs(events)).toEqual([4, 5, 6, 7])
    expect(types(events)).toEqual(['step/end', 'turn/end', 'turn/start', 'step/start'])
    expect((await persistence.readFrom('suffix', 8)).events).toEqual([])
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  it('readFrom rejects a negative fromSeq with a TypeError', async () => {
    await stored(
      'suffix',
      raw(0, s => shortTurn(s, 1)),
    )
    const { persistence } = await lifecycle()
    await expect(persistence.readFrom('suffix', -1)).rejects.toBeInstanceOf(TypeError)
    await expect(persistence.readFrom('suffix', 1.5)).rejects.toBeInstanceOf(TypeError)
  })

  it('list returns the headers of materialized sessions, oldest first', async () => {
    const { persistence } = await lifecycle()
    const b = meta('b', { createdAt: 2000 })
    const a = meta('a', { createdAt: 1000, cwd: '/other' })
    persistence.create(b)
    persistence.create(a)
    persistence.create(meta('c', { createdAt: 500 }))
    await persistence.append(
      'b',
      raw(0, s => shortTurn(s, 1)),
    )
    await persistence.append(
      'a',
      raw(0, s => shortTurn(s, 1)),
    )

    expect(await persistence.list()).toEqual([a, b])
    expect(await (await lifecycle()).persistence.list()).toEqual([a, b])
  })

  it('a missing id rejects with "not found"', async () => {
    await stored(
      'present',
      raw(0, s => shortTurn(s, 1)),
    )
    const { persistence } = await lifecycle()
    await expect(persistence.load('missing')).rejects.toThrow(/session "missing" not found/)
    await expect(persistence.inspect('missing')).rejects.toThrow(/not found/)
    await expect(persistence.prepare('missing')).rejects.toThrow(/not found/)
    await expect(persistence.readFrom('missing', 0)).rejects.toThrow(/not found/)
  })
})

describe('id collision', () => {
  it('a live session whose events differ from the stored log of its id is vetoed at creation', async () => {
    const file = await stored(
      'dup',
      raw(0, s => shortTurn(s, 1)),
    )
    const bytes = fs.readFileSync(file)
    const { sessions } = await lifecycle()
    const seed = raw(0, s => shortTurn(s, 7))

    expect(() => sessions.create('dup', { seed, meta: { cwd: CWD } })).toThrow(/id collision/)
    expect(sessions.get('dup')).toBeUndefined()
    expect(() => sessions.create('dup', { meta: { cwd: CWD } })).toThrow(/id collision/)
    expect(sessions.get('dup')).toBeUndefined()
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })
})
