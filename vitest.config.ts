import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { defineConfig } from 'vitest/config'

/** Every package, plugin and app with a tests/ folder is a project, named as its package. */
const projects = ['packages', 'plugins', 'apps']
  .flatMap(dir => readdirSync(dir).map(name => join(dir, name)))
  .filter(root => existsSync(join(root, 'tests')))
  .map(root => ({
    extends: true as const,
    test: {
      name: JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).name as string,
      root,
      include: ['tests/**/*.test.ts'],
      // The CLI's tests run real commands, some in subprocesses.
      ...(root === join('apps', 'cli') && { testTimeout: 60_000 }),
    },
  }))

// The workspace runs from source: `@loom/*` packages export their TypeScript
// under the `loom-source` condition (their compiled dist/ is for installs).
// Subprocesses the tests start (the CLI, session writers) inherit it through
// NODE_OPTIONS.
const SOURCE_CONDITION = '--conditions=loom-source'
if (!process.env.NODE_OPTIONS?.includes(SOURCE_CONDITION)) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} ${SOURCE_CONDITION}`.trim()

export default defineConfig({
  ssr: { resolve: { conditions: ['loom-source'] } },
  test: {
    projects,
    // Every core: vitest's default leaves one idle, a single worker on a 2-core
    // machine. The slowest files mostly wait on subprocesses, so they overlap well.
    maxWorkers: '100%',
    // Worker threads that keep their modules from one test file to the next: a
    // file starts without booting a process or importing the same packages
    // again. Every test builds its own Cordis context, folders and environment
    // (each thread has its own process.env), so nothing leaks between files.
    pool: 'threads',
    isolate: false,
  },
})
