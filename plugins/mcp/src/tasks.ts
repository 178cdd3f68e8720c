/**
 * Tools that require task-based execution (MCP tasks, protocol 2025-11-25,
 * experimental). Such a call creates a task on the server; the task is polled
 * with `tasks/get` at the interval the server suggests until it ends, and its
 * result is fetched with `tasks/result`. An abort or the deadline cancels the
 * task with `tasks/cancel`: once a task exists, that is how the spec cancels it
 * (not `notifications/cancelled`).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  type CallToolResult,
  type Progress,
  type ServerCapabilities,
  type Task,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js'

/** The poll interval when the server suggests none, in ms. */
export const DEFAULT_POLL_MS = 1_000
/** The shortest poll interval, whatever the server suggests (0 would be a busy loop). */
const MIN_POLL_MS = 50
/** How long a `tasks/cancel` may take; nobody waits for it. */
const CANCEL_TIMEOUT_MS = 10_000

/** Whether the tool must be called as a task (`execution.taskSupport: required`). */
export function requiresTask(tool: Tool): boolean {
  return tool.execution?.taskSupport === 'required'
}

/** Why a tool cannot be called by this client, or `undefined` when it can. */
export function taskProblem(tool: Tool, capabilities: ServerCapabilities): string | undefined {
  if (!requiresTask(tool) || capabilities.tasks?.requests?.tools?.call) return undefined
  return 'it requires task-based execution, which the server does not declare for tools/call'
}

/** The deadline passed while the task still ran; `progress` says how far it got. */
export class TaskTimeoutError extends Error {
  readonly progress: string

  constructor(progress: string) {
    super(`the task did not end in time (${progress})`)
    this.name = 'TaskTimeoutError'
    this.progress = progress
  }
}

export interface TaskCallOptions {
  /** The call's signal: its abort cancels the task. */
  signal: AbortSignal
  /** The whole call's deadline: creation, polls and result. */
  timeoutMs: number
}

/** Calls `params` as a task and returns the tool's result once the task ended. */
export async function callToolAsTask(
  client: Client,
  params: { name: string; arguments: Record<string, unknown> },
  { signal, timeoutMs }: TaskCallOptions,
): Promise<CallToolResult> {
  const deadline = Date.now() + timeoutMs
  const stop = new AbortController()
  const timer = setTimeout(() => stop.abort(new Error('deadline')), timeoutMs)
  const forward = () => stop.abort(signal.reason)
  signal.addEventListener('abort', forward, { once: true })
  const options = () => ({ signal: stop.signal, timeout: Math.max(1, deadline - Date.now()) })

  let task: Task | undefined
  let progress: Progress | undefined
  try {
    if (signal.aborted) throw signal.reason
    const created = await client.request({ method: 'tools/call', params }, CreateTaskResultSchema, {
      ...options(),
      task: {},
      // Progress notifications go on after the task is created, until it ends.
      onprogress: update => {
        progress = update
      },
    })
    task = created.task
    while (task.status === 'working') {
      await sleep(Math.max(MIN_POLL_MS, task.pollInterval ?? DEFAULT_POLL_MS), stop.signal)
      task = await client.experimental.tasks.getTask(task.taskId, options())
    }
    if (task.status === 'cancelled') throw new Error(`the server cancelled its task${task.statusMessage ? `: ${task.statusMessage}` : ''}`)
    // Completed or failed: the result (an error result when it failed). Input required: the
    // result request is where the server's questions would come; it ends with the task.
    return await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, options())
  } catch (error) {
    if (!stop.signal.aborted) throw error
    if (task && !isTerminal(task) && client.getServerCapabilities()?.tasks?.cancel) {
      void client.experimental.tasks.cancelTask(task.taskId, { timeout: CANCEL_TIMEOUT_MS }).catch(() => {})
    }
    if (signal.aborted) throw signal.reason
    throw new TaskTimeoutError(describe(task, progress))
  } finally {
    clearTimeout(timer)
    signal.removeEventListener('abort', forward)
  }
}

function isTerminal(task: Task): boolean {
  return task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled'
}

/** `task working: rendering; progress 3/12: page 3`, from its last status and the last progress notification. */
function describe(task: Task | undefined, progress: Progress | undefined): string {
  if (!task) return 'no task was created yet'
  const total = progress?.total ? `/${progress.total}` : ''
  const done = progress && `progress ${progress.progress}${total}${progress.message ? `: ${progress.message}` : ''}`
  const said = [task.statusMessage, done].filter(Boolean).join('; ')
  return `task ${task.status}${said ? `: ${said}` : ''}`
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
