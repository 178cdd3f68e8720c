import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'
import { workspaceRootOf } from '@loom/tools/workspace'
import { defineTool, type ToolRunContext } from '@loom/tools'
import { RipgrepEngine } from './rg-engine.ts'
import { checkSetting } from './ripgrep.ts'
import { ScanWorkers } from './scan.ts'
import { globFiles, grepFiles, type GlobArgs, type GrepArgs, type GrepOutput, type Searcher, type SearchLimits } from './search.ts'

export const name = '@loom/tool-search'
export const inject = ['tools', 'systemPrompt']

export interface Config extends SearchLimits {
  /** Workspace root; absent: the calling agent's session cwd, else the process cwd. */
  root?: string
  /** Which ripgrep searches: `auto` (rg on PATH), `never` (the search worker only) or the path of a binary. */
  ripgrep: string
}

/**
 * grep stops itself at `timeoutMs` and answers with what it found; the host's own
 * timeout for the call comes this much later, as a backstop, so it does not race
 * that answer.
 */
export const GREP_HOST_TIMEOUT_GRACE_MS = 1000

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description(
    "Workspace root every search is confined to (a leading ~/ is the home directory). Absent: the calling agent's session cwd, else the process cwd.",
  ),
  globMaxResults: Schema.natural().min(1).default(100).description('Files `glob` lists at most; past it a notice says "Showing N of M files".'),
  grepMaxMatches: Schema.natural()
    .min(1)
    .default(250)
    .description(
      'Matching lines `grep` shows at most. Past it the result shows the first and the last matches and keeps them all as an artifact that `read` pages through (without a session, the search stops with a notice).',
    ),
  grepMaxLineBytes: Schema.natural()
    .min(1)
    .default(2000)
    .description('Bytes kept of one matching line; longer lines end in "... (line truncated to N bytes)".'),
  ignore: Schema.array(Schema.string())
    .default(['.git', 'node_modules'])
    .description(
      'File and directory names skipped wherever they occur in a walk, even with `hidden` or `no_ignore` (a `path` naming one explicitly is still searched).',
    ),
  timeoutMs: Schema.natural()
    .min(1)
    .default(30000)
    .description(
      'Milliseconds a glob or grep may take: glob is aborted (a TIMEOUT error); grep stops its search and returns the matches found so far with a notice.',
    ),
  ripgrep: Schema.string()
    .default('auto')
    .description(
      'Which ripgrep runs the searches it can answer exactly as the search worker would: "auto" (rg on PATH, looked up once), "never" (the worker only) or the absolute path of an rg binary. The results are the same either way.',
    ),
}) as unknown as Schema<Config>

/** Section names and orders (first-party tool guidance band). */
export const SECTIONS = { glob: ['tool:glob', 103], grep: ['tool:grep', 104] } as const

/** The guidance sections the model sees, for a config (static: they change only with the config). */
export function guidance(config: Pick<Config, 'globMaxResults' | 'grepMaxMatches' | 'ignore'>) {
  const always = config.ignore.length === 0 ? '' : `; ${list(config.ignore.map(n => `\`${n}\``))} always ${config.ignore.length === 1 ? 'is' : 'are'}`
  const skipped = ` Hidden files and files ignored by \`.gitignore\` or \`.ignore\` are skipped unless \`hidden\` or \`no_ignore\` is true${always}.`
  return {
    glob: `Use \`glob\` to find files by name, not \`find\` or \`ls -R\` in a shell. Patterns are relative to \`path\` (default: the workspace root): \`**\` matches any number of directories, \`*\` and \`?\` match within one name, and \`{a,b}\` and \`[abc]\` work, so \`**/*.ts\` finds every TypeScript file and \`*.ts\` only those directly in \`path\`. Results are the newest files first, at most ${config.globMaxResults}.${skipped}`,
    grep: `Use \`grep\` to search file contents, not \`grep\` or \`rg\` in a shell. \`pattern\` is a JavaScript regular expression, matched line by line; narrow the search with \`path\` (a directory or one file) and \`glob\` (\`*.ts\` matches file names at any depth). Results read \`file:line: text\`, in path order, at most ${config.grepMaxMatches} lines: with more matches, the first and the last, and a reference \`read\` pages through. Binary files are skipped.${skipped}`,
  }
}

function list(items: string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`
}

const pathProperty = (what: string) => ({
  type: 'string',
  description: `${what}, relative to the workspace root (an absolute path must lie inside it). Default: the workspace root.`,
})

/** The arguments that widen a walk, shared by both tools. */
const walkProperties = {
  hidden: { type: 'boolean', description: 'Also search hidden files (names starting with "."). Default false.' },
  no_ignore: { type: 'boolean', description: 'Also search files that .gitignore, .ignore or git excludes ignore. Default false.' },
}

/** Starting the search worker takes 50 to 150 ms: done this long after the plugin starts, unless it was disposed first. */
const WARM_AFTER_MS = 1000

/** A call made in a session keeps every match (up to one artifact) and shows the first and last `grepMaxMatches`. */
function grepOutput(ctx: Context, exec: ToolRunContext): GrepOutput | undefined {
  const { artifacts } = ctx.tools
  if (!artifacts.available(exec)) return undefined
  return { maxBytes: artifacts.limits.maxBytes, shorten: (text, limit) => artifacts.shorten(exec, text, limit) }
}

/** Registers the `glob` and `grep` tools and their guidance sections. */
export function apply(ctx: Context, config: Config) {
  checkSetting(config.ripgrep)
  const texts = guidance(config)
  const workers = new ScanWorkers()
  const ripgrep = new RipgrepEngine(config.ripgrep, workers)
  const searcher: Searcher = {
    run: async (job, signal, deadline) => (await ripgrep.run(job, signal, deadline)) ?? workers.run(job, signal, deadline),
  }
  ripgrep.binary().catch(() => {}) // checked once, ahead of the first search (a wrong binary is reported by the search)
  // The worker answers every search without ripgrep, and with it counts what an empty answer skipped: started ahead of the first.
  ctx.effect(() => {
    const warm = setTimeout(() => workers.warm(), WARM_AFTER_MS).unref()
    return () => {
      clearTimeout(warm)
      workers.close()
    }
  }, `${name}: search worker`)
  ctx.systemPrompt.section({ name: SECTIONS.glob[0], order: SECTIONS.glob[1], text: texts.glob })
  ctx.systemPrompt.section({ name: SECTIONS.grep[0], order: SECTIONS.grep[1], text: texts.grep })

  ctx.tools.register(
    defineTool<GlobArgs>({
      name: 'glob',
      description: `Lists the workspace files whose path matches a glob pattern (\`**\`, \`*\`, \`?\`, \`{a,b}\`, \`[a-z]\`), newest first, at most ${config.globMaxResults}. Paths are relative to the workspace root. Hidden and ignored files are skipped unless asked.`,
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string', minLength: 1, description: 'Glob matched against paths relative to `path`, e.g. "**/*.ts" or "src/*.{js,ts}".' },
          path: pathProperty('Directory to search in'),
          ...walkProperties,
        },
        required: ['pattern'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      timeoutMs: config.timeoutMs,
      execute: (args, exec) => globFiles(workspaceRootOf(config.root, exec), args, config, searcher, exec.signal, ctx.tools.readRules()),
    }),
  )

  ctx.tools.register(
    defineTool<GrepArgs>({
      name: 'grep',
      description: `Searches text files of the workspace for a JavaScript regular expression and returns matching lines as \`file:line: text\`, at most ${config.grepMaxMatches}. Hidden and ignored files are skipped unless asked.`,
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string', minLength: 1, description: 'JavaScript regular expression (no slashes or flags), matched against each line.' },
          path: pathProperty('Directory or file to search'),
          glob: { type: 'string', description: 'Only search files matching this glob; without a "/" it matches the file name at any depth (e.g. "*.ts").' },
          ignore_case: { type: 'boolean', description: 'Match case-insensitively. Default false.' },
          ...walkProperties,
        },
        required: ['pattern'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      timeoutMs: Math.min(config.timeoutMs + GREP_HOST_TIMEOUT_GRACE_MS, 2 ** 31 - 1),
      execute: (args, exec) => grepFiles(workspaceRootOf(config.root, exec), args, config, searcher, exec.signal, ctx.tools.readRules(), grepOutput(ctx, exec)),
    }),
  )
}

export { compileGlob, GLOB_MAX_LENGTH, splitGlob, type GlobMatcher } from './pattern.ts'
export { compileRegExp } from './search.ts'
export { GREP_BLOCK_BYTES } from './text.ts'
