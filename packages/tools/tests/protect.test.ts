// Protected paths (`tools.protect`): a call that declares it writes one is asked about before any
// pre-execute listener, refused where nobody answers, and the protection goes with its plugin.
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { defineTool, PROTECTED_RULE } from '@loom/tools'
import { realpathLoose } from '@loom/tools/workspace'
import { host } from './helpers.ts'

/** A host with a tool `put` that declares it writes `args.path` (resolved, as the contract asks), and counts its runs. */
async function writer() {
  const h = await host()
  const runs: string[] = []
  h.ctx.tools.register(
    defineTool<{ path: string }>({
      name: 'put',
      description: 'writes a path',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      writes: async args => [await realpathLoose(args.path)],
      execute: args => {
        runs.push(args.path)
        return 'ran'
      },
    }),
  )
  return { h, runs }
}

const dir = () => mkdtempSync(join(tmpdir(), 'loom-protect-'))

describe('tools.protect', () => {
  it('asks about a write to a protected file or anything under a protected folder, ahead of every listener', async () => {
    const { h, runs } = await writer()
    const base = dir()
    const owner = await h.plugin('deployment')
    owner.tools.protect(join(base, 'loom.yml'), 'it decides what runs')
    owner.tools.protect(join(base, '.git', 'hooks'), 'git runs hooks')
    // A listener that allows everything does not get to decide.
    h.ctx.on('tools/pre-execute', () => ({ kind: 'allow' }))
    for (const path of [join(base, 'loom.yml'), join(base, '.git', 'hooks', 'pre-commit')]) {
      const result = await h.run('put', { path })
      expect(result.isError).toBe(true)
      expect(result.meta).toMatchObject({ decision: { policy: 'ask', answer: 'no-approver', rule: PROTECTED_RULE } })
    }
    expect(JSON.stringify((await h.run('put', { path: join(base, 'loom.yml') })).content)).toContain('which is protected: it decides what runs')
    // Beside them: no question.
    expect((await h.run('put', { path: join(base, 'loom.yml.bak') })).isError).toBe(false)
    expect((await h.run('put', { path: join(base, '.git', 'config') })).isError).toBe(false)
    expect(runs).toEqual([join(base, 'loom.yml.bak'), join(base, '.git', 'config')])
    expect(h.tools.protectedPaths().map(entry => entry.owner)).toEqual(['deployment', 'deployment'])
  })

  it('sees through a symlink to a protected folder, and ends with the plugin that protected it', async () => {
    const { h, runs } = await writer()
    const base = dir()
    mkdirSync(join(base, 'real'))
    symlinkSync(join(base, 'real'), join(base, 'link'))
    const owner = await h.root.plugin({ name: 'deployment', inject: ['tools'], apply: ctx => void ctx.tools.protect(join(base, 'real'), 'kept') })
    expect((await h.run('put', { path: join(base, 'link', 'file') })).isError).toBe(true)
    // Protected through a link: where it leads is protected.
    const byLink = await h.root.plugin({ name: 'by-link', inject: ['tools'], apply: ctx => void ctx.tools.protect(join(base, 'link', 'sub'), 'kept') })
    expect(h.tools.protectedPaths().map(entry => entry.path)).toContain(join(realpathSync(base), 'real', 'sub'))
    await byLink.dispose()
    await owner.dispose()
    expect(h.tools.protectedPaths()).toEqual([])
    expect((await h.run('put', { path: join(base, 'link', 'file') })).isError).toBe(false)
    expect(runs).toEqual([join(base, 'link', 'file')])
  })

  it('refuses a relative path, and a tool whose writes is not a function', async () => {
    const { h } = await writer()
    expect(() => h.ctx.tools.protect('loom.yml', 'x')).toThrow('tools.protect() takes an absolute path, got "loom.yml"')
    expect(() => defineTool({ name: 'bad', description: 'bad', parameters: { type: 'object' }, writes: 'x' as never, execute: () => 'ran' })).toThrow(
      'invalid tool definition "bad": writes must be a function',
    )
  })
})
