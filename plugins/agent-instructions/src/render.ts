import type { FileRead } from './files.ts'
import { sectionLabel, splitSections, type MarkdownSection } from './markdown.ts'

/** One instruction file found for an assembly. */
export interface FoundFile {
  /** Path relative to the project root, with `/` separators: the label the model sees. */
  readonly label: string
  /** Absolute path: where the notice says the full file is. */
  readonly path: string
  readonly read: Exclude<FileRead, { kind: 'missing' }>
  /** When the file was last written (ms since the epoch), when known. */
  readonly modifiedAt?: number
}

export const HEADER =
  'Project instructions: the AGENTS.md and CLAUDE.md files from the project root down to the working directory, outermost first. A deeper file is more specific and wins where they disagree.'

const MAX_LISTED = 12

interface Block {
  readonly file: FoundFile
  readonly sections: readonly MarkdownSection[]
  /** Indices into `sections` that are left out. */
  readonly dropped: Set<number>
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8')

function listTitles(sections: readonly MarkdownSection[]): string {
  const labels = sections.slice(0, MAX_LISTED).map(sectionLabel)
  const more = sections.length - labels.length
  return labels.join(', ') + (more > 0 ? ` and ${more} more` : '')
}

function renderBlock(block: Block, maxBytes: number): string {
  const { file } = block
  const open = `<instructions file="${file.label}">`
  const close = '</instructions>'
  if (file.read.kind === 'unusable') {
    return `${open}\n[Not included: this file ${file.read.reason}. The full file is ${file.path}.]\n${close}`
  }
  const kept = block.sections.filter((_, index) => !block.dropped.has(index))
  const left = block.sections.filter((_, index) => block.dropped.has(index))
  if (left.length === 0) return `${open}\n${kept.map(section => section.text).join('\n\n')}\n${close}`
  const leftBytes = left.reduce((sum, section) => sum + bytes(section.text), 0)
  if (kept.length === 0) {
    return `${open}\n[Left out entirely (${leftBytes} bytes) to stay within the ${maxBytes}-byte budget for project instructions. The full file is ${file.path}: read it before relying on this project's conventions.]\n${close}`
  }
  const notice = `[Trimmed to stay within the ${maxBytes}-byte budget for project instructions: left out ${left.length} of ${block.sections.length} sections (${leftBytes} bytes): ${listTitles(left)}. The full file is ${file.path}: read it when those sections matter.]`
  return `${open}\n${kept.map(section => section.text).join('\n\n')}\n\n${notice}\n${close}`
}

function renderAll(blocks: readonly Block[], maxBytes: number): string {
  return [HEADER, ...blocks.map(block => renderBlock(block, maxBytes))].join('\n\n')
}

/**
 * The text of the `instructions:project` section: every file in full when that fits
 * `maxBytes`; otherwise whole markdown sections are left out, never a cut mid-text,
 * in this order until it fits: (1) every section of a file that is neither its first
 * section nor a rule section, outermost file first; (2) rule sections, last first,
 * outermost file first; (3) the first section, which leaves the file out entirely.
 * Each trimmed file says what was left out and where the full file is.
 */
export function renderInstructions(files: readonly FoundFile[], maxBytes: number, keep: readonly RegExp[]): string {
  if (files.length === 0) return ''
  const blocks: Block[] = files.map(file => ({
    file,
    sections: file.read.kind === 'text' ? splitSections(file.read.text, keep) : [],
    dropped: new Set<number>(),
  }))
  let text = renderAll(blocks, maxBytes)
  if (bytes(text) <= maxBytes) return text

  const fits = () => bytes((text = renderAll(blocks, maxBytes))) <= maxBytes
  // 1. Sections that are neither the first nor rules, a whole file at a time.
  for (const block of blocks) {
    let changed = false
    block.sections.forEach((section, index) => {
      if (section.keep === 'other') {
        block.dropped.add(index)
        changed = true
      }
    })
    if (changed && fits()) return text
  }
  // 2. Rule sections, last first.
  for (const block of blocks) {
    for (let index = block.sections.length - 1; index >= 0; index--) {
      if (block.sections[index].keep !== 'rule') continue
      block.dropped.add(index)
      if (fits()) return text
    }
  }
  // 3. The first section: the file is left out with its notice.
  for (const block of blocks) {
    const index = block.sections.findIndex(section => section.keep === 'first')
    if (index === -1) continue
    block.dropped.add(index)
    if (fits()) return text
  }
  return text
}
