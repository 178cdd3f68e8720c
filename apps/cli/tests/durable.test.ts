// Durable before shown: `loom run` is SIGKILLed at random points of a tool loop;
// every tool result it printed as done (✓) and a final answer it printed whole
// must be in the log on disk.
import { describe, expect, it } from 'vitest'
import { events, loomProcess, project, sessionFiles } from './helpers.ts'

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

const KILLS = 50
const PARALLEL = 5

interface Outcome {
  shownResults: number
  shownFinal: boolean
  loggedResults: number
  loggedFinal: boolean
}

/** One run, killed once `stopAfter` result lines were printed (or at the end), plus a random delay. */
async function killedRun(stopAfter: number): Promise<Outcome> {
  const { cwd, home } = project({ 'loom.yml': LOOP_MODEL, 'notes.txt': 'notes\n', 'checks.txt': 'checked\n' })
  const run = await loomProcess(['run', 'check the files'], {
    cwd,
    home,
    onSpawn: (child, output) => {
      const poll = setInterval(() => {
        const shown = output.stdout().split('✓').length - 1
        if (shown >= stopAfter || output.stdout().includes(FINAL)) {
          clearInterval(poll)
          setTimeout(() => child.kill('SIGKILL'), Math.floor(Math.random() * 40))
        }
      }, 5)
      child.on('exit', () => clearInterval(poll))
    },
  })
  const log = sessionFiles(home).flatMap(events)
  return {
    shownResults: run.stdout.split('✓').length - 1,
    shownFinal: run.stdout.includes(`${FINAL}\n`),
    loggedResults: log.filter(event => event.type === 'tool/result' && !event.data.message.content[0].isError).length,
    loggedFinal: log.some(
      event =>
        event.type === 'assistant/message' &&
        !event.data.interrupted &&
        event.data.message.content.some((block: any) => block.type === 'text' && block.text === FINAL),
    ),
  }
}

describe('durable before shown', () => {
  it(`after ${KILLS} SIGKILLs at random points nothing shown as done is missing from the log`, async () => {
    const stops = Array.from({ length: KILLS }, (_, i) => i % (2 * STEPS + 2))
    const outcomes: Outcome[] = []
    for (let i = 0; i < stops.length; i += PARALLEL) {
      outcomes.push(...(await Promise.all(stops.slice(i, i + PARALLEL).map(killedRun))))
    }
    const lost = outcomes.filter(o => o.loggedResults < o.shownResults || (o.shownFinal && !o.loggedFinal))
    expect(lost).toEqual([])
    // The kills landed all over the run: before any result, among them, and after the answer.
    expect(outcomes.some(o => o.shownResults === 0)).toBe(true)
    expect(outcomes.some(o => o.shownResults > 0 && !o.shownFinal)).toBe(true)
    expect(outcomes.some(o => o.shownFinal)).toBe(true)
  }, 240_000)
})
