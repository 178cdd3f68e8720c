// Durable storage figures: append throughput (each batch is one fsync'd write)
// at several batch sizes, and the cost of loading a long log compared with the
// bare JSON.parse of its lines (the ratio is what reading the file, the scanner,
// validation and projection add): medians of alternating rounds.
import { Context } from '@deepseek-ai/cordis'
import AgentLoop from '@loom/agent-loop'
import Llm, { userText } from '@loom/llm'
import SessionStore from '@loom/session'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime from '@loom/tools'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { InstantAdapter } from '../../../packages/agent-loop/bench/step.ts'
import { longSession } from '../../../packages/session/bench/derive.ts'
import JsonlPersistence from '../src/index.ts'
import { JsonlFiles } from '../src/store.ts'

export interface AppendFigure {
  bench: 'session-jsonl/append'
  batch: number
  events: number
  events_per_s: number
  batches_per_s: number
}
export interface LoadFigure {
  bench: 'session-jsonl/load'
  events: number
  bytes: number
  load_ms: number
  json_parse_ms: number
  ratio: number
  /** The same parse keeping what it parsed, as a load must: the part of the ratio that holding the events costs. */
  json_parse_kept_ms: number
  ratio_to_kept: number
  /** The first `session.events` after the load: the restored events are frozen then. */
  first_events_ms: number
  /** `agents.resume` of the same log: the load, then the agent (turn count, inbox, runtime context, backend tracking). */
  resume_ms: number
  /** The resumed agent's first step (history handed out, prompt assembled, request built), with a model that answers at once. */
  first_step_ms: number
}

const header = (id: string) => ({ version: 0 as const, id, createdAt: 0, cwd: '/bench' })
const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6

export async function benchAppend(batchSizes = [1, 10, 100, 1000], total = 2000): Promise<AppendFigure[]> {
  const events = longSession(total).events
  const figures: AppendFigure[] = []
  for (const batch of batchSizes) {
    const root = mkdtempSync(join(tmpdir(), 'loom-bench-'))
    const files = new JsonlFiles({ root, packChunks: true })
    const count = Math.min(events.length, Math.max(batch * 20, 200))
    await files.materialize(header('append'), [])
    const path = files.pathOf(header('append'))
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i += batch) await files.append(path, events.slice(i, i + batch))
    const seconds = ms(start) / 1000
    figures.push({
      bench: 'session-jsonl/append',
      batch,
      events: count,
      events_per_s: Math.round(count / seconds),
      batches_per_s: Math.round(Math.ceil(count / batch) / seconds),
    })
    rmSync(root, { recursive: true, force: true })
  }
  return figures
}

export async function benchLoad(size = 100_000, rounds = 7): Promise<LoadFigure> {
  const root = mkdtempSync(join(tmpdir(), 'loom-bench-'))
  const files = new JsonlFiles({ root, packChunks: true })
  const events = await writeLongLog(files, size)
  const path = files.pathOf(header('load'))
  const text = readFileSync(path, 'utf8')

  // Alternate the two, each from a collected heap (a collection owed to earlier
  // work is charged to neither); the first round warms up and is dropped.
  const parses: number[] = []
  const kepts: number[] = []
  const loads: number[] = []
  for (let round = 0; round <= rounds; round++) {
    collectGarbage()
    let start = process.hrtime.bigint()
    for (const line of text.split('\n')) if (line) JSON.parse(line)
    const parse = ms(start)

    collectGarbage()
    start = process.hrtime.bigint()
    const kept: unknown[] = []
    for (const line of text.split('\n')) if (line) kept.push(JSON.parse(line))
    const parseKept = ms(start)
    kept.length = 0

    collectGarbage()
    start = process.hrtime.bigint()
    const log = await files.read(path, 'load')
    files.restore(log)
    const load = ms(start)
    if (round > 0) {
      parses.push(parse)
      kepts.push(parseKept)
      loads.push(load)
    }
  }
  // Apart, so that it does not change the heap the loads start from.
  const firsts: number[] = []
  for (let round = 0; round < 3; round++) {
    collectGarbage()
    const session = files.restore(await files.read(path, 'load'))
    const start = process.hrtime.bigint()
    void session.events
    firsts.push(ms(start))
  }
  const resumed = await benchResume(root)
  rmSync(root, { recursive: true, force: true })
  const parse = median(parses)
  const kept = median(kepts)
  const load = median(loads)
  return {
    bench: 'session-jsonl/load',
    events,
    bytes: Buffer.byteLength(text),
    load_ms: Math.round(load * 10) / 10,
    json_parse_ms: Math.round(parse * 10) / 10,
    ratio: Math.round((load / parse) * 100) / 100,
    json_parse_kept_ms: Math.round(kept * 10) / 10,
    ratio_to_kept: Math.round((load / kept) * 100) / 100,
    first_events_ms: Math.round(median(firsts) * 10) / 10,
    resume_ms: Math.round(median(resumed.resumes) * 10) / 10,
    first_step_ms: Math.round(median(resumed.steps) * 10) / 10,
  }
}

/** Resumes the log of `root` (a copy each round: a resume appends) as `loom sessions resume` does, and takes one step. */
async function benchResume(root: string, rounds = 5): Promise<{ resumes: number[]; steps: number[] }> {
  const home = new Context()
  await home.plugin(SystemPrompt, { persona: 'You are a benchmark.' })
  await home.plugin(SessionStore)
  await home.plugin(Llm)
  await home.plugin(ToolRuntime)
  await home.plugin(AgentLoop, {})
  const host = await home.plugin({ name: 'bench', inject: ['llm', 'agents'], apply() {} })
  host.ctx.llm.registerAdapter(['instant'], new InstantAdapter())
  const resumes: number[] = []
  const steps: number[] = []
  for (let round = 0; round <= rounds; round++) {
    const copy = mkdtempSync(join(tmpdir(), 'loom-bench-'))
    cpSync(root, copy, { recursive: true })
    const backend = await host.ctx.plugin(JsonlPersistence, { root: copy, checkpoints: false })
    collectGarbage()
    let start = process.hrtime.bigint()
    const agent = await host.ctx.agents.resume('load', { provider: 'instant', model: 'm' })
    const resume = ms(start)
    start = process.hrtime.bigint()
    agent.followup(userText('one more step'))
    await agent.idle()
    const step = ms(start)
    await agent.dispose()
    await backend.dispose()
    rmSync(copy, { recursive: true, force: true })
    // The first round warms up, and is dropped.
    if (round > 0) {
      resumes.push(resume)
      steps.push(step)
    }
  }
  return { resumes, steps }
}

/**
 * `benchLoad` in fresh processes, as `loom sessions resume` loads a session: the
 * heap that earlier benches of one `pnpm bench` leave behind would otherwise be
 * collected again during every load. Plain Node (its own type stripping): a
 * TypeScript loader in the child made every other run twice as slow. One process
 * can land in a slow or a fast phase of the machine for its parse or its loads:
 * the figure is that of the process with the median ratio, with the range of all.
 */
export function benchLoadFresh(processes = 5): LoadFigure & { processes: number; ratio_min: number; ratio_max: number } {
  const figures: LoadFigure[] = []
  for (let i = 0; i < processes; i++) {
    const child = spawnSync(process.execPath, ['--conditions=loom-source', fileURLToPath(import.meta.url), '--load'], { encoding: 'utf8' })
    if (child.status !== 0) throw new Error(`the load bench failed: ${child.stderr}`)
    figures.push(JSON.parse(child.stdout) as LoadFigure)
  }
  figures.sort((a, b) => a.ratio - b.ratio)
  return { ...figures[figures.length >> 1], processes, ratio_min: figures[0].ratio, ratio_max: figures[figures.length - 1].ratio }
}

/** Writes the log of a session of about `size` events; the session is not kept (it would weigh on every collection). */
async function writeLongLog(files: JsonlFiles, size: number): Promise<number> {
  const { events } = longSession(size)
  await files.materialize(header('load'), events)
  return events.length
}

const median = (samples: number[]) => samples.slice().sort((a, b) => a - b)[samples.length >> 1]

// `gc` without restarting node with --expose-gc.
let gc: (() => void) | undefined
function collectGarbage() {
  if (!gc) {
    setFlagsFromString('--expose-gc')
    gc = runInNewContext('gc') as () => void
  }
  gc()
}

// `node persistence.ts --load`: the figure of benchLoadFresh's child.
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--load')) console.log(JSON.stringify(await benchLoad()))
