/**
 * The working directory of the agent a tool call or an assembly belongs to
 * (`exec.agent`, `context.agent`): its session header's cwd, if it has one.
 */
export function agentCwd(agent: unknown): string | undefined {
  const cwd = (agent as { session?: { header?: { cwd?: unknown } } } | undefined)?.session?.header?.cwd
  return typeof cwd === 'string' ? cwd : undefined
}
