import { afterEach, describe, expect, test } from 'vitest'
import type { Context } from '@deepseek-ai/cordis'
import type { Agent } from '@loom/agent-loop'
import { userText, type GenerateOptions, type StreamChunk } from '@loom/llm'
import type { ScriptResult } from '@loom/llm/testing'
import { eventsOfType, lastEventOfType, type SessionEvent } from '@loom/session'
import { renderContextSections, renderPrompt } from '@loom/system-prompt'
import { createHost, SCRIPTED_MODEL, SCRIPTED_PROVIDER, type Host } from '@loom/testkit'
import { defineTool } from '@loom/tools'
import * as plugin from '../src/index.ts'

const CWD = '/workspace/project'
const hosts: Host[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
})

type Answer = ScriptResult | ((request: GenerateOptions) => ScriptResult | Promise<ScriptResult>)

/** Two plain tools, so a child's tool set can be told apart from its parent's. */
const testTools = {
  name: 'test-tools',
  inject: ['tools'],
  apply(ctx: Context) {
    for (const name of ['alpha', 'beta']) {
      ctx.tools.register(defineTool({ name, description: `The ${name} tool.`, parameters: { type: 'object' }, execute: () => `${name} ran` }))
    }
  },
}

async function setup(config: Partial<plugin.Config> = {}) {
  const host = await createHost({ cwd: CWD })
  hosts.push(host)
  await host.mount(testTools)
  const mounted = await host.mount(plugin, config)
  const children: Agent[] = []
  host.ctx.on('agent/created', ({ agent }) => {
    if (agent.name === plugin.AGENT_NAME) children.push(agent)
  })
  return { host, mounted, children }
}

/** The text of the first user prompt of a request: how a child's answers are picked. */
function promptOf(request: GenerateOptions): string {
  const first = request.messages.find(message => message.role === 'user' && message.source.kind === 'user')
  return first ? first.content.map(block => (block.type === 'text' ? block.text : '')).join('') : ''
}

/**
 * One scripted model for every agent: top-level agents answer from `parent` in
 * order, each child from the queue keyed by its prompt.
 */
function script(host: Host, parent: Answer[], children: Record<string, Answer[]> = {}) {
  const queues = new Map(Object.entries(children).map(([prompt, answers]) => [prompt, [...answers]]))
  const top = [...parent]
  const answer = (request: GenerateOptions) => {
    const queue = request.sessionId?.includes('-task-') ? queues.get(promptOf(request)) : top
    const next = queue?.shift()
    if (next === undefined) throw new Error(`no scripted answer left for session ${request.sessionId}`)
    return typeof next === 'function' ? next(request) : next
  }
  return host.scriptedModel(Array.from({ length: 40 }, () => answer))
}

const task = (id: string, args: Partial<plugin.TaskArgs>) => ({
  toolCalls: [{ id, name: plugin.TOOL, arguments: { description: 'look it up', prompt: 'What is 6 x 7?', ...args } }],
})

const toolNames = (request: GenerateOptions) => (request.tools ?? []).map(tool => tool.name)
const resultText = (event: SessionEvent<'tool/result'>) =>
  event.data.message.content.flatMap(block => block.content.map(inner => (inner.type === 'text' ? inner.text : ''))).join('')
const requestsOf = (host: Host, sessionId: string) => host.adapter.requests.filter(request => request.sessionId === sessionId)

function deferred<T = void>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>(done => (resolve = done))
  return { promise, resolve }
}

describe('one task', () => {
  test("the child runs on its own session: origin subagent, the parent's session, depth 1, the parent's route and cwd", async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', {}), 'The child says 42.'], { 'What is 6 x 7?': ['42'] })
    const run = await host.run('Delegate the sum.')

    expect(run.reason).toEqual({ kind: 'completed' })
    expect(children).toHaveLength(1)
    const [child] = children
    expect(child.id.startsWith(`${run.agent.id}-task-`)).toBe(true)
    expect(child.session.header).toMatchObject({ id: child.id, cwd: CWD, parentSession: run.agent.id, origin: 'subagent', delegationDepth: 1 })
    expect(child.session.requestHeader()?.config).toMatchObject({ provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL })
    expect(lastEventOfType(child.session.events, 'turn/end')?.data.reason).toEqual({ kind: 'completed' })
    // One turn whose user message is the prompt.
    expect(eventsOfType(child.session.events, 'turn/start')).toHaveLength(1)
    expect(requestsOf(host, child.id).map(promptOf)).toEqual(['What is 6 x 7?'])
    // Done: the child agent and its live session are gone.
    expect(host.ctx.agents.get(child.id)).toBeUndefined()
    expect(host.ctx.sessions.get(child.id)).toBeUndefined()
  })

  test("the child's final text is the tool result, with a footer naming its session, steps and tokens", async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', {}), 'Done.'], { 'What is 6 x 7?': [{ toolCalls: [{ name: 'alpha' }] }, 'It is 42.'] })
    const run = await host.run('Delegate.')
    const [child] = children
    const usage = eventsOfType(child.session.events, 'assistant/message').map(event => event.data.usage!)
    const inputTokens = usage.reduce((sum, u) => sum + u.inputTokens, 0)
    const outputTokens = usage.reduce((sum, u) => sum + u.outputTokens, 0)

    const result = lastEventOfType(run.events, 'tool/result')!
    expect(result.data.message.content[0].isError).not.toBe(true)
    expect(resultText(result)).toBe(`It is 42.\n\n[subagent session ${child.id}: 2 steps, ${inputTokens} input tokens, ${outputTokens} output tokens]`)
    expect(result.data.meta).toEqual({ childSession: child.id, steps: 2, inputTokens, outputTokens })
    // The parent's model reads the answer in its next request.
    expect(JSON.stringify(requestsOf(host, run.agent.id)[1].messages)).toContain('It is 42.')
  })

  test("the child's request header lists every tool of the parent except task; `tools` narrows it", async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', {}), task('call-2', { prompt: 'Only beta.', tools: ['beta'] }), 'Done.'], {
      'What is 6 x 7?': ['42'],
      'Only beta.': ['ok'],
    })
    const run = await host.run('Delegate twice.')
    expect(run.reason).toEqual({ kind: 'completed' })

    expect(toolNames(requestsOf(host, run.agent.id)[0])).toEqual(['alpha', 'beta', 'task'])
    expect(children.map(child => child.session.requestHeader()?.tools?.map(tool => tool.name))).toEqual([['alpha', 'beta'], ['beta']])
    expect(children.map(child => toolNames(requestsOf(host, child.id)[0]))).toEqual([['alpha', 'beta'], ['beta']])
    // A child is told its role and not how to delegate; the parent the other way round.
    const [first] = children
    const childSystem = first.session.requestHeader()?.system ?? ''
    expect(childSystem).toContain(plugin.ROLE)
    expect(childSystem).not.toContain('Use `task`')
    expect(requestsOf(host, run.agent.id)[0].system).toContain('Use `task`')
    expect(requestsOf(host, run.agent.id)[0].system).not.toContain(plugin.ROLE)
  })

  test('a tool name the parent does not have is a tool error, and no child is created', async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', { tools: ['alpha', 'gamma'] }), 'Done.'])
    const run = await host.run('Delegate.')
    const result = lastEventOfType(run.events, 'tool/result')!
    expect(result.data.error).toEqual({ name: 'SubagentError', code: 'SUBAGENT_TOOLS' })
    expect(resultText(result)).toContain('"gamma"')
    expect(children).toEqual([])
  })
})

describe('budget, errors and cancel', () => {
  test("the child's maxSteps limit is a tool error naming the child session; its log ends at the limit", async () => {
    const { host, children } = await setup({ maxSteps: 1 })
    script(host, [task('call-1', {}), 'The child ran out.'], { 'What is 6 x 7?': [{ toolCalls: [{ name: 'alpha' }] }] })
    const run = await host.run('Delegate.')
    const [child] = children

    expect(lastEventOfType(child.session.events, 'turn/end')?.data.reason).toEqual({ kind: 'limit', limit: 'max-steps', used: 1, max: 1 })
    const result = lastEventOfType(run.events, 'tool/result')!
    expect(result.data.error).toEqual({ name: 'SubagentError', code: 'SUBAGENT_LIMIT' })
    expect(resultText(result)).toBe(`Error: subagent session "${child.id}" stopped at its max-steps limit (1 used, 1 allowed) after 1 step`)
    // The parent carries on with its own turn.
    expect(run.reason).toEqual({ kind: 'completed' })
    expect(run.text).toBe('The child ran out.')
  })

  test('a failing model in the child is a tool error naming the child session and the failure', async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', {}), 'Noted.'], { 'What is 6 x 7?': [{ error: { code: 'BAD_REQUEST', message: 'the model refused' } }] })
    const run = await host.run('Delegate.')
    const result = lastEventOfType(run.events, 'tool/result')!
    expect(result.data.error).toEqual({ name: 'SubagentError', code: 'SUBAGENT_FAILED' })
    expect(resultText(result)).toContain(`subagent session "${children[0].id}" failed: BAD_REQUEST: the model refused`)
  })

  test("cancelling the parent cancels the child: the child's log ends with its turn aborted by the parent", async () => {
    const { host, children } = await setup()
    const started = deferred()
    const hang = (request: GenerateOptions): AsyncIterable<StreamChunk> => {
      started.resolve()
      return (async function* () {
        await new Promise((_, reject) => request.signal!.addEventListener('abort', () => reject(request.signal!.reason), { once: true }))
      })()
    }
    script(host, [task('call-1', {})], { 'What is 6 x 7?': [hang] })
    const parent = host.ctx.agents.create('parent', { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
    const childGone = new Promise<Agent>(resolve => host.ctx.on('agent/disposed', ({ agent }) => agent.name === plugin.AGENT_NAME && resolve(agent)))
    parent.followup(userText('Delegate.'))
    await started.promise

    parent.cancel({ kind: 'user' })
    await parent.idle()
    const child = await childGone
    expect(child).toBe(children[0])
    const events = child.session.events
    expect(events.at(-1)?.type).toBe('turn/end')
    expect(lastEventOfType(events, 'turn/end')?.data.reason).toEqual({ kind: 'aborted', reason: { kind: 'parent' } })
    expect(lastEventOfType(parent.session.events, 'turn/end')?.data.reason).toEqual({ kind: 'aborted', reason: { kind: 'user' } })
  })
})

describe('parallel tasks and the runtime context', () => {
  test("two task calls of one step run at once, both listed in the parent's subagents:active, each answer to its call", async () => {
    const { host, children } = await setup()
    const arrived = { A: deferred(), B: deferred() }
    let listed = ''
    // Each child waits until the other has started: sequential calls would never get here.
    const meet = (me: 'A' | 'B', other: 'A' | 'B') => async () => {
      arrived[me].resolve()
      await arrived[other].promise
      const parent = host.ctx.agents.list().find(agent => agent.id.startsWith('testkit-run-'))
      if (me === 'B') listed = contextText(await host.ctx.systemPrompt.assemble({ agent: parent, scope: parent }))
      return `answer ${me}`
    }
    script(
      host,
      [
        {
          toolCalls: [
            { id: 'call-a', name: 'task', arguments: { description: 'first job', prompt: 'Job A.' } },
            { id: 'call-b', name: 'task', arguments: { description: 'second job', prompt: 'Job B.' } },
          ],
        },
        'Both done.',
      ],
      { 'Job A.': [meet('A', 'B')], 'Job B.': [meet('B', 'A')] },
    )
    const run = await host.run('Delegate both.')

    expect(run.reason).toEqual({ kind: 'completed' })
    const [a, b] = ['Job A.', 'Job B.'].map(prompt => children.find(child => requestsOf(host, child.id).some(request => promptOf(request) === prompt))!)
    expect(listed).toContain(`- first job (session ${a.id}): 1 step so far`)
    expect(listed).toContain(`- second job (session ${b.id}): 1 step so far`)
    const results = eventsOfType(run.events, 'tool/result').map(result => [result.data.message.content[0].toolCallId, resultText(result).split('\n')[0]])
    expect(results.sort()).toEqual([
      ['call-a', 'answer A'],
      ['call-b', 'answer B'],
    ])
  })

  test('subagents:active lists the running child for its parent only, and is empty before and after', async () => {
    const { host, children } = await setup()
    const parent = host.ctx.agents.create('parent', { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
    const other = host.ctx.agents.create('other', { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
    const seen: Record<string, string> = {}
    const assembleFor = async (agent: Agent) => contextText(await host.ctx.systemPrompt.assemble({ agent, scope: agent }))
    seen.before = await assembleFor(parent)
    script(host, [task('call-1', { description: 'count the files' }), 'Done.'], {
      'What is 6 x 7?': [
        async () => {
          seen.parent = await assembleFor(parent)
          seen.child = await assembleFor(children[0])
          seen.other = await assembleFor(other)
          return '42'
        },
      ],
    })
    parent.followup(userText('Delegate.'))
    await parent.idle()

    expect(seen.before).toBe('')
    expect(seen.parent).toBe(
      `Subagents working for you now (each answers as the result of its \`task\` call):\n- count the files (session ${children[0].id}): 1 step so far`,
    )
    expect(seen.child).toBe('')
    expect(seen.other).toBe('')
    expect(await assembleFor(parent)).toBe('')
    // The parent's steps never overlap its running tools: its logged snapshots never list a child.
    expect(JSON.stringify(parent.session.events)).not.toContain('Subagents working for you')
  })
})

describe('recursion', () => {
  test('with maxDepth 1 a child has no task tool; a call to it anyway fails as an unknown tool in the child', async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', {}), 'Done.'], {
      'What is 6 x 7?': [{ toolCalls: [{ id: 'nested', name: 'task', arguments: { description: 'deeper', prompt: 'Deeper.' } }] }, 'Could not delegate.'],
    })
    await host.run('Delegate.')
    expect(children).toHaveLength(1)
    const [child] = children
    expect(toolNames(requestsOf(host, child.id)[0])).not.toContain('task')
    expect(lastEventOfType(child.session.events, 'tool/result')?.data.error).toMatchObject({ code: 'UNKNOWN_TOOL' })
  })

  test('asking for task in `tools` beyond maxDepth is refused', async () => {
    const { host, children } = await setup()
    script(host, [task('call-1', { tools: ['task'] }), 'Done.'])
    const run = await host.run('Delegate.')
    const result = lastEventOfType(run.events, 'tool/result')!
    expect(result.data.error).toEqual({ name: 'SubagentError', code: 'SUBAGENT_DEPTH' })
    expect(resultText(result)).toContain('maxDepth 1')
    expect(children).toEqual([])
  })

  test('with maxDepth 2 a child delegates once more; the grandchild has depth 2, its parent is the child, and no task tool', async () => {
    const { host, children } = await setup({ maxDepth: 2 })
    script(host, [task('call-1', {}), 'Done.'], {
      'What is 6 x 7?': [{ toolCalls: [{ id: 'nested', name: 'task', arguments: { description: 'deeper', prompt: 'Deeper.' } }] }, 'Child done.'],
      'Deeper.': ['Grandchild done.'],
    })
    const run = await host.run('Delegate.')
    expect(run.reason).toEqual({ kind: 'completed' })
    const [child, grandchild] = children
    expect(toolNames(requestsOf(host, child.id)[0])).toEqual(['alpha', 'beta', 'task'])
    expect(grandchild.session.header).toMatchObject({ origin: 'subagent', parentSession: child.id, delegationDepth: 2 })
    expect(toolNames(requestsOf(host, grandchild.id)[0])).toEqual(['alpha', 'beta'])
    expect(resultText(lastEventOfType(child.session.events, 'tool/result')!)).toContain('Grandchild done.')
  })
})

describe('lifecycle', () => {
  test('the delta is the task tool and its guidance section; nothing remains after unload', async () => {
    const { host, mounted } = await setup()
    const delta = await mounted.delta()
    expect(delta.tools.map(tool => tool.name)).toEqual(['task'])
    expect(delta.sections.map(section => [section.name, section.order])).toEqual([[plugin.SECTION_NAME, plugin.SECTION_ORDER]])
    script(host, [task('call-1', {}), 'Done.'], { 'What is 6 x 7?': ['42'] })
    expect((await host.run('Delegate.')).reason).toEqual({ kind: 'completed' })

    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })

  test('unloading the plugin while a child runs cancels the child and leaves nothing', async () => {
    const { host, mounted, children } = await setup()
    const started = deferred()
    const hang = (request: GenerateOptions): AsyncIterable<StreamChunk> => {
      started.resolve()
      return (async function* () {
        await new Promise((_, reject) => request.signal!.addEventListener('abort', () => reject(request.signal!.reason), { once: true }))
      })()
    }
    script(host, [task('call-1', {}), 'Done.'], { 'What is 6 x 7?': [hang] })
    const parent = host.ctx.agents.create('parent', { provider: SCRIPTED_PROVIDER, model: SCRIPTED_MODEL, cwd: CWD })
    parent.followup(userText('Delegate.'))
    await started.promise

    await mounted.dispose()
    await parent.idle()
    expect(lastEventOfType(children[0].session.events, 'turn/end')?.data.reason).toEqual({ kind: 'aborted', reason: { kind: 'disposed' } })
    expect(lastEventOfType(parent.session.events, 'tool/result')?.data.error).toMatchObject({ code: 'SUBAGENT_ABORTED' })
    // The parent belongs to the test's host, not to the plugin.
    await parent.dispose()
    await host.assertZeroResidue(mounted)
  })
})

function contextText(assembly: Parameters<typeof renderPrompt>[0]): string {
  return renderContextSections(assembly).find(section => section.name === plugin.CONTEXT_NAME)?.text ?? ''
}
