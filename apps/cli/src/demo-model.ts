// The offline demo model: what `loom run` talks to when no API key is set. It is
// a ScriptedAdapter whose one (looping) script entry decides from the request:
// first it lists the working directory with a real tool call, then it reads the
// README the listing shows, then it answers with a summary built from the tool
// results it finds in the request. No key, no network.
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { GenerateOptions, Message, ToolResultBlock } from '@loom/llm'
import { ScriptedAdapter, type ScriptReply } from '@loom/llm-scripted'

export const name = '@loom/cli/demo-model'
export const inject = ['llm']

export interface Config {
  provider: string
  model: string
}

export const Config: Schema<Config> = Schema.object({
  provider: Schema.string().default('scripted').description('The provider route the demo model serves.'),
  model: Schema.string().default('loom-demo').description('The model id it reports.'),
})

export const DEMO_LABEL = '(offline demo model — set DEEPSEEK_API_KEY for a real one)'

export function apply(ctx: Context, config: Config) {
  const adapter = new ScriptedAdapter({ provider: config.provider, model: config.model, script: [demoReply], loop: true })
  ctx.llm.registerAdapter([config.provider], adapter)
}

interface Call {
  id: string
  name: string
  args: Record<string, unknown>
  result?: { text: string; isError: boolean }
}

/** The demo's next answer for a request. */
export function demoReply(request: GenerateOptions): ScriptReply {
  const messages = request.messages
  let start = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === 'user' && messages[i].source.kind === 'user') {
      start = i
      break
    }
  }
  const task = start >= 0 ? textOf(messages[start]) : ''
  const calls = callsAfter(messages.slice(start + 1))
  const tools = new Set((request.tools ?? []).map(tool => tool.name))

  const listing = calls.find(call => call.name === 'bash' || call.name === 'glob')
  if (!listing) {
    if (tools.has('bash')) return { text: 'Let me look at the current directory.', toolCalls: [{ name: 'bash', arguments: { command: 'ls -la' } }] }
    if (tools.has('glob')) return { text: 'Let me look at the current directory.', toolCalls: [{ name: 'glob', arguments: { pattern: '*' } }] }
    return { text: answer(task, undefined, undefined, tools) }
  }
  const entries = listing.result && !listing.result.isError ? parseListing(listing.result.text, listing.name) : []
  const readme = entries.find(entry => !entry.dir && /^readme(\.[a-z0-9]+)?$/i.test(entry.name))
  const read = calls.find(call => call.name === 'read')
  if (readme && !read && tools.has('read')) {
    return { text: `There is a ${readme.name}; let me read it.`, toolCalls: [{ name: 'read', arguments: { path: readme.name } }] }
  }
  return { text: answer(task, listing, read, tools) }
}

function textOf(message: Message): string {
  return message.content
    .filter(block => block.type === 'text')
    .map(block => (block as { text: string }).text)
    .join('\n')
}

function callsAfter(messages: readonly Message[]): Call[] {
  const calls: Call[] = []
  const byId = new Map<string, Call>()
  for (const message of messages) {
    for (const block of message.content) {
      if (block.type === 'tool-call') {
        let args: Record<string, unknown> = {}
        try {
          args = JSON.parse(block.arguments || '{}')
        } catch {
          /* keep {} */
        }
        const call: Call = { id: block.id, name: block.name, args }
        calls.push(call)
        byId.set(block.id, call)
      } else if (block.type === 'tool-result') {
        const call = byId.get(block.toolCallId)
        if (call) call.result = { text: resultText(block), isError: block.isError === true }
      }
    }
  }
  return calls
}

function resultText(block: ToolResultBlock): string {
  return block.content.map(inner => (inner.type === 'text' ? inner.text : '')).join('\n')
}

interface Listed {
  name: string
  dir: boolean
}

/** Entries of an `ls -la` listing (or of glob output: one path per line). */
export function parseListing(text: string, tool: string): Listed[] {
  const entries: Listed[] = []
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('[') || /^total \d+/.test(line)) continue
    if (tool === 'bash') {
      const match = /^([dl\-bcps])[rwxsStT\-@+.]{9,}\s+\d+\s+\S+\s+\S+\s+\d+\s+\S+\s+\S+\s+\S+\s+(.+)$/.exec(line)
      if (!match) continue
      const name = match[2].replace(/ -> .*$/, '')
      if (name === '.' || name === '..') continue
      entries.push({ name, dir: match[1] === 'd' })
    } else {
      const name = line.trim()
      if (/^(no files|found \d+|\d+ (files|matches))/i.test(name)) continue
      entries.push({ name: name.replace(/\/$/, ''), dir: name.endsWith('/') })
    }
  }
  return entries
}

function answer(task: string, listing: Call | undefined, read: Call | undefined, tools: Set<string>): string {
  const lines = [DEMO_LABEL, '']
  if (!listing) {
    lines.push(
      tools.size
        ? `This deployment gives me no tool to list a directory (I have: ${[...tools].join(', ')}).`
        : 'This deployment gives me no tools, so I cannot look at the directory.',
    )
  } else if (!listing.result || listing.result.isError) {
    lines.push(`Listing the directory failed: ${listing.result?.text.split('\n')[0] ?? 'no result'}`)
  } else {
    const entries = parseListing(listing.result.text, listing.name)
    const dirs = entries.filter(entry => entry.dir)
    const files = entries.filter(entry => !entry.dir)
    if (!entries.length) {
      lines.push('The directory is empty.')
    } else {
      const show = (list: Listed[]) =>
        list
          .slice(0, 12)
          .map(entry => entry.name)
          .join(', ') + (list.length > 12 ? `, and ${list.length - 12} more` : '')
      lines.push(
        `The directory has ${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}: ${dirs.length} folder${dirs.length === 1 ? '' : 's'} and ${files.length} file${files.length === 1 ? '' : 's'}.`,
      )
      if (dirs.length) lines.push(`- folders: ${show(dirs)}`)
      if (files.length) lines.push(`- files: ${show(files)}`)
    }
  }
  if (read?.result) {
    const path = String(read.args.path ?? 'the README')
    if (read.result.isError) {
      lines.push('', `Reading ${path} failed: ${read.result.text.split('\n')[0]}`)
    } else {
      const body = read.result.text
        .split('\n')
        .map(line => line.replace(/^\s*\d+\t/, ''))
        .filter(line => line.trim() && !line.startsWith('['))
      const title = body.find(line => /^#\s/.test(line))?.replace(/^#+\s*/, '') ?? body[0]
      const prose = body.find(line => !/^[#`|<>!\-*]/.test(line.trim()) && line.trim().length > 40)
      lines.push('', `${path} is titled "${title ?? path}"${prose ? `; it begins: "${prose.trim().slice(0, 200)}"` : '.'}`)
    }
  }
  lines.push(
    '',
    `You asked: "${task.trim()}". I am a scripted demo that always lists the directory and reads its README; with DEEPSEEK_API_KEY, ANTHROPIC_API_KEY (or OPENAI_BASE_URL and OPENAI_API_KEY) set, the same command uses a real model.`,
  )
  return lines.join('\n')
}
