// The loom.yml snippets of the docs cannot drift: every ```yaml block in the
// README, docs/ and every package README is a project's layer over the default
// bundle, and the deployment it makes boots. A plugin it mounts by path, or by a
// package name that is not installed here, is an empty stand-in. A snippet that
// reads LOOM_PG_URL gets a real PostgreSQL server.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { TestPostgres } from '@loom/session-postgres/testing'
import { afterAll, describe, expect, it } from 'vitest'
import { CLI_ROOT, resolvePackage } from '../src/compose.ts'
import { loom, project } from './helpers.ts'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))

const docs = [
  'README.md',
  ...readdirSync(join(REPO, 'docs')).map(name => join('docs', name)),
  ...['packages', 'plugins', 'apps'].flatMap(dir => readdirSync(join(REPO, dir)).map(name => join(dir, name, 'README.md'))),
].filter(file => file.endsWith('.md') && existsSync(join(REPO, file)))

const snippets = docs.flatMap(file =>
  [...readFileSync(join(REPO, file), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].map((match, index) => ({
    name: `${file} #${index + 1}`,
    yaml: match[1],
  })),
)

describe('loom.yml snippets of the docs', () => {
  it('there are some to check', () => {
    expect(snippets.length).toBeGreaterThan(10)
  })

  it.each(snippets)('$name boots on its bundle', async ({ yaml }) => {
    // A plugin the snippet mounts by path is an empty one here, and so is a
    // package it names that is not installed; a file a config points at is empty.
    const paths = [...yaml.matchAll(/name: \.\/(\S+\.ts)/g)].map(([, path]) => [path, stubPlugin(path)])
    const packages = [...yaml.matchAll(/name: '?((?:@[\w.-]+\/)?[\w.-]+)'?\s*$/gm)]
      .map(([, name]) => name)
      .filter(name => !installed(name))
      .flatMap(name => Object.entries(stubPackage(name)))
    const files = [...yaml.matchAll(/^\s+\w+: \.\/(\S+\.\w+)\s*$/gm)].map(([, path]) => [path, ''])
    const { cwd, home } = project({ 'loom.yml': yaml, ...Object.fromEntries([...files, ...paths, ...packages]) })
    // `# loom.yml on the minimal bundle`: a layer over that bundle instead of the default one.
    const bundle = /^# loom\.yml on the (\w+) bundle/.exec(yaml)?.[1] ?? 'default'
    const env: Record<string, string> = yaml.includes('LOOM_PG_URL') ? { LOOM_PG_URL: (await postgres()).url } : {}
    const run = await loom(['--bundle', bundle, 'prompt'], { cwd, home, env })
    expect(run.stderr).not.toMatch(/warning|error|failed/)
    expect(run.code, run.stderr).toBe(0)
  })
})

/** One server for the snippets that need it, started at the first. */
let server: Promise<TestPostgres> | undefined
const postgres = () => (server ??= import('@loom/session-postgres/testing').then(({ startTestPostgres }) => startTestPostgres()))
afterAll(async () => {
  await (await server)?.stop()
})

function installed(name: string): boolean {
  try {
    resolvePackage(name, CLI_ROOT)
    return true
  } catch {
    return false
  }
}

/** An installed package whose plugin does nothing. */
const stubPackage = (name: string) => ({
  [`node_modules/${name}/package.json`]: JSON.stringify({ name, type: 'module', exports: './index.js' }),
  [`node_modules/${name}/index.js`]: stubPlugin(name),
})

/** A plugin that does nothing, named after its file. */
const stubPlugin = (path: string) => `export const name = '${path}'\nexport function apply() {}\n`
