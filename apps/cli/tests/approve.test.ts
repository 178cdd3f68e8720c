// The headless approver of `loom run --approve MODE`, through the tool runtime's ask path.
import { describe, expect, it } from 'vitest'
import { bashAskedByPolicy, events, loom, project, scriptedModel, sessionFiles } from './helpers.ts'
import { Context } from '@deepseek-ai/cordis'
import SystemPrompt from '@loom/system-prompt'
import ToolRuntime, { defineTool } from '@loom/tools'
import * as Permissions from '@loom/permissions'
import * as ToolFs from '@loom/tool-fs'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PassThrough, Readable } from 'node:stream'
import { answerOf, type Asking, DENIAL_NOTES, HeadlessApprover, headlessApprover, provideApprover, TerminalApprover } from '../src/approve.ts'
import type { TtyInput } from '../src/input/terminal.ts'
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
    // The ask says how a person would let the call run: that is the note.
    expect(answerOf('policy', { refusal: 'only at the terminal' })).toEqual({ kind: 'deny', note: 'only at the terminal' })
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
    const workspace = project().cwd
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

describe('the terminal approver', () => {
  /** tool-fs in a workspace with `files`, writes asked about, and the terminal approver on `input`; `shown()` is what it wrote. */
  async function asking(input: NodeJS.ReadableStream, files: Record<string, string> = {}, asking: Asking = { asking: false }) {
    const workspace = project(files).cwd
    const root = new Context()
    await root.plugin(SystemPrompt)
    await root.plugin(ToolRuntime, { denyRead: [join(workspace, 'secret.txt')] } as never)
    await root.plugin(Permissions, { default: 'allow', rules: [{ tool: 'write', action: 'ask' }] })
    await root.plugin(ToolFs, { root: workspace } as ToolFs.Config)
    const output = new PassThrough()
    let shown = ''
    output.on('data', chunk => (shown += String(chunk)))
    await root.plugin(TerminalApprover, { input: input as TtyInput, output, asking })
    const controller = new AbortController()
    const write = (path: string, content: string) =>
      root.get('tools')!.execute({ callId: 'c1', name: 'write', arguments: { path, content }, signal: controller.signal })
    return { workspace, write, shown: () => shown, abort: () => controller.abort(), file: (path: string) => readFileSync(join(workspace, path), 'utf8') }
  }

  /** A stand-in terminal's input: what is written to it arrives as typed keys. */
  const keyboard = () => Object.assign(new PassThrough(), { isTTY: true, isRaw: false, setRawMode: () => {} })
  /** Resolves once `shown()` matches. */
  const until = async (shown: () => string, pattern: RegExp) => {
    await expect.poll(shown, { timeout: 10_000 }).toMatch(pattern)
  }

  it('one key answers, with no Enter; any other key asks again, ? explains the keys', async () => {
    const input = keyboard()
    const { write, shown, file } = await asking(input, { 'notes.txt': 'one\ntwo\n' })
    const result = write('notes.txt', 'one\nTWO\n')
    await until(shown, /\[n\] deny: $/)
    // The question shows what the write changes in the file.
    expect(shown()).toMatch(
      /\? write wants to write notes\.txt.*\n {4}replaces 2 lines, 8 bytes with 2 lines, 8 bytes:\n {6}one\n {4}- two\n {4}\+ TWO\n {2}\[y\] allow once/,
    )
    input.write('x')
    await until(shown, /deny: x\n {2}answer y, a or n \(\? explains them\)\n.*\[n\] deny: $/)
    input.write('?')
    await until(shown, /deny: \?\n {2}y {2}allow this call once\n[\s\S]*cancels the turn\n.*\[n\] deny: $/)
    input.write('y')
    expect((await result).meta).toMatchObject({ decision: { answer: 'allow' } })
    expect(file('notes.txt')).toBe('one\nTWO\n')
  })

  it('n asks for a note on one line; the model reads it with the denial', async () => {
    const input = keyboard()
    const { write, shown, file } = await asking(input, { 'notes.txt': 'kept\n' })
    const result = write('notes.txt', 'lost\n')
    await until(shown, /\[n\] deny: $/)
    input.write('n')
    await until(shown, /note for the model \(optional\): /)
    input.write('not this file\r')
    expect((await result).meta).toMatchObject({ decision: { answer: 'deny', note: 'not this file' } })
    expect(file('notes.txt')).toBe('kept\n')
  })

  it('Ctrl-C is not an answer (the conversation beneath cancels the turn); the question closes when the call is aborted', async () => {
    const input = keyboard()
    const { write, shown, abort } = await asking(input)
    const result = write('new.txt', 'text\n')
    await until(shown, /a new file, 1 line, 5 bytes:\n {4}\+ text\n.*\[n\] deny: $/)
    input.write('\x03')
    await new Promise(resolve => setTimeout(resolve, 50))
    expect(shown()).toMatch(/\[n\] deny: $/)
    abort()
    expect((await result).isError).toBe(true)
  })

  it('shows what the turn streamed first (asking.before), and nothing of a file the tools may not read', async () => {
    const order: string[] = []
    const input = keyboard()
    const state: Asking = {
      asking: false,
      before: async () => {
        order.push('before')
      },
    }
    const { workspace, write, shown } = await asking(input, { 'secret.txt': 'hunter2\n' }, state)
    // The tool does not resolve a denied path for the question: the approver finds the file itself.
    const result = write(join(workspace, 'secret.txt'), 'new\n')
    await until(shown, /\[n\] deny: $/)
    order.push('asked')
    expect(order).toEqual(['before', 'asked'])
    expect(shown()).toContain('replaces a file (tools may not read it) with 1 line, 4 bytes:')
    expect(shown()).not.toContain('hunter2')
    input.write('n')
    await until(shown, /note for the model/)
    input.write('\r')
    expect((await result).meta).toMatchObject({ decision: { answer: 'deny' } })
  })

  it('input that is not a terminal answers with lines, and a line that is not an answer asks again', async () => {
    const { write, shown } = await asking(Readable.from(['maybe\n', 'yes\n']), { 'a.txt': 'a\n' })
    expect((await write('a.txt', 'b\n')).meta).toMatchObject({ decision: { answer: 'allow' } })
    expect(shown()).toContain('answer y, a or n (? explains them)')
  })
})
