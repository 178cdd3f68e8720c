// placeholder: replaced by the MCP plugin
export const name = '@loom/mcp'
export function apply() {}
