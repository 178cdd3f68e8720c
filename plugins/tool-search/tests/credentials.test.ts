// grep and glob skip what the read rules deny (the credential stores under a fake home folder):
// when the workspace is the home folder, through a symlink to a key, and a search that starts
// inside a store is refused with the reason. The notes count what was left out.
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import * as toolSearch from '../src/index.ts'
import { installedRipgrep } from '../src/ripgrep.ts'

/** Both engines; with rules to apply in the walk, ripgrep's leaves the search to the worker, which counts what it skips. */
const RG = await installedRipgrep()
const ENGINES = [
  { name: 'worker', ripgrep: 'never' },
  { name: 'ripgrep', ripgrep: RG },
]

let host: Awaited<ReturnType<typeof createHost>>
let ripgrep: string | undefined
let base: string
let home: string
const savedEnv = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME }

const textOf = (r: { content: readonly { type: string; text?: string }[] }) => r.content.map(b => (b.type === 'text' ? b.text : '')).join('')

async function call(name: string, args: Record<string, unknown>, cwd = home) {
  const result = await host.callTool(name, args, { cwd })
  return { ...result, text: textOf(result) }
}

beforeEach(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), 'loom-tool-search-home-')))
  home = join(base, 'home')
  const spec: Record<string, string> = {
    '.ssh/id_ed25519': 'needle PRIVATE KEY\n',
    '.ssh/known_hosts': 'needle host\n',
    '.docker/config.json': '{"auth":"needle"}\n',
    '.docker/daemon.json': '{"needle":true}\n',
    '.npmrc': '//registry/:_authToken=needle\n',
    'project/a.txt': 'needle\n',
  }
  for (const [path, text] of Object.entries(spec)) {
    await mkdir(dirname(join(home, path)), { recursive: true })
    await writeFile(join(home, path), text)
  }
  // Read by the tools runtime when it starts (its default rules), and by the walk (git's global excludes).
  process.env.HOME = home
  process.env.XDG_CONFIG_HOME = join(base, 'xdg')
  host = await createHost()
  await host.mount(toolSearch, { ripgrep })
})

afterEach(async () => {
  await host.dispose()
  for (const [key, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  await rm(base, { recursive: true, force: true })
})

const SKIPPED = (n: number) =>
  `(Skipped ${n} ${n === 1 ? 'entry' : 'entries'} that tools may not read, such as credential stores; the user can let one through with allowRead on the @loom/tools row of loom.yml.)`

for (const engine of ENGINES) {
  describe.skipIf(engine.ripgrep === undefined)(`${engine.name} engine${engine.ripgrep === undefined ? ' (skipped: rg is not on PATH)' : ''}`, () => {
    beforeAll(() => {
      ripgrep = engine.ripgrep
    })

    describe('credential stores in a search', () => {
      it('the workspace is the home folder: grep and glob with hidden: true skip them, and say so', async () => {
        const grep = await call('grep', { pattern: 'needle', hidden: true })
        expect(grep.text).toBe(`.docker/daemon.json:1: {"needle":true}\nproject/a.txt:1: needle\n\n${SKIPPED(3)}`)
        expect(grep.meta).toMatchObject({ matches: 2, deniedSkipped: 3 })
        const glob = await call('glob', { pattern: '**/*', hidden: true })
        expect(glob.text.split('\n\n')[0].split('\n').sort()).toEqual(['.docker/daemon.json', 'project/a.txt'])
        expect(glob.text.endsWith(SKIPPED(3))).toBe(true)
        // Nothing denied in the way: no note.
        expect((await call('grep', { pattern: 'needle' }, join(home, 'project'))).text).toBe('a.txt:1: needle')
      })

      it('a search that starts inside a store, or names a key, is refused with the reason', async () => {
        for (const [name, args] of [
          ['grep', { pattern: 'needle', path: '.ssh' }],
          ['grep', { pattern: 'needle', path: '.docker/config.json' }],
          ['glob', { pattern: '*', path: '.ssh' }],
          ['glob', { pattern: '.ssh/*' }],
        ] as const) {
          const r = await call(name, args)
          expect(r.isError, JSON.stringify(args)).toBe(true)
          expect(r.text).toContain('is out of reach: tools may not read or change')
          expect(r.text).toContain('allowRead on the @loom/tools row')
        }
      })

      it('a symlink in the workspace to a key is skipped, as its target', async () => {
        await symlink(join(home, '.ssh', 'id_ed25519'), join(home, 'project', 'key.txt'))
        const r = await call('grep', { pattern: 'needle' })
        expect(r.text).toBe(`project/a.txt:1: needle\n\n${SKIPPED(1)}`)
      })

      it('an allowed path inside a store is searched; the rest of the store is not', async () => {
        await host.root.plugin({
          name: 'deployment',
          inject: ['tools'],
          apply: ctx => void ctx.tools.allowRead(join(home, '.ssh', 'known_hosts'), 'ssh checks hosts'),
        })
        expect((await call('grep', { pattern: 'needle', path: '.ssh' })).text).toBe(`.ssh/known_hosts:1: needle host\n\n${SKIPPED(1)}`)
        expect((await call('grep', { pattern: 'needle', hidden: true })).text).toContain('.ssh/known_hosts:1: needle host')
      })
    })

    describe('a symlink in the searched folder to a file denyRead covers elsewhere in the workspace', () => {
      // The rule (secret/) lies neither at, above nor below the searched folder (src/): only the link's target meets it.
      let ws: string
      beforeEach(async () => {
        ws = join(base, 'ws')
        await mkdir(join(ws, 'src'), { recursive: true })
        await mkdir(join(ws, 'secret'))
        await writeFile(join(ws, 'src', 'a.txt'), 'needle\n')
        await writeFile(join(ws, 'secret', 'key.txt'), 'needle KEY\n')
        await symlink('../secret/key.txt', join(ws, 'src', 'link'))
        await host.root.plugin({
          name: 'deployment',
          inject: ['tools'],
          apply: ctx => void ctx.tools.denyRead(join(ws, 'secret'), 'the deployment lists it under denyRead (@loom/tools)'),
        })
      })

      it('grep from the folder neither returns the content nor names the link, and counts it', async () => {
        const r = await call('grep', { pattern: 'needle' }, ws)
        expect(r.text).toBe(`src/a.txt:1: needle\n\n${SKIPPED(2)}`) // secret/ and the link
        for (const args of [
          { pattern: 'needle', path: 'src' },
          { pattern: 'K.Y', path: 'src', glob: '*' },
        ]) {
          const inSrc = await call('grep', args, ws)
          expect(inSrc.text, JSON.stringify(args)).not.toContain('needle KEY')
          expect(inSrc.text, JSON.stringify(args)).not.toContain('src/link')
          expect(inSrc.text, JSON.stringify(args)).toContain(SKIPPED(1))
          expect(inSrc.meta, JSON.stringify(args)).toMatchObject({ deniedSkipped: 1 })
        }
        expect((await call('grep', { pattern: 'needle', path: 'src' }, ws)).text).toBe(`src/a.txt:1: needle\n\n${SKIPPED(1)}`)
      })

      it('glob does not list the link (read refuses it: its target is denied), and counts it', async () => {
        for (const args of [{ pattern: '**/*', path: 'src' }, { pattern: 'src/*' }, { pattern: '*', path: 'src' }]) {
          const r = await call('glob', args, ws)
          expect(r.text, JSON.stringify(args)).toBe(`src/a.txt\n\n${SKIPPED(1)}`)
          expect(r.meta, JSON.stringify(args)).toMatchObject({ total: 1, deniedSkipped: 1 })
        }
      })

      it('naming the link as the path is refused with the reason, as read refuses it', async () => {
        const r = await call('grep', { pattern: 'needle', path: 'src/link' }, ws)
        expect(r.isError).toBe(true)
        expect(r.text).toContain('is out of reach: tools may not read or change')
      })
    })

    it('searches with the chosen engine where no rule applies', async () => {
      expect((await call('grep', { pattern: 'needle' }, join(home, 'project'))).meta).toMatchObject({ engine: engine.name })
      expect((await call('grep', { pattern: 'needle', hidden: true })).meta).toMatchObject({ engine: 'worker' })
    })
  })
}
