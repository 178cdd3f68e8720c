import { createAssistantMessage, createToolResultMessage, estimateMessage, userText, type ContentBlock, type ToolResultMessage } from '@loom/llm'
import { prefixReuse, Session, type SessionEventMap } from '@loom/session'
import { createHost, type Host } from '@loom/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import * as compaction from '../src/index.ts'
import { budgetStub, measureContent, PRUNE_MARKER, PRUNE_MARKER_LENGTH, pruneContent, prunerConfig, pruneSession, pruneToBudget } from '../src/index.ts'
import { defineTool } from '@loom/tools'

const text = (value: string): ContentBlock => ({ type: 'text', text: value })

/** A tool that returns `n` characters. */
const dumpTool = defineTool<{ n: number }>({
  name: 'dump',
  description: 'Dumps n characters.',
  parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
  execute: ({ n }) => 'd'.repeat(n),
})

describe('pruneContent', () => {
  it('keeps 4096 code points of head and 1024 of tail around the marker by default', () => {
    expect(PRUNE_MARKER).toBe('\n\n[... tool result middle pruned ...]\n\n')
    expect(PRUNE_MARKER_LENGTH).toBe(39)
    const body = 'h'.repeat(4096) + 'm'.repeat(5000) + 't'.repeat(1024)
    const pruned = pruneContent([text(body)])!
    expect(pruned).toEqual([text('h'.repeat(4096) + PRUNE_MARKER + 't'.repeat(1024))])
    expect(measureContent(pruned)).toBe(4096 + 39 + 1024)
  })

  it('leaves content at or under the threshold alone, and a second pass changes nothing', () => {
    expect(pruneContent([text('x'.repeat(8192))])).toBeNull()
    const once = pruneContent([text('x'.repeat(8193))])!
    expect(measureContent(once)).toBe(5159)
    expect(pruneContent(once)).toBeNull()
  })

  it('counts code points, not UTF-16 units', () => {
    const config = prunerConfig({ thresholdChars: 50, headChars: 5, tailChars: 6 })
    expect(measureContent([text('😀'.repeat(50))])).toBe(50)
    expect(pruneContent([text('😀'.repeat(50))], config)).toBeNull()
    const pruned = pruneContent([text('😀'.repeat(60))], config)!
    expect(pruned).toEqual([text('😀'.repeat(5) + PRUNE_MARKER + '😀'.repeat(6))])
  })

  it('cuts across blocks in order: one marker, empty blocks dropped, other blocks kept in place', () => {
    const config = prunerConfig({ thresholdChars: 50, headChars: 5, tailChars: 6 })
    const reasoning: ContentBlock = { type: 'reasoning', text: 'not counted' }
    const blocks = [text('0123456789'), reasoning, text('a'.repeat(31)), text('ABCDEFGHIJ')]
    expect(measureContent(blocks)).toBe(51)
    const pruned = pruneContent(blocks, config)!
    expect(pruned).toEqual([text('01234' + PRUNE_MARKER), reasoning, text('EFGHIJ')])
    expect(measureContent(pruned)).toBe(50)
    expect(pruneContent(pruned, config)).toBeNull()
    // A head or tail that ends exactly at a block boundary keeps that block whole.
    expect(pruneContent([text('abcde'), text('x'.repeat(50)), text('uvwxyz')], config)).toEqual([text('abcde'), text(PRUNE_MARKER), text('uvwxyz')])
  })
})

describe('pruner config', () => {
  it('is validated: integers, threshold > 0, head and tail >= 0, head + 39 + tail <= threshold, no unknown key', () => {
    expect(prunerConfig()).toEqual({ thresholdChars: 8192, headChars: 4096, tailChars: 1024 })
    expect(prunerConfig({ thresholdChars: 39, headChars: 0, tailChars: 0 })).toEqual({ thresholdChars: 39, headChars: 0, tailChars: 0 })
    expect(() => prunerConfig({ headChars: 1.5 })).toThrow('"headChars" must be an integer')
    expect(() => prunerConfig({ thresholdChars: 0, headChars: 0, tailChars: 0 })).toThrow('"thresholdChars" must be > 0')
    expect(() => prunerConfig({ tailChars: -1 })).toThrow('"tailChars" must be >= 0')
    expect(() => prunerConfig({ thresholdChars: 100, headChars: 31, tailChars: 31 })).toThrow('must not exceed thresholdChars (100)')
    expect(() => prunerConfig({ thresholdChars: 100, headChars: 30, tailChars: 31 })).not.toThrow()
    expect(() => prunerConfig({ middleChars: 3 } as any)).toThrow('unknown key "middleChars"')
  })
})

describe('pruneSession', () => {
  function sessionWithResults(...bodies: string[]) {
    const session = Session.create('s1')
    session.append('user/message', userText('go'), { surfaceOp: 'append' })
    const calls = bodies.map((_, i) => ({ type: 'tool-call' as const, id: `c${i}`, name: 'read', arguments: '{}' }))
    session.append(
      'assistant/message',
      {
        turn: 1,
        step: 1,
        message: createAssistantMessage({ content: calls, source: { provider: 'p', model: 'm' } }),
      },
      { surfaceOp: 'append' },
    )
    const seqs = bodies.map((body, i) => {
      const call = session.append('tool/call', { turn: 1, step: 1, callId: `c${i}`, name: 'read', arguments: '{}' })
      return session.append(
        'tool/result',
        {
          turn: 1,
          step: 1,
          message: createToolResultMessage({ callId: `c${i}`, content: [text(body)] }),
          meta: { n: i },
        },
        { surfaceOp: 'append', sourceEventSeqs: [call.seq] },
      ).seq
    })
    return { session, seqs }
  }

  it('appends compaction/prune, then the replacing tool/result with the same message id and only the content changed', () => {
    const big = 'a'.repeat(9000)
    const { session, seqs } = sessionWithResults('small', big)
    const original = session.events[seqs[1]]
    const originalMessage = (original.data as SessionEventMap['tool/result']).message
    const from = session.seq

    const report = pruneSession(session)
    expect(report).toEqual({
      pruned: [{ originalSeq: seqs[1], replacementSeq: from + 1, callId: 'c1', charsBefore: 9000, charsAfter: 5159 }],
      charsRemoved: 9000 - 5159,
    })
    const [prune, replacement] = session.events.slice(from)
    expect(session.events).toHaveLength(from + 2)
    expect(prune.type).toBe('compaction/prune')
    expect(prune.data).toEqual({
      shadowedRange: { start: seqs[1], end: seqs[1] },
      shadowedSeqs: [seqs[1]],
      shadowedTokenCount: estimateMessage(originalMessage),
    })
    expect(replacement.type).toBe('tool/result')
    expect(replacement.surfaceOp).toEqual({ op: 'replace', start: seqs[1], end: seqs[1] })
    expect(replacement.sourceEventSeqs).toEqual([seqs[1]])
    const data = replacement.data as SessionEventMap['tool/result']
    expect(data).toEqual({
      ...original.data,
      message: { ...originalMessage, content: [{ ...originalMessage.content[0], content: [text('a'.repeat(4096) + PRUNE_MARKER + 'a'.repeat(1024))] }] },
    })
    expect(data.message.id).toBe(originalMessage.id)
    // The original stays in the log; the history carries the pruned one in its place.
    expect(session.events[seqs[1]]).toBe(original)
    const history = session.deriveMessages()
    expect(history).toHaveLength(4)
    expect((history[3] as ToolResultMessage).content[0].content).toEqual(data.message.content[0].content)
    expect(session.surface.nodes.at(-1)).toBe(replacement.seq)

    // Idempotent: nothing left to prune.
    expect(pruneSession(session)).toEqual({ pruned: [], charsRemoved: 0 })
    expect(session.events).toHaveLength(from + 2)
  })

  it('prunes every large result on the surface, in surface order', () => {
    const { session, seqs } = sessionWithResults('b'.repeat(9000), 'ok', 'c'.repeat(10000))
    const report = pruneSession(session, prunerConfig({ thresholdChars: 100, headChars: 10, tailChars: 10 }))
    expect(report.pruned.map(p => [p.originalSeq, p.callId, p.charsAfter])).toEqual([
      [seqs[0], 'c0', 59],
      [seqs[2], 'c2', 59],
    ])
    expect(report.charsRemoved).toBe(9000 - 59 + 10000 - 59)
    expect(session.events.slice(-4).map(e => e.type)).toEqual(['compaction/prune', 'tool/result', 'compaction/prune', 'tool/result'])
  })
})

describe('the plugin', () => {
  let host: Host
  afterEach(() => host?.dispose())

  it('provides ctx.toolResultPruner with its config, and leaves nothing behind', async () => {
    host = await createHost()
    const mounted = await host.mount(compaction.default, { pruner: { thresholdChars: 100, headChars: 10, tailChars: 20 } })
    const pruner = host.root.get('toolResultPruner')!
    expect(pruner.config).toEqual({ thresholdChars: 100, headChars: 10, tailChars: 20 })
    expect(pruner.pruneContent([text('x'.repeat(101))])).toEqual([text('x'.repeat(10) + PRUNE_MARKER + 'x'.repeat(20))])
    expect(mounted.ctx.compaction.config.thresholdRatio).toBe(0.8)
    expect(mounted.ctx.compaction.config.retainRatio).toBe(0.16)
    await mounted.dispose()
    expect(host.root.get('toolResultPruner')).toBeUndefined()
    expect(host.root.get('compaction')).toBeUndefined()
    await host.assertZeroResidue(mounted)
  })

  it('rejects a pruner config that cannot fit the marker', async () => {
    host = await createHost()
    await expect(host.mount(compaction.default, { pruner: { thresholdChars: 40, headChars: 1, tailChars: 1 } })).rejects.toThrow(
      /failed to start[\s\S]*must not exceed thresholdChars \(40\)/,
    )
  })
})

describe('pruneToBudget', () => {
  /** Appends one step: the assistant's call, then its result with `body`. */
  function addStep(session: Session, body: string) {
    const callId = `c${session.seq}`
    const call = { type: 'tool-call' as const, id: callId, name: 'read', arguments: '{}' }
    const message = createAssistantMessage({ content: [call], source: { provider: 'p', model: 'm' } })
    session.append('assistant/message', { turn: 1, step: 1, message }, { surfaceOp: 'append' })
    const callEvent = session.append('tool/call', { turn: 1, step: 1, callId, name: 'read', arguments: '{}' })
    const result = createToolResultMessage({ callId, content: [text(body)] })
    return session.append('tool/result', { turn: 1, step: 1, message: result }, { surfaceOp: 'append', sourceEventSeqs: [callEvent.seq] }).seq
  }
  function sessionOf(...bodies: string[]) {
    const session = Session.create('s')
    session.append('user/message', userText('go'), { surfaceOp: 'append' })
    return { session, seqs: bodies.map(body => addStep(session, body)) }
  }
  const history = (session: Session) => session.deriveMessages().map(message => JSON.stringify(message))
  const resultTexts = (session: Session) =>
    session
      .deriveMessages()
      .flatMap(message =>
        message.content.flatMap(block => (block.type === 'tool-result' ? block.content.map(part => (part.type === 'text' ? part.text : '')) : [])),
      )
  const kilo = (letter: string) => letter.repeat(1000)
  const STUB_1000 = budgetStub(1000)

  it('changes nothing within the cap; over it, stubs the oldest results until the total is at most the low-water mark', () => {
    const { session, seqs } = sessionOf(kilo('a'), kilo('b'), kilo('c'), kilo('d'), kilo('e'))
    const before = session.seq
    expect(pruneToBudget(session, 5000, 2500)).toEqual({ pruned: [], charsRemoved: 0 })
    expect(session.seq).toBe(before)

    seqs.push(addStep(session, kilo('f')))
    // 6000 > 5000: each stub saves 1000 - STUB_1000.length; four bring the total to 2496 <= 2500.
    const report = pruneToBudget(session, 5000, 2500)
    expect(report.pruned.map(p => p.originalSeq)).toEqual(seqs.slice(0, 4))
    expect(report.charsRemoved).toBe(4 * (1000 - STUB_1000.length))
    expect(resultTexts(session)).toEqual([STUB_1000, STUB_1000, STUB_1000, STUB_1000, kilo('e'), kilo('f')])
  })

  it('between two crossings the history only grows, and a crossing leaves the earlier stubs as they were', () => {
    const { session } = sessionOf(kilo('a'), kilo('b'), kilo('c'), kilo('d'), kilo('e'), kilo('f'))
    expect(pruneToBudget(session, 5000, 2500).pruned).toHaveLength(4)
    const afterFirst = history(session)
    // 2496 + 1000 and + 2000 stay within the cap: nothing is rewritten.
    for (const letter of ['g', 'h']) {
      const earlier = history(session)
      addStep(session, kilo(letter))
      expect(pruneToBudget(session, 5000, 2500)).toEqual({ pruned: [], charsRemoved: 0 })
      expect(history(session).slice(0, earlier.length)).toEqual(earlier)
    }
    // 5496 > 5000: the next oldest four go (e to h), the newest stays; a, b, c, d are untouched.
    addStep(session, kilo('i'))
    expect(pruneToBudget(session, 5000, 2500).pruned).toHaveLength(4)
    expect(resultTexts(session)).toEqual([...Array(8).fill(STUB_1000), kilo('i')])
    const firstChanged = history(session).findIndex((message, i) => message !== afterFirst[i])
    expect(afterFirst.slice(0, firstChanged).filter(message => message.includes(STUB_1000))).toHaveLength(4)
    expect(pruneToBudget(session, 5000, 2500)).toEqual({ pruned: [], charsRemoved: 0 })
  })

  it('with no low-water mark of its own (it is then the cap) stubs just enough, so every further result rewrites the history', () => {
    const { session } = sessionOf(kilo('a'), kilo('b'), kilo('c'))
    expect(pruneToBudget(session, 2500).pruned).toHaveLength(1)
    for (const letter of ['d', 'e', 'f']) {
      addStep(session, kilo(letter))
      expect(pruneToBudget(session, 2500).pruned).toHaveLength(1)
    }
  })

  it('keeps the newest result whatever its size, and a result no longer than its stub would be', () => {
    const { session, seqs } = sessionOf('ok', kilo('a'), 'x'.repeat(3000))
    const report = pruneToBudget(session, 1000, 0)
    expect(report.pruned.map(p => p.originalSeq)).toEqual([seqs[1]])
    expect(resultTexts(session)).toEqual(['ok', STUB_1000, 'x'.repeat(3000)])
    expect(pruneToBudget(session, 1000, 0)).toEqual({ pruned: [], charsRemoved: 0 })
  })
})

describe('the tool-results budget', () => {
  let host: Host
  afterEach(() => host?.dispose())

  it("older results beyond the prompt row's tool-results cap are replaced by a stub saying so; the newest always stays", async () => {
    host = await createHost({ prompt: { budgets: { categories: { 'tool-results': { cap: 2500 } } } } })
    await host.mount(compaction.default, { auto: false })
    host.ctx.tools.register(dumpTool)
    host.scriptedModel([
      { toolCalls: [{ name: 'dump', arguments: { n: 1000 } }] },
      { toolCalls: [{ name: 'dump', arguments: { n: 1200 } }] },
      { toolCalls: [{ name: 'dump', arguments: { n: 3000 } }] },
      'Done.',
    ])
    const run = await host.run('dump three times')
    const results = (request: (typeof run.requests)[number]) =>
      request.messages.flatMap(message => message.content.flatMap(block => (block.type === 'tool-result' ? [measureContent(block.content)] : [])))
    expect(run.requests.map(results)).toEqual([[], [1000], [1000, 1200], [budgetStub(1000).length, budgetStub(1200).length, 3000]])
    const stubbed = JSON.stringify(run.requests[3].messages)
    expect(stubbed).toContain('[This tool result (1000 characters) was left out to stay within the tool-results budget. Call the tool again if you need it.]')
    // In the log: each replacement follows the compaction/prune that shadows the original.
    expect(run.events.filter(event => event.type === 'compaction/prune')).toHaveLength(2)
  })

  it('over a session the history is rewritten only when the results cross the cap, not at every step once it is reached', async () => {
    /** The 1-based numbers of the requests that do not extend the one before (the provider's cached prefix breaks there). */
    async function rewrites(config: object) {
      host = await createHost({ prompt: { budgets: { categories: { 'tool-results': { cap: 3000 } } } } })
      await host.mount(compaction.default, { auto: false, ...config })
      host.ctx.tools.register(dumpTool)
      host.scriptedModel([...Array.from({ length: 12 }, () => ({ toolCalls: [{ name: 'dump', arguments: { n: 500 } }] })), 'Done.'])
      const { requests } = await host.run('dump twelve times')
      expect(requests).toHaveLength(13)
      await host.dispose()
      return requests.flatMap((request, i) => (i > 0 && prefixReuse(requests[i - 1], request) < 1 ? [i + 1] : []))
    }
    // Request 8 carries 7 results (3500 > 3000): down to 1500, stubs and all; the next crossing is at request 12.
    expect(await rewrites({})).toEqual([8, 12])
    // Pruning just enough rewrites every request from the first crossing on.
    expect(await rewrites({ toolResultsLowWater: 1 })).toEqual([8, 9, 10, 11, 12, 13])
  })

  it('takes toolResultsLowWater as a share of the cap, 0 to 1', async () => {
    host = await createHost()
    expect((await host.mount(compaction.default, { auto: false })).ctx.compaction.config.toolResultsLowWater).toBe(0.5)
    await host.dispose()
    host = await createHost()
    await expect(host.mount(compaction.default, { toolResultsLowWater: 1.5 })).rejects.toThrow(/toolResultsLowWater/)
  })

  it('without a tool-results cap nothing is replaced', async () => {
    host = await createHost()
    await host.mount(compaction.default, { auto: false })
    const session = Session.create('s')
    expect(pruneToBudget(session, 10)).toEqual({ pruned: [], charsRemoved: 0 })
    expect(host.root.get('compaction')!.keepToolResultsInBudget(host.agent())).toBeUndefined()
  })
})
