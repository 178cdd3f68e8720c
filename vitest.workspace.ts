import { existsSync, readdirSync } from 'node:fs'

/**
 * The test projects (imported by vitest.config.ts as `test.projects`). Two: the
 * CLI's tests (they run real commands, some in subprocesses, and get a longer
 * timeout) and every other package's tests/ folder. One module graph each: a
 * project per package transformed the shared packages once per package. The
 * timeouts are a guard against a hang, not a speed check: a test that takes 2 s
 * alone can take 6 s on a loaded 2-core machine.
 */
const CLI = 'apps/cli'
const others = ['packages', 'plugins', 'apps']
  .flatMap(dir => readdirSync(dir).map(name => `${dir}/${name}`))
  .filter(root => root !== CLI && existsSync(`${root}/tests`))

export default [
  { extends: true as const, test: { name: 'packages', include: others.map(root => `${root}/tests/**/*.test.ts`), testTimeout: 30_000 } },
  { extends: true as const, test: { name: 'cli', include: [`${CLI}/tests/**/*.test.ts`], testTimeout: 60_000 } },
]
