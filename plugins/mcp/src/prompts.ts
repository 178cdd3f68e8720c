/**
 * MCP prompts, offered to the user as slash commands `/mcp__<server>__<prompt>
 * args…`. Each connected server's prompts are listed (`prompts/list`, again on
 * `notifications/prompts/list_changed`); running one gets its messages
 * (`prompts/get`) with the arguments taken from the command line. A host reaches
 * the prompts of every `@loom/mcp` row through `listPrompts` and `getPrompt`.
 */
import type { Context } from '@deepseek-ai/cordis'

export interface McpPromptArgument {
  name: string
  description?: string
  required: boolean
}

export interface McpPrompt {
  /** The command without its slash: `mcp__<server>__<prompt>` (named like the server's tools). */
  command: string
  server: string
  /** The prompt's name on its server. */
  prompt: string
  title?: string
  description?: string
  /** In the server's order: positional words fill them in this order. */
  arguments: McpPromptArgument[]
  /** How it is called: `/mcp__notes__review <file> [focus]`. */
  usage: string
}

export interface McpPromptMessage {
  role: 'user' | 'assistant'
  text: string
}

export interface McpPromptResult {
  command: string
  /** The server's description of this rendering, when it gave one. */
  description?: string
  messages: McpPromptMessage[]
  /** The messages as the text of one user message (roles named when the server wrote an assistant message too). */
  text: string
}

/** What one server offers (a `ServerConnection`). */
export interface PromptSource {
  readonly prompts: readonly McpPrompt[]
  getPrompt(prompt: McpPrompt, args: Record<string, string>, signal?: AbortSignal): Promise<McpPromptResult>
}

/** Every `@loom/mcp` row adds its servers: an event, so two rows (or a reloaded plugin) need no shared state. */
export const PROMPTS_EVENT = 'mcp/prompts'

declare module '@deepseek-ai/cordis' {
  interface Events {
    /** Collects the prompt sources of every `@loom/mcp` row (see `listPrompts`). */
    'mcp/prompts'(into: PromptSource[]): void
  }
}

function sources(ctx: Context): PromptSource[] {
  const into: PromptSource[] = []
  ctx.emit(PROMPTS_EVENT, into)
  return into
}

/** The prompts of every connected MCP server of the host, sorted by command. */
export function listPrompts(ctx: Context): McpPrompt[] {
  return sources(ctx)
    .flatMap(source => source.prompts)
    .sort((a, b) => (a.command < b.command ? -1 : a.command > b.command ? 1 : 0))
}

/**
 * Runs the slash command `/<command> <line>`: maps `line` onto the prompt's
 * arguments (`promptArguments`) and gets its messages from the server. Rejects
 * with a message naming the command, the server and the prompt: an unknown
 * command, a missing argument, a server that is not connected or that failed.
 */
export async function getPrompt(ctx: Context, command: string, line = '', options: { signal?: AbortSignal } = {}): Promise<McpPromptResult> {
  const wanted = command.replace(/^\//, '')
  for (const source of sources(ctx)) {
    const prompt = source.prompts.find(candidate => candidate.command === wanted)
    if (prompt) return source.getPrompt(prompt, promptArguments(prompt, line), options.signal)
  }
  const known = listPrompts(ctx).map(prompt => `/${prompt.command}`)
  throw new Error(`no MCP prompt /${wanted}: ${known.length ? `the connected servers offer ${known.join(', ')}` : 'no connected MCP server offers prompts'}`)
}

/**
 * The arguments of a command line: `name=value` sets a declared argument by
 * name; the other words fill the arguments not named, in the server's order,
 * and the last one filled takes the rest of the words (`/mcp__git__commit fix
 * the parser` gives `message` all three). Quotes group words (`'…'` as typed,
 * `"…"` with `\` escapes). A required argument left empty, or words for a
 * prompt without arguments, are refused with its usage.
 */
export function promptArguments(prompt: McpPrompt, line: string): Record<string, string> {
  let words: string[]
  try {
    words = splitWords(line)
  } catch (error) {
    throw new Error(`${subject(prompt)}: ${(error as Error).message}; usage: ${prompt.usage}`)
  }
  const declared = new Set(prompt.arguments.map(argument => argument.name))
  const values: Record<string, string> = {}
  const positional: string[] = []
  for (const word of words) {
    const at = word.indexOf('=')
    const name = at > 0 ? word.slice(0, at) : ''
    if (declared.has(name) && !(name in values)) values[name] = word.slice(at + 1)
    else positional.push(word)
  }
  const open = prompt.arguments.filter(argument => !(argument.name in values))
  if (positional.length && !open.length) {
    const why = prompt.arguments.length ? 'every argument is set already' : 'it takes no arguments'
    throw new Error(`${subject(prompt)}: ${why}, so ${JSON.stringify(positional.join(' '))} has nowhere to go; usage: ${prompt.usage}`)
  }
  open.forEach((argument, index) => {
    if (index >= positional.length) return
    const last = index === open.length - 1
    values[argument.name] = last ? positional.slice(index).join(' ') : positional[index]
  })
  const missing = prompt.arguments.filter(argument => argument.required && !values[argument.name])
  if (missing.length) {
    const names = missing.map(argument => `"${argument.name}"`).join(', ')
    throw new Error(`${subject(prompt)} needs ${missing.length === 1 ? 'argument' : 'arguments'} ${names}; usage: ${prompt.usage}`)
  }
  return values
}

/** `/mcp__notes__review (prompt "review" of MCP server "notes")` */
export function subject(prompt: McpPrompt): string {
  return `/${prompt.command} (prompt "${prompt.prompt}" of MCP server "${prompt.server}")`
}

/** `/mcp__notes__review <file> [focus]` */
export function promptUsage(command: string, args: readonly McpPromptArgument[]): string {
  return [`/${command}`, ...args.map(argument => (argument.required ? `<${argument.name}>` : `[${argument.name}]`))].join(' ')
}

/** Words of a command line: whitespace separates them; `'…'` groups as typed, `"…"` with `\` escapes. */
export function splitWords(line: string): string[] {
  const words: string[] = []
  let word: string | undefined
  let quote: '"' | "'" | undefined
  for (let i = 0; i < line.length; i++) {
    const char = line[i]
    if (quote === "'") {
      if (char === "'") quote = undefined
      else word += char
    } else if (quote === '"') {
      if (char === '"') quote = undefined
      else if (char === '\\' && i + 1 < line.length) word += line[++i]
      else word += char
    } else if (/\s/.test(char)) {
      if (word !== undefined) words.push(word)
      word = undefined
    } else if (char === '"' || char === "'") {
      quote = char
      word ??= ''
    } else if (char === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i]
    } else {
      word = (word ?? '') + char
    }
  }
  if (quote) throw new Error(`unclosed ${quote} in ${JSON.stringify(line)}`)
  if (word !== undefined) words.push(word)
  return words
}

/** The messages as one user message: their texts, each headed by its role when an assistant message is among them. */
export function promptText(messages: readonly McpPromptMessage[]): string {
  const labelled = messages.some(message => message.role === 'assistant')
  return messages.map(message => (labelled ? `${message.role === 'user' ? 'User' : 'Assistant'}: ${message.text}` : message.text)).join('\n\n')
}
