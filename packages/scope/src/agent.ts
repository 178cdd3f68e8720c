/**
 * The agent an assembly or a tool call belongs to, as plugins and tools see it
 * (`AssembleContext.agent`, `ToolRunContext.agent`). An agent is also the key of
 * its own scope. `Agent` of @loom/agent-loop implements it.
 */
export interface AgentRef {
  readonly id: string
  /** The name its creator gave it, shared by the agents of one role across sessions (an id is per session): what plugins select agents by. */
  readonly name?: string
  /** The session the agent writes: `ctx.sessions.get(sessionId)` is the live session. */
  readonly sessionId: string
  /** The absolute working directory recorded in the session header, if any. */
  readonly cwd?: string
}
