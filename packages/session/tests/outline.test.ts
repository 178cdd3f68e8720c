// What a stored log says at a glance (outlineSession, lastRoute, modelPrices) and
// the plugins a header change names (headerChangeOwners).
import { userText } from '@loom/llm'
import { describe, expect, it } from 'vitest'
import { headerChangeOwners } from '../src/describe.ts'
import { listPrices, modelPrices } from '../src/prices.ts'
import { Session } from '../src/session.ts'
import { lastRoute, outlineSession } from '../src/summary.ts'

describe('outlineSession', () => {
  it('counts turns, says how the last one ended, and whether one is still open', () => {
    const session = Session.create('s')
    expect(outlineSession(session.events)).toEqual({ turns: 0, events: 0, lastStatus: null, openTurn: false })
    session.append('turn/start', { turn: 1 })
    session.append('user/message', userText('hi'), { surfaceOp: 'append' })
    session.append('turn/end', { turn: 1, reason: { kind: 'error', error: { code: 'X', message: 'x' } } })
    session.append('request/header', { header: { config: { provider: 'p', model: 'm' } }, reason: 'initial' })
    session.append('turn/start', { turn: 2 })
    expect(outlineSession(session.events)).toEqual({ turns: 2, events: 5, lastStatus: 'error', openTurn: true })
    expect(lastRoute(session.events)).toEqual({ provider: 'p', model: 'm' })
    expect(lastRoute([])).toBeUndefined()
  })
})

describe('modelPrices', () => {
  it('takes a configured price by provider/model, then by model id, then the list price; none for an unknown model', () => {
    const mine = { hit: 1, miss: 2, output: 3 }
    expect(modelPrices('deepseek', 'deepseek-flash', { 'deepseek/deepseek-flash': mine })).toBe(mine)
    expect(modelPrices('deepseek', 'deepseek-flash', { 'deepseek-flash': mine })).toBe(mine)
    expect(modelPrices('deepseek', 'deepseek-flash')).toEqual(listPrices('deepseek', 'deepseek-flash'))
    expect(modelPrices('openai', 'my-model')).toBeUndefined()
    expect(modelPrices('openai', 'constructor', {})).toBeUndefined()
  })
})

describe('headerChangeOwners', () => {
  it('names the owners of what changed, grew or shrank, and the plugins that drifted, once each', () => {
    const owners = headerChangeOwners(
      {
        sections: [{ name: 'a:one', owner: 'a', change: 'changed' }],
        tools: [{ name: 'run', owner: 'b', change: 'added' }],
        config: [],
        resized: [{ name: 'a:two', owner: 'a', fromChars: 1, toChars: 2 }],
      },
      { added: [{ name: 'c', digest: 'd' }], removed: [], upgraded: [{ name: 'b', from: '1', to: '2' }] },
    )
    expect(owners).toEqual(['a', 'b', 'c'])
    expect(headerChangeOwners(undefined)).toEqual([])
  })
})
