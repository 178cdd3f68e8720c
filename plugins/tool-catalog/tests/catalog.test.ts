import { type Context, Service } from '@deepseek-ai/cordis'
import { createUserMessage, type GenerateOptions } from '@loom/llm'
import { eventsOfType, prefixReuse, serializeRequest } from '@loom/session'
import { renderPrompt } from '@loom/system-prompt'
import { createHost, type Host } from '@loom/testkit'
import { defineTool, type ApprovalAnswer, type ApprovalRequest, type ToolExecutionResult } from '@loom/tools'
import { afterEach, describe, expect, it } from 'vitest'
import * as catalog from '../src/index.ts'
import { closeMatches, firstSentence } from '../src/index.ts'

const CWD = '/workspace/project'
const hosts: Host[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
})

const text = (result: ToolExecutionResult) => result.content.map(block => (block.type === 'text' ? block.text : '')).join('')

const ISSUE_PARAMS = {
  type: 'object',
  properties: {
    project: { type: 'string', description: 'Project key, e.g. LOOM.' },
    title: { type: 'string', minLength: 1 },
    priority: { type: 'string', enum: ['low', 'high'] },
  },
  required: ['project', 'title'],
  additionalProperties: false,
}

/** A deployment's tools: two the catalogue keeps by default, three it serves on demand. */
const deployment = {
  name: 'deployment-tools',
  inject: ['tools'],
  apply(ctx: Context) {
    const plain = (name: string, description: string) =>
      ctx.tools.register(defineTool({ name, description, parameters: { type: 'object', additionalProperties: false }, execute: () => `${name} ran` }))
    plain('read', 'Reads a file.')
    plain('bash', 'Runs a shell command.')
    plain('weather', 'Tells the weather. Uses the public forecast service.')
    ctx.tools.register(
      defineTool<{ project: string; title: string; priority?: string }>({
        name: 'issue_create',
        description: 'Creates an issue in the tracker.\nReturns its key.',
        parameters: ISSUE_PARAMS,
        isConcurrencySafe: true,
        execute: args => ({ content: `created ${args.project}-1: ${args.title}`, meta: { key: `${args.project}-1` } }),
      }),
    )
    ctx.tools.register(
      defineTool({
        name: 'slow_report',
        description: 'Builds a report! It takes its time.',
        parameters: { type: 'object' },
        timeoutMs: 30,
        execute: (_args, exec) => new Promise((_, reject) => exec.signal.addEventListener('abort', () => reject(exec.signal.reason))),
      }),
    )
  },
}

const SECTION = [
  'Tools on demand. Besides the tools you were given, you can use the tools listed below. Their parameter schemas are not loaded: before the first use of one, call `tool_schema` with its name (several names in one call are fine) to read its full schema, then run it with `call_tool`, passing `name` and the `arguments` the schema describes. A schema you loaded stays valid for the whole conversation: do not load it again.',
  '- issue_create — Creates an issue in the tracker.',
  '- slow_report — Builds a report!',
  '- weather — Tells the weather.',
].join('\n')

async function setup(config: Partial<catalog.Config> = {}) {
  const host = await createHost({ cwd: CWD })
  hosts.push(host)
  await host.mount(deployment)
  const mounted = await host.mount(catalog, config)
  return { host, mounted }
}

const toolNames = (request: GenerateOptions) => (request.tools ?? []).map(tool => tool.name)

describe('what the model sees', () => {
  it('adds the catalogue section and two tools; the on-demand schemas leave the request', async () => {
    const { host, mounted } = await setup()
    const delta = await mounted.delta({ cwd: CWD })
    expect(delta.sections).toEqual([{ name: 'tool-catalog', order: 150, stability: 'static', literal: true, text: SECTION, rendered: SECTION }])
    expect(delta.tools.map(tool => tool.name)).toEqual(['call_tool', 'tool_schema'])
    expect(delta.contexts).toEqual([])
    expect(delta.variables).toEqual([])

    host.scriptedModel(['Nothing to do.'])
    const run = await host.run('hello', { cwd: CWD })
    expect(toolNames(run.requests[0])).toEqual(['bash', 'call_tool', 'read', 'tool_schema'])
    expect(run.requests[0].system).toContain(SECTION)
    await host.assertStablePrompt({ cwd: CWD })
  })

  it('follows onDemand and keep, globs included', async () => {
    const { host, mounted } = await setup({ onDemand: ['issue_*', 'weather', 'read'], keep: ['rea?'] })
    const delta = await mounted.delta({ cwd: CWD })
    expect(delta.sections[0].text.split('\n').slice(1)).toEqual(['- issue_create — Creates an issue in the tracker.', '- weather — Tells the weather.'])
    host.scriptedModel(['ok'])
    const run = await host.run('hello', { cwd: CWD })
    expect(toolNames(run.requests[0])).toEqual(['bash', 'call_tool', 'read', 'slow_report', 'tool_schema'])
  })

  it('adds nothing to the request when nothing is on demand', async () => {
    const { host, mounted } = await setup({ onDemand: [] })
    const delta = await mounted.delta({ cwd: CWD })
    expect(delta.sections).toEqual([{ name: 'tool-catalog', order: 150, stability: 'static', literal: true, text: '', rendered: '' }])
    expect(delta.tools).toEqual([])
    host.scriptedModel(['ok'])
    const run = await host.run('hello', { cwd: CWD })
    expect(toolNames(run.requests[0])).toEqual(['bash', 'issue_create', 'read', 'slow_report', 'weather'])
  })

  it('keeps the first-party tools by default', async () => {
    const { mounted } = await setup()
    expect(mounted.config).toEqual({ onDemand: ['*'], keep: catalog.DEFAULT_KEEP, maxDescriptionChars: 200 })
    expect(catalog.DEFAULT_KEEP).toEqual(['bash', 'edit', 'glob', 'grep', 'load_skill', 'read', 'task', 'web_fetch', 'write'])
  })

  it('refuses a bad pattern, naming the key', async () => {
    const host = await createHost({ cwd: CWD })
    hosts.push(host)
    await expect(host.mount(catalog, { onDemand: ['mcp__*', 'no spaces'] })).rejects.toThrow(/tool-catalog" failed to start: invalid config[\s\S]*onDemand/)
  })
})

describe('a session that loads a schema', () => {
  it('keeps system text and tools byte-identical while the model loads a schema and calls the tool', async () => {
    const { host } = await setup()
    host.scriptedModel([
      { toolCalls: [{ name: 'tool_schema', arguments: { names: ['issue_create'] } }] },
      { toolCalls: [{ name: 'call_tool', arguments: { name: 'issue_create', arguments: { project: 'LOOM', title: 'Cache' } } }] },
      { toolCalls: [{ name: 'issue_create', arguments: { project: 'LOOM', title: 'Direct' } }] },
      'Created two issues.',
    ])
    const run = await host.run('file two issues', { cwd: CWD })
    expect(run.text).toBe('Created two issues.')
    expect(run.requests).toHaveLength(4)
    for (const request of run.requests.slice(1)) {
      expect(request.system).toBe(run.requests[0].system)
      expect(JSON.stringify(request.tools)).toBe(JSON.stringify(run.requests[0].tools))
    }
    // Append-only: each request's serialization starts with the whole previous one.
    for (let i = 1; i < run.requests.length; i++) {
      expect(prefixReuse(run.requests[i - 1], run.requests[i])).toBe(1)
      expect(serializeRequest(run.requests[i]).startsWith(serializeRequest(run.requests[i - 1]))).toBe(true)
    }
    // One request header in the log: nothing about the prompt changed.
    expect(eventsOfType(run.events, 'request/header')).toHaveLength(1)

    const results = eventsOfType(run.events, 'tool/result').map(event => event.data)
    const resultText = (i: number) =>
      results[i].message.content.flatMap(block => block.content.map(inner => (inner.type === 'text' ? inner.text : ''))).join('')
    expect(JSON.parse(resultText(0))).toEqual({
      name: 'issue_create',
      description: 'Creates an issue in the tracker.\nReturns its key.',
      parameters: ISSUE_PARAMS,
    })
    // The catalogue's own tools are allowed outright (recorded as a decision); policies judge the inner call.
    expect(results[0].meta).toEqual({ loaded: ['issue_create'], decision: { policy: 'allow' } })
    expect(resultText(1)).toBe('created LOOM-1: Cache')
    expect(results[1].meta).toEqual({ tool: 'issue_create', result: { key: 'LOOM-1' }, decision: { policy: 'allow' } })
    // A direct call by name still runs: the tool stays registered.
    expect(resultText(2)).toBe('created LOOM-1: Direct')
  })

  it('loads several schemas at once, in the order asked', async () => {
    const { host } = await setup()
    const result = await host.callTool('tool_schema', { names: ['weather', 'issue_create', 'weather'] }, { cwd: CWD })
    expect(result.isError).toBe(false)
    expect(
      text(result)
        .split('\n')
        .map(line => JSON.parse(line).name),
    ).toEqual(['weather', 'issue_create'])
  })

  it('answers unknown names with close matches and loads nothing', async () => {
    const { host } = await setup()
    const result = await host.callTool('tool_schema', { names: ['weather', 'issue_creat', 'zzz'] }, { cwd: CWD })
    expect(result).toMatchObject({ isError: true, error: { info: { name: 'ToolNotFoundError', code: 'UNKNOWN_TOOL' } } })
    expect(text(result)).toBe(
      'Error: unknown tool "issue_creat" (did you mean "issue_create"?); unknown tool "zzz". No schema was loaded: call tool_schema again with names from the catalogue.',
    )
    expect(closeMatches('Weather', ['weather', 'read', 'web_fetch'])).toEqual(['weather'])
    expect(closeMatches('issue', ['issue_create', 'issue_close', 'bash'])).toEqual(['issue_close', 'issue_create'])
  })
})

describe('call_tool runs through the tool runtime', () => {
  it('validates the arguments against the real schema', async () => {
    const { host } = await setup()
    const result = await host.callTool('call_tool', { name: 'issue_create', arguments: { project: 'LOOM', title: '', extra: 1 } }, { cwd: CWD })
    expect(result).toMatchObject({ isError: true, error: { info: { name: 'ToolArgsError', code: 'INVALID_ARGS' } } })
    expect(text(result)).toMatch(/^Error: invalid arguments for tool "issue_create": .*extra.*title/)
  })

  it('applies the tool timeout', async () => {
    const { host } = await setup()
    const result = await host.callTool('call_tool', { name: 'slow_report' }, { cwd: CWD })
    expect(result).toMatchObject({ isError: true, error: { message: 'tool "slow_report" timed out after 30 ms', info: { code: 'TIMEOUT' } } })
  })

  it('names close matches for an unknown tool, and will not run itself', async () => {
    const { host } = await setup()
    const unknown = await host.callTool('call_tool', { name: 'wether' }, { cwd: CWD })
    expect(text(unknown)).toBe('Error: unknown tool "wether" (did you mean "weather"?); the tools on demand are listed in the system prompt')
    const itself = await host.callTool('call_tool', { name: 'call_tool', arguments: { name: 'weather' } }, { cwd: CWD })
    expect(text(itself)).toBe('Error: call_tool cannot run itself; name the tool to run')
  })

  it('lets policies and the approver see the inner call under its own name', async () => {
    const { host } = await setup()
    const seen: string[] = []
    const asked: string[] = []
    const policy = await host.mount({
      name: 'policy',
      inject: ['tools'],
      apply(ctx: Context) {
        ctx.on('tools/pre-execute', (exec, next) => {
          seen.push(exec.name)
          if (exec.name === 'weather') return { kind: 'deny', reason: 'no weather today' }
          if (exec.name === 'issue_create') return { kind: 'ask', reason: 'writes to the tracker' }
          return next()
        })
      },
    })
    class Approver extends Service {
      constructor(ctx: Context) {
        super(ctx, 'approver')
      }
      async approve(request: ApprovalRequest): Promise<ApprovalAnswer> {
        asked.push(request.tool)
        return { kind: 'deny', note: 'not now' }
      }
    }
    const approver = await host.mount(Approver)
    const denied = await host.callTool('call_tool', { name: 'weather' }, { cwd: CWD })
    expect(text(denied)).toBe('Error: no weather today')
    const refused = await host.callTool('call_tool', { name: 'issue_create', arguments: { project: 'A', title: 'b' } }, { cwd: CWD })
    expect(text(refused)).toBe('Error: tool "issue_create" was not approved (writes to the tracker): not now')
    // The inner decision reaches the session log's meta, next to the dispatcher's own.
    expect(refused).toMatchObject({
      meta: {
        tool: 'issue_create',
        result: { decision: { policy: 'ask', answer: 'deny', reason: 'writes to the tracker', note: 'not now' } },
        decision: { policy: 'allow' },
      },
    })
    expect(asked).toEqual(['issue_create'])
    // The dispatcher itself never reaches the policy; the inner calls do.
    expect(seen).toEqual(['weather', 'issue_create'])
    await approver.dispose()
    await policy.dispose()
  })

  it('passes deferred context and a concluded turn through, as a direct call does', async () => {
    const { host } = await setup()
    await host.mount({
      name: 'late-effects',
      inject: ['tools'],
      apply(ctx: Context) {
        const tool = (name: string, execute: Parameters<typeof defineTool>[0]['execute']) =>
          ctx.tools.register(defineTool({ name, description: `The ${name} tool.`, parameters: { type: 'object' }, execute }))
        tool('finish_up', (_args, exec) => {
          exec.concludeTurn()
          return 'done'
        })
        tool('leave_note', (_args, exec) => {
          exec.deferContext(createUserMessage({ content: [{ type: 'text', text: 'A note for later.' }], source: { kind: 'plugin', plugin: 'late-effects' } }))
          return 'noted'
        })
      },
    })
    host.scriptedModel([{ toolCalls: [{ name: 'call_tool', arguments: { name: 'finish_up' } }] }, 'never asked'])
    expect((await host.run('finish', { cwd: CWD })).requests).toHaveLength(1)

    host.scriptedModel([{ toolCalls: [{ name: 'call_tool', arguments: { name: 'leave_note' } }] }, 'ok'])
    const run = await host.run('note', { cwd: CWD })
    expect(run.requests).toHaveLength(2)
    const notes = run.requests[1].messages.filter(
      message => message.role === 'user' && message.content.some(block => block.type === 'text' && block.text === 'A note for later.'),
    )
    expect(notes).toHaveLength(1)
  })
})

describe('the catalogue follows the registry', () => {
  it('changes only when a tool is added or removed, owned by the catalogue plugin', async () => {
    const { host, mounted } = await setup()
    const agent = host.agent(CWD)
    const assemble = () => host.ctx.systemPrompt.assemble({ scope: agent, agent })
    const sectionOf = async () => (await assemble()).sections.find(section => section.name === 'tool-catalog')!
    const before = await sectionOf()
    expect(before.owner).toBe(mounted.name)
    expect(renderPrompt(await assemble())).toBe(renderPrompt(await assemble()))

    const extra = await host.mount({
      name: 'late-tool',
      inject: ['tools'],
      apply(ctx: Context) {
        ctx.tools.register(defineTool({ name: 'deploy', description: 'Deploys the service. Careful.', parameters: { type: 'object' }, execute: () => 'ok' }))
      },
    })
    const added = await sectionOf()
    expect(added.owner).toBe(mounted.name)
    expect(added.text).toBe(SECTION.replace('- issue_create', '- deploy — Deploys the service.\n- issue_create'))
    expect((await assemble()).tools.map(tool => tool.name)).toEqual(['bash', 'call_tool', 'read', 'tool_schema'])
    await host.assertStablePrompt({ cwd: CWD })

    await extra.dispose()
    expect((await sectionOf()).text).toBe(SECTION)
    // The host checks strictly: a static section changing with no registry change would have failed an assembly.
    expect(host.logs.filter(log => log.type === 'warn' || log.type === 'error')).toEqual([])
  })

  it("follows an agent's restriction", async () => {
    const { host } = await setup()
    const agent = host.agent(CWD)
    agent.ctx.tools.restrict(name => name !== 'weather')
    const assembly = await host.ctx.systemPrompt.assemble({ scope: agent, agent })
    expect(assembly.sections.find(section => section.name === 'tool-catalog')!.text).not.toContain('weather')
    const result = await host.callTool('tool_schema', { names: ['weather'] }, { cwd: CWD })
    expect(result.isError).toBe(true)
  })

  it('keeps every schema for an agent that cannot reach call_tool', async () => {
    const { host } = await setup()
    const agent = host.agent(CWD)
    agent.ctx.tools.restrict(['read', 'weather'])
    const assembly = await host.ctx.systemPrompt.assemble({ scope: agent, agent })
    expect(assembly.tools.map(tool => tool.name)).toEqual(['read', 'weather'])
    expect(assembly.sections.find(section => section.name === 'tool-catalog')!.text).toBe('')
  })
})

describe('lifecycle', () => {
  it('leaves nothing behind, and the schemas come back', async () => {
    const { host, mounted } = await setup()
    await host.callTool('tool_schema', { names: ['weather'] }, { cwd: CWD })
    await host.callTool('call_tool', { name: 'weather' }, { cwd: CWD })
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
    host.scriptedModel(['ok'])
    const run = await host.run('hello', { cwd: CWD })
    expect(toolNames(run.requests[0])).toEqual(['bash', 'issue_create', 'read', 'slow_report', 'weather'])
    expect(run.requests[0].system).not.toContain('Tools on demand')
    expect(host.logs.filter(log => log.type === 'error')).toEqual([])
  })
})

describe('helpers', () => {
  it('cuts a description to its first sentence, on one line', () => {
    expect(firstSentence('Reads a file. Then more.', 200)).toBe('Reads a file.')
    expect(firstSentence('Version 1.2 of the API\nis used', 200)).toBe('Version 1.2 of the API is used')
    expect(firstSentence('A very long sentence without an end', 10)).toBe('A very lo…')
  })
})
