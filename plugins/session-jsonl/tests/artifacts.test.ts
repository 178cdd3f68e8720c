// Artifacts (long tool output kept whole, `@loom/tools/artifacts`) in a JSONL store: files in
// `artifacts/` beside the session's log, written atomically, bounded per session, read back
// after a restart, and never reachable from another session.
import { Context, type Fiber } from '@deepseek-ai/cordis'
import SessionStore from '@loom/session'
import { live, shortTurn } from '@loom/session/testing'
import ToolRuntime from '@loom/tools'
import SystemPrompt from '@loom/system-prompt'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, beforeEach, expect, it } from 'vitest'
import JsonlPersistence, { ARTIFACTS_DIRNAME } from '../src/index.ts'

let dir: string
let fibers: Fiber[]

beforeEach(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'loom-jsonl-artifacts-')))
  fibers = []
})
afterEach(async () => {
  await stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

async function stop() {
  for (const fiber of fibers.splice(0).reverse()) await Promise.resolve(fiber.dispose()).catch(() => {})
}

/** One process: the session store, the JSONL backend over `dir`, and the tool runtime with small artifact limits. */
async function host() {
  await stop()
  const root = new Context()
  fibers.push(await root.plugin(SessionStore))
  fibers.push(await root.plugin(JsonlPersistence, { root: dir, maxDelayMs: 5 }))
  fibers.push(await root.plugin(SystemPrompt))
  fibers.push(await root.plugin(ToolRuntime, { protect: [], denyRead: [], allowRead: [], artifacts: { maxBytes: 1000, sessionMaxBytes: 2500 } }))
  const owner = await root.plugin({ name: 'owner', inject: ['sessions', 'sessionPersistence', 'tools'], apply() {} })
  fibers.push(owner)
  return owner.ctx
}

const call = (sessionId: string, callId: string) => ({ callId, agent: { id: `agent-${sessionId}`, sessionId } })

it('keeps an artifact in artifacts/ beside the session log, atomically, and reads it back after a restart', async () => {
  let ctx = await host()
  const session = ctx.sessions.create('s-1', { meta: { cwd: dir } })
  const reference = await ctx.tools.artifacts.keep(call(session.id, 'call_1'), 'line 1\nline 2\n')
  expect(reference).toBe('artifact://call_1')

  const log = ctx.sessionPersistence.locate(session.header).path
  const folder = path.join(path.dirname(log), ARTIFACTS_DIRNAME)
  expect(fs.readdirSync(folder)).toEqual(['call_1'])
  expect(fs.readFileSync(path.join(folder, 'call_1'), 'utf8')).toBe('line 1\nline 2\n')
  expect(fs.statSync(path.join(folder, 'call_1')).mode & 0o777).toBe(0o600)

  shortTurn(live(session), 1)
  await ctx.sessions.flush(session)
  ctx = await host()
  expect(await ctx.tools.artifacts.read(call('s-1', 'later'), 'artifact://call_1')).toBe('line 1\nline 2\n')
})

it('never reads another session’s artifact, and lists none of its temp files', async () => {
  const ctx = await host()
  ctx.sessions.create('mine', { meta: { cwd: dir } })
  ctx.sessions.create('theirs', { meta: { cwd: dir } })
  await ctx.tools.artifacts.keep(call('theirs', 'secret'), 'theirs only')
  await expect(ctx.tools.artifacts.read(call('mine', 'c'), 'artifact://secret')).rejects.toThrow(/is not an artifact of this session/)
  await expect(ctx.tools.artifacts.read(call('mine', 'c'), 'artifact://../theirs/artifacts/secret')).rejects.toThrow(/is not an artifact reference/)

  const folder = path.join(path.dirname(ctx.sessionPersistence.locate({ id: 'mine', cwd: dir }).path), ARTIFACTS_DIRNAME)
  fs.mkdirSync(folder, { recursive: true })
  fs.writeFileSync(path.join(folder, '.c.abc123.tmp'), 'half written')
  expect(await ctx.sessionPersistence.artifacts.list('mine')).toEqual([])
})

it('removes the oldest artifacts of a session past its bound', async () => {
  const ctx = await host()
  ctx.sessions.create('s', { meta: { cwd: dir } })
  for (const id of ['a', 'b', 'c', 'd']) {
    await ctx.tools.artifacts.keep(call('s', id), id.repeat(800))
    // Distinct modification times: eviction goes by age.
    await new Promise(resolve => setTimeout(resolve, 5))
  }
  const entries = await ctx.sessionPersistence.artifacts.list('s')
  expect(entries.map(entry => entry.name).sort()).toEqual(['b', 'c', 'd'])
  expect(entries.reduce((sum, entry) => sum + entry.bytes, 0)).toBeLessThanOrEqual(2500)
})

it('goes with the session folder', async () => {
  const ctx = await host()
  const session = ctx.sessions.create('gone', { meta: { cwd: dir } })
  await ctx.tools.artifacts.keep(call('gone', 'c'), 'kept')
  shortTurn(live(session), 1)
  await ctx.sessions.flush(session)
  const sessionDir = path.dirname(ctx.sessionPersistence.locate(session.header).path)
  await stop()
  fs.rmSync(sessionDir, { recursive: true })
  const later = await host()
  expect(await later.sessionPersistence.list()).toEqual([])
  await expect(later.tools.artifacts.read(call('gone', 'x'), 'artifact://c')).rejects.toThrow(/session "gone" not found/)
})
