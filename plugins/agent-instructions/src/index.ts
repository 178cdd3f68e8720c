import { join, relative, resolve, sep } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import { type AssembleContext, frontMatterAsserts, type PromptSource } from '@loom/system-prompt'
import { createHash } from 'node:crypto'
import { directoryChain, FileCache, findGitRoot } from './files.ts'
import { compileKeepPatterns } from './markdown.ts'
import { renderInstructions, type FoundFile } from './render.ts'

export const name = '@loom/agent-instructions'
export const inject = ['systemPrompt']

/** The section this plugin registers. */
export const SECTION = 'instructions:project'
/** Session-stable band (300..399), last: after every static section, so an edit re-sends the least; see the README. */
export const ORDER = 320

export const DEFAULT_KEEP_HEADINGS = [
  'rules?',
  'must',
  'never',
  'always',
  'conventions?',
  'security',
  'safety',
  'constraints?',
  'requirements?',
  'do not',
  "don[''’]?t",
  'important',
  'polic(?:y|ies)',
  'guidelines?',
  'forbidden',
]

export interface Config {
  root?: string
  files: string[]
  maxBytes: number
  maxFileBytes: number
  keepHeadings: string[]
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description(
    "Project root (absolute, or relative to the agent's working directory). Default: the nearest directory above the working directory with a `.git` entry, else the working directory.",
  ),
  files: Schema.array(Schema.string())
    .default(['AGENTS.md', 'CLAUDE.md'])
    .description('File names read in each directory from the project root down to the working directory, in this order.'),
  maxBytes: Schema.natural()
    .min(1)
    .default(32768)
    .description('Byte budget of the whole section; over it, whole markdown sections are left out (rule sections last) with a notice.'),
  maxFileBytes: Schema.natural().min(1).default(1048576).description('A file larger than this is not read; the model is told where it is.'),
  keepHeadings: Schema.array(Schema.string())
    .default(DEFAULT_KEEP_HEADINGS)
    .description('Regular expressions (case-insensitive, whole words) for headings whose sections are kept when trimming.'),
}) as Schema<Config>

function cwdOf(context: AssembleContext): string {
  return context.agent?.cwd ?? process.cwd()
}

/** `AGENTS.md` and `CLAUDE.md` from the project root down to the agent's working directory, as one system section. */
export function apply(ctx: Context, config: Config) {
  const files = config.files ?? ['AGENTS.md', 'CLAUDE.md']
  const maxBytes = config.maxBytes ?? 32768
  const keep = compileKeepPatterns(config.keepHeadings ?? DEFAULT_KEEP_HEADINGS)
  const cache = new FileCache(config.maxFileBytes ?? 1048576)
  const logger = ctx.logger('agent-instructions')
  // The rendered text, source and asserts of the last few file sets, keyed by every path and version.
  const rendered = new Map<string, Rendered>()

  // Text, source and asserts are asked for separately in one assembly: the files are looked at once.
  const assemblies = new WeakMap<AssembleContext, Rendered>()
  const current = (context: AssembleContext) => {
    let seen = assemblies.get(context)
    if (!seen) assemblies.set(context, (seen = look(context)))
    return seen
  }

  const look = (context: AssembleContext) => {
    const cwd = resolve(cwdOf(context))
    const root = config.root !== undefined ? resolve(cwd, config.root) : (findGitRoot(cwd) ?? cwd)
    const found: FoundFile[] = []
    const stamps: string[] = []
    const seen = new Set<string>()
    for (const dir of directoryChain(root, cwd)) {
      for (const file of files) {
        const path = join(dir, file)
        const { read, stamp, modifiedAt } = cache.read(path)
        stamps.push(`${path}\0${stamp}`)
        if (read.kind === 'missing') continue
        // CLAUDE.md is often a copy of (or a link to) AGENTS.md: say it once.
        if (read.kind === 'text') {
          if (seen.has(read.text)) continue
          seen.add(read.text)
        }
        found.push({ label: relative(root, path).split(sep).join('/'), path, read, ...(modifiedAt !== undefined && { modifiedAt }) })
      }
    }
    const key = stamps.join('\n')
    let result = rendered.get(key)
    if (result === undefined) {
      result = { text: renderInstructions(found, maxBytes, keep), source: sourceOf(found), asserts: assertsOf(found, message => logger.warn(message)) }
      if (rendered.size >= 64) rendered.clear()
      rendered.set(key, result)
    }
    return result
  }

  // File text, never a template: `${{ secrets.X }}` or `{{x}}` in a file reaches the model as written.
  ctx.systemPrompt.section({
    name: SECTION,
    order: ORDER,
    stability: 'session',
    literal: true,
    trust: 'repository',
    category: 'instructions',
    text: context => current(context).text,
    source: context => current(context).source,
    asserts: context => current(context).asserts,
  })
}

interface Rendered {
  text: string
  source: PromptSource | undefined
  asserts: Record<string, { value: string; from: string }>
}

/**
 * The rules the files' front matter asserts (`asserts:`, see the README), each
 * with the file it was read from; a deeper file is more specific and wins. A line
 * that cannot be read is warned about once per version of the file (the render is cached).
 */
function assertsOf(found: readonly FoundFile[], warn: (message: string) => void): Rendered['asserts'] {
  const asserts: Rendered['asserts'] = {}
  for (const file of found) {
    if (file.read.kind !== 'text') continue
    const declared = frontMatterAsserts(file.read.text)
    for (const problem of declared.problems) warn(`${file.label}: ${problem} (its asserts are read from front matter, see the @loom/agent-instructions README)`)
    for (const [rule, value] of Object.entries(declared.asserts)) asserts[rule] = { value, from: file.label }
  }
  return asserts
}

/** The files read, for the manifest: their labels, one sha256 over their contents, and the newest change. */
function sourceOf(found: readonly FoundFile[]): PromptSource | undefined {
  if (!found.length) return undefined
  const hash = createHash('sha256')
  for (const file of found) hash.update(`${file.label}\0${file.read.kind === 'text' ? file.read.text : ''}\0`)
  return { path: found.map(file => file.label).join(', '), sha256: hash.digest('hex'), modifiedAt: Math.max(...found.map(file => file.modifiedAt ?? 0)) }
}

export { renderInstructions, HEADER, type FoundFile } from './render.ts'
export { splitSections, compileKeepPatterns, type MarkdownSection } from './markdown.ts'
export { findGitRoot, directoryChain } from './files.ts'
