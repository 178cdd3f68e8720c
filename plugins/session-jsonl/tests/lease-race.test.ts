// Two real processes race to resume and append to one stored session: exactly one
// writes, the other is refused with the holder's pid before it writes anything,
// and the log verifies clean afterwards. Raced on a free session, over the lock
// of a dead process, and over a stale lock from another host.
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { Session } from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process'
import * as fs from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { closedTurn } from './fixtures/turns.ts'

const writerScript = fileURLToPath(new URL('./fixtures/lease-writer.ts', import.meta.url))
const HOST = hostname()

interface Writer {
  child: ChildProcessWithoutNullStreams
  /** Resolves with the first stdout line matching `pattern`. */
  line(pattern: RegExp): Promise<string>
  exited: Promise<number | null>
}

function startWriter(root: string, id: string): Writer {
  const child = spawn(process.execPath, [writerScript, root, id], { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  const waiting: (() => void)[] = []
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
    for (const check of waiting.splice(0)) check()
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  const exited = new Promise<number | null>(resolve =>
    child.on('exit', code => {
      for (const check of waiting.splice(0)) check()
      resolve(code)
    }),
  )
  const line = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const found = out.split('\n').find(text => pattern.test(text))
        if (found !== undefined) return resolve(found)
        if (child.exitCode !== null) return reject(new Error(`writer exited with ${child.exitCode} before ${pattern}: ${out}${err}`))
        waiting.push(check)
      }
      check()
    })
  return { child, line, exited }
}

async function race(root: string, id: string) {
  const writers = [startWriter(root, id), startWriter(root, id)]
  await Promise.all(writers.map(writer => writer.line(/^READY$/)))
  for (const writer of writers) writer.child.stdin.write('GO\n')
  const outcomes = await Promise.all(writers.map(writer => writer.line(/^(WROTE|REFUSED) /)))
  // The winner keeps its lease until the loser is done, so the two really overlap.
  outcomes.forEach((outcome, i) => {
    if (outcome.startsWith('WROTE')) writers[i].child.stdin.write('EXIT\n')
  })
  const codes = await Promise.all(writers.map(writer => writer.exited))
  return writers.map((writer, i) => ({ pid: writer.child.pid!, outcome: outcomes[i], code: codes[i] }))
}

function plant(lock: string, holder: { pid: number; host: string }, ageMs: number) {
  fs.writeFileSync(lock, JSON.stringify({ ...holder, since: Date.now() - ageMs, token: 'planted' }) + '\n')
  const beat = new Date(Date.now() - ageMs)
  fs.utimesSync(lock, beat, beat)
}

describe('two processes, one session', () => {
  it('exactly one writes, the other is refused naming it, and the log stays clean', { timeout: 120_000 }, async () => {
    const root = fs.mkdtempSync(join(tmpdir(), 'loom-lease-race-'))
    const id = 'raced'
    const header = { version: 0 as const, id, createdAt: 1_700_000_000_000, cwd: '/race' }
    const ctx = new Context()
    await ctx.plugin(SessionStore)
    const backend = await ctx.plugin(JsonlPersistence, { root })
    const seed = Session.create(id, undefined, header)
    closedTurn(seed, 1)
    ctx.sessionPersistence.create(header)
    await ctx.sessionPersistence.append(id, seed.events)
    const file = ctx.sessionPersistence.locate(header).path
    const lock = join(dirname(file), 'session.lock')
    await backend.dispose()

    const setups: [string, () => void][] = [
      ['a free session', () => {}],
      ['the lock of a dead process', () => plant(lock, { pid: spawnSync(process.execPath, ['-e', '']).pid!, host: HOST }, 0)],
      ['a stale lock from another host', () => plant(lock, { pid: 4242, host: 'elsewhere.example' }, 60_000)],
    ]
    for (const [label, setup] of setups) {
      setup()
      const results = await race(root, id)
      const winners = results.filter(result => result.outcome.startsWith('WROTE'))
      const losers = results.filter(result => result.outcome.startsWith('REFUSED'))
      expect(winners, label).toHaveLength(1)
      expect(losers, label).toHaveLength(1)
      expect(winners[0].code, label).toBe(0)
      expect(losers[0].code, label).toBe(1)
      expect(losers[0].outcome, label).toMatch(
        new RegExp(
          `^REFUSED session ${id} is being written by pid ${winners[0].pid} on host ${HOST.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} ` +
            `since \\d\\d:\\d\\d:\\d\\d \\(lease-writer\\); wait for it to finish or stop it$`,
        ),
      )
      // The winner exited without disposing: its exit hook released the lock.
      expect(fs.readdirSync(dirname(file)), label).toEqual(['session.jsonl'])
    }

    // Read-only checks, as `loom sessions verify` does: no torn tail, no open turn, dense seqs.
    const check = new Context()
    await check.plugin(SessionStore)
    await check.plugin(JsonlPersistence, { root })
    const log = await check.sessionPersistence.files.read(file, id)
    expect(log.committedBytes).toBe(log.fileBytes)
    expect(log.closers).toEqual([])
    const { events } = await check.sessionPersistence.inspect(id)
    expect(events.map(event => event.seq)).toEqual(events.map((_, i) => i))
    expect(events.filter(event => event.type === 'turn/end')).toHaveLength(1 + setups.length)
    expect(events.filter(event => event.type === 'session/end-seed')).toHaveLength(setups.length)
    fs.rmSync(root, { recursive: true, force: true })
  })
})
