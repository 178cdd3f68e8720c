// The token meter mounted on a real host through the test kit.
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Context } from '@deepseek-ai/cordis'
import { estimateHeader, estimateMessage, userText, type StreamChunk } from '@loom/llm'
import { Session } from '@loom/session'
import { createHost, type Host } from '@loom/testkit'
import * as tokenMeter from '../src/index.ts'

let host: Host
afterEach(() => host?.dispose())

const answer = (text: string, inputTokens: number): StreamChunk[] => [
  { type: 'block-start', index: 0, blockType: 'text' },
  { type: 'text-delta', index: 0, text },
  { type: 'block-end', index: 0, block: { type: 'text', text } },
  { type: 'usage', usage: { inputTokens, outputTokens: 3 } },
  { type: 'finish', reason: { kind: 'stop' } },
]

describe('@loom/token-meter on a host', () => {
  it('provides ctx.tokenMeter, adds nothing to the prompt and leaves no residue', async () => {
    host = await createHost()
    const mounted = await host.mount(tokenMeter.default, {})
    expect(host.root.tokenMeter).toBeInstanceOf(tokenMeter.TokenMeter)
    expect(await mounted.delta()).toEqual({ sections: [], contexts: [], tools: [], variables: [] })
    await mounted.dispose()
    expect(host.root.get('tokenMeter')).toBeUndefined()
    await host.assertZeroResidue(mounted)
  })

  it('refuses any config key', async () => {
    host = await createHost()
    await expect(host.mount(tokenMeter.default, { charsPerToken: 3 })).rejects.toThrow(
      'TokenMeterConfig: unknown key "charsPerToken" (no settings are supported)',
    )
  })

  it('measures a real turn: the provider usage plus the estimated growth since the call', async () => {
    host = await createHost()
    await host.mount(tokenMeter.default, {})
    host.scriptedModel([answer('done', 6000)])
    const run = await host.run('what is here?')
    const measured = host.root.tokenMeter.measure(run.agent.session)
    const assistant = estimateMessage({ content: [{ type: 'text', text: 'done' }] })
    expect(measured.baseline).toEqual({ kind: 'usage', tokens: 6003, usage: { inputTokens: 6000, outputTokens: 3 } })
    expect(measured.surfaceDeltaTokens).toBe(measured.surfaceTokens - assistant)
    expect(measured.totalTokens).toBe(6003 + measured.surfaceDeltaTokens)
    expect(measured.logRevision).toBe(run.agent.session.events.length)

    // A follow-up turn: the meter follows the same session, reading only what each append adds.
    host.scriptedModel([answer('again', 6100)])
    const wholeLog = vi.spyOn(Session.prototype, 'events', 'get')
    run.agent.followup(userText('and now?'))
    await run.agent.idle()
    const next = host.root.tokenMeter.measure(run.agent.session)
    expect(wholeLog).not.toHaveBeenCalled()
    wholeLog.mockRestore()
    expect(next.baseline).toMatchObject({ kind: 'usage', tokens: 6103 })
    expect(next.nodes.reduce((sum, node) => sum + node.tokens, 0)).toBe(next.surfaceTokens)
    expect(next.logRevision).toBe(run.agent.session.events.length)
    // The header the request carried is in the log; measuring against it keeps the usage.
    expect(host.root.tokenMeter.measure(run.agent.session, run.agent.session.requestHeader())).toEqual(next)
    const header = run.agent.session.requestHeader()!
    const changed = host.root.tokenMeter.measure(run.agent.session, { ...header, system: `${header.system ?? ''} more` })
    expect(changed.baseline.kind).toBe('estimated')
    expect(changed.totalTokens).toBe(estimateHeader({ ...header, system: `${header.system ?? ''} more` }) + next.surfaceTokens)
  })

  it('breaks an assembly down by the plugins that own its sections, tools and contexts', async () => {
    host = await createHost()
    await host.mount(tokenMeter.default, {})
    const guide = {
      name: 'guide',
      inject: ['systemPrompt', 'tools'],
      apply(ctx: Context) {
        ctx.systemPrompt.section({ name: 'guide', order: 200, text: 'x'.repeat(400) })
        ctx.systemPrompt.context({ name: 'guide:state', order: 30, text: 'y'.repeat(40) })
      },
    }
    await host.mount(guide)
    const assembly = await host.root.systemPrompt.assemble({})
    const result = host.root.tokenMeter.breakdown(assembly)
    expect(result.byOwner.find(row => row.owner === 'guide')).toEqual({ owner: 'guide', system: 100, tools: 0, contexts: 10, total: 110 })
    expect(result.totalTokens).toBe(result.byOwner.reduce((sum, row) => sum + row.total, 0))
    expect(result.systemTokens + result.toolsTokens + result.contextTokens).toBe(result.totalTokens)
    expect(result.byOwner[0].owner).toBe('guide')
  })
})
