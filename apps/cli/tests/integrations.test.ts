// The integrations in one deployment: an MCP server, subagents and web_fetch,
// switched on by a project's loom.yml over the default bundle. `loom prompt`
// shows each with its owner, and one `loom run` with the offline model calls the
// MCP tool, fetches a page from a loopback server and delegates to a subagent.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loom, project, scriptedModel } from './helpers.ts'

/**
 * A minimal MCP server over stdio, written against the protocol itself (no SDK):
 * newline-delimited JSON-RPC with initialize, tools/list and tools/call.
 */
const MCP_SERVER = `import { createInterface } from 'node:readline'
const send = message => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\\n')
const tools = [{ name: 'lookup', description: 'Looks a word up in the glossary.', inputSchema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] }, annotations: { readOnlyHint: true } }]
for await (const line of createInterface({ input: process.stdin })) {
  const { id, method, params } = JSON.parse(line)
  if (method === 'initialize') send({ id, result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'glossary', version: '1.0.0' }, instructions: 'Look words up before defining them.' } })
  else if (method === 'tools/list') send({ id, result: { tools } })
  else if (method === 'tools/call') send({ id, result: { content: [{ type: 'text', text: params.arguments.word + ': a frame for weaving' }] } })
  else if (id !== undefined) send({ id, error: { code: -32601, message: 'unknown method ' + method } })
}
`

const layer = (pageUrl: string) => `${scriptedModel(`
- toolCalls:
    - { id: c1, name: mcp__glossary__lookup, arguments: { word: loom } }
    - { id: c2, name: web_fetch, arguments: { url: '${pageUrl}' } }
- toolCalls:
    - { id: c3, name: task, arguments: { description: 'check the page', prompt: 'Say what the page is about.' } }
- The page is about looms.
- A loom is a frame for weaving, and the page agrees.
`)}
- id: web-fetch
  disabled: false
  config:
    allowPrivate: true
- insert:
    - id: mcp
      name: '@loom/mcp'
      config:
        servers:
          glossary:
            command: node
            args: [./glossary-server.mjs]
    - id: subagents
      name: '@loom/subagents'
`

let server: Server
let pageUrl: string

beforeAll(async () => {
  server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' })
    response.end('<html><head><title>Looms</title></head><body><h1>Looms</h1><p>A loom holds threads taut.</p></body></html>')
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  pageUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/looms`
})
afterAll(() => new Promise<void>(resolve => server.close(() => resolve())))

describe('MCP, subagents and web_fetch in one deployment', () => {
  it('`loom prompt` shows each tool and section with its owner', async () => {
    const { cwd, home } = project({ 'loom.yml': layer(pageUrl), 'glossary-server.mjs': MCP_SERVER })
    const run = await loom(['prompt', '--json'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    const { manifest } = JSON.parse(run.stdout) as { manifest: { rows: { kind: string; name: string; owner: string }[] } }
    const owned = (kind: string, name: string) => manifest.rows.find(row => row.kind === kind && row.name === name)?.owner
    expect(owned('tool', 'mcp__glossary__lookup')).toBe('@loom/mcp')
    expect(owned('section', 'mcp:servers')).toBe('@loom/mcp')
    expect(owned('context', 'mcp:status')).toBe('@loom/mcp')
    expect(owned('tool', 'task')).toBe('@loom/subagents')
    expect(owned('tool', 'web_fetch')).toBe('@loom/web-fetch')
  })

  it('one `loom run` calls the MCP tool, fetches the page and delegates, with the offline model', async () => {
    const { cwd, home } = project({ 'loom.yml': layer(pageUrl), 'glossary-server.mjs': MCP_SERVER })
    const run = await loom(['run', 'What is a loom?'], { cwd, home })
    expect(run.code, run.stderr).toBe(0)
    for (const call of ['→ mcp__glossary__lookup', '→ web_fetch', '→ task: check the page']) expect(run.stdout).toContain(call)
    expect(run.stdout).not.toContain('✗')
    expect(run.stdout).toContain('A loom is a frame for weaving, and the page agrees.')

    const list = JSON.parse((await loom(['sessions', 'list', '--json'], { cwd, home })).stdout) as { id: string; parentSession?: string }[]
    const parent = list.find(session => !session.parentSession)!
    const shown = (await loom(['sessions', 'show', parent.id], { cwd, home })).stdout
    expect(shown).toContain('loom: a frame for weaving')
    expect(shown).toContain('A loom holds threads taut.')
    expect(list.some(session => session.parentSession === parent.id)).toBe(true)
  })
})
