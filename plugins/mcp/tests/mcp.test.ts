import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host, type Mounted } from '@loom/testkit'
import * as mcp from '../src/index.ts'
import { INSTRUCTIONS } from './fixtures/server.ts'
import { httpServer, isAlive, mountConnected as mountConnectedTo, statusOf, stdioServer, textOf, waitFor } from './helpers.ts'

let host: Host

beforeEach(async () => {
  host = await createHost()
})

afterEach(async () => {
  await host.dispose()
})

const toolNames = () => host.ctx.tools.schemas().map(tool => tool.name)
const mountConnected = (config: Record<string, unknown>) => mountConnectedTo(host, config)

const FIXTURE_TOOLS = ['add', 'add_prompt', 'add_tool', 'big', 'crash', 'echo', 'env', 'fail', 'log', 'media', 'pid', 'slow', 'stats']

describe('tools, guidance and status', () => {
  it('registers each server tool as mcp__<server>__<tool> with its schema, a guidance section and a status context', async () => {
    const mounted = await mountConnected({ servers: { docs: stdioServer(['--resources']) } })
    const delta = await mounted.delta()
    expect(delta.tools.map(tool => tool.name)).toEqual([...FIXTURE_TOOLS.map(tool => `mcp__docs__${tool}`), 'mcp_read_resource'])
    const echo = delta.tools.find(tool => tool.name === 'mcp__docs__echo')!
    expect(echo.description).toBe('Returns its text.')
    expect(echo.parameters).toMatchObject({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] })

    expect(delta.sections.map(({ name, order, stability }) => ({ name, order, stability }))).toEqual([
      { name: mcp.SECTION_NAME, order: mcp.SECTION_ORDER, stability: 'session' },
    ])
    const guidance = delta.sections[0].rendered
    expect(guidance).toContain('`mcp__<server>__<tool>`')
    expect(guidance).toContain('## MCP server "docs"')
    expect(guidance).toContain('`mcp__docs__echo`')
    expect(guidance).toContain(`Instructions from the server:\n${INSTRUCTIONS}`)
    expect(guidance).toContain('- note://readme (readme)')

    expect(delta.contexts.map(({ name, order, stability }) => ({ name, order, stability }))).toEqual([
      { name: mcp.CONTEXT_NAME, order: mcp.CONTEXT_ORDER, stability: 'step' },
    ])
    expect(delta.contexts[0].rendered).toBe(`MCP servers:\n- docs (stdio): connected (${FIXTURE_TOOLS.length} tools)`)
    // Every tool is attributed to the plugin.
    const assembly = await host.ctx.systemPrompt.assemble()
    expect(new Set(assembly.tools.filter(tool => tool.name.startsWith('mcp')).map(tool => tool.owner))).toEqual(new Set(['@loom/mcp']))
  })

  it('keeps servers apart: same tool names, each call reaching its own server', async () => {
    await mountConnected({ servers: { docs: stdioServer(['--tag', 'docs:']), 'other.srv': stdioServer(['--tag', 'other:']) } })
    expect(toolNames()).toContain('mcp__other_srv__echo')
    expect(textOf(await host.callTool('mcp__docs__echo', { text: 'hi' }))).toBe('docs:hi')
    expect(textOf(await host.callTool('mcp__other_srv__echo', { text: 'hi' }))).toBe('other:hi')
  })

  it('does not block on a server that is down, and shows it failed with the reason', async () => {
    const mounted = await host.mount(mcp, {
      // A path, not a name: a PATH entry the user cannot enter turns a missing command into EACCES.
      servers: { gone: { command: '/nonexistent/loom-no-such-mcp-server' }, remote: { url: 'http://127.0.0.1:1/mcp' } },
      restart: { initialDelayMs: 60_000 },
    })
    const status = await waitFor('both failures', async () => {
      const text = await statusOf(mounted)
      return text.includes('gone (stdio): failed') && text.includes('remote (Streamable HTTP): failed') && text
    })
    expect(status).toMatch(/- gone \(stdio\): failed \(.*ENOENT.*\); restarting in \d+ s/)
    expect(status).toMatch(/- remote \(Streamable HTTP\): failed \(.+\); restarting in \d+ s/)
    expect((await mounted.delta()).sections[0].text).toBe('')
    expect(toolNames().filter(name => name.startsWith('mcp'))).toEqual([])
  })

  it('refuses a server with both command and url, naming the key', async () => {
    await expect(host.mount(mcp, { servers: { both: { command: 'x', url: 'http://x' } } })).rejects.toThrow(/servers\.both has both command and url/)
  })
})

describe('calls', () => {
  let mounted: Mounted
  beforeEach(async () => {
    mounted = await mountConnected({ servers: { docs: stdioServer() }, timeoutMs: 500, maxOutputChars: 300 })
  })

  it('returns text, structured content and notes for binary blocks', async () => {
    expect(textOf(await host.callTool('mcp__docs__echo', { text: 'hello' }))).toBe('hello')
    expect(JSON.parse(textOf(await host.callTool('mcp__docs__add', { a: 2, b: 3 })))).toEqual({ sum: 5 })
    const media = textOf(await host.callTool('mcp__docs__media'))
    expect(media).toBe(
      'a chart:\n[image: image/png, 16 bytes, not shown]\n[resource link: report.csv <file:///data/report.csv> (text/csv)]\n[resource <note://inline>]\ninline text',
    )
  })

  it('turns an error result of the server into an error result naming the server', async () => {
    const result = await host.callTool('mcp__docs__fail')
    expect(result.isError).toBe(true)
    expect(textOf(result)).toBe('Error: MCP server "docs", tool "fail": the widget is broken')
  })

  it('shows the head and tail of a result over maxOutputChars and keeps the whole as an artifact', async () => {
    const result = await host.callTool('mcp__docs__big', { chars: 1000 })
    const [head, notice, tail] = textOf(result).split('\n')
    expect([head, tail]).toEqual(['x'.repeat(150), 'x'.repeat(150)])
    const reference =
      /^\[… part of line 1 not shown \(700 characters\)\. The whole output is kept as (artifact:\/\/\S+): read it with `read` \(path "\1", offset 1\)\.\]$/.exec(
        notice,
      )![1]
    expect(result.meta).toEqual({ server: 'docs', tool: 'big', chars: 1000, omittedChars: 700, artifact: reference })
    expect(await host.root.tools.artifacts.read({ callId: 'reader', agent: host.agent() }, reference)).toBe('x'.repeat(1000))
    expect((await host.callTool('mcp__docs__big', { chars: 300 })).meta).toEqual({ server: 'docs', tool: 'big', chars: 300, omittedChars: 0 })
  })

  it('times out a call (code TIMEOUT) and cancels it on the server', async () => {
    const result = await host.callTool('mcp__docs__slow', { ms: 600_000 })
    expect(result.isError).toBe(true)
    if (result.isError)
      expect(result.error).toEqual({ message: 'MCP server "docs": tool "slow" timed out after 0.5 s', info: { name: 'ToolTimeoutError', code: 'TIMEOUT' } })
    await waitFor('the server to see the cancellation', async () => JSON.parse(textOf(await host.callTool('mcp__docs__stats'))).cancelled === 1)
  })

  it('aborts a running call through the signal and cancels it on the server', async () => {
    await mounted.dispose()
    mounted = await mountConnected({ servers: { docs: stdioServer() } })
    const abort = new AbortController()
    const call = host.callTool('mcp__docs__slow', { ms: 600_000 }, { signal: abort.signal })
    await waitFor('the call to run on the server', async () => JSON.parse(textOf(await host.callTool('mcp__docs__stats'))).running === 1)
    abort.abort()
    const result = await call
    expect(result.isError && result.error.info?.code).toBe('ABORTED')
    await waitFor('the server to see the cancellation', async () => JSON.parse(textOf(await host.callTool('mcp__docs__stats'))).cancelled === 1)
  })

  it('gives the server only the basic environment and its configured env', async () => {
    await mounted.dispose()
    process.env.MCP_FIXTURE_API_KEY = 'sk-fixture-0123456789'
    try {
      mounted = await mountConnected({ servers: { docs: stdioServer([], { env: { GREETING: 'hi' } }) } })
      const names = textOf(await host.callTool('mcp__docs__env')).split('\n')
      expect(names).toContain('GREETING')
      expect(names).toContain('PATH')
      expect(names).not.toContain('MCP_FIXTURE_API_KEY')
      expect(names).not.toContain('NODE_OPTIONS')
      // (NODE_COMPILE_CACHE: the fixture's configured env, see stdioServer.)
      expect(names.every(name => ['GREETING', 'HOME', 'LOGNAME', 'NODE_COMPILE_CACHE', 'PATH', 'SHELL', 'TERM', 'USER'].includes(name))).toBe(true)
    } finally {
      delete process.env.MCP_FIXTURE_API_KEY
    }
  })

  it('a scripted model calls a server tool and reads its result in the next request', async () => {
    host.scriptedModel([{ toolCalls: [{ name: 'mcp__docs__echo', arguments: { text: 'from-mcp' } }] }, 'done'])
    const run = await host.run('use the server')
    expect(run.text).toBe('done')
    expect(run.requests).toHaveLength(2)
    expect(run.requests[0].system).toContain('## MCP server "docs"')
    expect(run.requests[0].tools?.map(tool => tool.name)).toContain('mcp__docs__echo')
    expect(JSON.stringify(run.requests[1].messages)).toContain('from-mcp')
  })
})

// Servers are started, crashed and restarted: as long as the waits inside (waitFor's 20 s), not vitest's 5 s.
describe('lifecycle', { timeout: 30_000 }, () => {
  it('a server that crashes mid-call: the call fails, tools go, status failed, then it is restarted and tools come back', async () => {
    const mounted = await mountConnected({ servers: { docs: stdioServer() }, restart: { initialDelayMs: 300 } })
    const result = await host.callTool('mcp__docs__crash')
    expect(result.isError).toBe(true)
    expect(textOf(result)).toMatch(
      /^Error: MCP server "docs" closed the connection during the call of tool "crash" \(the server process exited.*\); it will be restarted$/,
    )
    // The loss was handled before the call returned.
    expect(toolNames().filter(name => name.startsWith('mcp'))).toEqual([])
    expect(await statusOf(mounted)).toMatch(
      /^MCP servers:\n- docs \(stdio\): failed \(the server process exited: Error: crashed on purpose\); restarting in 1 s$/,
    )
    expect((await mounted.delta()).sections[0].text).toBe('')

    await waitFor('the restart', async () => (await statusOf(mounted)).includes('connected'))
    expect(toolNames()).toContain('mcp__docs__echo')
    expect(textOf(await host.callTool('mcp__docs__echo', { text: 'back' }))).toBe('back')
  })

  it('backs off exponentially while a server keeps failing', async () => {
    const mounted = await host.mount(mcp, {
      servers: { gone: { command: 'loom-no-such-mcp-server' } },
      restart: { initialDelayMs: 1_000, factor: 10, maxDelayMs: 100_000 },
    })
    // 1 s, then 10 s: the wait grows with each failure in a row.
    await waitFor('a second failure', async () => /restarting in (9|10) s/.test(await statusOf(mounted)), 10_000)
  })

  it('re-lists tools on notifications/tools/list_changed: the next request shows the new tool', async () => {
    await mountConnected({ servers: { docs: stdioServer() } })
    host.scriptedModel([
      { toolCalls: [{ name: 'mcp__docs__add_tool', arguments: { name: 'late' } }] },
      { toolCalls: [{ name: 'mcp__docs__late', arguments: {} }] },
      'done',
    ])
    const run = await host.run('add a tool')
    expect(run.requests).toHaveLength(3)
    expect(run.requests[0].tools?.map(tool => tool.name)).not.toContain('mcp__docs__late')
    expect(run.requests[1].tools?.map(tool => tool.name)).toContain('mcp__docs__late')
    expect(JSON.stringify(run.requests[2].messages)).toContain('"text":"late"')
    const headers = run.events.filter(event => event.type === 'request/header')
    expect(headers).toHaveLength(2)
  })

  it('unloading closes the connection, ends the server process and leaves no residue', async () => {
    const mounted = await mountConnected({ servers: { docs: stdioServer(['--resources']) } })
    const pid = Number(textOf(await host.callTool('mcp__docs__pid')))
    expect(isAlive(pid)).toBe(true)
    await mounted.dispose()
    expect(isAlive(pid)).toBe(false)
    expect(toolNames().filter(name => name.startsWith('mcp'))).toEqual([])
    await host.assertZeroResidue(mounted)
  })

  it('unloading while a server is restarting leaves no timer behind', async () => {
    const mounted = await host.mount(mcp, { servers: { gone: { command: 'loom-no-such-mcp-server' } } })
    await waitFor('the failure', async () => (await statusOf(mounted)).includes('failed'))
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })
})

describe('resources', () => {
  it('mcp_read_resource reads a resource of a server that offers them, and exists only while one does', async () => {
    const mounted = await mountConnected({ servers: { docs: stdioServer(['--resources']), plain: stdioServer() } })
    const tool = (await mounted.delta()).tools.find(candidate => candidate.name === mcp.RESOURCE_TOOL)!
    expect(tool.parameters).toMatchObject({ properties: { server: { enum: ['docs'] } }, required: ['server', 'uri'] })
    expect(textOf(await host.callTool(mcp.RESOURCE_TOOL, { server: 'docs', uri: 'note://readme' }))).toBe('Read me first.')
    const missing = await host.callTool(mcp.RESOURCE_TOOL, { server: 'docs', uri: 'note://nope' })
    expect(textOf(missing)).toMatch(/^Error: MCP server "docs": resource <note:\/\/nope> failed: /)
    await mounted.dispose()

    await mountConnected({ servers: { plain: stdioServer() } })
    expect(toolNames()).not.toContain(mcp.RESOURCE_TOOL)
  })
})

describe('Streamable HTTP', () => {
  it('lists and calls the tools of a server over HTTP; a server that goes away is failed', async () => {
    const server = await httpServer({ resources: true })
    try {
      const mounted = await mountConnected({ servers: { remote: { url: server.url } }, restart: { initialDelayMs: 60_000 } })
      expect(await statusOf(mounted)).toBe(`MCP servers:\n- remote (Streamable HTTP): connected (${FIXTURE_TOOLS.length} tools)`)
      expect(textOf(await host.callTool('mcp__remote__echo', { text: 'over http' }))).toBe('over http')
      expect(textOf(await host.callTool(mcp.RESOURCE_TOOL, { server: 'remote', uri: 'note://readme' }))).toBe('Read me first.')
      await server.close()
      const result = await host.callTool('mcp__remote__echo', { text: 'again' })
      expect(textOf(result)).toMatch(/^Error: MCP server "remote": tool "echo" failed: /)
      expect(await statusOf(mounted)).toMatch(/- remote \(Streamable HTTP\): failed \(request failed: .+\); restarting in 60 s/)
      expect(toolNames().filter(name => name.startsWith('mcp'))).toEqual([])
      await mounted.dispose()
      // Node's fetch (undici) keeps one shared, unref'd clock timer while its sockets wind down.
      await waitFor('no residue', async () => (await host.residue(mounted)).length === 0, 5_000).catch(() => {})
      await host.assertZeroResidue(mounted)
    } finally {
      await server.close()
    }
  })
})
