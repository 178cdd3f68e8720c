// The headless approver of `loom run --approve MODE`, through the tool runtime's ask path.
import { describe, expect, it } from 'vitest'
import { bashAskedByPolicy, events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'
import { Context } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import * as Permissions from '@loom/permissions'
import * as ToolFs from '@loom/tool-fs'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { answerOf, DENIAL_NOTES, HeadlessApprover, headlessApprover, provideApprover, TerminalApprover } from '../src/approve.ts'
import { type ApproveMode, DEFAULT_APPROVE_MODE, parseApproveMode } from '../src/commands.ts'

/** A root with the tool runtime, a tool `t` whose every call the policy asks about, and the headless approver in `mode`. */
async function deployment(mode?: ApproveMode) {
  const root = new Context()
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime)
  const fiber = await root.plugin({ name: 'policy', inject: ['tools', 'systemPrompt'], apply() {} })
  const runs = { count: 0 }
  fiber.ctx.tools.register(
    defineTool({
      name: 't',
      description: 'the t tool',
      parameters: { type: 'object' },
      execute: () => {
        runs.count++
        return 'ran'
      },
    }),
  )
  fiber.ctx.on('tools/pre-execute', () => ({ kind: 'ask', reason: 'it pushes' }))
  const approver = await provideApprover(root, mode)
  const call = () => fiber.ctx.tools.execute({ callId: 'c1', name: 't', arguments: {}, signal: new AbortController().signal })
  return { approver, runs, call }
}

describe('parseApproveMode', () => {
  it('takes the three modes, defaults to policy, and names the flag otherwise', () => {
    expect(parseApproveMode('never')).toBe('never')
    expect(parseApproveMode('all')).toBe('all')
    expect(parseApproveMode('policy')).toBe('policy')
    expect(parseApproveMode(undefined)).toBe('policy')
    expect(() => parseApproveMode('yes')).toThrow('--approve must be one of never, policy, all, not "yes"')
    expect(() => parseApproveMode('yes')).toThrow(expect.objectContaining({ name: 'UsageError' }))
  })
})

describe('answers', () => {
  it('all allows; never and policy deny with a note that names the mode', () => {
    expect(answerOf('all')).toEqual({ kind: 'allow' })
    expect(answerOf('never')).toEqual({ kind: 'deny', note: DENIAL_NOTES.never })
    expect(answerOf('policy')).toEqual({ kind: 'deny', note: DENIAL_NOTES.policy })
    expect(DENIAL_NOTES.never).toContain('--approve never')
    expect(DENIAL_NOTES.policy).toContain('--approve policy')
  })

  it("policy takes the ask rule's unattended answer; never and all do not", () => {
    expect(answerOf('policy', { unattended: 'allow' })).toEqual({ kind: 'allow' })
    expect(answerOf('policy', { unattended: 'deny' })).toEqual({ kind: 'deny', note: DENIAL_NOTES.policy })
    expect(answerOf('never', { unattended: 'allow' })).toEqual({ kind: 'deny', note: DENIAL_NOTES.never })
    expect(answerOf('all', { unattended: 'deny' })).toEqual({ kind: 'allow' })
  })
})

describe('provideApprover', () => {
  it('all: an asked call runs, recorded as allowed by the approver', async () => {
    const { runs, call } = await deployment('all')
    const result = await call()
    expect(result.isError).toBe(false)
    expect(runs.count).toBe(1)
    expect(result.meta).toEqual({ decision: { policy: 'ask', answer: 'allow', reason: 'it pushes' } })
  })

  it('policy: the model reads a denial with the reason and the note', async () => {
    const { runs, call } = await deployment('policy')
    const result = await call()
    expect(runs.count).toBe(0)
    expect(result.content).toEqual([{ type: 'text', text: `Error: tool "t" was not approved (it pushes): ${DENIAL_NOTES.policy}` }])
  })

  it('never: a tool that does more than read (or does not say) is refused before any rule, and the model reads why', async () => {
    const { runs, call } = await deployment('never')
    const result = await call()
    expect(runs.count).toBe(0)
    expect(result.content).toEqual([{ type: 'text', text: 'Error: tool "t" does more than read, and approvals are turned off for this run (--approve never)' }])
  })

  it(`the default mode is ${DEFAULT_APPROVE_MODE}, and disposing the approver leaves no one to approve`, async () => {
    const { approver, call } = await deployment()
    expect((await call()).content).toEqual([{ type: 'text', text: `Error: tool "t" was not approved (it pushes): ${DENIAL_NOTES.policy}` }])
    await approver.dispose()
    expect((await call()).content).toEqual([
      { type: 'text', text: 'Error: tool "t" requires approval, and no one can approve here (no approver is registered): it pushes' },
    ])
  })
})

describe('headlessApprover', () => {
  it('is the boot plugin entry of the approver in a mode (default policy)', async () => {
    expect(headlessApprover('all')).toEqual({ plugin: HeadlessApprover, config: { mode: 'all' } })
    expect(headlessApprover()).toEqual({ plugin: HeadlessApprover, config: { mode: 'policy' } })
    const root = new Context()
    const { plugin, config } = headlessApprover('never')
    await root.plugin(plugin, config)
    expect(root.get('approver')).toBeInstanceOf(HeadlessApprover)
    expect(await root.get('approver')?.approve({ tool: 't', callId: 'c1', args: {}, signal: new AbortController().signal })).toEqual(answerOf('never'))
  })
})

describe('the default bundle, headless', () => {
  const layer = scriptedModel(`
- toolCalls:
    - { id: c1, name: bash, arguments: { command: 'echo ran-unattended' } }
- Done.
`)

  it('bash asks, and a headless run takes its unattended answer: it runs, recorded as asked and allowed by rule 3 (writes and commands)', async () => {
    const { cwd, home } = project({ 'loom.yml': layer })
    const run = await loom(['run', 'say it'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const result = events(sessionFiles(home)[0]).find(event => event.type === 'tool/result')!
    expect(JSON.stringify(result.data)).toContain('ran-unattended')
    expect(result.data.meta).toMatchObject({ decision: { policy: 'ask', answer: 'allow', rule: 'rule 3' } })
  })

  it('--approve never denies it; the model reads why', async () => {
    const { cwd, home } = project({ 'loom.yml': layer })
    const run = await loom(['run', '--approve', 'never', 'say it'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('✗ Error: tool "bash" does more than read, and approvals are turned off for this run (--approve never)')
  })
})

describe('loom run --approve with @loom/permissions', () => {
  const layer = bashAskedByPolicy('echo approved-and-ran')

  it('headless, the policy asks and nobody can answer: the model reads the denial, and the log records the decision', async () => {
    const { cwd, home } = project({ 'loom.yml': layer })
    const run = await loom(['run', 'say it'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('✗ Error: tool "bash" was not approved')
    expect(run.stdout).not.toContain('✓')
    const result = events(sessionFiles(home)[0]).find(event => event.type === 'tool/result')!
    expect(JSON.stringify(result.data)).toContain('was not approved')
    expect(JSON.stringify(result.data)).toContain('"answer":"deny"')
  })

  it('--approve all allows what the policy asks about; a bad mode is a usage error', async () => {
    const { cwd, home } = project({ 'loom.yml': layer })
    const run = await loom(['run', '--approve', 'all', 'say it'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain('✓')
    expect(JSON.stringify(events(sessionFiles(home)[0]).find(event => event.type === 'tool/result')!.data)).toContain('approved-and-ran')
    const bad = await loom(['run', '--approve', 'yes', 'say it'], { cwd, home })
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('--approve must be one of never, policy, all, not "yes"')
  })
})

describe('a protected path at the terminal', () => {
  /** tool-fs in a workspace whose loom.yml is protected, the default bundle's permissions (write asks), and the terminal approver answering `answer`. */
  async function terminal(answer: string) {
    const workspace = mkdtempSync(join(tmpdir(), 'loom-terminal-protect-'))
    writeFileSync(join(workspace, 'loom.yml'), '[]\n')
    const root = new Context()
    await root.plugin(SystemPrompt)
    await root.plugin(ToolRuntime)
    await root.plugin(Permissions, { default: 'allow', rules: [{ tool: 'write', action: 'ask', unattended: 'allow' }] })
    // The plugin's schema fills in the other keys.
    await root.plugin(ToolFs, { root: workspace } as ToolFs.Config)
    await root.plugin({ name: 'deployment', inject: ['tools'], apply: ctx => void ctx.tools.protect(join(workspace, 'loom.yml'), 'it decides what runs') })
    const output = new PassThrough()
    let shown = ''
    output.on('data', chunk => (shown += String(chunk)))
    await root.plugin(TerminalApprover, { input: Readable.from([`${answer}\n`, '\n']), output })
    const result = await root
      .get('tools')!
      .execute({ callId: 'c1', name: 'write', arguments: { path: 'loom.yml', content: 'x' }, signal: new AbortController().signal })
    return { result, shown: () => shown, file: () => readFileSync(join(workspace, 'loom.yml'), 'utf8') }
  }

  it('the person is asked, shown why it is protected, and their yes lets it through', async () => {
    const { result, shown, file } = await terminal('y')
    expect(shown()).toContain('? write wants to write loom.yml')
    expect(shown()).toMatch(/write would change ".*loom\.yml", which is protected: it decides what runs/)
    expect(result.meta).toMatchObject({ decision: { policy: 'ask', answer: 'allow', rule: 'protected path' } })
    expect(file()).toBe('x')
  })

  it('a no keeps the file as it was', async () => {
    const { result, file } = await terminal('n')
    expect(result.isError).toBe(true)
    expect(file()).toBe('[]\n')
  })
})
