// Durable before shown: `loom run` is stopped at random points of a tool loop
// (frozen, or SIGKILLed); every tool result it printed as done (✓) and a final
// answer it printed whole must be in the log on disk at that moment.
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cleanEnv, events, MAIN, project, sessionFiles } from './helpers.ts'

const STEPS = 6
const FINAL = 'All six files were read and every check passed.'

/**
 * A model that reads two files, STEPS times, then answers. The rows that take
 * no part in what is shown or stored (git state, the clock, instructions,
 * skills, search, compaction, the shell) are off: each of the many runs boots
 * and steps faster. (Which tool ran does not matter to the gate: every tool
 * result is shown only once its event is durable.)
 */
const LOOP_MODEL = `
${['workspace', 'time', 'instructions', 'skills', 'search', 'compaction', 'shell'].map(id => `- id: ${id}\n  disabled: true`).join('\n')}
- id: scripted
  disabled: true
- insert:
    - id: looping
      name: '@loom/llm-scripted'
      config:
        provider: scripted
        model: scripted-1
        script:
${Array.from(
  { length: STEPS },
  (_, i) => `          - text: Step ${i + 1}.
            toolCalls:
              - { name: read, arguments: { path: notes.txt } }
              - { name: read, arguments: { path: checks.txt } }`,
).join('\n')}
          - ${JSON.stringify(FINAL)}
`

/**
 * 50 crash points in 10 runs: each run is frozen (SIGSTOP) at four points, where
 * the log on disk is what a SIGKILL would leave, compared with what was shown and
 * continued (SIGCONT); at its fifth point it is SIGKILLed. (A boot costs far more
 * than a run: ten boots instead of fifty.)
 */
const RUNS = 10
const POINTS_PER_RUN = 5
const PARALLEL = 5
/** A point is a number of results shown (0 to 12), or 13: the answer shown. */
const POINTS = 2 * STEPS + 2

interface Outcome {
  shownResults: number
  shownFinal: boolean
  loggedResults: number
  loggedFinal: boolean
}

const sleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/** Whether the process is stopped (or gone); where there is no /proc, after a pause. */
async function stopped(pid: number): Promise<void> {
  for (let tries = 0; tries < 400; tries++) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !existsSync('/proc/self')) return sleep(100)
      return
    }
    // The state follows the command name, which is in parentheses.
    if (/^ [TtZX]/.test(stat.slice(stat.lastIndexOf(')') + 1))) return
    await sleep(5)
  }
  throw new Error(`process ${pid} did not stop`)
}

/** What was shown, against what the log on disk holds. */
function observe(shown: string, home: string): Outcome {
  const log = sessionFiles(home).flatMap(events)
  return {
    shownResults: shown.split('✓').length - 1,
    shownFinal: shown.includes(`${FINAL}\n`),
    loggedResults: log.filter(event => event.type === 'tool/result' && !event.data.message.content[0].isError).length,
    loggedFinal: log.some(
      event =>
        event.type === 'assistant/message' &&
        !event.data.interrupted &&
        event.data.message.content.some((block: any) => block.type === 'text' && block.text === FINAL),
    ),
  }
}

/**
 * One run, its output going to a file (read as it grows: what it has shown at any
 * moment). At each point, once that many results (or the answer) are shown and a
 * random delay later, it is frozen and observed; at the last, killed.
 */
async function observedRun(points: number[]): Promise<{ outcomes: Outcome[]; killed: boolean }> {
  const { cwd, home } = project({ 'loom.yml': LOOP_MODEL, 'notes.txt': 'notes\n', 'checks.txt': 'checked\n' })
  const output = join(dirname(cwd), 'stdout.txt')
  const fd = openSync(output, 'w')
  const child = spawn(process.execPath, [MAIN, 'run', 'check the files'], { cwd, env: cleanEnv(home), stdio: ['ignore', fd, 'pipe'] })
  closeSync(fd)
  let stderr = ''
  child.stderr!.setEncoding('utf8').on('data', (data: string) => {
    stderr += data
  })
  const exited = new Promise<NodeJS.Signals | null>(resolve => child.on('exit', (_code, signal) => resolve(signal)))
  let running = true
  void exited.then(() => {
    running = false
  })
  const guard = setTimeout(() => child.kill('SIGKILL'), 45_000)
  const shown = () => readFileSync(output, 'utf8')
  const outcomes: Outcome[] = []
  for (const [index, point] of points.entries()) {
    // The answer counts as shown once whole (its line ended), as `observe` reads it: waiting only for
    // its text let a loaded machine stop every run between the text and its newline.
    while (running && !shown().includes(`${FINAL}\n`) && shown().split('✓').length - 1 < point) await sleep(5)
    // Within a step or two: a step takes a few milliseconds, and a longer delay let most runs answer before their kill.
    await sleep(Math.floor(Math.random() * 10))
    if (!running) break
    if (index === points.length - 1) {
      child.kill('SIGKILL')
      break
    }
    child.kill('SIGSTOP')
    await stopped(child.pid!)
    outcomes.push(observe(shown(), home))
    child.kill('SIGCONT')
  }
  const signal = await exited
  clearTimeout(guard)
  if (signal !== 'SIGKILL' && !shown().includes(FINAL)) throw new Error(`the run ended early: ${stderr}`)
  outcomes.push(observe(shown(), home))
  return { outcomes, killed: signal === 'SIGKILL' }
}

describe('durable before shown', () => {
  it(`at ${RUNS * POINTS_PER_RUN} random points of ${RUNS} runs (${RUNS} of them SIGKILLs) nothing shown as done is missing from the log`, async () => {
    // Every point 0..13 about equally often, in increasing order within a run.
    const runs = Array.from({ length: RUNS }, (_, run) =>
      Array.from({ length: POINTS_PER_RUN }, (_, k) => (run * POINTS_PER_RUN + k) % POINTS).sort((a, b) => a - b),
    )
    const results: { outcomes: Outcome[]; killed: boolean }[] = []
    for (let i = 0; i < runs.length; i += PARALLEL) results.push(...(await Promise.all(runs.slice(i, i + PARALLEL).map(observedRun))))
    const outcomes = results.flatMap(result => result.outcomes)
    const lost = outcomes.filter(o => o.loggedResults < o.shownResults || (o.shownFinal && !o.loggedFinal))
    expect(lost).toEqual([])
    // The points landed all over the run: before any result, among them, and after the answer; and kills cut runs
    // before their answer. (A run whose last point comes late can finish within the random delay before its kill: how
    // many do depends on how fast the steps are, so the count of kills is not asserted.)
    expect(outcomes.some(o => o.shownResults === 0)).toBe(true)
    expect(outcomes.some(o => o.shownResults > 0 && !o.shownFinal)).toBe(true)
    expect(outcomes.some(o => o.shownFinal)).toBe(true)
    expect(results.filter(result => result.killed && !result.outcomes.at(-1)!.shownFinal).length).toBeGreaterThan(0)
  }, 240_000)
})
