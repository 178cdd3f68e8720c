// The loom.yml snippets of the docs cannot drift: every ```yaml block that starts
// with `# loom.yml`, in the README, docs/ and every package README, is a
// project's layer over the default bundle, and the deployment it makes boots.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { loom, project } from './helpers.ts'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))

const docs = [
  'README.md',
  ...readdirSync(join(REPO, 'docs')).map(name => join('docs', name)),
  ...['packages', 'plugins', 'apps'].flatMap(dir => readdirSync(join(REPO, dir)).map(name => join(dir, name, 'README.md'))),
].filter(file => file.endsWith('.md') && existsSync(join(REPO, file)))

const snippets = docs.flatMap(file =>
  [...readFileSync(join(REPO, file), 'utf8').matchAll(/```yaml\n(# loom\.yml[^\n]*\n[\s\S]*?)```/g)].map((match, index) => ({
    name: `${file} #${index + 1}`,
    yaml: match[1],
  })),
)

describe('loom.yml snippets of the docs', () => {
  it('there are some to check', () => {
    expect(snippets.length).toBeGreaterThan(10)
  })

  it.each(snippets)('$name boots on the default bundle', async ({ yaml }) => {
    // A plugin the snippet mounts by path is an empty one here.
    const plugins = [...yaml.matchAll(/name: \.\/(\S+\.ts)/g)].map(([, path]) => [path, stubPlugin(path)])
    const { cwd, home } = project({ 'loom.yml': yaml, ...Object.fromEntries(plugins) })
    const run = await loom(['prompt'], { cwd, home })
    expect(run.stderr).not.toMatch(/warning|error|failed/)
    expect(run.code, run.stderr).toBe(0)
  })
})

/** A plugin that does nothing, named after its file. */
const stubPlugin = (path: string) => `export const name = '${path}'\nexport function apply() {}\n`
