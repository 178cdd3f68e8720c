// Kills a real writer process with SIGKILL at random moments, then reloads its
// log: every event acknowledged by a flush must be there unchanged, the torn tail
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
const writer = fileURLToPath(new URL('./fixtures/crash-writer.ts', import.meta.url))

interface Ack {
  seq: number
  digest: string
}

/** Runs the writer until a random moment after its first acknowledgement, then SIGKILLs it. */
function runAndKill(root: string, id: string, delayMs: number): Promise<Ack> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [writer, root, id], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    let timer: NodeJS.Timeout | undefined
    child.stdout.on('data', chunk => {
      out += chunk
      timer ??= setTimeout(() => child.kill('SIGKILL'), delayMs)
    })
    child.stderr.on('data', chunk => {
      err += chunk
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited with ${code}: ${err}`))
      const acks = out
        .split('\n')
        .filter(line => line.startsWith('ACK '))
        .map(line => line.split(' '))
      if (!acks.length) return reject(new Error(`writer acknowledged nothing: ${err}`))
      const [, seq, digest] = acks.at(-1)!
      resolve({ seq: Number(seq), digest })
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
  it(`keeps every acknowledged event across ${RUNS} SIGKILLs at random moments`, { timeout: 240_000 }, async () => {
    const outcomes = { torn: 0, closedTurns: 0 }
    const run = async (i: number) => {
      const root = mkdtempSync(join(tmpdir(), 'loom-crash-'))
      const id = `crash-${i}`
      const ack = await runAndKill(root, id, Math.floor(Math.random() * 150))
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
    // Two writers at a time: one per core.
    for (let i = 0; i < RUNS; i += 2) await Promise.all([run(i), run(i + 1)])
    console.log(`crash runs: ${RUNS}, torn tails repaired: ${outcomes.torn}, open turns closed: ${outcomes.closedTurns}`)
  })
})
