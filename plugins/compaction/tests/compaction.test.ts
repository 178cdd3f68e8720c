import type { Agent } from '@loom/agent-loop'
import { userText, type ContentBlock, type GenerateOptions, type Message, type UserMessage } from '@loom/llm'
import type { ScriptResult } from '@loom/llm/testing'
import { Session, type SessionEvent, type SessionEventMap } from '@loom/session'
import { createHost, type Host, type Mounted } from '@loom/testkit'
import { defineTool } from '@loom/tools'
import { afterEach, describe, expect, it, vi } from 'vitest'
import * as compaction from '../src/index.ts'
import { balancedCuts, chooseCut, COMPACTION_PLUGIN, PRUNE_MARKER, SUMMARY_SECTIONS, surfaceNodes, type SurfaceNode } from '../src/index.ts'

const RUNTIME_OWNER = '@loom/system-prompt'
const SUMMARY = '## Primary Request\nRead the blobs.\n## Current Work\nReading blob 4.'

let host: Host
afterEach(() => host?.dispose())

/**
 * A model that answers loop requests from `turns` (in order) and summary
 * requests (`purpose: 'compaction'`) from `summaries`; it records both.
 */
function model(turns: ScriptResult[], summaries: ScriptResult[] = [SUMMARY]) {
  const loop: GenerateOptions[] = []
  const summary: GenerateOptions[] = []
  const reply = (request: GenerateOptions): ScriptResult => {
    if (request.purpose === 'compaction') {
      summary.push(request)
      return summaries.shift() ?? { error: { code: 'SCRIPT_EXHAUSTED', message: 'no summary left' } }
    }
    loop.push(request)
    return turns.shift() ?? { error: { code: 'SCRIPT_EXHAUSTED', message: 'no answer left' } }
  }
  host.scriptedModel(Array.from({ length: 60 }, () => reply))
  return { loop, summary }
}

const blobCall = (n: number) => ({ toolCalls: [{ id: `call-${n}`, name: 'blob', arguments: { n } }] })

async function setup(config: Record<string, unknown>, blobChars = 1200): Promise<{ mounted: Mounted; agent: Agent }> {
  host = await createHost({ cwd: '/srv/project' })
  host.ctx.tools.register(
    defineTool<{ n: number }>({
      name: 'blob',
      description: 'Returns a large blob.',
      parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
      execute: args => `blob ${args.n}: ` + String(args.n).repeat(blobChars),
    }),
  )
  host.ctx.systemPrompt.context({ name: 'clock', order: 0, text: 'Time: noon.' })
  // Created first: the agent is the test's, not the plugin's.
  const agent = host.ctx.agents.create('a1', { provider: 'scripted', model: 'scripted', cwd: '/srv/project' })
  const mounted = await host.mount(compaction.default, config)
  return { mounted, agent }
}

async function turn(agent: Agent, text: string) {
  agent.followup(userText(text))
  await agent.idle()
}

const ofType = (events: readonly SessionEvent[], type: string) => events.filter(event => event.type === type)
const isOwnedSnapshot = (message: Message) => message.source.kind === 'plugin' && message.source.plugin === RUNTIME_OWNER

/** Every tool result's call is in an earlier assistant message, and every call has a later result. */
function expectPaired(messages: readonly Message[]) {
  const calls = new Map<string, number>()
  const results = new Map<string, number>()
  messages.forEach((message, index) => {
    for (const block of message.content) {
      if (block.type === 'tool-call') {
        expect(message.role).toBe('assistant')
        calls.set(block.id, index)
      }
      if (block.type === 'tool-result') results.set(block.toolCallId, index)
    }
  })
  for (const [id, index] of results) {
    expect(calls.has(id), `result ${id} has no call`).toBe(true)
    expect(calls.get(id)!).toBeLessThan(index)
  }
  for (const [id, index] of calls) {
    expect(results.has(id), `call ${id} has no result`).toBe(true)
    expect(results.get(id)!).toBeGreaterThan(index)
  }
}

describe('balanced cuts', () => {
  const node = (seq: number, message: Partial<Message>): SurfaceNode => ({
    seq,
    message: { id: `m${seq}`, role: 'user', content: [], source: { kind: 'user' }, ...message } as Message,
    tokens: 10,
  })
  const user = (seq: number) => node(seq, { content: [{ type: 'text', text: 'hi' }] })
  const call = (seq: number, ...ids: string[]) =>
    node(seq, { role: 'assistant', content: ids.map(id => ({ type: 'tool-call', id, name: 't', arguments: '{}' })) as ContentBlock[] })
  const result = (seq: number, id: string) => node(seq, { content: [{ type: 'tool-result', toolCallId: id, content: [] }] })

  it('never separates a call from its results', () => {
    const nodes = [user(0), call(1, 'a', 'b'), result(2, 'a'), result(3, 'b'), call(4, 'c'), result(5, 'c'), user(6)]
    // Not after 1 (open calls), not after 2 (b open), not before a result.
    expect(balancedCuts(nodes)).toEqual([1, 4, 6, 7])
    // Keep at least 25 tokens (3 nodes): the largest balanced cut that does is 4.
    expect(chooseCut(nodes, 25)).toBe(4)
    expect(chooseCut(nodes, 10)).toBe(6)
    expect(chooseCut(nodes, 0)).toBe(7)
    expect(chooseCut(nodes, 1000)).toBeUndefined()
  })
})

describe('automatic compaction', () => {
  it('summarizes at a balanced boundary when the projected prompt passes 0.8 of the window, keeping calls paired', async () => {
    const { agent } = await setup({ contextWindow: 1500 })
    const m = model([blobCall(1), blobCall(2), blobCall(3), blobCall(4), 'All blobs read.'])
    await turn(agent, 'read the blobs')

    const events = agent.session.events
    expect(ofType(events, 'turn/end').map(e => (e.data as SessionEventMap['turn/end']).reason)).toEqual([{ kind: 'completed' }])
    const starts = ofType(events, 'compaction/start')
    expect(starts.length).toBeGreaterThanOrEqual(1)
    const start = starts[0]
    expect(start.data).toMatchObject({ turn: 1 })
    const id = (start.data as SessionEventMap['compaction/start']).compactionId
    // start, summary, the replacement, end: contiguous, in that order.
    const [summaryEvent, replacement, end] = events.slice(start.seq + 1, start.seq + 4)
    expect([summaryEvent.type, replacement.type, end.type]).toEqual(['compaction/summary', 'user/message', 'compaction/end'])
    expect(end.data).toEqual({ compactionId: id, turn: 1 })
    const summary = summaryEvent.data as SessionEventMap['compaction/summary']
    expect(summary).toMatchObject({ compactionId: id, summary: [{ type: 'text', text: SUMMARY }], provider: 'scripted', model: 'scripted' })
    expect(summary.shadowedRange).toEqual({ start: summary.shadowedSeqs[0], end: summary.shadowedSeqs.at(-1) })
    expect(replacement.surfaceOp).toEqual({ op: 'replace', ...summary.shadowedRange })
    expect(replacement.sourceEventSeqs).toEqual(expect.arrayContaining(summary.shadowedSeqs))
    const message = replacement.data as UserMessage
    expect(message.source).toEqual({ kind: 'plugin', plugin: COMPACTION_PLUGIN, form: 'notice', summary: expect.any(String) })
    expect((message.content[0] as { text: string }).text).toContain(`<compacted-summary>\n${SUMMARY}\n</compacted-summary>`)

    // The cut is balanced: the shadowed part answers all its calls, the kept part starts with no result.
    const shadowedMessages = summary.shadowedSeqs.map(seq => agent.session.deriveEventMessage(events[seq])!).filter(Boolean)
    expectPaired(shadowedMessages)
    const surfaceAfter = eventsSurfaceAfter(events, replacement.seq)
    const firstKept = events[surfaceAfter[surfaceAfter.indexOf(replacement.seq) + 1]]
    expect(firstKept.type).not.toBe('tool/result')

    // The derived history keeps every call with its result, and shrank.
    const history = agent.session.deriveMessages()
    expectPaired(history)
    expect(history[0].id).toBe(message.id)
    expect(summary.shadowedTokenCount).toBeGreaterThan(0)

    // One summary call: the same system and tools, the shadowed messages, then the instruction.
    expect(m.summary).toHaveLength(starts.length)
    const request = m.summary[0]
    const loopBefore = m.loop.filter(r => r.messages.length > 0)[0]
    expect(request.purpose).toBe('compaction')
    expect(request.system).toBe(loopBefore.system)
    expect(request.tools).toEqual(loopBefore.tools)
    expect(request.messages.slice(0, -1).map(x => x.id)).toEqual(shadowedMessages.map(x => x.id))
    const instruction = request.messages.at(-1)!
    for (const section of SUMMARY_SECTIONS) expect((instruction.content[0] as { text: string }).text).toContain(`## ${section}`)
  })

  it('sends the summary and the retained tail in the next request, and re-projects the runtime context', async () => {
    const { agent } = await setup({ contextWindow: 1500 })
    const m = model([blobCall(1), blobCall(2), blobCall(3), blobCall(4), 'All blobs read.', 'Second turn answer.'])
    await turn(agent, 'read the blobs')
    const events = agent.session.events
    const replacement = ofType(events, 'user/message').find(e => typeof e.surfaceOp === 'object')!
    expect(replacement).toBeDefined()
    const summary = ofType(events, 'compaction/summary')[0].data as SessionEventMap['compaction/summary']
    // The snapshot that was visible before is among the shadowed messages.
    const shadowedSnapshot = summary.shadowedSeqs.some(seq => events[seq].type === 'user/message' && isOwnedSnapshot(events[seq].data as Message))
    expect(shadowedSnapshot).toBe(true)

    // The first loop request after the replace.
    const stepStarts = ofType(events, 'step/start').filter(e => e.seq > replacement.seq)
    const requestsBefore = ofType(events, 'step/start').filter(e => e.seq < replacement.seq).length
    const next = m.loop[requestsBefore]
    expect(stepStarts.length).toBeGreaterThan(0)
    expect(next.messages[0].id).toBe((replacement.data as UserMessage).id)
    expect((next.messages[0].content[0] as { text: string }).text).toContain(SUMMARY)
    // The retained tail follows the summary unchanged.
    const retained = eventsSurfaceAfter(events, replacement.seq)
      .slice(1)
      .map(seq => agent.session.deriveEventMessage(events[seq]))
      .filter(x => x !== null)
    expect(next.messages.slice(1, 1 + retained.length).map(x => x.id)).toEqual(retained.map(x => x!.id))
    expectPaired(next.messages)

    // The loop's projection hid nothing new in this turn; on the next step (the next
    // turn here) it re-emits the snapshot that the replace shadowed.
    expect(ofType(events, 'user/message').filter(e => e.seq > replacement.seq && isOwnedSnapshot(e.data as Message))).toHaveLength(0)
    await turn(agent, 'and now?')
    const after = agent.session.events
    const snapshotsAfter = ofType(after, 'user/message').filter(e => e.seq > replacement.seq && isOwnedSnapshot(e.data as Message))
    expect(snapshotsAfter).toHaveLength(1)
    const snapshot = snapshotsAfter[0].data as UserMessage
    expect(snapshot.content[0]).toMatchObject({ text: expect.stringContaining('Time: noon.') })
    // The next turn carries the summary first, then the retained tail, the new prompt and the new snapshot.
    const last = m.loop.at(-1)!
    expect(last.messages[0].id).toBe((replacement.data as UserMessage).id)
    expect(last.messages.at(-1)!.id).toBe(snapshot.id)
    expect(last.messages.filter(isOwnedSnapshot)).toHaveLength(1)
    expectPaired(last.messages)
  })

  it('refuses a summary that is not shorter than what it replaces, and changes nothing', async () => {
    const { agent } = await setup({ contextWindow: 1500 })
    const long = 'x'.repeat(20000)
    const m = model([blobCall(1), blobCall(2), blobCall(3), blobCall(4), 'All blobs read.'], Array(10).fill(long))
    await turn(agent, 'read the blobs')
    const events = agent.session.events
    // Tried once; not again in the same turn.
    expect(m.summary).toHaveLength(1)
    expect(ofType(events, 'compaction/start')).toHaveLength(1)
    expect(ofType(events, 'compaction/summary')).toHaveLength(0)
    expect(events.filter(e => typeof e.surfaceOp === 'object')).toHaveLength(0)
    const ends = ofType(events, 'compaction/end')
    expect(ends).toHaveLength(ofType(events, 'compaction/start').length)
    for (const end of ends) expect((end.data as SessionEventMap['compaction/end']).error).toMatch(/not shorter than what it replaces/)
    expect(ofType(events, 'turn/end').map(e => (e.data as SessionEventMap['turn/end']).reason.kind)).toEqual(['completed'])
    expectPaired(agent.session.deriveMessages())
  })

  it('prunes large tool results first and stops there when that is enough', async () => {
    const { agent } = await setup({ contextWindow: 3000 }, 12000)
    const m = model([blobCall(1), 'Read it.'])
    await turn(agent, 'read one blob')
    const events = agent.session.events
    expect(ofType(events, 'compaction/prune')).toHaveLength(1)
    expect(ofType(events, 'compaction/start')).toHaveLength(0)
    expect(m.summary).toHaveLength(0)
    const result = m.loop[1].messages.at(-1)!
    expect(result.content[0]).toMatchObject({ type: 'tool-result', toolCallId: 'call-1' })
    expect(JSON.stringify(result.content)).toContain(JSON.stringify(PRUNE_MARKER).slice(1, -1))
  })

  it('does nothing under the threshold, or with auto off', async () => {
    const { agent } = await setup({ contextWindow: 1_000_000 })
    const m = model([blobCall(1), blobCall(2), 'Done.'])
    // Measuring the pressure every step reads the surface's events, not a copy of the whole log.
    const wholeLog = vi.spyOn(Session.prototype, 'events', 'get')
    await turn(agent, 'read')
    expect(wholeLog).not.toHaveBeenCalled()
    wholeLog.mockRestore()
    expect(agent.session.events.filter(e => e.type.startsWith('compaction/'))).toHaveLength(0)
    expect(m.summary).toHaveLength(0)
    await host.dispose()

    const off = await setup({ contextWindow: 1500, auto: false })
    const m2 = model([blobCall(1), blobCall(2), blobCall(3), blobCall(4), 'Done.'])
    await turn(off.agent, 'read')
    expect(off.agent.session.events.filter(e => e.type.startsWith('compaction/'))).toHaveLength(0)
    expect(m2.summary).toHaveLength(0)
  })
})

describe('prompt pressure', () => {
  it('keeps the history count up with appends and recounts after a replacement, as a full count would', async () => {
    const { mounted, agent } = await setup({ contextWindow: 1500 })
    const fullCount = () => surfaceNodes(agent.session).reduce((sum, node) => sum + node.tokens, 0)
    const m = model([blobCall(1), 'One blob read.', blobCall(2), blobCall(3), blobCall(4), 'All blobs read.', 'You are welcome.'])
    await turn(agent, 'read a blob')
    expect(mounted.ctx.compaction.measure(agent).surfaceTokens).toBe(fullCount())
    await turn(agent, 'read the rest')
    expect(ofType(agent.session.events, 'compaction/end').length).toBeGreaterThanOrEqual(1)
    expect(mounted.ctx.compaction.measure(agent).surfaceTokens).toBe(fullCount())
    // A step after the first measure reads no event of the history to count it.
    const read = vi.spyOn(Session.prototype, 'eventAt')
    await turn(agent, 'thanks')
    expect(read).not.toHaveBeenCalled()
    read.mockRestore()
    expect(JSON.stringify(m.loop.at(-1)?.messages)).toContain('"text":"thanks"')
    expect(mounted.ctx.compaction.measure(agent).surfaceTokens).toBe(fullCount())
  })
})

describe('context overflow', () => {
  const overflow = { error: { code: 'CONTEXT_OVERFLOW', message: 'too long' } }
  const reasons = (agent: Agent) => ofType(agent.session.events, 'turn/end').map(e => (e.data as SessionEventMap['turn/end']).reason)
  const replaces = (agent: Agent) => agent.session.events.filter(e => typeof e.surfaceOp === 'object')
  /** Turn 1 reads three blobs (no window: no automatic compaction); `rest` answers turn 2. */
  async function withHistory(config: Record<string, unknown>, rest: ScriptResult[]) {
    const { agent } = await setup(config)
    const m = model([blobCall(1), blobCall(2), blobCall(3), 'Done.', ...rest])
    await turn(agent, 'read the blobs')
    expect(agent.session.events.filter(e => e.type.startsWith('compaction/'))).toHaveLength(0)
    return { agent, m, from: agent.session.seq }
  }

  it('compacts after a CONTEXT_OVERFLOW failure and retries the request with the summary', async () => {
    const { agent, m, from } = await withHistory({}, [overflow, 'Recovered.'])
    await turn(agent, 'go on')
    const events = agent.session.events.slice(from)
    expect(events.filter(e => e.type.startsWith('compaction/')).map(e => e.type)).toEqual(['compaction/start', 'compaction/summary', 'compaction/end'])
    const start = ofType(events, 'compaction/start')[0]
    expect(start.data).toMatchObject({ turn: 2 })
    // Inside the step whose request failed: after its step/start, before its step/end, one step only.
    expect(ofType(events, 'step/start')).toHaveLength(1)
    expect(ofType(events, 'step/start')[0].seq).toBeLessThan(start.seq)
    expect(ofType(events, 'step/end')[0].seq).toBeGreaterThan(start.seq)
    expect(m.summary).toHaveLength(1)

    const replacement = replaces(agent).at(-1)!
    const failed = m.loop.at(-2)!
    const retried = m.loop.at(-1)!
    expect(failed.messages.some(x => x.id === (replacement.data as UserMessage).id)).toBe(false)
    expect(retried.messages[0].id).toBe((replacement.data as UserMessage).id)
    expect((retried.messages[0].content[0] as { text: string }).text).toContain(`<compacted-summary>\n${SUMMARY}\n</compacted-summary>`)
    expect(retried.messages.length).toBeLessThan(failed.messages.length)
    expect(retried.messages.at(-1)!.content).toEqual(failed.messages.at(-1)!.content)
    expectPaired(retried.messages)
    expect(reasons(agent)).toEqual([{ kind: 'completed' }, { kind: 'completed' }])
    expect(agent.session.deriveMessages().at(-1)!.content).toEqual([{ type: 'text', text: 'Recovered.' }])
  })

  it('accepts CONTEXT_WINDOW_EXCEEDED too', async () => {
    const { agent, m } = await withHistory({}, [{ error: { code: 'CONTEXT_WINDOW_EXCEEDED', message: 'too long' } }, 'Recovered.'])
    await turn(agent, 'go on')
    expect(m.summary).toHaveLength(1)
    expect(reasons(agent).at(-1)).toEqual({ kind: 'completed' })
  })

  it('leaves the failure terminal when nothing can be compacted', async () => {
    const { agent } = await setup({})
    const m = model([overflow, 'never sent'])
    await turn(agent, 'hi')
    expect(replaces(agent)).toHaveLength(0)
    expect(ofType(agent.session.events, 'compaction/summary')).toHaveLength(0)
    expect(m.loop).toHaveLength(1)
    // The only shadowable message is the short prompt: its summary is refused, the surface is untouched.
    for (const end of ofType(agent.session.events, 'compaction/end')) expect((end.data as SessionEventMap['compaction/end']).error).toMatch(/not shorter/)
    expect(reasons(agent)).toEqual([{ kind: 'error', error: { code: 'CONTEXT_OVERFLOW', message: 'too long' } }])
  })

  it('recovers at most maxOverflowRetries times per step', async () => {
    const { agent, m, from } = await withHistory({}, [overflow, overflow, 'never sent'])
    await turn(agent, 'go on')
    expect(ofType(agent.session.events.slice(from), 'compaction/start')).toHaveLength(1)
    expect(m.summary).toHaveLength(1)
    expect(m.loop).toHaveLength(4 + 2)
    expect(reasons(agent).at(-1)).toEqual({ kind: 'error', error: { code: 'CONTEXT_OVERFLOW', message: 'too long' } })
    await host.dispose()

    const off = await withHistory({ maxOverflowRetries: 0 }, [overflow, 'never sent'])
    await turn(off.agent, 'go on')
    expect(off.agent.session.events.filter(e => e.type.startsWith('compaction/'))).toHaveLength(0)
    expect(off.m.summary).toHaveLength(0)
    expect(reasons(off.agent).at(-1)).toMatchObject({ kind: 'error' })
  })

  it('does not touch other failures', async () => {
    const { agent, m, from } = await withHistory({}, [{ error: { code: 'RATE_LIMITED', message: 'slow down' } }, 'never sent'])
    await turn(agent, 'go on')
    expect(agent.session.events.slice(from).filter(e => e.type.startsWith('compaction/'))).toHaveLength(0)
    expect(m.summary).toHaveLength(0)
    expect(m.loop).toHaveLength(4 + 1)
    expect(reasons(agent).at(-1)).toEqual({ kind: 'error', error: { code: 'RATE_LIMITED', message: 'slow down' } })
  })
})

describe('compactNow', () => {
  it('compacts between turns with turn: null, and is refused while a turn runs', async () => {
    const { mounted, agent } = await setup({ auto: false })
    const m = model([blobCall(1), blobCall(2), blobCall(3), 'Done.', 'Later.'])
    await turn(agent, 'read the blobs')
    const from = agent.session.seq
    const result = await mounted.ctx.compaction.compactNow(agent)
    expect(result.status).toBe('compacted')
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore)
    const types = agent.session.events.slice(from).map(e => e.type)
    expect(types).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end'])
    expect(agent.session.events[from].data).toMatchObject({ turn: null })
    expect(m.summary).toHaveLength(1)
    expectPaired(agent.session.deriveMessages())

    agent.followup(userText('more'))
    await expect(mounted.ctx.compaction.compactNow(agent)).rejects.toThrow(/already has active work/)
    await agent.idle()
  })

  it('leaves nothing behind after dispose', async () => {
    const { mounted } = await setup({ contextWindow: 1500 })
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })
})

/** The surface right after the event at `seq` was committed. */
function eventsSurfaceAfter(events: readonly SessionEvent[], seq: number): number[] {
  const nodes: number[] = []
  for (const event of events.slice(0, seq + 1)) {
    if (event.surfaceOp === 'append') nodes.push(event.seq)
    else if (typeof event.surfaceOp === 'object') {
      const i = nodes.indexOf(event.surfaceOp.start)
      const j = nodes.indexOf(event.surfaceOp.end)
      nodes.splice(i, j - i + 1, event.seq)
    }
  }
  return nodes
}
