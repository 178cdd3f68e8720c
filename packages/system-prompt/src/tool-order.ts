import type { AssembledTool } from './types.ts'

/** The `toolOrder` entry where every tool not listed by name is inserted. */
export const TOOL_ORDER_REST = '<unlisted-tools>'

/** Checks a configured `toolOrder` once, when the service starts. */
export function validateToolOrder(order: readonly string[]): void {
  const seen = new Set<string>()
  for (const name of order) {
    if (seen.has(name)) throw new Error(`toolOrder lists "${name}" more than once`)
    seen.add(name)
  }
  if (!seen.has(TOOL_ORDER_REST)) {
    throw new Error(`toolOrder must contain the "${TOOL_ORDER_REST}" rest entry (where unlisted tools are inserted)`)
  }
}

/** Plain code-unit comparison: the same on every machine and locale. */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/**
 * Canonical tool order. Without `toolOrder`: by name in code units; schemas sharing
 * a name are ordered by owner, then keep their collection order. With `toolOrder`:
 * listed names in list order (every schema of that name), the rest where the rest
 * entry stands. A listed name no visible provider knows is an error.
 */
export function orderTools(tools: readonly AssembledTool[], knownNames: ReadonlySet<string>, toolOrder: readonly string[] | undefined): AssembledTool[] {
  if (tools.some(tool => tool.name === TOOL_ORDER_REST)) {
    throw new Error(`tool provider returned reserved tool name "${TOOL_ORDER_REST}" (reserved for toolOrder's rest entry)`)
  }
  const sorted = [...tools].sort((a, b) => compareCodeUnits(a.name, b.name) || compareCodeUnits(a.owner, b.owner))
  if (!toolOrder) return sorted

  const unknown = toolOrder.filter(name => name !== TOOL_ORDER_REST && !knownNames.has(name))
  if (unknown.length) {
    const known = [...knownNames].sort(compareCodeUnits).join(', ') || '(none)'
    const listed = unknown.map(name => `"${name}"`).join(', ')
    throw new Error(`toolOrder lists unregistered tool${unknown.length > 1 ? 's' : ''} ${listed}; known tools: ${known}`)
  }
  const listed = new Set(toolOrder)
  return toolOrder.flatMap(entry => (entry === TOOL_ORDER_REST ? sorted.filter(tool => !listed.has(tool.name)) : sorted.filter(tool => tool.name === entry)))
}
