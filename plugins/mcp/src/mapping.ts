/**
 * How MCP reaches the model: tool names under the registry's name rule, and
 * results (content blocks, structured content, resource contents) as capped text.
 */
import { createHash } from 'node:crypto'
import type { CallToolResult, ContentBlock, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js'
import { TOOL_NAME } from '@loom/tools'

export const TOOL_PREFIX = 'mcp__'
/** The longest tool name model APIs accept (`TOOL_NAME` of @loom/tools). */
const MAX_NAME = 64

/** Characters outside the tool-name alphabet become `_`. */
export function cleanPart(part: string): string {
  return part.replace(/[^a-zA-Z0-9_-]/g, '_') || '_'
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8)
}

/**
 * Registry names for one server's tools: `mcp__<server>__<tool>`, cleaned. A name
 * that is too long, or that two tools of the server would share once cleaned
 * (`a.b` and `a_b`), ends in a hash of the original instead, so each stays unique
 * and the same on every connection.
 */
export function toolNames(server: string, tools: readonly string[]): Map<string, string> {
  const base = (tool: string) => `${TOOL_PREFIX}${cleanPart(server)}__${cleanPart(tool)}`
  const counts = new Map<string, number>()
  for (const tool of tools) counts.set(base(tool), (counts.get(base(tool)) ?? 0) + 1)
  const names = new Map<string, string>()
  for (const tool of tools) {
    let name = base(tool)
    if (name.length > MAX_NAME || counts.get(name)! > 1) name = `${name.slice(0, MAX_NAME - 9)}_${shortHash(`${server}\0${tool}`)}`
    if (!TOOL_NAME.test(name)) throw new Error(`cannot name tool "${tool}" of MCP server "${server}" (got ${name})`)
    names.set(tool, name)
  }
  return names
}

/** `data` is base64: its decoded size. */
function base64Bytes(data: string): number {
  return Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0)
}

/** One MCP content block as text: text as it is, anything binary as a one-line note. */
export function blockText(block: ContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text
    case 'image':
    case 'audio':
      return `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`
    case 'resource_link': {
      const about = [block.mimeType, block.description].filter(Boolean).join(', ')
      return `[resource link: ${block.name} <${block.uri}>${about ? ` (${about})` : ''}]`
    }
    case 'resource': {
      const resource = block.resource
      if ('text' in resource) return `[resource <${resource.uri}>]\n${resource.text}`
      return `[resource <${resource.uri}>: ${resource.mimeType ?? 'binary'}, ${base64Bytes(resource.blob)} bytes, not shown]`
    }
    default:
      return `[${(block as { type: string }).type} content, not shown]`
  }
}

/**
 * A tool result as the model reads it: the content blocks one after another, and
 * the structured content as JSON when no text block carries it already (the spec
 * asks servers to repeat it as text, not all do).
 */
export function callResultText(result: CallToolResult): string {
  const content = result.content ?? []
  const parts = content.map(blockText)
  if (result.structuredContent !== undefined && !content.some(block => block.type === 'text')) {
    parts.push(JSON.stringify(result.structuredContent, null, 2))
  }
  return parts.length ? parts.join('\n') : '(no content)'
}

/** The contents of a resource: each part's text, binary parts as a note. */
export function resourceText(result: ReadResourceResult): string {
  if (!result.contents.length) return '(empty resource)'
  const single = result.contents.length === 1
  return result.contents
    .map(part => {
      if ('text' in part && typeof part.text === 'string') return single ? part.text : `[${part.uri}]\n${part.text}`
      const blob = 'blob' in part && typeof part.blob === 'string' ? part.blob : ''
      return `[${part.uri}: ${part.mimeType ?? 'binary'}, ${base64Bytes(blob)} bytes, not shown]`
    })
    .join('\n')
}
