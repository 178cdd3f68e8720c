import { resolve } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type { AssembleContext } from '@loom/system-prompt'
import { defineTool } from '@loom/tools'
import { displayPath, resolveDirs, SkillScanner, type Skill } from './scan.ts'

export const name = '@loom/skills'
export const inject = ['systemPrompt', 'tools']

export const SECTION = 'skills:catalog'
export const ORDER = 310
export const TOOL = 'load_skill'

export interface Config {
  root?: string
  skillsDir: string[]
  maxSkillBytes: number
}

export const Config: Schema<Config> = Schema.object({
  root: Schema.string().description("Workspace root the relative skills directories resolve against. Default: the agent's working directory."),
  skillsDir: Schema.array(Schema.string())
    .default(['.loom/skills'])
    .description('Directories holding `<skill>/SKILL.md`: relative to the workspace root, or absolute. On a name clash the earlier directory wins.'),
  maxSkillBytes: Schema.natural().min(1).default(262144).description('A SKILL.md larger than this is skipped with a warning.'),
}) as Schema<Config>

export const CATALOG_INTRO =
  "Skills: instructions for specific tasks, loaded on demand. Only each skill's name and description are listed here. When a task matches a skill, call `load_skill` with its name before you start, then follow the instructions it returns."

/** The catalog section text for some skills (`''` when there are none). */
export function renderCatalog(skills: readonly Skill[]): string {
  if (skills.length === 0) return ''
  return `${CATALOG_INTRO}\n\n${skills.map(skill => `- ${skill.name}: ${skill.description}`).join('\n')}`
}

/** A `skills:catalog` section listing `<dir>/*\/SKILL.md` and a `load_skill` tool that returns a skill's body. */
export function apply(ctx: Context, config: Config) {
  const dirs = config.skillsDir ?? ['.loom/skills']
  const logger = ctx.logger('skills')
  const scanner = new SkillScanner(config.maxSkillBytes ?? 262144, message => logger.warn(message))
  const scan = (cwd = process.cwd()) => {
    const root = resolve(cwd, config.root ?? '.')
    const searched = resolveDirs(root, dirs)
    return { root, searched, ...scanner.scan(searched) }
  }

  // Names and descriptions come from files: literal text, so a `{{` in one reaches the model as written.
  ctx.systemPrompt.section({
    name: SECTION,
    order: ORDER,
    stability: 'session',
    literal: true,
    // Skill files live in the project (or the user's own folders): the repository's word.
    trust: 'repository',
    category: 'skills',
    text: (context: AssembleContext) => renderCatalog(scan(context.agent?.cwd).skills),
  })

  ctx.tools.register(
    defineTool<{ name: string }>({
      name: TOOL,
      description:
        "Loads the full instructions of a skill from the skills catalog in the system prompt. Call it when a task matches a skill's description, then follow the instructions.",
      parameters: {
        type: 'object',
        properties: { name: { type: 'string', description: 'The skill name, exactly as listed in the catalog.' } },
        required: ['name'],
        additionalProperties: false,
      },
      isConcurrencySafe: true,
      effects: ['read'],
      execute(args, exec) {
        const { root, searched, skills } = scan(exec.agent?.cwd)
        const skill = skills.find(candidate => candidate.name === args.name)
        if (!skill) {
          if (skills.length === 0) {
            throw new Error(`unknown skill "${args.name}"; no skills are available (looked in ${searched.map(dir => displayPath(root, dir)).join(', ')})`)
          }
          throw new Error(`unknown skill "${args.name}"; available skills: ${skills.map(candidate => candidate.name).join(', ')}`)
        }
        const header = `Skill "${skill.name}" (${displayPath(root, skill.file)}). Paths it mentions are relative to ${displayPath(root, skill.dir)}.`
        return {
          content: skill.body === '' ? `${header}\n\n(This skill has no instructions beyond its description.)` : `${header}\n\n${skill.body}`,
          meta: { skill: skill.name, file: skill.file },
        }
      },
    }),
  )
}

export { parseSkill, SkillScanner, type Skill, type ParsedSkill } from './scan.ts'
