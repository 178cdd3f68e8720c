// The code a stdio server runs from the project is protected from the agent's own tools:
// the next start runs it as the user, outside the sandbox.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createHost } from '@loom/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { serverCode } from '../src/code.ts'
import * as mcp from '../src/index.ts'

const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function project(files: Record<string, string>): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'loom-mcp-code-')))
  folders.push(dir)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  return dir
}

describe('serverCode', () => {
  it('a script argument that is a file, a program given as a path, a package npx runs from node_modules; not flags, folders or missing files', () => {
    const cwd = project({
      'tools/server.mjs': '',
      'bin/serve': '',
      'node_modules/@acme/mcp-server/package.json': '{"name":"@acme/mcp-server"}',
      'data/.keep': '',
    })
    expect(serverCode({ command: 'node', args: ['--inspect', './tools/server.mjs', 'data', 'missing.js'] }, cwd)).toEqual([join(cwd, 'tools/server.mjs')])
    expect(serverCode({ command: './bin/serve', args: [] }, cwd)).toEqual([join(cwd, 'bin/serve')])
    expect(serverCode({ command: 'npx', args: ['-y', '@acme/mcp-server@1.2.0', '--stdio'] }, join(cwd, 'data'))).toEqual([
      join(cwd, 'node_modules/@acme/mcp-server'),
    ])
    // Not installed in the project: npx fetches it into its cache, outside the workspace.
    expect(serverCode({ command: 'npx', args: ['-y', 'other-server'] }, cwd)).toEqual([])
    expect(serverCode({ command: 'uvx', args: ['mcp-server-git'] }, cwd)).toEqual([])
  })
})

describe('a mounted stdio server', () => {
  it('protects its script while the plugin runs, and lets it go with the plugin', async () => {
    const cwd = project({ 'server.mjs': 'process.exit(3)\n' })
    const host = await createHost()
    try {
      // The server fails to start (it exits at once): its script is protected all the same.
      const mounted = await host.mount(mcp, { servers: { local: { command: 'node', args: ['server.mjs'], cwd } }, startupWaitMs: 0 })
      const protectedPaths = () => host.ctx.tools.protectedPaths().map(entry => [entry.path, entry.reason])
      expect(protectedPaths()).toEqual([[join(cwd, 'server.mjs'), 'code MCP server "local" runs as the user, outside the sandbox, at the next start']])
      await mounted.dispose()
      expect(protectedPaths()).toEqual([])
    } finally {
      await host.dispose()
    }
  })
})
