// MCP prompts as slash commands: the listing a host offers, the arguments of a
// command line, the messages a server renders, and the errors that name it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import * as mcp from '../src/index.ts'
import { mountConnected, statusOf, stdioServer, textOf, waitFor } from './helpers.ts'

const review: mcp.McpPrompt = {
  command: 'mcp__docs__review',
  server: 'docs',
  prompt: 'review',
  arguments: [
    { name: 'file', required: true },
    { name: 'focus', required: false },
  ],
  usage: '/mcp__docs__review <file> [focus]',
}
const greet: mcp.McpPrompt = { command: 'mcp__docs__greet', server: 'docs', prompt: 'greet', arguments: [], usage: '/mcp__docs__greet' }

describe('command line to prompt arguments', () => {
  it('fills the arguments in order, the last one taking the rest of the words', () => {
    expect(mcp.promptArguments(review, 'src/a.ts')).toEqual({ file: 'src/a.ts' })
    expect(mcp.promptArguments(review, 'src/a.ts error handling')).toEqual({ file: 'src/a.ts', focus: 'error handling' })
    expect(mcp.promptArguments(greet, '  ')).toEqual({})
  })

  it('takes name=value for a declared argument, and quotes group words', () => {
    expect(mcp.promptArguments(review, 'focus=speed src/a.ts')).toEqual({ file: 'src/a.ts', focus: 'speed' })
    expect(mcp.promptArguments(review, `"my file.ts" focus='the "inner" loop'`)).toEqual({ file: 'my file.ts', focus: 'the "inner" loop' })
    // Not a declared name: just a word.
    expect(mcp.promptArguments(review, 'a=b')).toEqual({ file: 'a=b' })
    expect(mcp.splitWords(String.raw`a\ b "c \"d\"" ''`)).toEqual(['a b', 'c "d"', ''])
  })

  it('refuses a missing required argument, words without a place and an open quote, naming the command, prompt and server', () => {
    expect(() => mcp.promptArguments(review, '')).toThrow(
      '/mcp__docs__review (prompt "review" of MCP server "docs") needs argument "file"; usage: /mcp__docs__review <file> [focus]',
    )
    expect(() => mcp.promptArguments(greet, 'hello there')).toThrow(
      '/mcp__docs__greet (prompt "greet" of MCP server "docs"): it takes no arguments, so "hello there" has nowhere to go; usage: /mcp__docs__greet',
    )
    expect(() => mcp.promptArguments(review, 'file=a focus=b c')).toThrow(/every argument is set already, so "c" has nowhere to go/)
    expect(() => mcp.promptArguments(review, '"src/a.ts')).toThrow(/^\/mcp__docs__review \(prompt "review" of MCP server "docs"\): unclosed " in/)
  })
})

describe('prompts of connected servers', { timeout: 30_000 }, () => {
  let host: Host
  beforeEach(async () => {
    host = await createHost()
  })
  afterEach(async () => {
    await host.dispose()
  })

  it('lists every server prompt as a command with its arguments and usage, for as long as the plugin is loaded', async () => {
    const mounted = await mountConnected(host, { servers: { docs: stdioServer(), 'other.srv': stdioServer() } })
    const prompts = mcp.listPrompts(host.root)
    expect(prompts.map(prompt => prompt.command)).toEqual([
      'mcp__docs__broken',
      'mcp__docs__greet',
      'mcp__docs__review',
      'mcp__other_srv__broken',
      'mcp__other_srv__greet',
      'mcp__other_srv__review',
    ])
    expect(prompts.find(prompt => prompt.command === 'mcp__docs__review')).toEqual({
      command: 'mcp__docs__review',
      server: 'docs',
      prompt: 'review',
      title: 'Code review',
      description: 'Asks for a review of a file.',
      arguments: [
        { name: 'file', description: 'The file to review.', required: true },
        { name: 'focus', required: false },
      ],
      usage: '/mcp__docs__review <file> [focus]',
    })
    await mounted.dispose()
    expect(mcp.listPrompts(host.root)).toEqual([])
    await host.assertZeroResidue(mounted)
  })

  it('gets the messages of a prompt with the arguments of the command line', async () => {
    await mountConnected(host, { servers: { docs: stdioServer() } })
    expect(await mcp.getPrompt(host.root, '/mcp__docs__review', 'src/a.ts error handling')).toEqual({
      command: 'mcp__docs__review',
      description: 'Review of src/a.ts',
      messages: [{ role: 'user', text: 'Review src/a.ts, looking at error handling.' }],
      text: 'Review src/a.ts, looking at error handling.',
    })
    const greeting = await mcp.getPrompt(host.root, 'mcp__docs__greet')
    expect(greeting.messages).toEqual([
      { role: 'user', text: 'Hello.' },
      { role: 'assistant', text: 'Hello! What shall we do?' },
    ])
    expect(greeting.text).toBe('User: Hello.\n\nAssistant: Hello! What shall we do?')
  })

  it('rejects an unknown command, a missing argument and a failing prompt, naming them', async () => {
    await mountConnected(host, { servers: { docs: stdioServer() } })
    await expect(mcp.getPrompt(host.root, '/mcp__docs__nope')).rejects.toThrow(
      'no MCP prompt /mcp__docs__nope: the connected servers offer /mcp__docs__broken, /mcp__docs__greet, /mcp__docs__review',
    )
    await expect(mcp.getPrompt(host.root, '/mcp__docs__review')).rejects.toThrow(/prompt "review" of MCP server "docs"\) needs argument "file"/)
    await expect(mcp.getPrompt(host.root, '/mcp__docs__broken')).rejects.toThrow('MCP server "docs": prompt "broken" failed: the template is missing')
  })

  it('follows notifications/prompts/list_changed, and a failed server offers none', async () => {
    const mounted = await mountConnected(host, { servers: { docs: stdioServer() }, restart: { initialDelayMs: 60_000 } })
    expect(textOf(await host.callTool('mcp__docs__add_prompt', { name: 'later' }))).toBe('added prompt later')
    await waitFor('the new prompt', () => mcp.listPrompts(host.root).some(prompt => prompt.command === 'mcp__docs__later'))
    expect((await mcp.getPrompt(host.root, '/mcp__docs__later')).text).toBe('late prompt')

    await host.callTool('mcp__docs__crash')
    expect(await statusOf(mounted)).toContain('docs (stdio): failed')
    expect(mcp.listPrompts(host.root)).toEqual([])
    await expect(mcp.getPrompt(host.root, '/mcp__docs__review', 'a.ts')).rejects.toThrow(
      'no MCP prompt /mcp__docs__review: no connected MCP server offers prompts',
    )
  })
})
