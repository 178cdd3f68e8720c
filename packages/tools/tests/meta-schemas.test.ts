// The meta-schemas compiled ahead of time: current with the installed Ajv, and
// what lets a process define its tools without loading Ajv at all.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { generateMetaSchemas } from '../scripts/generate-meta-schemas.ts'

describe('meta-schemas.generated.ts', () => {
  it('is what the generator writes from the installed Ajv (run `pnpm --filter @loom/tools generate` after an upgrade)', () => {
    expect(readFileSync(new URL('../src/meta-schemas.generated.ts', import.meta.url), 'utf8')).toBe(generateMetaSchemas())
  })

  it('defining tools, even a bad one, loads no Ajv; the first call of a tool does', () => {
    const script = `
      import { createRequire } from 'node:module'
      import { compileTool, defineTool } from './src/define.ts'
      const ajvLoaded = () => Object.keys(createRequire(import.meta.url).cache).some(path => path.endsWith('/ajv/dist/core.js'))
      const tool = defineTool({ name: 't', description: 'd', parameters: { type: 'object', properties: { a: { type: 'string' } } }, execute: () => 'ok' })
      try { defineTool({ name: 'bad', description: 'd', parameters: { type: 'object', required: 'a' }, execute: () => 'ok' }) } catch {}
      const before = ajvLoaded()
      compileTool(tool).validate({ a: 'x' })
      console.log(JSON.stringify({ before, after: ajvLoaded() }))
    `
    const out = execFileSync(process.execPath, ['--conditions=loom-source', '--input-type=module', '-e', script], {
      cwd: new URL('..', import.meta.url),
      encoding: 'utf8',
    })
    expect(JSON.parse(out)).toEqual({ before: false, after: true })
  })
})
