import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import type { SessionEvent } from '@loom/session'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { appendLines, type FileOps, materialize, nodeFileOps, statRevision, truncateTo } from '../src/file.ts'
import { encodeEvents, encodeHeaderLine } from '../src/format.ts'
import { logPath } from '../src/paths.ts'
import { scanLog } from '../src/scanner.ts'

const HEADER = encodeHeaderLine({ version: 0, id: 's1', createdAt: 1000, cwd: '/proj' })

function ev(type: string, seq: number, data: unknown = {}): SessionEvent {
  return { type, seq, time: 1000 + seq, data } as unknown as SessionEvent
}
function turn(first: number, turnNumber: number): SessionEvent[] {
  return [
    ev('turn/start', first, { turn: turnNumber }),
    ev('step/start', first + 1, { turn: turnNumber, step: 1 }),
    ev('step/end', first + 2, { turn: turnNumber, step: 1 }),
    ev('turn/end', first + 3, { turn: turnNumber, reason: { kind: 'completed' } }),
  ]
}

function enospc(): Error {
  return Object.assign(new Error('ENOSPC: no space left on device, fsync'), { code: 'ENOSPC' })
}

let root: string
let file: string
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-session-jsonl-file-'))
  file = logPath(root, '/proj', 's1')
})
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

const size = (p: string) => fs.statSync(p).size
const siblings = (p: string) => fs.readdirSync(path.dirname(p))

describe('materialize', () => {
  it('creates the directories (0700) and publishes header plus first batch (0600)', async () => {
    const lines = encodeEvents(turn(0, 1))
    await materialize(file, HEADER, lines)
    expect(fs.readFileSync(file, 'utf8')).toBe([HEADER, ...lines].join('\n') + '\n')
    expect(fs.statSync(file).mode & 0o777).toBe(0o600 & ~process.umask())
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700 & ~process.umask())
    expect(fs.statSync(path.dirname(path.dirname(file))).mode & 0o777).toBe(0o700 & ~process.umask())
    // The temp link is gone.
    expect(siblings(file)).toEqual(['session.jsonl'])
    expect(scanLog(fs.readFileSync(file, 'utf8'), file).events.map(e => e.seq)).toEqual([0, 1, 2, 3])
  })

  it('can publish a header-only log', async () => {
    await materialize(file, HEADER, [])
    expect(fs.readFileSync(file, 'utf8')).toBe(HEADER + '\n')
  })

  it('fsyncs the parent of every directory it creates, then the session directory', async () => {
    const synced: string[] = []
    const ops: FileOps = {
      ...nodeFileOps,
      async open(p, flags, mode) {
        const handle = await nodeFileOps.open(p, flags, mode)
        if (flags === 'r') synced.push(p)
        return handle
      },
    }
    await materialize(file, HEADER, [], ops)
    const sessionDir = path.dirname(file)
    const projectDir = path.dirname(sessionDir)
    // root already existed; the project dir and the session dir were created.
    expect(synced).toEqual([root, projectDir, sessionDir])
  })

  it('never overwrites: a second materialize of the same path rejects and leaves the file unchanged', async () => {
    await materialize(file, HEADER, encodeEvents(turn(0, 1)))
    const before = fs.readFileSync(file)
    await expect(materialize(file, HEADER, [])).rejects.toThrow(/already exists/)
    expect(fs.readFileSync(file)).toEqual(before)
    expect(siblings(file)).toEqual(['session.jsonl'])
  })

  it('never overwrites: the link of a log already there fails, with the refusal and EEXIST, and no temp file is left', async () => {
    await materialize(file, HEADER, encodeEvents(turn(0, 1)))
    const before = fs.readFileSync(file)
    await expect(materialize(file, HEADER, [])).rejects.toMatchObject({ code: 'EEXIST', message: expect.stringMatching(/refusing to materialize/) })
    expect(fs.readFileSync(file)).toEqual(before)
    expect(siblings(file)).toEqual(['session.jsonl'])
  })

  it('makes the folder when it is missing, and looks nothing up when it is there', async () => {
    const made: string[] = []
    const ops: FileOps = {
      ...nodeFileOps,
      async mkdir(dir, mode) {
        made.push(dir)
        return nodeFileOps.mkdir(dir, mode)
      },
      async stat() {
        throw new Error('materialize looks nothing up')
      },
    }
    await materialize(file, HEADER, encodeEvents(turn(0, 1)), ops)
    expect(made).toContain(path.dirname(file))
    made.length = 0
    const second = path.join(path.dirname(file), 'other.jsonl')
    await materialize(second, HEADER, encodeEvents(turn(0, 1)), ops)
    expect(made).toEqual([])
    expect(scanLog(fs.readFileSync(second, 'utf8'), second).events).toHaveLength(4)
  })

  it('publishes nothing and leaves no temp file when the temp fsync fails', async () => {
    // Existing directories, so the failing fsync is the temp file's.
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const ops: FileOps = {
      ...nodeFileOps,
      sync: async () => {
        throw enospc()
      },
    }
    await expect(materialize(file, HEADER, [], ops)).rejects.toThrow(/ENOSPC/)
    expect(fs.existsSync(file)).toBe(false)
    expect(siblings(file)).toEqual([])
  })
})

describe('appendLines', () => {
  beforeEach(async () => {
    await materialize(file, HEADER, encodeEvents(turn(0, 1)))
  })

  it('appends one batch as lines joined by newlines plus a final newline', async () => {
    const before = fs.readFileSync(file, 'utf8')
    await appendLines(file, ['{"a":1}', '{"b":"é"}'])
    expect(fs.readFileSync(file, 'utf8')).toBe(before + '{"a":1}\n{"b":"é"}\n')
  })

  it('an empty batch writes nothing', async () => {
    const before = size(file)
    await appendLines(file, [])
    expect(size(file)).toBe(before)
  })

  it('does not create a missing log', async () => {
    const missing = logPath(root, '/proj', 'other')
    await expect(appendLines(missing, ['{}'])).rejects.toMatchObject({ code: 'ENOENT' })
    expect(fs.existsSync(missing)).toBe(false)
  })

  it('rolls back when fsync fails once, and a retry succeeds (contract 134)', async () => {
    const before = size(file)
    let failures = 1
    const ops: FileOps = {
      ...nodeFileOps,
      async sync(handle) {
        if (failures-- > 0) throw enospc()
        return nodeFileOps.sync(handle)
      },
    }
    const batch = encodeEvents(turn(4, 2))
    await expect(appendLines(file, batch, ops)).rejects.toThrow(/ENOSPC/)
    expect(size(file)).toBe(before)
    await appendLines(file, batch, ops)
    expect(scanLog(fs.readFileSync(file, 'utf8'), file).events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
  })

  it('rolls back a partial write', async () => {
    const before = fs.readFileSync(file)
    const ops: FileOps = {
      ...nodeFileOps,
      async write(handle, data) {
        await nodeFileOps.write(handle, data.subarray(0, 5))
        throw enospc()
      },
    }
    await expect(appendLines(file, encodeEvents(turn(4, 2)), ops)).rejects.toThrow(/ENOSPC/)
    expect(fs.readFileSync(file)).toEqual(before)
  })

  it('reports a failed rollback as an AggregateError of both errors', async () => {
    const appendError = enospc()
    const rollbackError = Object.assign(new Error('EIO: i/o error, ftruncate'), { code: 'EIO' })
    const ops: FileOps = {
      ...nodeFileOps,
      sync: async () => {
        throw appendError
      },
      truncate: async () => {
        throw rollbackError
      },
    }
    const err = await appendLines(file, ['{}'], ops).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(AggregateError)
    expect((err as AggregateError).message).toBe(`failed to roll back append to "${file}"`)
    expect((err as AggregateError).errors).toEqual([appendError, rollbackError])
  })
})

describe('truncateTo', () => {
  it('cuts the file back and refuses to extend it', async () => {
    await materialize(file, HEADER, [])
    const headerOnly = size(file)
    await appendLines(file, ['{"torn'])
    await truncateTo(file, headerOnly)
    expect(fs.readFileSync(file, 'utf8')).toBe(HEADER + '\n')
    await expect(truncateTo(file, headerOnly + 10)).rejects.toThrow(/refusing to truncate/)
    expect(size(file)).toBe(headerOnly)
    await expect(truncateTo(file, -1)).rejects.toThrow(TypeError)
  })
})

describe('revisions', () => {
  it('a revision is dev:ino:size:mtimeNs:ctimeNs', async () => {
    await materialize(file, HEADER, encodeEvents(turn(0, 1)))
    const stat = fs.statSync(file, { bigint: true })
    expect(await statRevision(file)).toBe(`${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`)
  })

  it('changes after an append and after a truncate', async () => {
    await materialize(file, HEADER, encodeEvents(turn(0, 1)))
    const r0 = await statRevision(file)
    const stored = size(file)
    await appendLines(file, encodeEvents(turn(4, 2)))
    const r1 = await statRevision(file)
    expect(r1).not.toBe(r0)
    await truncateTo(file, stored)
    const r2 = await statRevision(file)
    expect(r2).not.toBe(r1)
    expect(r2).not.toBe(r0) // same size as r0, but a later ctime
  })
})
