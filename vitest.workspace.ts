import { existsSync, readdirSync } from 'node:fs'

/**
 * The test projects (imported by vitest.config.ts as `test.projects`). Two: the
 * CLI's tests (they run real commands, some in subprocesses, and get a longer
 * timeout) and every other package's tests/ folder. One module graph each: a
 * project per package transformed the shared packages once per package.
 */
const CLI = 'apps/cli'
const others = ['packages', 'plugins', 'apps']
  .flatMap(dir => readdirSync(dir).map(name => `${dir}/${name}`))
  .filter(root => root !== CLI && existsSync(`${root}/tests`))

export default [
  { extends: true as const, test: { name: 'packages', include: others.map(root => `${root}/tests/**/*.test.ts`) } },
  { extends: true as const, test: { name: 'cli', include: [`${CLI}/tests/**/*.test.ts`], testTimeout: 60_000 } },
]
