import type { Context } from '@deepseek-ai/cordis'
import { VARIABLE_NAME } from './render.ts'
import type { PromptAssembly } from './types.ts'

/**
 * Development companion: validates the final (post-listener) value of every
 * assembly in every scope, so a listener that returns a malformed assembly fails
 * at the assembly that broke it rather than at the model.
 */
export const name = 'system-prompt-invariant'
export const inject = ['systemPrompt']

const PACKAGE = '@loom/system-prompt'

export class InvariantError extends Error {
  readonly packageName: string
  readonly code = 'INVARIANT'
  constructor(packageName: string, detail: string) {
    super(`invariant violated by "${packageName}": ${detail}`)
    this.packageName = packageName
    this.name = 'InvariantError'
  }
}

function fail(detail: string): never {
  throw new InvariantError(PACKAGE, detail)
}

function checkNamedTexts(kind: 'section' | 'context', items: readonly { name: unknown; text: unknown; owner?: unknown }[]) {
  const seen = new Set<unknown>()
  for (const item of items) {
    if (typeof item.name !== 'string' || item.name === '') fail(`assembled ${kind} names must be non-empty`)
    if (seen.has(item.name)) fail(`assembled ${kind} name "${item.name}" is duplicated`)
    seen.add(item.name)
    if (typeof item.text !== 'string') fail(`assembled ${kind} "${item.name}" text must be a string`)
    if (typeof item.owner !== 'string' || item.owner === '') fail(`assembled ${kind} "${item.name}" names no owner plugin`)
  }
}

export function checkAssembly(assembly: PromptAssembly): void {
  checkNamedTexts('section', assembly.sections)
  checkNamedTexts('context', assembly.contexts)
  for (const tool of assembly.tools) {
    if (typeof tool.name !== 'string' || tool.name === '') fail('assembled tool names must be non-empty')
    if (typeof tool.owner !== 'string' || tool.owner === '') fail(`assembled tool "${tool.name}" names no owner plugin`)
  }
  for (const [key, value] of Object.entries(assembly.variables)) {
    if (!VARIABLE_NAME.test(key)) fail(`assembled variable name "${key}" is invalid`)
    if (value !== undefined && typeof value !== 'string') fail(`assembled variable "${key}" must be a string or undefined`)
  }
}

export function apply(ctx: Context) {
  // Global and prepended: the outermost listener of every scope sees the value
  // every other listener produced.
  ctx.on(
    'system-prompt/assemble',
    async (_assembly, _context, next) => {
      const result = await next()
      checkAssembly(result)
      return result
    },
    { global: true, prepend: true },
  )
}
