// An uncaught error is named after the row whose code its stack names first
// (signals.test.ts runs it end to end); Loom's own code is no plugin's.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { CLI_ROOT } from '../src/compose.ts'
import { findCulprit, type RowModule } from '../src/culprit.ts'
import { project } from './helpers.ts'

/** An error thrown at these files, top frame first. */
function thrownAt(...files: string[]): Error {
  const error = new Error('boom')
  error.stack = [
    'Error: boom',
    ...files.map((file, i) => `    at f${i} (${file}:3:7)`),
    '    at process.processTicksAndRejections (node:internal/process/task_queues:105:5)',
  ].join('\n')
  return error
}

describe('findCulprit', () => {
  const { cwd } = project({
    'node_modules/greeter/package.json': '{ "name": "greeter", "main": "lib/index.js" }',
    'node_modules/greeter/lib/index.js': '',
    'node_modules/greeter/lib/helper.js': '',
    'node_modules/greeter/node_modules/dep/index.js': '',
    'crash.ts': '',
  })
  mkdirSync(join(cwd, 'folder-plugin'))
  writeFileSync(join(cwd, 'folder-plugin', 'index.ts'), '')
  const greeter = join(cwd, 'node_modules/greeter')
  const rows: RowModule[] = [
    { id: 'greeter', shown: 'greeter', file: pathToFileURL(join(greeter, 'lib/index.js')).href, package: true },
    { id: 'crash', shown: './crash.ts', file: join(cwd, 'crash.ts'), package: false },
    { id: 'folder', shown: './folder-plugin', file: join(cwd, 'folder-plugin'), package: false },
    { id: 'runner', shown: '@loom/cli/runner', file: join(CLI_ROOT, 'src', 'runner.ts'), package: true },
  ]

  it("names the row of the first frame in a row's code: any file of its package, its file, what is in its folder", () => {
    expect(findCulprit(thrownAt('node:internal/timers', pathToFileURL(join(greeter, 'lib/helper.js')).href), rows)).toEqual({
      id: 'greeter',
      label: 'row "greeter" (greeter)',
    })
    expect(findCulprit(thrownAt(join(cwd, 'crash.ts'), join(greeter, 'lib/index.js')), rows)?.id).toBe('crash')
    expect(findCulprit(thrownAt(`${pathToFileURL(join(cwd, 'folder-plugin', 'index.ts')).href}?hot=3`), rows)?.id).toBe('folder')
  })

  it("a package's own dependencies, the CLI's code and a stack without frames in any row are no plugin's", () => {
    expect(findCulprit(thrownAt(join(greeter, 'node_modules/dep/index.js')), rows)).toBeUndefined()
    expect(findCulprit(thrownAt(pathToFileURL(join(CLI_ROOT, 'src', 'runner.ts')).href), rows)).toBeUndefined()
    expect(findCulprit(thrownAt('node:internal/timers'), rows)).toBeUndefined()
    expect(findCulprit('not an error', rows)).toBeUndefined()
  })
})
