import TurndownService from 'turndown'

/** The little of a DOM element the rules below read (turndown parses with domino). */
interface Element {
  nodeName: string
  parentNode: Element | null
  childNodes: ArrayLike<Element>
  textContent: string | null
  getAttribute(name: string): string | null
}

/** Elements that are never content: code, styling, embedded media and page chrome. */
const NOISE = [
  'script',
  'style',
  'noscript',
  'template',
  'iframe',
  'object',
  'embed',
  'svg',
  'canvas',
  'nav',
  'footer',
  'aside',
  'button',
  'select',
  'input',
  'textarea',
  'meta',
  'link',
]

export interface Page {
  /** The text of `<title>`, when there is one. */
  title?: string
  markdown: string
}

/**
 * Converts HTML to Markdown: headings, lists, code, emphasis and tables kept,
 * links and images resolved against the page URL (or its `<base href>`),
 * scripts, styles, navigation and form controls dropped, inline `data:` images
 * reduced to their alt text.
 */
export function htmlToMarkdown(html: string, pageUrl: string): Page {
  let title: string | undefined
  let base = pageUrl
  const service = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-', emDelimiter: '_' })
  const resolve = (href: string) => {
    try {
      return new URL(href, base).href
    } catch {
      return href
    }
  }
  service.remove(NOISE as TurndownService.TagName[])
  // Elements are visited in document order, so <base> and <title> (in the head) come before the links.
  service.addRule('base', {
    filter: 'base',
    replacement: (_content, node: Element) => {
      const href = node.getAttribute('href')
      if (href) base = resolve(href)
      return ''
    },
  })
  service.addRule('title', {
    filter: 'title',
    replacement: (_content, node: Element) => {
      title ??= node.textContent?.replace(/\s+/g, ' ').trim() || undefined
      return ''
    },
  })
  service.addRule('link', {
    filter: (node: Element) => node.nodeName === 'A' && node.getAttribute('href') !== null,
    replacement: (content, node: Element) => {
      const href = node.getAttribute('href')!.trim()
      const text = content.trim()
      if (text === '') return ''
      if (href === '' || href.startsWith('#') || /^javascript:/i.test(href)) return text
      return `[${text}](${escapeUrl(resolve(href))})`
    },
  })
  service.addRule('image', {
    filter: 'img',
    replacement: (_content, node: Element) => {
      const alt = (node.getAttribute('alt') ?? '').replace(/\s+/g, ' ').trim()
      const src = (node.getAttribute('src') ?? '').trim()
      if (src === '' || /^data:/i.test(src)) return alt
      return `![${alt}](${escapeUrl(resolve(src))})`
    },
  })
  service.addRule('tableCell', {
    filter: ['th', 'td'],
    replacement: content => ` ${content.replace(/\s+/g, ' ').trim().replaceAll('|', '\\|')} |`,
  })
  service.addRule('tableRow', {
    filter: 'tr',
    replacement: (content, node: Element) => {
      const row = `|${content}\n`
      if (!isFirstRow(node)) return row
      const cells = Array.from(node.childNodes).filter(child => child.nodeName === 'TH' || child.nodeName === 'TD').length
      return `${row}|${' --- |'.repeat(cells)}\n`
    },
  })
  service.addRule('table', {
    filter: 'table',
    replacement: content => `\n\n${content.trim()}\n\n`,
  })
  // Table sections only group rows; the rows carry the content.
  service.addRule('tableSection', {
    filter: ['thead', 'tbody', 'tfoot'],
    replacement: content => content,
  })
  const markdown = service.turndown(html)
  return { ...(title !== undefined && { title }), markdown }
}

/** The row is the first `<tr>` of its table (the header separator goes after it). */
function isFirstRow(row: Element): boolean {
  let table = row.parentNode
  while (table && table.nodeName !== 'TABLE') table = table.parentNode
  return table !== null && firstRowOf(table) === row
}

function firstRowOf(node: Element): Element | undefined {
  for (const child of Array.from(node.childNodes)) {
    if (child.nodeName === 'TR') return child
    if (child.nodeName === 'THEAD' || child.nodeName === 'TBODY' || child.nodeName === 'TFOOT') {
      const row = firstRowOf(child)
      if (row) return row
    }
  }
  return undefined
}

/** Parentheses and spaces in a link target would end it early in Markdown. */
function escapeUrl(url: string): string {
  return url.replace(/[()\s]/g, char => `%${char.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}`)
}

/** JSON pretty-printed with two spaces; undefined when the text is not JSON. */
export function prettyJson(text: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(text), null, 2)
  } catch {
    return undefined
  }
}
