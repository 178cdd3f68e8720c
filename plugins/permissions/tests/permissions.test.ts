import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { type Context, Service } from '@deepseek-ai/cordis'
import { createHost, type Host } from '@loom/testkit'
import { defineTool, type ApprovalAnswer, type ApprovalRequest, type PreToolDecision, type ToolExecutionResult } from '@loom/tools'
import * as plugin from '../src/index.ts'

const hosts: Host[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A host whose cwd is a fresh workspace, with stand-ins for `bash` and `write` that record what ran. */
async function host() {
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'loom-permissions-')))
  dirs.push(cwd)
  const h = await createHost({ cwd })
  hosts.push(h)
  const ran: string[] = []
  const tool = (name: string, argument: string) =>
    defineTool<Record<string, string>>({
      name,
      description: `a stand-in for ${name}`,
      parameters: { type: 'object', properties: { [argument]: { type: 'string' } }, required: [argument] },
      execute: args => {
        ran.push(`${name} ${args[argument]}`)
        return 'done'
      },
    })
  h.ctx.tools.register(tool('bash', 'command'))
  h.ctx.tools.register(tool('write', 'path'))
  return { h, ran, cwd }
}

/** Provides `ctx.approver` answering with `answer`; records every request. */
async function approver(h: Host, answer: (request: ApprovalRequest) => ApprovalAnswer) {
  const requests: ApprovalRequest[] = []
  class TestApprover extends Service {
    static override readonly name = 'test-approver'
    constructor(ctx: Context) {
      super(ctx, 'approver')
    }
    async approve(request: ApprovalRequest) {
      requests.push(request)
      return answer(request)
    }
  }
  await h.root.plugin(TestApprover)
  return requests
}

const text = (result: ToolExecutionResult) => result.content.map(block => (block.type === 'text' ? block.text : '')).join('')
const decision = (result: ToolExecutionResult) => (result.meta as { decision?: unknown } | undefined)?.decision

const RULES: plugin.Config = {
  rules: [
    { tool: 'bash', action: 'allow', commands: ['git status'] },
    { tool: 'bash', action: 'deny', commands: ['rm'] },
    { tool: 'write', action: 'allow', paths: ['src/**'] },
  ],
  default: 'ask',
}

describe('decisions', () => {
  test('allow runs the call, deny refuses it with the rule, the default asks (nobody can approve here)', async () => {
    const { h, ran } = await host()
    await h.mount(plugin, RULES)
    const allowed = await h.callTool('bash', { command: 'git status -s' })
    expect(text(allowed)).toBe('done')
    expect(decision(allowed)).toEqual({ policy: 'allow' })

    const denied = await h.callTool('bash', { command: 'ls && rm -rf .' })
    expect(text(denied)).toBe('Error: bash command "ls && rm -rf ." is denied by permissions rule 2')
    expect(decision(denied)).toEqual({ policy: 'deny', reason: 'bash command "ls && rm -rf ." is denied by permissions rule 2' })

    const asked = await h.callTool('bash', { command: 'git push' })
    expect(text(asked)).toBe(
      'Error: tool "bash" requires approval, and no one can approve here (no approver is registered): bash command "git push" needs approval under the permissions default',
    )
    expect(decision(asked)).toMatchObject({ policy: 'ask', answer: 'no-approver', rule: 'default' })
    expect(ran).toEqual(['bash git status -s'])
  })

  test('path globs match the path relative to the workspace, symlinks resolved', async () => {
    const { h, ran, cwd } = await host()
    const outside = realpathSync(mkdtempSync(join(tmpdir(), 'loom-permissions-outside-')))
    dirs.push(outside)
    mkdirSync(join(cwd, 'src'))
    symlinkSync(outside, join(cwd, 'src', 'escape'))
    await h.mount(plugin, { ...RULES, default: 'deny' })
    expect(text(await h.callTool('write', { path: 'src/a/b.ts' }))).toBe('done')
    expect(text(await h.callTool('write', { path: join(cwd, 'src', 'c.ts') }))).toBe('done')
    expect(text(await h.callTool('write', { path: 'package.json' }))).toBe('Error: write of "package.json" is denied by the permissions default')
    // Through the link the file lies outside the workspace: no path rule matches it.
    expect(text(await h.callTool('write', { path: 'src/escape/x.ts' }))).toBe('Error: tool "write" is denied by the permissions default')
    expect(ran).toEqual(['write src/a/b.ts', `write ${join(cwd, 'src', 'c.ts')}`])
  })

  test('a later pre-execute listener may still refuse what the rules allow', async () => {
    const { h, ran } = await host()
    await h.mount(plugin, RULES)
    h.ctx.on('tools/pre-execute', () => ({ kind: 'deny', reason: 'frozen' }))
    expect(text(await h.callTool('bash', { command: 'git status' }))).toBe('Error: frozen')
    expect(ran).toEqual([])
  })

  test("an ask rule's unattended answer goes with its ask; on another action it is a mistake naming the rule", async () => {
    const { h } = await host()
    const asks: PreToolDecision[] = []
    h.ctx.on('tools/pre-execute', async (_exec, next) => {
      const decision = await next()
      asks.push(decision)
      return decision
    })
    await h.mount(plugin, { rules: [{ tool: 'bash', action: 'ask', unattended: 'allow' }], default: 'ask' })
    await h.callTool('bash', { command: 'make' })
    await h.callTool('write', { path: 'a.txt' })
    expect(asks).toEqual([
      { kind: 'ask', reason: 'bash command "make" needs approval under permissions rule 1', rule: 'rule 1', unattended: 'allow' },
      { kind: 'ask', reason: 'write of "a.txt" needs approval under the permissions default', rule: 'default' },
    ])
    const other = await host()
    await expect(other.h.mount(plugin, { rules: [{ tool: 'bash', action: 'deny', unattended: 'allow' }], default: 'ask' })).rejects.toThrow(
      'rule 1 (tool "bash"): unattended applies to ask rules only, and its action is deny',
    )
  })

  test('a mistaken rule fails the plugin, naming the rule', async () => {
    const { h } = await host()
    await expect(h.mount(plugin, { rules: [{ tool: 'write', action: 'allow', paths: ['/etc/**'] }], default: 'ask' })).rejects.toThrow(
      'rule 1 (tool "write"): the path glob "/etc/**" is absolute',
    )
  })
})

describe('with the agent loop', () => {
  test('the model calls bash, the policy asks, the approver denies: the model reads why, the log records it', async () => {
    const { h, ran } = await host()
    await h.mount(plugin, RULES)
    const requests = await approver(h, () => ({ kind: 'deny', note: 'do not push from here' }))
    h.scriptedModel([{ toolCalls: [{ id: 'c1', name: 'bash', arguments: { command: 'git push' } }] }, 'ok'])
    const run = await h.run('push it')

    expect(ran).toEqual([])
    expect(requests.map(request => [request.tool, request.args, request.rule, request.session])).toEqual([
      ['bash', { command: 'git push' }, 'default', run.agent.sessionId],
    ])
    const denial = 'Error: tool "bash" was not approved (bash command "git push" needs approval under the permissions default): do not push from here'
    expect(JSON.stringify(run.requests[1].messages.at(-1))).toContain(JSON.stringify(denial))
    const result = run.events.find(event => event.type === 'tool/result')
    expect(result?.data).toMatchObject({
      meta: {
        decision: {
          policy: 'ask',
          answer: 'deny',
          rule: 'default',
          reason: 'bash command "git push" needs approval under the permissions default',
          note: 'do not push from here',
        },
      },
    })
    expect(run.text).toBe('ok')
  })

  test('allow-session: the approver is asked once per rule in a session; later calls are recorded as remembered', async () => {
    const { h, ran } = await host()
    await h.mount(plugin, RULES)
    const requests = await approver(h, () => ({ kind: 'allow-session' }))
    const push = (id: string) => ({ toolCalls: [{ id, name: 'bash', arguments: { command: `git push ${id}` } }] })
    h.scriptedModel([push('c1'), push('c2'), 'ok'])
    const run = await h.run('push twice')
    expect(requests).toHaveLength(1)
    expect(ran).toEqual(['bash git push c1', 'bash git push c2'])
    const answers = run.events.flatMap(event => (event.type === 'tool/result' ? [(event.data.meta as { decision: { answer: string } }).decision.answer] : []))
    expect(answers).toEqual(['allow-session', 'remembered'])
  })
})

describe('the plugin', () => {
  test('adds its policy section, and leaves nothing behind when unloaded', async () => {
    const { h } = await host()
    const mounted = await h.mount(plugin, RULES)
    expect((await mounted.delta()).sections).toEqual([
      { name: plugin.SECTION_NAME, order: plugin.SECTION_ORDER, stability: 'static', text: plugin.GUIDANCE, rendered: plugin.GUIDANCE },
    ])
    await mounted.dispose()
    await h.assertZeroResidue(mounted)
    expect(decision(await h.callTool('bash', { command: 'git push' }))).toBeUndefined()
  })
})
