// Tools that require task-based execution (MCP tasks), against the fixture's
// task tools: `job` requires a task, `quick` allows one, `task_stats` reports.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createHost, type Host } from '@loom/testkit'
import { TASK_POLL_MS } from './fixtures/server.ts'
import { mcpTools, mountConnected, statusOf, stdioServer, textOf, waitFor } from './helpers.ts'

let host: Host

beforeEach(async () => {
  host = await createHost()
})

afterEach(async () => {
  await host.dispose()
})

interface TaskStat {
  status: string
  /** When the task was created, then each `tasks/get`, in ms since the epoch. */
  polls: number[]
}

const taskStats = async (): Promise<TaskStat[]> => JSON.parse(textOf(await host.callTool('mcp__docs__task_stats')))

// Each test starts a server and waits on its tasks: as long as the waits inside (waitFor's 20 s), not vitest's 5 s.
describe('task-based tools', { timeout: 30_000 }, () => {
  it('calls a tool that requires tasks through the tasks API, polling no faster than the server asks', async () => {
    await mountConnected(host, { servers: { docs: stdioServer(['--tasks']) } })
    expect(mcpTools(host)).toContain('mcp__docs__job')

    const result = await host.callTool('mcp__docs__job', { ms: 3 * TASK_POLL_MS })
    expect(result.isError).toBe(false)
    expect(textOf(result)).toBe(`job done after ${3 * TASK_POLL_MS} ms`)
    expect(result.meta).toMatchObject({ server: 'docs', tool: 'job' })

    const [task] = await taskStats()
    expect(task.status).toBe('completed')
    // Created, then polled with tasks/get: never sooner than the pollInterval after the last (load only stretches the gaps).
    expect(task.polls.length).toBeGreaterThanOrEqual(2)
    for (let i = 1; i < task.polls.length; i++) expect(task.polls[i] - task.polls[i - 1]).toBeGreaterThanOrEqual(TASK_POLL_MS - 5)
  })

  it('a task that fails is an error result naming the server and the tool', async () => {
    await mountConnected(host, { servers: { docs: stdioServer(['--tasks']) } })
    const result = await host.callTool('mcp__docs__job', { ms: 10, fail: true })
    expect(result.isError).toBe(true)
    expect(textOf(result)).toBe('Error: MCP server "docs", tool "job": the job broke')
  })

  it("the call's abort cancels the task on the server (tasks/cancel)", async () => {
    await mountConnected(host, { servers: { docs: stdioServer(['--tasks']) } })
    const abort = new AbortController()
    const call = host.callTool('mcp__docs__job', { ms: 600_000 }, { signal: abort.signal })
    await waitFor('the task to run on the server', async () => (await taskStats()).some(task => task.status === 'working'))
    abort.abort()
    const result = await call
    expect(result.isError && result.error.info?.code).toBe('ABORTED')
    await waitFor('the server to cancel the task', async () => (await taskStats()).every(task => task.status === 'cancelled'))
  })

  it('past timeoutMs the task is cancelled, and the error (code TIMEOUT) says how far it got', async () => {
    await mountConnected(host, { servers: { docs: stdioServer(['--tasks']) }, timeoutMs: 1_000 })
    const result = await host.callTool('mcp__docs__job', { ms: 600_000 })
    expect(result.isError).toBe(true)
    if (result.isError) {
      expect(result.error).toEqual({
        message: 'MCP server "docs": tool "job" timed out after 1 s (task working: warming up; progress 1/4: first step); the task was cancelled',
        info: { name: 'ToolTimeoutError', code: 'TIMEOUT' },
      })
    }
    await waitFor('the server to cancel the task', async () => (await taskStats()).every(task => task.status === 'cancelled'))
  })

  it('a tool that only allows tasks is called directly', async () => {
    await mountConnected(host, { servers: { docs: stdioServer(['--tasks']) } })
    expect(textOf(await host.callTool('mcp__docs__quick', { text: 'now' }))).toBe('quick now')
  })

  it('a tool that requires tasks of a server that does not declare them is left out, and the status says why', async () => {
    const mounted = await mountConnected(host, { servers: { docs: stdioServer(['--tasks-undeclared']) } })
    expect(mcpTools(host)).not.toContain('mcp__docs__job')
    expect(mcpTools(host)).toContain('mcp__docs__quick')
    expect(await statusOf(mounted)).toMatch(
      /^MCP servers:\n- docs \(stdio\): connected \(\d+ tools; not offered: job \(it requires task-based execution, which the server does not declare for tools\/call\)\)$/,
    )
  })
})
