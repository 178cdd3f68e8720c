// Kills real writer processes with SIGKILL at random moments, then reloads their
// logs: every event acknowledged by a flush must be there unchanged, the torn tail
// must be cut, and an open turn must be closed with explicit results.
import { Context } from '@deepseek-ai/cordis'
import SessionStore from '@loom/session'
import JsonlPersistence from '@loom/session-jsonl'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const RUNS = 50
/** Writers per process: one kill lands at a different point of each one's cycle. */
const WRITERS = 5
const writer = fileURLToPath(new URL('./fixtures/crash-writer.ts', import.meta.url))

interface Ack {
  seq: number
  digest: string
}

/**
 * Runs a process of writers, one per id, until a random moment after each has
 * acknowledged something, then SIGKILLs it. The last acknowledgement of each id.
 */
function runAndKill(root: string, ids: string[], delayMs: number): Promise<Map<string, Ack>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [writer, root, ...ids], { stdio: ['ignore', 'pipe', 'pipe'] })
    const acks = new Map<string, Ack>()
    let pending = ''
    let err = ''
    let timer: NodeJS.Timeout | undefined
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\n')
      pending = lines.pop()!
      for (const line of lines) {
        const [tag, id, seq, digest] = line.split(' ')
        if (tag === 'ACK') acks.set(id, { seq: Number(seq), digest })
      }
      if (acks.size === ids.length) timer ??= setTimeout(() => child.kill('SIGKILL'), delayMs)
    })
    child.stderr.on('data', chunk => {
      err += chunk
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited with ${code}: ${err}`))
      resolve(acks)
    })
  })
}

async function backend(root: string) {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await ctx.plugin(JsonlPersistence, { root })
  return ctx.sessionPersistence
}

describe('crash safety', () => {
  it(`keeps every acknowledged event of ${RUNS} writers SIGKILLed at random moments`, { timeout: 240_000 }, async () => {
    const outcomes = { torn: 0, closedTurns: 0 }
    const check = async (root: string, id: string, ack: Ack) => {
      const persistence = await backend(root)

      const before = await persistence.files.read((await persistence.files.find(id))!)
      if (before.committedBytes < before.fileBytes) outcomes.torn++
      if (before.closers.length) outcomes.closedTurns++

      const { events } = await persistence.load(id)
      const acknowledged = events.slice(0, ack.seq + 1)
      expect(acknowledged).toHaveLength(ack.seq + 1)
      expect(createHash('sha256').update(JSON.stringify(acknowledged)).digest('hex')).toBe(ack.digest)
      expect(events.map(event => event.seq)).toEqual(events.map((_, index) => index))
      expect(events.at(-1)!.type).toBe('turn/end')

      // Repaired on disk: no torn tail, no open turn, and every tool call has a result.
      const after = await persistence.files.read(before.path)
      expect(after.committedBytes).toBe(after.fileBytes)
      expect(after.closers).toEqual([])
      const calls = events.flatMap(event =>
        event.type === 'assistant/message'
          ? (event.data as any).message.content.filter((block: any) => block.type === 'tool-call').map((block: any) => block.id)
          : [],
      )
      const results = new Set(events.filter(event => event.type === 'tool/result').map(event => (event.data as any).message.source.callId))
      expect(calls.filter(call => !results.has(call))).toEqual([])
    }
    const run = async (first: number) => {
      const root = mkdtempSync(join(tmpdir(), 'loom-crash-'))
      const ids = Array.from({ length: WRITERS }, (_, k) => `crash-${first + k}`)
      const acks = await runAndKill(root, ids, Math.floor(Math.random() * 150))
      for (const id of ids) await check(root, id, acks.get(id)!)
    }
    // Two processes at a time: one per core.
    for (let i = 0; i < RUNS; i += 2 * WRITERS) await Promise.all([run(i), run(i + WRITERS)])
    console.log(`crash runs: ${RUNS}, torn tails repaired: ${outcomes.torn}, open turns closed: ${outcomes.closedTurns}`)
  })
})
