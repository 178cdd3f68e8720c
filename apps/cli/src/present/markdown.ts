// Markdown for the terminal: the model's answers use it, and raw `**` and `#`
// read badly. marked parses; this file styles the tokens with the terminal's own
// attributes (bold, italic, dim, colors), keeping every word of the text.
// `MarkdownStream` renders an answer as it streams, one finished block at a time.
import type * as Marked from 'marked'
import type { Token, Tokens } from 'marked'
import { createRequire } from 'node:module'
import type { styler } from './term.ts'

// marked loads with the first answer rendered, not with every command (~13 ms a start).
const require = createRequire(import.meta.url)
let marked: typeof Marked | undefined

export type Style = ReturnType<typeof styler>

/** `text` rendered for a terminal, blocks separated by one blank line, without a final newline. */
export function renderMarkdown(text: string, style: Style): string {
  return blocks((marked ??= require('marked') as typeof Marked).Lexer.lex(text), style).join('\n\n')
}

function blocks(tokens: readonly Token[], style: Style): string[] {
  const out: string[] = []
  for (const token of tokens) {
    const text = block(token, style)
    if (text !== undefined) out.push(text)
  }
  return out
}

function block(token: Token, style: Style): string | undefined {
  switch (token.type) {
    case 'space':
      return undefined
    case 'heading': {
      const text = inline(token.tokens ?? [], style)
      return token.depth <= 2 ? style.bold(style.underline(text)) : style.bold(text)
    }
    case 'paragraph':
      return inline(token.tokens ?? [], style)
    case 'text':
      return token.tokens ? inline(token.tokens, style) : entities(token.text)
    case 'code': {
      const gutter = style.dim('│ ')
      const label = token.lang ? style.dim(`  ${token.lang}`) + '\n' : ''
      return (
        label +
        token.text
          .split('\n')
          .map((line: string) => `  ${gutter}${style.cyan(line)}`)
          .join('\n')
      )
    }
    case 'blockquote':
      return blocks(token.tokens ?? [], style)
        .join('\n\n')
        .split('\n')
        .map(line => style.dim('│ ') + style.italic(line))
        .join('\n')
    case 'list':
      return list(token as Tokens.List, style)
    case 'hr':
      return style.dim('─'.repeat(40))
    case 'table':
      return table(token as Tokens.Table, style)
    default:
      // html and anything marked adds later: the source, as written.
      return 'raw' in token && typeof token.raw === 'string' ? token.raw.replace(/\n+$/, '') : undefined
  }
}

function list(token: Tokens.List, style: Style): string {
  const start = typeof token.start === 'number' ? token.start : 1
  return token.items
    .map((item, index) => {
      const bullet = token.ordered ? `${start + index}.` : '•'
      const box = item.task ? (item.checked ? '[x] ' : '[ ] ') : ''
      // A loose item's paragraphs are set apart; a tight one's nested list follows on the next line.
      const body = blocks(
        item.tokens.filter(part => part.type !== 'checkbox'),
        style,
      ).join(item.loose ? '\n\n' : '\n')
      const indent = ' '.repeat(bullet.length + 1)
      return `${style.dim(bullet)} ${box}${body.split('\n').join(`\n${indent}`)}`
    })
    .join(token.loose ? '\n\n' : '\n')
}

function table(token: Tokens.Table, style: Style): string {
  const head = token.header.map(cell => inline(cell.tokens, style))
  const rows = token.rows.map(row => row.map(cell => inline(cell.tokens, style)))
  const widths = head.map((cell, column) => Math.max(visibleWidth(cell), ...rows.map(row => visibleWidth(row[column] ?? ''))))
  const line = (cells: string[]) => cells.map((cell, column) => cell + ' '.repeat(widths[column] - visibleWidth(cell))).join(style.dim(' │ '))
  return [style.bold(line(head)), style.dim(widths.map(width => '─'.repeat(width)).join('─┼─')), ...rows.map(line)].join('\n')
}

function inline(tokens: readonly Token[], style: Style): string {
  let out = ''
  for (const token of tokens) {
    switch (token.type) {
      case 'strong':
        out += style.bold(inline(token.tokens ?? [], style))
        break
      case 'em':
        out += style.italic(inline(token.tokens ?? [], style))
        break
      case 'del':
        out += style.dim(inline(token.tokens ?? [], style))
        break
      case 'codespan':
        out += style.cyan(entities(token.text))
        break
      case 'link': {
        const text = inline(token.tokens ?? [], style)
        out += text === token.href ? style.underline(text) : `${style.underline(text)} ${style.dim(`(${token.href})`)}`
        break
      }
      case 'image':
        out += style.dim(`[image: ${token.text || token.href}]`)
        break
      case 'br':
        out += '\n'
        break
      case 'text':
        out += token.tokens ? inline(token.tokens, style) : entities(token.text)
        break
      case 'escape':
        out += entities(token.text)
        break
      default:
        out += 'raw' in token && typeof token.raw === 'string' ? token.raw : ''
    }
  }
  return out
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" }

/** The few entities an answer writes to mean the character itself. */
function entities(text: string): string {
  return text.replace(/&(?:amp|lt|gt|quot|#39);/g, entity => ENTITIES[entity])
}

/** Columns `text` takes on a terminal: its characters without escape codes. */
function visibleWidth(text: string): number {
  return [...text.replace(/\x1b\[[0-9;]*m/g, '')].length
}

/**
 * Renders an answer as it streams: `push` returns the blocks finished so far
 * (a blank line outside a fenced code block ends one), `end` the rest. Each
 * returned piece ends with a newline, and pieces after the first start with the
 * blank line that sets blocks apart.
 */
export class MarkdownStream {
  private readonly style: Style
  private pending = ''
  private started = false

  constructor(style: Style) {
    this.style = style
  }

  push(delta: string): string {
    this.pending += delta
    const cut = lastBlockEnd(this.pending)
    if (cut <= 0) return ''
    const done = this.pending.slice(0, cut)
    this.pending = this.pending.slice(cut)
    return this.render(done)
  }

  end(): string {
    const rest = this.pending
    this.pending = ''
    return this.render(rest)
  }

  /** Drops what has not been shown (a retried request's partial answer). */
  discard(): void {
    this.pending = ''
  }

  private render(text: string): string {
    if (!text.trim()) return ''
    const rendered = renderMarkdown(text, this.style)
    if (!rendered) return ''
    const piece = (this.started ? '\n' : '') + rendered + '\n'
    this.started = true
    return piece
  }
}

/** The offset just past the last blank line that lies outside a fenced code block, or 0. */
function lastBlockEnd(text: string): number {
  let fence: string | undefined
  let end = 0
  let offset = 0
  for (const line of text.split('\n')) {
    const next = offset + line.length + 1
    // Only complete lines count: the last piece has no newline yet.
    if (next > text.length) break
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1]
    if (fence === undefined && marker) fence = marker
    else if (fence !== undefined && marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) {
      fence = undefined
      end = next
    } else if (fence === undefined && line.trim() === '') end = next
    offset = next
  }
  return end
}
