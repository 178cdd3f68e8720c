// The reconstruction theorem, checked against what the adapter really received,
// and prefix reuse (beyond.md 4) over a long scripted session.
import { LlmError } from '@loom/llm'
import { foldRequestHeader, prefixReuse, reconstructRequests, requestEconomics, serializeRequest, Session } from '@loom/session'
import { defineTool } from '@loom/tools'
import { describe, expect, it } from 'vitest'
import { harness, textResponse, toolCallResponse, type Harness } from './harness.ts'

const echo = defineTool<{ text: string }>({
  name: 'echo',
  description: 'Repeats its argument.',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: ({ text }) => `echo: ${text}`,
})

/** Every request the adapter received, as reconstructed from the log, compared field by field. */
function expectFaithful(h: Harness) {
  const events = h.events()
  const requests = reconstructRequests(events)
  expect(requests).toHaveLength(h.adapter.requests.length)
  requests.forEach((rebuilt, i) => {
    const sent = h.adapter.requests[i]
    expect(rebuilt.messages, `request ${i} messages`).toEqual([...sent.messages])
    expect(rebuilt.header?.system, `request ${i} system`).toBe(sent.system)
    expect(rebuilt.header?.tools, `request ${i} tools`).toEqual(sent.tools)
    expect(rebuilt.header?.config).toMatchObject({ provider: sent.provider, model: sent.model })
    // The one-pass fold agrees with the theorem as the loop's README states it.
    const prefix = events.slice(0, rebuilt.seq)
    expect(rebuilt.messages).toEqual(Session.create('check', prefix).deriveMessages())
    expect(rebuilt.header).toEqual(foldRequestHeader(prefix))
  })
  return requests
}

describe('reconstructRequests', () => {
  it('rebuilds every request of a multi-step tool session, a retried attempt included', async () => {
    let clock = 0
    const h = await harness({
      prompt: { persona: 'You are a test agent.' },
      script: [
        toolCallResponse('c1', 'echo', { text: 'one' }, 'Calling echo.'),
        () => {
          throw new LlmError('overloaded', 'RATE_LIMITED')
        },
        toolCallResponse('c2', 'echo', { text: 'two' }),
        textResponse('All done.'),
      ],
      setup: ctx => {
        ctx.tools.register(echo)
        ctx.systemPrompt.context({ name: 'clock', order: 0, text: () => `Tick ${++clock}.` })
        ctx.on('agent/request-error', () => ({ kind: 'retry' }))
      },
    })
    h.send('echo twice')
    await h.settle()
    const ends = h
      .events()
      .filter(event => event.type === 'turn/end')
      .map(event => (event.data as any).reason.kind)
    expect(ends).toEqual(['completed'])
    expect(h.adapter.requests).toHaveLength(4)

    const requests = expectFaithful(h)
    expect(requests.map(r => [r.turn, r.step])).toEqual([
      [1, 1],
      [1, 2],
      [1, 2],
      [1, 3],
    ])
    // The failed attempt and its retry saw the same request.
    expect(serializeRequest(requests[2])).toBe(serializeRequest(requests[1]))
    expect(requests[3].messages.length).toBeGreaterThan(requests[1].messages.length)
    expect(requests[0].outputChars).toBe('Calling echo.'.length + 'echo'.length + JSON.stringify({ text: 'one' }).length)
  })

  it('a 30-step session with a per-step clock and a git state that changes every 5 steps reuses 100% of every previous request', async () => {
    let h!: Harness
    const sent = () => h.adapter.requests.length
    h = await harness({
      prompt: { persona: 'You are a test agent.' },
      script: [...Array.from({ length: 29 }, (_, i) => toolCallResponse(`c${i + 1}`, 'echo', { text: `step ${i + 1}` })), textResponse('Finished.')],
      setup: ctx => {
        ctx.tools.register(echo)
        ctx.systemPrompt.context({ name: 'time', order: 0, stability: 'step', text: () => `Time: 2026-01-01T10:${String(sent()).padStart(2, '0')}:00Z` })
        ctx.systemPrompt.context({ name: 'git', order: 1, stability: 'step', text: () => `Git: main, ${Math.floor(sent() / 5)} commits ahead` })
      },
    })
    h.send('run the thirty steps')
    await h.settle()
    expect(h.adapter.requests).toHaveLength(30)

    const requests = expectFaithful(h)
    for (let i = 1; i < requests.length; i++) expect(prefixReuse(requests[i - 1], requests[i]), `steps ${i} → ${i + 1}`).toBe(1)
    // The facts really changed: each request carries a new snapshot.
    const snapshots = (i: number) => requests[i].messages.filter(m => JSON.stringify(m).includes('Time: ')).length
    expect(snapshots(29)).toBe(30)
    const economics = requestEconomics(requests)
    expect(economics.totals.meanReuse).toBe(1)
    expect(economics.totals.minReuse).toBe(1)
    expect(economics.totals.inputCost).toBeLessThan(economics.totals.uncachedInputCost)
  })

  it('a section added mid-session changes the header and lowers the reuse of that one pair', async () => {
    let h!: Harness
    h = await harness({
      prompt: { persona: 'You are a test agent.' },
      script: [
        toolCallResponse('c1', 'echo', { text: 'a' }),
        toolCallResponse('c2', 'echo', { text: 'b' }),
        toolCallResponse('c3', 'echo', { text: 'c' }),
        textResponse('ok'),
      ],
      setup: ctx => {
        ctx.tools.register(
          defineTool<{ text: string }>({
            ...echo,
            execute: ({ text }) => {
              if (text === 'b') ctx.systemPrompt.section({ name: 'late', order: 500, text: 'A rule loaded mid-session.' })
              return `echo: ${text}`
            },
          }),
        )
      },
    })
    h.send('go')
    await h.settle()
    const requests = expectFaithful(h)
    const reuse = requests.slice(1).map((r, i) => prefixReuse(requests[i], r))
    expect(reuse[0]).toBe(1)
    expect(reuse[1]).toBeLessThan(1)
    expect(reuse[2]).toBe(1)
    expect(
      h
        .events()
        .filter(e => e.type === 'request/header')
        .map(e => (e.data as any).reason),
    ).toEqual(['initial', 'change'])
  })
})
