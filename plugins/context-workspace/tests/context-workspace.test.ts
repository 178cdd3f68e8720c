import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { userText } from '@loom/llm'
import { createHost, type Host } from '@loom/testkit'
import { defineTool } from '@loom/tools'
import * as workspace from '../src/index.ts'
import { findWorkTree, GitRunner, mayBeInRepository, PackageJsonCache, readGitState, readProjectFacts, workspaceText } from '../src/index.ts'

let base: string
let host: Host
const ceiling = process.env.GIT_CEILING_DIRECTORIES

beforeAll(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'loom-context-workspace-')))
  // A temp dir under some checkout must not count as part of that repository.
  process.env.GIT_CEILING_DIRECTORIES = base
})

afterAll(() => {
  rmSync(base, { recursive: true, force: true })
  if (ceiling === undefined) delete process.env.GIT_CEILING_DIRECTORIES
  else process.env.GIT_CEILING_DIRECTORIES = ceiling
})

beforeEach(async () => {
  host = await createHost({ cwd: base })
})
afterEach(async () => {
  await host.dispose()
})

let counter = 0
function dir(): string {
  const path = join(base, `d${++counter}`)
  mkdirSync(path)
  return path
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync(
    'git',
    ['-c', 'user.name=Loom Test', '-c', 'user.email=test@example.invalid', '-c', 'commit.gpgsign=false', '-c', 'init.defaultBranch=main', ...args],
    { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  ).trim()

function repo(): string {
  const path = dir()
  git(path, 'init', '-q')
  writeFileSync(join(path, 'a.txt'), 'a\n')
  git(path, 'add', 'a.txt')
  git(path, 'commit', '-q', '-m', 'first')
  return path
}

/** Pids of the processes whose command line names `path` (Linux). */
function processesRunning(path: string): number[] {
  return readdirSync('/proc')
    .filter(entry => /^\d+$/.test(entry))
    .filter(pid => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(path)
      } catch {
        return false // gone meanwhile
      }
    })
    .map(Number)
}

const contextText = async (mounted: Awaited<ReturnType<Host['mount']>>, cwd: string) => {
  const { contexts } = await mounted.delta({ cwd })
  expect(contexts).toHaveLength(1)
  return contexts[0].text
}

describe('workspaceText', () => {
  it('renders every kind of state', () => {
    expect(workspaceText('/w')).toBe('Working directory: /w')
    expect(workspaceText('/w', { branch: 'main', changed: 0 })).toBe('Working directory: /w\nGit: branch main, working tree clean')
    expect(workspaceText('/w', { branch: 'main', changed: 1 })).toBe('Working directory: /w\nGit: branch main, 1 file changed or untracked')
    expect(workspaceText('/w', { detached: 'abc1234', changed: 3 })).toBe('Working directory: /w\nGit: detached HEAD at abc1234, 3 files changed or untracked')
    expect(workspaceText('/w', { branch: 'main', unborn: true, changed: 0 })).toBe(
      'Working directory: /w\nGit: branch main (no commits yet), working tree clean',
    )
    expect(workspaceText('/w', { branch: 'main' })).toBe('Working directory: /w\nGit: branch main')
    expect(workspaceText('/w', {})).toBe('Working directory: /w')
  })
})

describe('what the project files say: package manager and test command', () => {
  const facts = (cwd: string) => readProjectFacts(cwd, new PackageJsonCache())
  const files = (root: string, entries: Record<string, string>) => {
    for (const [path, text] of Object.entries(entries)) {
      mkdirSync(join(root, path, '..'), { recursive: true })
      writeFileSync(join(root, path), text)
    }
    return root
  }
  const scripts = (test?: string, extra: object = {}) => JSON.stringify({ name: 'demo', ...extra, ...(test !== undefined && { scripts: { test } }) })

  it('the lockfile names the manager, and the test script runs through it', () => {
    for (const [lockfile, manager, command] of [
      ['pnpm-lock.yaml', 'pnpm', 'pnpm test'],
      ['package-lock.json', 'npm', 'npm test'],
      ['yarn.lock', 'yarn', 'yarn test'],
      ['bun.lockb', 'bun', 'bun run test'],
      ['bun.lock', 'bun', 'bun run test'],
    ]) {
      const cwd = files(dir(), { 'package.json': scripts('vitest run'), [lockfile]: '' })
      expect(facts(cwd)).toEqual({ packageManager: { name: manager, from: lockfile }, test: { command, from: 'package.json scripts.test' } })
    }
  })

  it('packageManager of package.json outranks the lockfile; a package of a monorepo finds both above it', () => {
    const root = files(dir(), {
      'package.json': scripts('vitest', { packageManager: 'pnpm@9.1.0' }),
      'package-lock.json': '',
      'packages/app/package.json': scripts('node --test'),
    })
    expect(facts(join(root, 'packages/app'))).toEqual({
      packageManager: { name: 'pnpm', from: '../../package.json packageManager' },
      test: { command: 'pnpm test', from: 'package.json scripts.test' },
    })
  })

  it('asserts nothing it cannot know: lockfiles of two managers, no test script, no package.json, a broken one', () => {
    expect(facts(files(dir(), { 'package.json': scripts(), 'pnpm-lock.yaml': '', 'package-lock.json': '' }))).toEqual({
      lockfiles: ['pnpm-lock.yaml', 'package-lock.json'],
    })
    expect(facts(files(dir(), { 'package.json': scripts('vitest') }))).toEqual({ test: { command: 'npm test', from: 'package.json scripts.test' } })
    expect(facts(dir())).toEqual({})
    expect(facts(files(dir(), { 'package.json': '{ "scripts": ', 'yarn.lock': '' }))).toEqual({ packageManager: { name: 'yarn', from: 'yarn.lock' } })
  })

  it("stops at the repository root: a lockfile above it is not the project's", () => {
    const outer = files(dir(), { 'pnpm-lock.yaml': '' })
    const inner = join(outer, 'checkout')
    mkdirSync(inner)
    git(inner, 'init', '-q')
    expect(facts(inner)).toEqual({})
  })

  it('the context says it and asserts it: a memory saying otherwise gets a [context-conflict] line that follows the lockfile', async () => {
    await host.mount(workspace)
    const memory = await host.mount({
      name: 'old-memory',
      inject: ['systemPrompt'],
      apply: ctx =>
        ctx.systemPrompt.context({ name: 'memory', order: 31, text: 'We use npm.', trust: 'user-confirmed', asserts: { 'package-manager': 'npm' } }),
    })
    const cwd = files(dir(), { 'package.json': scripts('vitest run'), 'pnpm-lock.yaml': '' })
    const agent = host.agent(cwd)
    const assembly = await host.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.contexts.find(context => context.name === 'runtime:workspace')?.text).toBe(
      `Working directory: ${cwd}\nPackage manager: pnpm (pnpm-lock.yaml)\nTests: pnpm test (package.json scripts.test)`,
    )
    expect(assembly.conflicts?.map(conflict => [conflict.rule, conflict.follow?.value, conflict.follow?.from])).toEqual([
      ['package-manager', 'pnpm', 'pnpm-lock.yaml'],
    ])
    expect(assembly.contexts.find(context => context.name === 'context:conflicts')?.text).toMatch(
      /^\[context-conflict\] "package-manager": pnpm-lock\.yaml says "pnpm" \(workspace; context "runtime:workspace" \(plugin "@loom\/context-workspace"\)\); context "memory" \(plugin "old-memory"\) says "npm" \(user-confirmed\)\. Follow pnpm-lock\.yaml: "pnpm"/,
    )
    await memory.dispose()
  })
})

describe('the plugin', () => {
  it('adds only the runtime context runtime:workspace (order 20, step-stable)', async () => {
    const mounted = await host.mount(workspace)
    const cwd = repo()
    const delta = await mounted.delta({ cwd })
    expect(delta.sections).toEqual([])
    expect(delta.tools).toEqual([])
    expect(delta.variables).toEqual([])
    expect(delta.contexts).toEqual([
      {
        name: 'runtime:workspace',
        order: 20,
        stability: 'step',
        text: `Working directory: ${cwd}\nGit: branch main, working tree clean`,
        rendered: `Working directory: ${cwd}\nGit: branch main, working tree clean`,
        literal: true,
      },
    ])
  })

  it('follows the git state of a repository: dirty files, branches, detached HEAD', async () => {
    const mounted = await host.mount(workspace)
    const cwd = repo()
    const head = `Working directory: ${cwd}\nGit:`
    expect(await contextText(mounted, cwd)).toBe(`${head} branch main, working tree clean`)

    writeFileSync(join(cwd, 'a.txt'), 'changed\n')
    expect(await contextText(mounted, cwd)).toBe(`${head} branch main, 1 file changed or untracked`)
    writeFileSync(join(cwd, 'new.txt'), 'new\n')
    expect(await contextText(mounted, cwd)).toBe(`${head} branch main, 2 files changed or untracked`)

    git(cwd, 'checkout', '-q', '-b', 'feature/x')
    expect(await contextText(mounted, cwd)).toBe(`${head} branch feature/x, 2 files changed or untracked`)

    git(cwd, 'add', '-A')
    git(cwd, 'commit', '-q', '-m', 'second')
    git(cwd, 'checkout', '-q', '--detach', 'HEAD~1')
    const sha = git(cwd, 'rev-parse', '--short', 'HEAD')
    expect(await contextText(mounted, cwd)).toBe(`${head} detached HEAD at ${sha}, working tree clean`)
  })

  it('reports the repository state from a subdirectory', async () => {
    const mounted = await host.mount(workspace)
    const cwd = join(repo(), 'src')
    mkdirSync(cwd)
    expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}\nGit: branch main, working tree clean`)
  })

  it('a repository without commits names its branch', async () => {
    const mounted = await host.mount(workspace)
    const cwd = dir()
    git(cwd, 'init', '-q')
    writeFileSync(join(cwd, 'x'), '')
    expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}\nGit: branch main (no commits yet), 1 file changed or untracked`)
  })

  it('a directory outside any repository gives the working directory only', async () => {
    const mounted = await host.mount(workspace)
    const cwd = dir()
    expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}`)
  })

  it('a missing git binary or a missing directory is never an error', async () => {
    const mounted = await host.mount(workspace, { git: join(base, 'no-such-git') })
    const cwd = repo()
    expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}`)
    await mounted.dispose()
    const plain = await host.mount(workspace)
    const gone = join(base, 'gone')
    expect(await contextText(plain, gone)).toBe(`Working directory: ${gone}`)
  })

  it('a directory or branch that looks like a {{variable}} appears exactly and cannot break the assembly (the context is literal)', async () => {
    await host.mount(workspace)
    const cwd = join(base, 'a{{x}}b')
    mkdirSync(cwd)
    git(cwd, 'init', '-q')
    git(cwd, 'commit', '-q', '--allow-empty', '-m', 'x')
    git(cwd, 'checkout', '-q', '-b', 'x{{{y}}')
    const text = `Working directory: ${base}/a{{x}}b\nGit: branch x{{{y}}, working tree clean`
    // Assembled for an agent, as the loop does (the kit's delta interpolates every entry, literal or not).
    const agent = host.agent(cwd)
    const assembly = await host.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.contexts.find(c => c.name === 'runtime:workspace')).toMatchObject({ literal: true, text })
    host.scriptedModel(['ok'])
    const run = await host.run('hi', { cwd })
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(
      run.requests[0].messages.some(
        message =>
          message.role === 'user' &&
          message.content.some(
            block => block.type === 'text' && block.text === `Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n${text}`,
          ),
      ),
    ).toBe(true)
  })

  it('config root overrides the session cwd', async () => {
    const root = repo()
    const mounted = await host.mount(workspace, { root })
    expect(await contextText(mounted, dir())).toBe(`Working directory: ${root}\nGit: branch main, working tree clean`)
  })

  it('a git slower than the deadline gives no git facts, within the deadline, and is stopped', async () => {
    // A git that would outlast the test's timeout: only the 200 ms deadline lets the assembly finish.
    const slowGit = join(base, 'slow-git')
    writeFileSync(slowGit, '#!/bin/sh\nsleep 600\n', { mode: 0o755 })
    const mounted = await host.mount(workspace, { git: slowGit, gitTimeoutMs: 200 })
    const cwd = repo()
    expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}`)
    // The deadline killed it (the plugin is still loaded). spawn() returns only once
    // the script has started, so a process missing here was stopped, not one yet to start.
    if (process.platform === 'linux') await vi.waitFor(() => expect(processesRunning(slowGit)).toEqual([]), { timeout: 20_000 })
  })

  it('leaves a context another plugin registered under the same name alone', async () => {
    const cwd = repo()
    const mounted = await host.mount(workspace)
    const agent = host.agent(cwd)
    agent.ctx.systemPrompt.context({ name: 'runtime:workspace', order: 20, text: 'mine' })
    const assembly = await host.ctx.systemPrompt.assemble({ agent, scope: agent })
    expect(assembly.contexts.find(c => c.name === 'runtime:workspace')?.text).toBe('mine')
    await mounted.dispose()
  })

  it('starts one git process per assembly on a branch, two for a detached HEAD', async () => {
    const calls = join(base, 'git-calls.log')
    const countingGit = join(base, 'counting-git')
    writeFileSync(countingGit, `#!/bin/sh\necho "$*" >> '${calls}'\nexec git "$@"\n`, { mode: 0o755 })
    const cwd = repo()
    const runner = new GitRunner(countingGit)
    expect(await readGitState(runner, cwd, 2_000)).toEqual({ branch: 'main', changed: 0 })
    expect(readFileSync(calls, 'utf8')).toBe('status --porcelain=v2 --branch\n')
    git(cwd, 'checkout', '-q', '--detach')
    writeFileSync(calls, '')
    expect(await readGitState(runner, cwd, 2_000)).toEqual({ detached: git(cwd, 'rev-parse', '--short', 'HEAD'), changed: 0 })
    expect(readFileSync(calls, 'utf8')).toBe('status --porcelain=v2 --branch\nrev-parse --short HEAD\n')
  })

  it('a status over the output cap still names the branch, from its first lines, and counts nothing', async () => {
    const floodingGit = join(base, 'flooding-git')
    writeFileSync(floodingGit, "#!/bin/sh\nprintf '# branch.oid 0123abc\\n# branch.head main\\n'\nyes '? untracked' | head -c 17000000\n", { mode: 0o755 })
    const cwd = dir()
    mkdirSync(join(cwd, '.git'))
    expect(await readGitState(new GitRunner(floodingGit), cwd, 5_000)).toEqual({ branch: 'main' })
  })

  it('starts no git outside every repository, and does again once one appears', async () => {
    const calls = join(base, 'git-calls-outside.log')
    const countingGit = join(base, 'counting-git-outside')
    writeFileSync(countingGit, `#!/bin/sh\necho "$*" >> '${calls}'\nexec git "$@"\n`, { mode: 0o755 })
    const runner = new GitRunner(countingGit)
    const cwd = dir()
    mkdirSync(join(cwd, 'sub'))
    expect(await readGitState(runner, join(cwd, 'sub'), 2_000)).toBeUndefined()
    expect(existsSync(calls)).toBe(false)
    git(cwd, 'init', '-q', '-b', 'main')
    expect(await readGitState(runner, join(cwd, 'sub'), 2_000)).toEqual({ branch: 'main', unborn: true, changed: 0 })
    expect(readFileSync(calls, 'utf8')).toBe('status --porcelain=v2 --branch\n')
  })

  it('counts as maybe a repository: a .git folder or file in the folder or a parent, a bare repository, the inside of .git', () => {
    const plain = dir()
    expect(mayBeInRepository(plain)).toBe(false)
    const work = repo()
    mkdirSync(join(work, 'a', 'b'), { recursive: true })
    expect(mayBeInRepository(join(work, 'a', 'b'))).toBe(true)
    expect(mayBeInRepository(join(work, '.git', 'refs'))).toBe(true)
    const linked = dir()
    writeFileSync(join(linked, '.git'), 'gitdir: /elsewhere\n')
    expect(mayBeInRepository(linked)).toBe(true)
    const bare = dir()
    git(bare, 'init', '-q', '--bare')
    expect(mayBeInRepository(bare)).toBe(true)
  })

  it('runs git once per assembly, in a few milliseconds (the per-step cost)', async () => {
    const cwd = repo()
    const runner = new GitRunner()
    await readGitState(runner, cwd, 2_000)
    const started = performance.now()
    const rounds = 5
    for (let i = 0; i < rounds; i++) expect(await readGitState(runner, cwd, 2_000)).toEqual({ branch: 'main', changed: 0 })
    const perStep = (performance.now() - started) / rounds
    console.log(`context-workspace: ${perStep.toFixed(1)} ms per assembly (small repository)`)
    expect(perStep).toBeLessThan(500)
  })

  it('reaches the model as a user-role snapshot, re-sent only when the git state changed', async () => {
    await host.mount(workspace)
    const cwd = repo()
    const script = host.scriptedModel(['one', 'two', 'three'])
    const run = await host.run('hello', { cwd })
    const turn = async (text: string) => {
      run.agent.followup(userText(text))
      await run.agent.idle()
    }
    await turn('same state')
    writeFileSync(join(cwd, 'dirty.txt'), '')
    await turn('after a change')
    const snapshots = (index: number) =>
      script.requests[index].messages
        .map(message => message.content.map(block => (block.type === 'text' ? block.text : '')).join(''))
        .filter(text => text.includes('Working directory:'))
    const clean = `Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nWorking directory: ${cwd}\nGit: branch main, working tree clean`
    expect(snapshots(0)).toEqual([clean])
    expect(snapshots(1)).toEqual([clean])
    expect(snapshots(2)).toEqual([clean, clean.replace('working tree clean', '1 file changed or untracked')])
    expect(script.requests[0].system).toBe(script.requests[2].system)
    expect(script.requests[0].system).not.toContain('Working directory')
  })

  it('leaves nothing after dispose', async () => {
    const mounted = await host.mount(workspace)
    const cwd = repo()
    writeFileSync(join(cwd, 'dirty'), '')
    await mounted.delta({ cwd })
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })

  it('an unload during a slow git stops it and leaves nothing behind', async () => {
    // A git that would outlast the test's timeout: only the unload ends it, and the pending delta with it.
    const slowGit = join(base, 'slower-git')
    const pidFile = join(base, 'slower-git.pid')
    writeFileSync(slowGit, `#!/bin/sh\necho $$ > '${pidFile}'\nexec sleep 600\n`, { mode: 0o755 })
    const mounted = await host.mount(workspace, { git: slowGit, gitTimeoutMs: 600_000 })
    const pending = mounted.delta({ cwd: repo() }).catch(() => undefined)
    await vi.waitFor(() => expect(existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim()).toBeTruthy(), { timeout: 20_000 })
    const pid = Number(readFileSync(pidFile, 'utf8'))
    await mounted.dispose()
    await pending
    await vi.waitFor(() => expect(() => process.kill(pid, 0)).toThrow(), { timeout: 20_000 })
    await host.assertZeroResidue(mounted)
  })
})

describe('the git state between steps: read again only when the tree may have changed', () => {
  /** A git that logs its arguments: how many `git status` ran. */
  function countingGit(): { git: string; statuses: () => number } {
    const calls = join(base, `calls-${++counter}.log`)
    const path = join(base, `counting-git-${counter}`)
    writeFileSync(path, `#!/bin/sh\necho "$*" >> '${calls}'\nexec git "$@"\n`, { mode: 0o755 })
    return {
      git: path,
      statuses: () =>
        existsSync(calls)
          ? readFileSync(calls, 'utf8')
              .split('\n')
              .filter(line => line.startsWith('status ')).length
          : 0,
    }
  }

  it('keeps the state while nothing changes, and sees each outside change at the next step: an edit, a new folder, a commit, a branch', async () => {
    const counting = countingGit()
    const mounted = await host.mount(workspace, { git: counting.git })
    const cwd = repo()
    const text = (git: string) => `Working directory: ${cwd}\nGit: ${git}`
    // The first step lists the folders to watch while status runs; the second keeps what it reads.
    expect(await contextText(mounted, cwd)).toBe(text('branch main, working tree clean'))
    expect(await contextText(mounted, cwd)).toBe(text('branch main, working tree clean'))
    const warm = counting.statuses()
    for (let i = 0; i < 5; i++) expect(await contextText(mounted, cwd)).toBe(text('branch main, working tree clean'))
    expect(counting.statuses()).toBe(warm)

    writeFileSync(join(cwd, 'a.txt'), 'edited outside\n')
    expect(await contextText(mounted, cwd)).toBe(text('branch main, 1 file changed or untracked'))
    expect(await contextText(mounted, cwd)).toBe(text('branch main, 1 file changed or untracked'))
    expect(counting.statuses()).toBe(warm + 1)

    mkdirSync(join(cwd, 'lib'))
    writeFileSync(join(cwd, 'lib', 'b.txt'), 'b\n')
    expect(await contextText(mounted, cwd)).toBe(text('branch main, 2 files changed or untracked'))
    git(cwd, 'add', '-A')
    git(cwd, 'commit', '-q', '-m', 'second')
    expect(await contextText(mounted, cwd)).toBe(text('branch main, working tree clean'))
    // The new folder is watched too, now that it was listed.
    expect(await contextText(mounted, cwd)).toBe(text('branch main, working tree clean'))
    writeFileSync(join(cwd, 'lib', 'b.txt'), 'edited\n')
    expect(await contextText(mounted, cwd)).toBe(text('branch main, 1 file changed or untracked'))

    git(cwd, 'checkout', '-q', '-b', 'feature/y')
    expect(await contextText(mounted, cwd)).toBe(text('branch feature/y, 1 file changed or untracked'))
    git(cwd, 'commit', '-q', '-am', 'third')
    expect(await contextText(mounted, cwd)).toBe(text('branch feature/y, working tree clean'))
    git(cwd, 'reset', '-q', '--soft', 'HEAD~1')
    expect(await contextText(mounted, cwd)).toBe(text('branch feature/y, 1 file changed or untracked'))
  })

  it("sees a change the agent's command made at the next step, even one no watch reports; a read reads no git", async () => {
    const counting = countingGit()
    await host.mount(workspace, { git: counting.git })
    const cwd = repo()
    // An untracked folder counts once while it holds a file: emptying a folder inside it changes the
    // count without touching any folder that is watched. Only the call's end tells.
    mkdirSync(join(cwd, 'out', 'deep'), { recursive: true })
    writeFileSync(join(cwd, 'out', 'deep', 'x'), '')
    await host.mount({
      name: 'tree-tools',
      inject: ['tools'],
      apply: (ctx: any) => {
        ctx.tools.register(
          defineTool({
            name: 'clean',
            description: 'Deletes the build output.',
            parameters: { type: 'object', properties: {} },
            effects: ['write'],
            execute: () => {
              rmSync(join(cwd, 'out', 'deep', 'x'))
              return 'deleted'
            },
          }),
        )
        ctx.tools.register(
          defineTool({
            name: 'look',
            description: 'Reads nothing much.',
            parameters: { type: 'object', properties: {} },
            effects: ['read'],
            execute: () => 'looked',
          }),
        )
      },
    })
    const script = host.scriptedModel([
      'warm',
      'kept',
      { toolCalls: [{ name: 'look', arguments: {} }] },
      { toolCalls: [{ name: 'clean', arguments: {} }] },
      'done',
    ])
    const run = await host.run('first', { cwd })
    const turn = async (text: string) => {
      run.agent.followup(userText(text))
      await run.agent.idle()
    }
    // The first step lists the folders to watch, the second keeps the state it reads.
    await turn('second')
    const afterWarmUp = counting.statuses()
    await turn('clean up')
    const workspaceLines = script.requests.map(request =>
      request.messages
        .flatMap(message => message.content.map(block => (block.type === 'text' ? block.text : '')))
        .filter(text => text.includes('Git:'))
        .at(-1),
    )
    // The third turn: a step that calls the read, one that calls the delete, one after it.
    expect(workspaceLines).toHaveLength(5)
    expect(workspaceLines.at(-2)).toContain('Git: branch main, 1 file changed or untracked')
    expect(workspaceLines.at(-1)).toContain('Git: branch main, working tree clean')
    // One status, for the step after the delete: none for the turn's first step, none after the read.
    expect(counting.statuses() - afterWarmUp).toBe(1)
  })

  it('reads git at every step in a tree with more folders than maxWatchedFolders, or with 0', async () => {
    for (const maxWatchedFolders of [2, 0]) {
      const counting = countingGit()
      const mounted = await host.mount(workspace, { git: counting.git, maxWatchedFolders })
      const cwd = repo()
      mkdirSync(join(cwd, 'a', 'b'), { recursive: true })
      writeFileSync(join(cwd, 'a', 'b', 'c.txt'), '')
      git(cwd, 'add', '-A')
      for (let i = 0; i < 4; i++) expect(await contextText(mounted, cwd)).toBe(`Working directory: ${cwd}\nGit: branch main, 1 file changed or untracked`)
      expect(counting.statuses()).toBe(4)
      await mounted.dispose()
    }
  })

  it('finds the work tree as git does: the nearest .git folder, or the git directory a .git file names', () => {
    const work = repo()
    mkdirSync(join(work, 'a', 'b'), { recursive: true })
    expect(findWorkTree(join(work, 'a', 'b'))).toEqual({ top: work, gitDir: join(work, '.git'), commonDir: join(work, '.git') })
    const linked = join(base, `linked-${++counter}`)
    git(work, 'worktree', 'add', '-q', linked)
    const where = findWorkTree(linked)!
    expect(where.top).toBe(linked)
    expect(realpathSync(where.commonDir)).toBe(join(work, '.git'))
    expect(where.gitDir.startsWith(join(work, '.git', 'worktrees'))).toBe(true)
    expect(findWorkTree(dir())).toBeUndefined()
  })

  it('a linked work tree is watched too: an edit there shows at the next step', async () => {
    const work = repo()
    const linked = join(base, `linked-${++counter}`)
    git(work, 'worktree', 'add', '-q', '-b', 'side', linked)
    const mounted = await host.mount(workspace)
    expect(await contextText(mounted, linked)).toBe(`Working directory: ${linked}\nGit: branch side, working tree clean`)
    expect(await contextText(mounted, linked)).toBe(`Working directory: ${linked}\nGit: branch side, working tree clean`)
    writeFileSync(join(linked, 'a.txt'), 'edited\n')
    expect(await contextText(mounted, linked)).toBe(`Working directory: ${linked}\nGit: branch side, 1 file changed or untracked`)
    git(linked, 'commit', '-q', '-am', 'on the side')
    expect(await contextText(mounted, linked)).toBe(`Working directory: ${linked}\nGit: branch side, working tree clean`)
  })
})
