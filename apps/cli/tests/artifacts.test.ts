// Long tool output kept as an artifact, end to end: `loom run` with the scripted model runs a
// command whose output is over the limit, reads the rest back with `read`, and the artifact is
// stored whole in the session's folder, beside its log.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { expect, it } from 'vitest'
import { events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'

it('bash output over the limit is kept with the session, and the model pages through it with read', async () => {
  const at = project({
    'loom.yml': scriptedModel(`
- toolCalls:
    - { id: long_1, name: bash, arguments: { command: 'seq 1 40000' } }
- toolCalls:
    - { id: page_1, name: read, arguments: { path: 'artifact://long_1', offset: 20000, limit: 3 } }
- Done.
`),
  })
  const run = await loom(['run', '--approve', 'all', 'count to forty thousand'], at)
  expect(run.code, run.stderr).toBe(0)

  const [log] = sessionFiles(at.home)
  const results = events(log)
    .filter(event => event.type === 'tool/result')
    .map(event => event.data.message.content[0].content[0].text as string)
  expect(results).toHaveLength(2)
  const [shown, page] = results
  expect(shown.startsWith('1\n2\n3\n')).toBe(true)
  expect(shown).toMatch(
    /\n\[… lines \d+-\d+ not shown \(\d+ bytes\)\. The whole output is kept as artifact:\/\/long_1: read it with `read` \(path "artifact:\/\/long_1", offset \d+\)\.\]\n/,
  )
  expect(shown.endsWith('\n39999\n40000\n[exit code: 0]')).toBe(true)
  expect(page).toBe(' 20000\t20000\n 20001\t20001\n 20002\t20002\n\n(Showing lines 20000-20002 of 40000. To read more, call read with offset=20003.)')

  const folder = join(dirname(log), 'artifacts')
  expect(readdirSync(folder)).toEqual(['long_1'])
  expect(readFileSync(join(folder, 'long_1'), 'utf8')).toBe(Array.from({ length: 40000 }, (_, i) => i + 1).join('\n'))
})
