import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'
import { defineTool, type ToolRunContext } from '@loom/tools'
import { ARTIFACT_SCHEME, isArtifactReference } from '@loom/tools/artifacts'
import { editText, type EditArgs } from './edit.ts'
import { ReadDeniedError, resolveInWorkspace, workspaceRootOf, type WorkspacePath } from '@loom/tools/workspace'
import { readLines, readTextLines, type ReadArgs, type ReadLimits } from './read.ts'
import { writeText, type WriteArgs } from './write.ts'

export const name = '@loom/tool-fs'
export const inject = ['tools', 'systemPrompt']

export interface Config extends ReadLimits {
  /** Workspace root; absent: the calling agent's session cwd, else the process cwd. */
  root?: string
  /** Milliseconds a call may take before it is aborted. */
  timeoutMs: number
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description(
    "Workspace root every path is confined to (a leading ~/ is the home directory). Absent: the calling agent's session cwd, else the process cwd.",
  ),
  readLimit: Schema.natural().min(1).default(2000).description('Lines `read` shows per call: the default and the maximum of its `limit`.'),
  maxLineLength: Schema.natural()
    .min(1)
    .default(2000)
    .description('Characters `read` keeps of one line; longer lines end in "... (line truncated to N chars)".'),
  maxBytes: Schema.natural()
    .min(1)
    .default(51200)
    .description('Bytes of numbered lines `read` returns at most; past it the output stops with a notice giving the offset to continue from.'),
  timeoutMs: Schema.natural().min(1).default(30000).description('Milliseconds a read, write or edit may take before it is aborted.'),
}) as unknown as Schema<Config>

/** Section names and orders (first-party tool guidance band). */
export const SECTIONS = { read: ['tool:read', 100], write: ['tool:write', 101], edit: ['tool:edit', 102] } as const

/** The guidance sections the model sees, for a config (static: they change only with the config). */
export function guidance(config: Pick<Config, 'readLimit' | 'maxLineLength'>) {
  return {
    read: `Use \`read\` to look at a file, not \`cat\`, \`head\` or \`tail\` in a shell. It shows numbered lines like \`cat -n\`: the number and the tab before each line are not part of the file. One call shows at most ${config.readLimit} lines from \`offset\` (1-based, default 1); when a file is longer, the footer tells you the offset to continue from. Lines longer than ${config.maxLineLength} characters are cut. Binary files are refused. A tool output too long to show whole is kept as an artifact: pass its reference (\`${ARTIFACT_SCHEME}...\`) as the path to read it the same way.`,
    write:
      'Use `write` to create a file or to replace all of its content; missing parent directories are created. Read an existing file before you overwrite it, and prefer `edit` for changing part of a file: it sends only the change.',
    edit: 'Use `edit` to change part of a file; read the file first. `old_string` is matched literally (no regex or wildcards), including whitespace and indentation: copy it from `read` output without the line-number prefix. It must occur exactly once; if it occurs several times, add surrounding lines to make it unique, or set `replace_all` to change every occurrence.',
  }
}

const pathProperty = {
  type: 'string',
  description: 'File path, relative to the workspace root (an absolute path must lie inside it).',
}

const readPathProperty = {
  type: 'string',
  description: `File path, relative to the workspace root (an absolute path must lie inside it), or an artifact reference (${ARTIFACT_SCHEME}...) a tool result gave.`,
}

/** Registers the `read`, `write` and `edit` tools and their guidance sections. */
export function apply(ctx: Context, config: Config) {
  const texts = guidance(config)
  // Every path is confined to the workspace, then checked against the read rules (credential
  // stores): resolved first, so a link to ~/.ssh/id_ed25519 is refused like the key itself. An
  // edit reads the file, and a write could plant a key: none of the three touches a denied path.
  const locate = async (exec: ToolRunContext, path: string) => {
    const file = await resolveInWorkspace(workspaceRootOf(config.root, exec), path)
    const denied = ctx.tools.readDenial(file.path)
    if (denied) throw new ReadDeniedError(file.display, denied)
    return file
  }
  // A write or edit resolves its path once: the protected-path check (`writes`, before the call)
  // and the body share it, keyed by the call's frozen arguments; the body writes where was checked.
  const located = new WeakMap<object, Promise<WorkspacePath>>()
  const locateOnce = (exec: ToolRunContext, path: string) => {
    const key = exec.arguments as object
    let found = located.get(key)
    if (!found) located.set(key, (found = locate(exec, path)))
    return found
  }
  const target = async (args: { path: string }, exec: ToolRunContext) => [(await locateOnce(exec, args.path)).path]

  ctx.systemPrompt.section({ name: SECTIONS.read[0], order: SECTIONS.read[1], text: texts.read })
  ctx.systemPrompt.section({ name: SECTIONS.write[0], order: SECTIONS.write[1], text: texts.write })
  ctx.systemPrompt.section({ name: SECTIONS.edit[0], order: SECTIONS.edit[1], text: texts.edit })

  ctx.tools.register(
    defineTool<ReadArgs>({
      name: 'read',
      description: `Reads a text file from the workspace and returns its lines numbered like \`cat -n\`, at most ${config.readLimit} lines and ${config.maxBytes} bytes per call; a footer says whether the end of the file was reached or which offset to continue from.`,
      parameters: {
        type: 'object',
        properties: {
          path: readPathProperty,
          offset: { type: 'integer', minimum: 1, description: 'Line number to start from (1-based). Default 1.' },
          limit: { type: 'integer', minimum: 1, description: `Lines to show (default and maximum ${config.readLimit}).` },
        },
        required: ['path'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      timeoutMs: config.timeoutMs,
      async execute(args, exec) {
        // Only ever the calling session's artifacts: the runtime resolves the reference in that session.
        if (isArtifactReference(args.path)) return readTextLines(args.path, await ctx.tools.artifacts.read(exec, args.path), args, config)
        return readLines(await locate(exec, args.path), args, config, exec.signal)
      },
    }),
  )

  ctx.tools.register(
    defineTool<WriteArgs>({
      name: 'write',
      description:
        'Writes a UTF-8 text file in the workspace, replacing its content if it exists and creating missing parent directories. Reports the bytes written.',
      parameters: {
        type: 'object',
        properties: {
          path: pathProperty,
          content: { type: 'string', description: 'The complete new content of the file.' },
        },
        required: ['path', 'content'],
        additionalProperties: false,
      },
      isConcurrencySafe: false,
      effects: ['write'],
      timeoutMs: config.timeoutMs,
      writes: target,
      async execute(args, exec) {
        return writeText(await locateOnce(exec, args.path), args, exec.signal)
      },
    }),
  )

  ctx.tools.register(
    defineTool<EditArgs>({
      name: 'edit',
      description: 'Replaces text in a workspace file: `old_string` is matched literally and must occur exactly once, unless `replace_all` is true.',
      parameters: {
        type: 'object',
        properties: {
          path: pathProperty,
          old_string: { type: 'string', description: 'The exact text to replace, whitespace and indentation included.' },
          new_string: { type: 'string', description: 'The text to put in its place (must differ from old_string).' },
          replace_all: { type: 'boolean', description: 'Replace every occurrence instead of requiring exactly one. Default false.' },
        },
        required: ['path', 'old_string', 'new_string'],
        additionalProperties: false,
      },
      isConcurrencySafe: false,
      effects: ['write'],
      timeoutMs: config.timeoutMs,
      writes: target,
      async execute(args, exec) {
        return editText(await locateOnce(exec, args.path), args, exec.signal)
      },
    }),
  )
}

export { displayPath, isInside, OutsideWorkspaceError, realpathLoose, resolveInWorkspace, workspaceRootOf, type WorkspacePath } from '@loom/tools/workspace'
export { cutBytes, cutChars, looksBinary, plural, SNIFF_BYTES } from '@loom/tools/workspace'
