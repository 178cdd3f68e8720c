// The terminal rendering of answers (markdown) and of edit calls (diffs), in
// process, with a style that writes its attributes as visible tags.
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { editDiff } from '../src/present/diff.ts'
import { MarkdownStream, renderMarkdown, type Style } from '../src/present/markdown.ts'

const tag = (name: string) => (text: string) => `<${name}>${text}</${name}>`
const style: Style = {
  enabled: true,
  bold: tag('b'),
  dim: tag('dim'),
  italic: tag('i'),
  underline: tag('u'),
  red: tag('red'),
  green: tag('green'),
  yellow: tag('yellow'),
  cyan: tag('cyan'),
}

describe('renderMarkdown', () => {
  it('styles inline markup and keeps every word, without the markup characters', () => {
    expect(renderMarkdown('Some **bold**, *italic*, `code` and ~~gone~~ &amp; \\*stars\\*', style)).toBe(
      'Some <b>bold</b>, <i>italic</i>, <cyan>code</cyan> and <dim>gone</dim> & *stars*',
    )
  })

  it('renders headings, links and rules; a bare link is shown once', () => {
    expect(renderMarkdown('# Title\n\n### Minor\n\nSee [the docs](https://x.test/a) or https://x.test/b\n\n---', style)).toBe(
      '<b><u>Title</u></b>\n\n<b>Minor</b>\n\nSee <u>the docs</u> <dim>(https://x.test/a)</dim> or <u>https://x.test/b</u>\n\n<dim>' +
        '─'.repeat(40) +
        '</dim>',
    )
  })

  it('numbers ordered lists from their start, indents nested lists, and shows task boxes', () => {
    expect(renderMarkdown('3. three\n4. four\n   - nested\n\n- [x] done\n- [ ] open', style)).toBe(
      '<dim>3.</dim> three\n<dim>4.</dim> four\n   <dim>•</dim> nested\n\n<dim>•</dim> [x] done\n<dim>•</dim> [ ] open',
    )
  })

  it('keeps code blocks verbatim behind a gutter, with their language', () => {
    expect(renderMarkdown('```ts\nconst a = 1 < 2\n\nreturn **a**\n```', style)).toBe(
      '<dim>  ts</dim>\n  <dim>│ </dim><cyan>const a = 1 < 2</cyan>\n  <dim>│ </dim><cyan></cyan>\n  <dim>│ </dim><cyan>return **a**</cyan>',
    )
  })

  it('aligns table columns by their visible width, escape codes not counted', () => {
    const ansi = (open: number, close: number) => (text: string) => `\x1b[${open}m${text}\x1b[${close}m`
    const terminal: Style = { ...style, bold: ansi(1, 22), dim: ansi(2, 22) }
    const rendered = renderMarkdown('| name | n |\n|---|---|\n| **a** | 10 |\n| bb | 2 |', terminal)
    expect(rendered).toContain('\x1b[1ma\x1b[22m')
    expect(rendered.replace(/\x1b\[\d+m/g, '').split('\n')).toEqual(['name │ n ', '─────┼───', 'a    │ 10', 'bb   │ 2 '])
  })

  it('marks quotes', () => {
    expect(renderMarkdown('> quoted *line*', style)).toBe('<dim>│ </dim><i>quoted <i>line</i></i>')
  })
})

describe('MarkdownStream', () => {
  const answer = '# Plan\n\nFirst **read** the file.\n\n```sh\nls\n\npwd\n```\n\n1. one\n2. two\n\nDone.'

  it('shows each block once it is complete, and the same text as rendering the whole answer', () => {
    const stream = new MarkdownStream(style)
    const pieces: string[] = []
    for (const char of answer) pieces.push(stream.push(char))
    pieces.push(stream.end())
    expect(pieces.join('')).toBe(renderMarkdown(answer, style) + '\n')
    // Streamed character by character, the heading shows before the answer ends.
    const headingAt = pieces.findIndex(piece => piece.includes('Plan'))
    expect(headingAt).toBeGreaterThan(0)
    expect(headingAt).toBeLessThan(answer.indexOf('First'))
  })

  it('does not cut a fenced code block at a blank line inside it', () => {
    const stream = new MarkdownStream(style)
    expect(stream.push('```sh\nls\n\n')).toBe('')
    expect(stream.push('pwd\n```\n')).toBe('<dim>  sh</dim>\n  <dim>│ </dim><cyan>ls</cyan>\n  <dim>│ </dim><cyan></cyan>\n  <dim>│ </dim><cyan>pwd</cyan>\n')
    expect(stream.push('after\n\n')).toBe('\nafter\n')
  })

  it('discards what a retried request streamed', () => {
    const stream = new MarkdownStream(style)
    stream.push('partial **ans')
    stream.discard()
    expect(stream.push('Whole answer.')).toBe('')
    expect(stream.end()).toBe('Whole answer.\n')
  })
})

describe('editDiff', () => {
  it("shows an edit's old and new lines with their context", () => {
    const args = { path: 'a.ts', old_string: 'one\ntwo\nthree\nfour', new_string: 'one\n2\nthree\nfour' }
    expect(editDiff('edit', args, style)).toEqual([
      '<dim>      one</dim>',
      '<red>    - two</red>',
      '<green>    + 2</green>',
      '<dim>      three</dim>',
      '<dim>      four</dim>',
    ])
  })

  it('is nothing for another tool or malformed arguments, and cut when long', () => {
    expect(editDiff('write', { path: 'a', content: 'x' }, style)).toBeUndefined()
    expect(editDiff('edit', 'not json', style)).toBeUndefined()
    const long = Array.from({ length: 60 }, (_, i) => `line ${i}`).join('\n')
    const lines = editDiff('edit', { path: 'a', old_string: 'x', new_string: long }, style)!
    expect(lines).toHaveLength(41)
    expect(lines.at(-1)).toBe('<dim>    … 21 more lines</dim>')
  })
})

describe('loading', () => {
  it('the CLI loads marked and diff with the first answer rendered and the first edit shown, not with its modules', () => {
    const script = `
      import { createRequire } from 'node:module'
      const loaded = () => [...new Set(Object.keys(createRequire(import.meta.url).cache).flatMap(path => path.match(/\\/node_modules\\/(marked|diff)\\//)?.[1] ?? []))].sort()
      await import('./src/cli.ts')
      const { renderMarkdown } = await import('./src/present/markdown.ts')
      const { editDiff } = await import('./src/present/diff.ts')
      const { styler } = await import('./src/present/term.ts')
      const before = loaded()
      renderMarkdown('# hi', styler({}))
      const afterAnswer = loaded()
      editDiff('edit', { old_string: 'a', new_string: 'b' }, styler({}))
      console.log(JSON.stringify({ before, afterAnswer, afterEdit: loaded() }))
    `
    const out = execFileSync(process.execPath, ['--conditions=loom-source', '--input-type=module', '-e', script], {
      cwd: new URL('..', import.meta.url),
      encoding: 'utf8',
    })
    expect(JSON.parse(out)).toEqual({ before: [], afterAnswer: ['marked'], afterEdit: ['diff', 'marked'] })
  })
})
