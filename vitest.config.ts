import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { BaseSequencer, type TestSpecification } from 'vitest/node'
import { defineConfig } from 'vitest/config'
import projects from './vitest.workspace.ts'

/**
 * The files that take longest (npm installs, many killed processes, terminals)
 * start first, whichever project they are in: one of them starting last would
 * run alone at the end. The rest keep vitest's order.
 */
const LONGEST_FIRST = [
  'apps/cli/tests/outside.test.ts',
  'plugins/session-jsonl/tests/crash.test.ts',
  'apps/cli/tests/durable.test.ts',
  'apps/cli/tests/conversation.test.ts',
  'apps/cli/tests/terminal.test.ts',
  'plugins/mcp/tests/mcp.test.ts',
  'apps/cli/tests/dev.test.ts',
]
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const index = LONGEST_FIRST.findIndex(path => file.moduleId.endsWith(path))
      return index === -1 ? LONGEST_FIRST.length : index
    }
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

// The workspace runs from source: `@loom/*` packages export their TypeScript
// under the `loom-source` condition (their compiled dist/ is for installs).
// Subprocesses the tests start (the CLI, session writers) inherit it through
// NODE_OPTIONS.
const SOURCE_CONDITION = '--conditions=loom-source'
if (!process.env.NODE_OPTIONS?.includes(SOURCE_CONDITION)) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} ${SOURCE_CONDITION}`.trim()
// Those subprocesses keep their compiled, type-stripped modules here from the
// start (the CLI enables Node's cache only once its entry file is loaded): a
// warm one loads no TypeScript stripper at all.
process.env.NODE_COMPILE_CACHE ??= join(import.meta.dirname, 'node_modules', '.cache', 'node-compile')

export default defineConfig({
  ssr: { resolve: { conditions: ['loom-source'] } },
  test: {
    projects,
    // More workers than cores: vitest's default leaves one core idle, and the
    // slowest files mostly wait on subprocesses, terminals and npm, so half as
    // many workers again keep the cores busy meanwhile. A number: vitest caps a
    // percentage at the core count.
    maxWorkers: Math.max(2, Math.round(availableParallelism() * 1.5)),
    // Worker processes that keep their modules from one test file to the next: a
    // file starts without booting a process or importing the same packages
    // again. Every test builds its own Cordis context, folders and environment,
    // so nothing leaks between files. Processes, not threads: the tests start
    // well over a thousand subprocesses (git, bash, bwrap, tmux, node), and each
    // start forks the process it comes from; forking one holding every worker's
    // heap and threads cost more than a tenth of the run's CPU in page faults.
    pool: 'forks',
    isolate: false,
    sequence: { sequencer: LongestFirst },
  },
})
